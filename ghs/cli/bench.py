"""``ghs bench``: speed against straightforward baselines run in the same process."""

from __future__ import annotations

import click

from ghs.cli.common import POSITIVE_DURATION, console, emit_json, json_option

PARTS = ("scheduler", "manager", "sensors")


@click.command()
@click.option("--quick", is_flag=True, help="Small sizes only (seconds instead of minutes).")
@click.option("--seed", type=int, default=1, help="Random seed of the generated hosts.")
@click.option("--part", "parts", type=click.Choice(PARTS), multiple=True,
              help="Only these parts (repeatable; default: scheduler and manager).")
@click.option("--sensor-duration", type=POSITIVE_DURATION, default=600.0,
              help="How long the sensor overhead run lasts (part 'sensors'; default 10m).")
@json_option
def bench(quick, seed, parts, sensor_duration, as_json):
    """Measure prediction, selection, manager and sensor speed (ratios against baselines)."""
    parts = parts or ("scheduler", "manager")
    results = {}
    if "scheduler" in parts:
        from ghs.benchmarks import scheduling

        results["scheduler"] = scheduling.run(quick=quick, seed=seed)
    if "manager" in parts:
        from ghs.benchmarks import manager

        results["manager"] = manager.run(quick=quick)
    if "sensors" in parts:
        from ghs.benchmarks import sensors

        results["sensors"] = sensors.sensor_overhead(60.0 if quick else sensor_duration)
    if as_json:
        emit_json(results)
        return
    out = console()
    if "scheduler" in results:
        from ghs.benchmarks import scheduling

        scheduling.show(out, results["scheduler"])
    if "manager" in results:
        from ghs.benchmarks import manager

        manager.show(out, results["manager"])
    if "sensors" in results:
        from ghs.benchmarks import sensors

        sensors.show(out, results["sensors"])
