"""A host's history for a person: a rich summary and a PNG of load against time of day."""

from __future__ import annotations

import itertools
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from ghs.durations import format_duration
from ghs.errors import GhsError
from ghs.figure_file import save_figure


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def available_fractions(history: dict[str, Any]) -> list[tuple[float, float]]:
    """(end epoch, available fraction of the host's cores) per capacity interval."""
    cores = max(int(history.get("cores") or 1), 1)
    points = history["capacity"]
    out = []
    for (t0, c0), (t1, c1) in itertools.pairwise(points):
        if t1 > t0:
            out.append((t1, (c1 - c0) / ((t1 - t0) * cores)))
    return out


def show_history(console: Console, history: dict[str, Any]) -> None:
    table = Table(title=f"History of {history['host']}", show_header=False,
                  title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    zero = history.get("replay_zero_epoch")
    measurements = history["measurements"]
    fractions = available_fractions(history)
    rows = [
        ("window", f"{_when(history.get('since_epoch_seconds'))} to "
                   f"{_when(history.get('latest_epoch_seconds'))}"),
        ("replay", "no" if zero is None else f"log time 0 = {_when(zero)} "
                                             f"({zero:.0f} epoch seconds)"),
        ("measurements", str(len(measurements))),
        ("mean utilisation (owners)",
         f"{sum(m['rho'] for m in measurements) / len(measurements):.3f}"
         if measurements else "-"),
        ("capacity intervals", str(len(history["capacity"]))),
        ("available fraction (mean)",
         f"{sum(f for _, f in fractions) / len(fractions):.3f}" if fractions else "-"),
    ]
    for change in history.get("tau_changes") or ():
        rows.append(("tau changed", f"{change['from']:.3f} -> {change['to']:.3f} at "
                                    f"{_when(change['epoch_seconds'])}"))
    running = history.get("running")
    if running is None:
        rows.append(("running jobs", "no snapshot"))
    else:
        rows.append(("running jobs", f"{len(running['jobs'])} at "
                                     f"{_when(running['epoch_seconds'])} (run queue "
                                     f"{running['run_queue_length']})"))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    if running and running["jobs"]:
        jobs = Table(title="Jobs running at the latest snapshot", title_justify="left")
        for column in ("user", "command", "CPU so far", "running for"):
            jobs.add_column(column, justify="right" if column[0] in "Cr" else "left")
        for job in running["jobs"]:
            jobs.add_row(job["user"], job["command"], format_duration(job["cpu_seconds"]),
                         format_duration(job["wall_seconds"]))
        console.print(jobs)


def plot_history(history: dict[str, Any], path: str) -> str:
    """Owners' utilisation and the available fraction against time of day (UTC), as PNG."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise GhsError("--plot needs matplotlib: pip install 'ghs[plot]'",
                       field="plot", value=path) from None
    figure = Figure(figsize=(9, 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    start = history.get("since_epoch_seconds") or 0.0

    def hours(epoch: float) -> float:
        return (epoch - start) / 3600.0

    fractions = available_fractions(history)
    if fractions:
        axes.plot([hours(t) for t, _ in fractions], [f for _, f in fractions], color="C2",
                  linewidth=0.8, label="available to a lowest-priority task")
    measurements = history["measurements"]
    if measurements:
        axes.plot([hours(m["end_epoch_seconds"]) for m in measurements],
                  [m["rho"] for m in measurements], "o", color="C3", markersize=3,
                  label="owners' utilisation (measurements)")
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel(f"hours since {_when(start)}")
    axes.set_ylabel("fraction of the host's CPU")
    axes.set_title(f"{history['host']}: load and harvestable CPU")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize="small")
    figure.tight_layout()
    save_figure(figure, path, 100)
    return path
