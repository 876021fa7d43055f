"""Rich tables for predictions, plans and simulations (the CLI's non-JSON output)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ghs.durations import format_duration
from ghs.planning import SimulationReport
from scheduler import Prediction
from scheduler.selection import Plan


def _summary_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, value)
    return table


def _host_table(prediction: Prediction, units: dict[str, int] | None = None) -> Table:
    table = Table(title="Per host", title_justify="left")
    for column in ("host", "share (ref-CPU-s)", "dedicated", "mean", "std"):
        table.add_column(column, justify="left" if column == "host" else "right")
    if units is not None:
        table.add_column("units", justify="right")
    means, stds = prediction.host_moments()
    for index, name in enumerate(prediction.hosts):
        row = [name, f"{prediction.shares[index]:,.1f}",
               format_duration(prediction.dedicated_seconds[index]),
               format_duration(means[index]), format_duration(stds[index])]
        if units is not None:
            row.append(str(units[name]))
        table.add_row(*row)
    return table


def _prediction_rows(prediction: Prediction) -> list[tuple[str, str]]:
    q = prediction.quantiles
    return [
        ("work", f"{prediction.work:,.0f} ref-CPU-s ({format_duration(prediction.work)})"),
        ("hosts", str(len(prediction.hosts))),
        ("mean", format_duration(prediction.mean)),
        ("std", format_duration(prediction.std)),
        ("CoV", f"{prediction.cov:.3f}"),
        ("criterion E(T)(1+CoV)", format_duration(prediction.criterion)),
        ("p50 / p90", f"{format_duration(q['p50'])} / {format_duration(q['p90'])}"),
        ("p95 / p99", f"{format_duration(q['p95'])} / {format_duration(q['p99'])}"),
        ("distribution / partition", f"{prediction.distribution} / {prediction.partition}"),
    ]


def show_prediction(console: Console, prediction: Prediction) -> None:
    console.print(_summary_table("Predicted completion time", _prediction_rows(prediction)))
    console.print(_host_table(prediction))


def show_plan(console: Console, plan: Plan, units: int | None = None) -> None:
    rows = _prediction_rows(plan.prediction)
    rows += [("method", plan.method), ("sets evaluated", f"{plan.evaluations:,}"),
             ("selection time", f"{plan.elapsed_seconds * 1e3:.1f} ms")]
    console.print(_summary_table("Schedule", rows))
    console.print(_host_table(plan.prediction, plan.units(units) if units is not None
                              else None))
    for exclusion in plan.excluded:
        console.print(f"[dim]excluded {exclusion.name}: {exclusion.reason}[/dim]")


def show_simulation(console: Console, report: SimulationReport) -> None:
    table = Table(title=f"Simulated completion time ({report.runs:,} runs, "
                        f"{report.service} demands)", title_justify="left")
    for column in ("", "mean", "std", "p50", "p90", "p95", "p99"):
        table.add_column(column, justify="right" if column else "left")
    sim, pred = report.simulated, report.predicted
    table.add_row("simulated", format_duration(sim["mean"]), format_duration(sim["std"]),
                  *(format_duration(sim["quantiles"][k]) for k in ("p50", "p90", "p95", "p99")))
    table.add_row(f"model ({pred.distribution})", format_duration(pred.mean),
                  format_duration(pred.std),
                  *(format_duration(pred.quantiles[k]) for k in ("p50", "p90", "p95", "p99")))
    console.print(table)


def show_status(console: Console, status: Any) -> None:
    """The manager's hosts and counters."""
    table = Table(title=f"Hosts ({len(status.hosts)})", title_justify="left")
    for column in ("host", "lam (1/s)", "1/mu (s)", "sigma (s)", "rho", "tau", "cores",
                   "meas.", "history", "state"):
        table.add_column(column, justify="left" if column in ("host", "state") else "right")

    def number(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for row in status.hosts:
        mu = row.get("mu")
        state = "stale" if row["stale"] else (row.get("reason") or (
            "provisional" if row.get("provisional") else "ok"))
        table.add_row(row["name"], number(row.get("lam"), ".5f"),
                      "-" if not mu else f"{1 / mu:.1f}", number(row.get("sigma"), ".1f"),
                      number(row.get("rho"), ".3f"), number(row.get("tau"), ".2f"),
                      str(row.get("cores")), str(row.get("measurements")),
                      f"{row.get('history_hours', 0):.1f} h", state)
    console.print(table)
    counters = status.counters
    rejected = ", ".join(f"{k} {v}" for k, v in sorted(counters.get("rejected", {}).items()))
    console.print(f"this run: stored {counters.get('measurements_stored', 0):,} measurements, "
                  f"{counters.get('duplicates', 0):,} duplicates; rejected: "
                  f"{rejected or 'none'}")
    lifetime = counters.get("lifetime")
    if lifetime:
        console.print(f"database: {lifetime['measurements_held']:,} measurements held, "
                      f"{lifetime['measurements_stored']:,} stored and "
                      f"{lifetime['duplicates']:,} duplicates over its lifetime, "
                      f"{lifetime['hosts']:,} hosts")
