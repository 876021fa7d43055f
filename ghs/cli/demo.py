"""``ghs demo``."""

from __future__ import annotations

import click

from ghs.cli.common import DURATION, console, emit_json, json_option


@click.command()
@click.option("--hosts", "simulated", type=click.IntRange(1, 200), default=12,
              show_default=True, help="Simulated workstations.")
@click.option("--speedup", type=click.FloatRange(min=100), default=3600.0, show_default=True,
              help="How much faster the simulated clock runs.")
@click.option("--work", type=DURATION, default=8 * 3600.0,
              help="Task size to predict and schedule (default 8h).")
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the lab.")
@json_option
def demo(simulated, speedup, work, seed, as_json):
    """Run a manager, a real agent and simulated workstations here; predict and schedule."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ghs import render
    from ghs.demo import run_demo

    out = console()
    if as_json:
        result = run_demo(simulated=simulated, speedup=speedup, seed=seed, work_seconds=work)
        emit_json({"endpoint": result.endpoint, "seconds": result.seconds,
                   "status": result.status.to_dict(), "prediction": result.prediction.to_dict(),
                   "schedule": result.plan.to_dict()})
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(
            "{task.fields[detail]}"), TimeElapsedColumn(), console=out,
            transient=True) as bar:
        task = bar.add_task("24 h of history", total=1.0, detail="starting daemons")

        def progress(fraction, status):
            stored = 0 if status is None else status.counters.get("measurements_stored", 0)
            bar.update(task, completed=fraction,
                       detail=f"{fraction * 24:.1f} h, {stored:,} measurements")

        result = run_demo(simulated=simulated, speedup=speedup, seed=seed, work_seconds=work,
                          progress=progress)
    out.print(f"manager {result.endpoint}: {len(result.status.hosts)} hosts "
              f"after {result.seconds:.0f} s")
    render.show_status(out, result.status)
    render.show_prediction(out, result.prediction)
    render.show_plan(out, result.plan)
