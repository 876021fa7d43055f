"""The paper's Fig. 7: equal-mean against equal-load and speed partitions (``ghs experiment
partition``).

Two workstations: A at utilisation 0.5, B at 0.2; local jobs arrive as a Poisson stream and
need log-uniform CPU demands (mean 120 s, CoV 1.5: 1.2 s to 779 s); speeds 1.33 : 1; the task
is 1 to 8 hours of reference work. The paper does not say which machine is the faster, so both
readings run: "A faster" (the literal A:B = 1.33:1) and "B faster". Each partition is simulated
with the discrete-event simulator, hosts starting mid-workload (stationary backlog, ``warm``:
a real machine is busy when a task lands) and idle (the model's assumption), with common
random numbers across the three partitions. The saving is 1 - T(equal-mean) / T(baseline).

The naive predictor is what users fall back on: dedicated time / (1 - last measured
utilisation), the slowest host deciding. Its utilisation is one measurement over the sensor's
60 s interval just before launch, drawn from the same local workload (independently of the
simulated launches), and capped at 0.95 so a busy minute does not predict forever.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.errors import GhsError
from ghs.traces import busy_fraction
from scheduler import Host, choices, partition, predict
from scheduler.simulation import simulate
from scheduler.workload import Demand, Trace, demand, poisson_jobs

RHO_A, RHO_B = 0.5, 0.2
SPEED_RATIO = 1.33
MEAN_DEMAND_SECONDS = 120.0
DEMAND_COV = 1.5
HOURS = (1, 2, 3, 4, 5, 6, 7, 8)
PARTITIONS = choices.PARTITIONS
STARTS = ("warm", "idle")
FASTER = ("A", "B")
MEASURE_SECONDS = 60.0
NAIVE_MAX_UTILISATION = 0.95
PAPER = {"saving_large_jobs": [0.20, 0.25],
         "text": "mean-time (equal-mean) partition saves 20%-25% for large jobs"}


def run(runs: int = 40_000, seed: int = 7, hours: Sequence[int] = HOURS,
        measure_seconds: float = MEASURE_SECONDS) -> dict[str, Any]:
    """Simulated completion per partition, work size, start and reading of the speed ratio.

    ``measure_seconds``: the interval of the naive predictor's one utilisation reading.
    """
    law = demand("loguniform", MEAN_DEMAND_SECONDS, DEMAND_COV)
    measured = {rho: last_measured_utilisation(rho, law, measure_seconds, runs,
                                               np.random.default_rng(case_seed(seed, "u", rho)))
                for rho in (RHO_A, RHO_B)}
    scenarios = []
    for faster in FASTER:
        hosts = two_workstations(faster, law)
        utilisation = [measured[host.rho] for host in hosts]
        rows = [_row(hosts, law, hours_, runs, seed, faster, utilisation) for hours_ in hours]
        scenarios.append({"faster": faster,
                          "hosts": [{"name": h.name, "rho": h.rho, "tau": h.tau} for h in hosts],
                          "asymptotic_saving": _asymptotic(hosts), "rows": rows})
    return {"runs": runs, "seed": seed, "measure_seconds": measure_seconds,
            "demand": {"kind": "loguniform", "mean_seconds": MEAN_DEMAND_SECONDS,
                       "cov": DEMAND_COV},
            "paper": PAPER, "scenarios": scenarios, "summary": _summary(scenarios)}


def two_workstations(faster: str, law: Demand) -> list[Host]:
    """A (rho 0.5) and B (rho 0.2), the named one SPEED_RATIO times faster than the other."""
    speed = {"A": SPEED_RATIO if faster == "A" else 1.0, "B": SPEED_RATIO if faster == "B" else 1.0}
    return [Host(name, lam=rho / law.mean_seconds, mu=1.0 / law.mean_seconds,
                 sigma=law.mean_seconds * law.cov, rho=rho, tau=speed[name])
            for name, rho in (("A", RHO_A), ("B", RHO_B))]


def last_measured_utilisation(rho: float, law: Demand, window_seconds: float, count: int,
                              rng: np.random.Generator) -> np.ndarray:
    """``count`` readings of a host's busy fraction over ``window_seconds`` at random times.

    One long Poisson stream at rate rho / mean demand, read after a warm-up of 200 mean
    demands at times spread far enough apart that readings barely overlap.
    """
    if not 0 <= rho < 1 or not window_seconds > 0 or count < 1:
        raise GhsError(f"need 0 <= rho < 1, window_seconds > 0 and count >= 1, got {rho!r}, "
                         f"{window_seconds!r}, {count!r}")
    rate = rho / law.mean_seconds
    warm_up = 200.0 * law.mean_seconds
    horizon = warm_up + count * 10.0 * max(window_seconds, law.mean_seconds)
    arrivals, demands = poisson_jobs(rate, law, rng, 0.0, horizon)
    ends = rng.uniform(warm_up, horizon, count)
    return busy_fraction(Trace(arrivals, demands), ends, window_seconds)


def naive_predictions(dedicated_seconds: np.ndarray, utilisation: list[np.ndarray]
                      ) -> np.ndarray:
    """max over hosts of dedicated / (1 - measured utilisation), one per reading (seconds)."""
    capped = [np.minimum(u, NAIVE_MAX_UTILISATION) for u in utilisation]
    return np.max([t / (1.0 - u) for t, u in zip(dedicated_seconds, capped) if t > 0], axis=0)


def case_seed(*parts: object) -> int:
    """A reproducible seed for one case of an experiment, from its identifying parts."""
    return zlib.crc32("-".join(str(p) for p in parts).encode())


def _row(hosts: list[Host], law: Demand, hours: int, runs: int, seed: int, faster: str,
         utilisation: list[np.ndarray]) -> dict[str, Any]:
    work = hours * 3600.0
    row: dict[str, Any] = {"hours": hours, "work_seconds": work, "partitions": {}}
    for method in PARTITIONS:
        shares = partition(hosts, work, method)
        dedicated = shares / np.array([h.tau for h in hosts])
        predicted = predict(hosts, work, partition=method).mean
        simulated = {}
        for start in STARTS:
            # the same seed for every partition: common random numbers sharpen the saving
            result = simulate(hosts, shares, runs=runs, service=[law, law],
                              warm=start == "warm",
                              rng=np.random.default_rng(case_seed(seed, faster, hours, start)))
            simulated[start] = {"mean": result.mean, "std": result.std,
                                "host_means": result.host_completion_seconds.mean(
                                    axis=0).tolist()}
        naive = naive_predictions(dedicated, utilisation)
        at_rho = float(np.max(dedicated / (1.0 - np.array([h.rho for h in hosts]))))
        reference = simulated["warm"]["mean"]
        row["partitions"][method] = {
            "shares": shares.tolist(), "predicted_mean": predicted, "simulated": simulated,
            "model_error": {s: abs(predicted / simulated[s]["mean"] - 1) for s in STARTS},
            "naive": {"mean_abs_error": float(np.mean(np.abs(naive / reference - 1))),
                      "median_abs_error": float(np.median(np.abs(naive / reference - 1))),
                      "at_true_utilisation_error": abs(at_rho / reference - 1)}}
    row["saving"] = {start: {f"vs_{base.replace('-', '_')}": 1 - (
        row["partitions"]["equal-mean"]["simulated"][start]["mean"]
        / row["partitions"][base]["simulated"][start]["mean"]) for base in PARTITIONS[1:]}
        for start in STARTS}
    return row


def _asymptotic(hosts: list[Host]) -> dict[str, float]:
    """The saving in mean busy-adjusted time, which the simulation approaches for long tasks."""
    capacity = np.array([h.capacity for h in hosts])
    tau = np.array([h.tau for h in hosts])
    equal_mean = 1.0 / capacity.sum()
    equal_load = np.max(1.0 / len(hosts) / capacity)
    speed = np.max(tau / tau.sum() / capacity)
    return {"vs_equal_load": 1 - equal_mean / equal_load, "vs_speed": 1 - equal_mean / speed}


def _summary(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for scenario in scenarios:
        largest = scenario["rows"][-1]
        naive = [p["naive"]["mean_abs_error"] for r in scenario["rows"]
                 for p in r["partitions"].values()]
        model = [p["model_error"]["warm"] for r in scenario["rows"]
                 for p in r["partitions"].values()]
        summary[f"{scenario['faster']}_faster"] = {
            "hours": largest["hours"], "saving_warm": largest["saving"]["warm"],
            "saving_idle": largest["saving"]["idle"],
            "model_mean_abs_error_warm": float(np.mean(model)),
            "naive_mean_abs_error": float(np.mean(naive))}
    return summary
