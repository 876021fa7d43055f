"""Rich tables for predictions, plans and simulations (the CLI's non-JSON output)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ghs.answers import Answer, start_sources
from ghs.durations import duration_unit, format_duration
from ghs.planning import SimulationReport
from scheduler import Prediction
from scheduler.selection import Plan

QUANTILES = ("p50", "p90", "p95", "p99")
SUMMARY_EXCLUDED = 5  # excluded hosts listed by name under --summary


def _summary_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, value)
    return table


def _in_unit(values: Any, unit: tuple[str, float], digits: int = 2) -> list[str]:
    return [f"{value / unit[1]:,.{digits}f}" for value in values]


def _host_table(answer: Answer, units: dict[str, int] | None = None) -> Table:
    prediction = answer.prediction
    means, stds = prediction.host_moments()
    unit = duration_unit([*prediction.dedicated_seconds, *means, *stds])
    table = Table(title="Per host", title_justify="left")
    for column in ("host", "share (ref-CPU-s)", f"dedicated ({unit[0]})", f"mean ({unit[0]})",
                   f"std ({unit[0]})"):
        table.add_column(column, justify="left" if column == "host" else "right")
    if units is not None:
        table.add_column("units", justify="right")
    marked = any(name in answer.provisional for name in prediction.hosts)
    if marked:
        table.add_column("estimate", justify="left")
    columns = zip(_in_unit(prediction.dedicated_seconds, unit), _in_unit(means, unit),
                  _in_unit(stds, unit))
    for index, (name, cells) in enumerate(zip(prediction.hosts, columns)):
        row = [name, f"{prediction.shares[index]:,.1f}", *cells]
        if units is not None:
            row.append(str(units[name]))
        if marked:
            row.append("provisional (< 24 h history)" if name in answer.provisional else "ok")
        table.add_row(*row)
    return table


def _prediction_rows(prediction: Prediction, by_seconds: float | None) -> list[tuple[str, str]]:
    q = prediction.quantiles
    rows = [
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
    if by_seconds is not None:
        rows.append((f"P(done by {format_duration(by_seconds)})",
                     f"{float(prediction.cdf(by_seconds)):.3f}"))
    return rows


def _notes(console: Console, answer: Answer, summary: bool) -> None:
    """Assumptions, provisional estimates and excluded hosts, one line each (or counted)."""
    console.print(f"assumes: {answer.assumptions.line()}")
    if answer.provisional:
        used = [name for name in answer.prediction.hosts if name in answer.provisional]
        if used:
            console.print(f"provisional (< 24 h of history): {len(used)} of "
                          f"{len(answer.prediction.hosts)} hosts in the prediction")
    shown = answer.excluded[:SUMMARY_EXCLUDED] if summary else answer.excluded
    for exclusion in shown:
        console.print(f"excluded {exclusion.name}: {exclusion.reason}")
    if len(shown) < len(answer.excluded):
        console.print(f"... and {len(answer.excluded) - len(shown):,} more excluded "
                      f"({len(answer.excluded):,} in all; --json lists every one)")


def show_prediction(console: Console, answer: Answer, *, summary: bool = False,
                    by_seconds: float | None = None) -> None:
    console.print(_summary_table("Predicted completion time",
                                 _prediction_rows(answer.prediction, by_seconds)))
    if not summary:
        console.print(_host_table(answer))
    _notes(console, answer, summary)


def show_plan(console: Console, answer: Answer, units: int | None = None, *,
              summary: bool = False) -> None:
    plan = answer.result
    assert isinstance(plan, Plan)
    rows = _prediction_rows(plan.prediction, None)
    rows += [("method", plan.method), ("sets evaluated", f"{plan.evaluations:,}"),
             ("selection time", f"{plan.elapsed_seconds * 1e3:.1f} ms")]
    console.print(_summary_table("Schedule", rows))
    if not summary:
        console.print(_host_table(answer, plan.units(units) if units is not None else None))
    _notes(console, answer, summary)


def show_simulation(console: Console, report: SimulationReport) -> None:
    sim, pred = report.simulated, report.predicted
    sim_values = [sim["mean"], sim["std"], *(sim["quantiles"][k] for k in QUANTILES)]
    model_values = [pred.mean, pred.std, *(pred.quantiles[k] for k in QUANTILES)]
    unit = duration_unit([*sim_values, *model_values])
    table = Table(title=f"Simulated completion time ({report.runs:,} runs)",
                  title_justify="left")
    for column in ("", "mean", "std", *QUANTILES):
        table.add_column(f"{column} ({unit[0]})" if column else "",
                         justify="right" if column else "left")
    table.add_row(f"simulated ({report.start_state} start)", *_in_unit(sim_values, unit))
    table.add_row(f"model ({pred.distribution}, {start_sources(pred)} start)",
                  *_in_unit(model_values, unit))
    console.print(table)
    console.print(f"simulated: start {report.start_state}; local demands {report.demands}; "
                  f"cores {report.cores_mode}")
    if report.model is not None:
        console.print(f"model assumes: {report.model.line()}")
    for exclusion in report.excluded:
        console.print(f"excluded {exclusion.name}: {exclusion.reason}")


def show_status(console: Console, status: Any) -> None:
    """The manager's hosts and counters."""
    table = Table(title=f"Hosts ({len(status.hosts)})", title_justify="left")
    for column in ("host", "lam (1/s)", "1/mu (s)", "sigma (s)", "rho", "tau", "cores",
                   "meas.", "history (h)", "state"):
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
                      f"{row.get('history_hours', 0):.1f}", state)
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
