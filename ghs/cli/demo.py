"""``ghs demo``."""

from __future__ import annotations

import click

from ghs.cli.common import POSITIVE_DURATION, SEED, console, emit_json, json_option
from ghs.daemon import sigterm_as_interrupt


@click.command()
@click.option("--hosts", "simulated", type=click.IntRange(1, 200), default=12,
              show_default=True, help="Simulated workstations.")
@click.option("--speedup", type=click.FloatRange(min=100), default=3600.0, show_default=True,
              help="How much faster the simulated clock runs.")
@click.option("--work", type=POSITIVE_DURATION, default=8 * 3600.0,
              help="Task size to predict and schedule (default 8h).")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Seed of the lab.")
@json_option
def demo(simulated, speedup, work, seed, as_json):
    """Run a manager, a real agent and simulated workstations here; predict and schedule."""
    from ghs import render

    out = console()
    # SIGTERM then unwinds like Ctrl-C: run_demo's cleanup stops the daemons, removes the folder
    with sigterm_as_interrupt():
        result = _run(out, simulated, speedup, work, seed, as_json)
    if as_json:
        emit_json({"endpoint": result.endpoint, "seconds": result.seconds,
                   "status": result.status.to_dict(), "prediction": result.prediction.to_dict(),
                   "schedule": result.plan.to_dict()})
        return
    out.print(f"manager {result.endpoint}: {len(result.status.hosts)} hosts "
              f"after {result.seconds:.0f} s")
    render.show_status(out, result.status)
    render.show_prediction(out, result.prediction)
    render.show_plan(out, result.plan)


def _run(out, simulated, speedup, work, seed, quiet):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ghs.demo import run_demo

    if quiet:
        return run_demo(simulated=simulated, speedup=speedup, seed=seed, work_seconds=work)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(
            "{task.fields[detail]}"), TimeElapsedColumn(), console=out,
            transient=True) as bar:
        task = bar.add_task("24 h of history", total=1.0, detail="starting daemons")

        def progress(fraction, status):
            stored = 0 if status is None else status.counters.get("measurements_stored", 0)
            bar.update(task, completed=fraction,
                       detail=f"{fraction * 24:.1f} h, {stored:,} measurements")

        return run_demo(simulated=simulated, speedup=speedup, seed=seed, work_seconds=work,
                        progress=progress)
