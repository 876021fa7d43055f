"""``ghs bench``: speed against straightforward baselines run in the same process."""

from __future__ import annotations

import click

from ghs.cli.common import POSITIVE_DURATION, SEED, console, emit_json, json_option

PARTS = ("scheduler", "manager", "calibration", "sensors", "soak")


@click.command()
@click.option("--quick", is_flag=True, help="Small sizes only (seconds instead of minutes).")
@click.option("--seed", type=SEED, default=1, help="Random seed of the generated hosts.")
@click.option("--part", "parts", type=click.Choice(PARTS), multiple=True,
              help="Only these parts (repeatable; default: scheduler, manager and "
                   "calibration).")
@click.option("--sensor-duration", type=POSITIVE_DURATION, default=600.0,
              help="How long the sensor overhead run lasts (part 'sensors'; default 10m).")
@click.option("--soak-hosts", type=click.IntRange(min=1), default=100,
              help="Simulated hosts of the soak (part 'soak').")
@click.option("--soak-days", type=click.FloatRange(min=0.1), default=10.0,
              help="Virtual days of the soak (part 'soak').")
@click.option("--soak-speedup", type=click.FloatRange(min=1.0), default=3600.0,
              help="Virtual seconds per real second in the soak (part 'soak').")
@click.option("--soak-agents", type=click.IntRange(min=1), default=4,
              help="Agent processes the soak's hosts are split over (part 'soak').")
@json_option
def bench(quick, seed, parts, sensor_duration, soak_hosts, soak_days, soak_speedup,
          soak_agents, as_json):
    """Measure prediction, selection, manager and sensor speed (ratios against baselines)."""
    parts = parts or ("scheduler", "manager", "calibration")
    results = {}
    if "scheduler" in parts:
        from ghs.benchmarks import scheduling

        results["scheduler"] = scheduling.run(quick=quick, seed=seed)
    if "manager" in parts:
        from ghs.benchmarks import manager

        results["manager"] = manager.run(quick=quick)
    if "calibration" in parts:
        from ghs.benchmarks import calibration

        results["calibration"] = calibration.run(quick=quick, seed=seed)
    if "sensors" in parts:
        from ghs.benchmarks import sensors

        results["sensors"] = sensors.sensor_overhead(60.0 if quick else sensor_duration)
    if "soak" in parts:
        from ghs.benchmarks import soak

        results["soak"] = soak.run(hosts=soak_hosts, days=soak_days, speedup=soak_speedup,
                                   agents=soak_agents)
    if as_json:
        emit_json(results)
        return
    out = console()
    if "scheduler" in results:
        from ghs.benchmarks import scheduling

        scheduling.show(out, results["scheduler"])
    if "calibration" in results:
        from ghs.benchmarks import calibration

        calibration.show(out, results["calibration"])
    if "manager" in results:
        from ghs.benchmarks import manager

        manager.show(out, results["manager"])
    if "sensors" in results:
        from ghs.benchmarks import sensors

        sensors.show(out, results["sensors"])
    if "soak" in results:
        from ghs.benchmarks import soak

        soak.show(out, results["soak"])
