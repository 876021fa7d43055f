"""Ask "how long, and where?" from Python, the way a workflow tool would.

Run: python examples/predict_api.py
"""

from pathlib import Path

from ghs.hostfile import load_hosts
from scheduler import predict, schedule

HERE = Path(__file__).resolve().parent


def main() -> None:
    lab = load_hosts(HERE / "hosts.json")
    work_seconds = 6 * 3600.0  # six hours on the reference machine

    everywhere = predict(lab.hosts, work_seconds)
    print(f"all {len(lab.hosts)} hosts: mean {everywhere.mean / 60:.1f} min, "
          f"p95 {everywhere.quantiles['p95'] / 60:.1f} min")

    plan = schedule(lab.hosts, work_seconds, method="optimal")
    print(f"best set ({plan.evaluations} sets evaluated): "
          f"{', '.join(host.name for host in plan.hosts)}")
    print(f"  mean {plan.prediction.mean / 60:.1f} min, "
          f"E(T)(1+CoV) {plan.prediction.criterion / 60:.1f} min")
    for name, units in plan.units(500).items():
        print(f"  {name}: {units} of 500 work units")


if __name__ == "__main__":
    main()
