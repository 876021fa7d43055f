"""The back-test for a person: a summary table and a PNG (reliability diagram, error by
task length)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ghs.backtest.scoring import LEVELS, NOMINAL
from ghs.durations import format_duration
from ghs.errors import GhsError
from ghs.figure_file import save_figure


def show_backtest(console: Console, result: dict[str, Any]) -> None:
    table = Table(title=f"Back-test ({result['mode']} tasks, {len(result['stations'])} "
                        f"stations; default predictor: {result['default_predictor']})",
                  title_justify="left")
    for column in ("predictor", "work", "launches", "mean |err|", "median |err|",
                   "means' total / realised", "p50/p90/p95 coverage", "finished before", "p90/p50",
                   "|err| / paper's", "unfinished"):
        table.add_column(column, justify="left" if column == "predictor" else "right")
    for row in result["summary"]:
        coverage, before = row["coverage"], row.get("finished_before")
        table.add_row(row["predictor"], format_duration(row["work"]), str(row["launches"]),
                      _percent(row["mean_abs_error"]), _percent(row["median_abs_error"]),
                      _ratio(row.get("total_mean_over_realised")),
                      _coverage(coverage, row.get("coverage_bounds"), row.get("unfinished")),
                      "-" if before is None else "/".join(
                          f"{100 * before[level]:.0f}%" for level in LEVELS),
                      "-" if row["median_p90_over_p50"] is None
                      else f"{row['median_p90_over_p50']:.2f}",
                      _vs_paper(row.get("vs_paper")), str(row.get("unfinished", 0)))
    console.print(table)
    if any(row.get("unfinished") for row in result["summary"]):
        console.print("unfinished: split tasks that ran past a station's log, not scored; "
                      "in brackets the coverage counting them (missed unless a quantile is "
                      "after the time they are known to have run), and |err| / paper's "
                      "with the paper model's unfinished ones at the least error they can "
                      "have (a bound above the ratio; before it, on the launches both "
                      "finished)")


def _coverage(coverage: dict[str, float] | None, bounds: dict[str, list[float]] | None,
              unfinished: int | None) -> str:
    if bounds is None:
        return "-"
    # a row none of whose tasks finished has the bounds alone ("-" before them)
    text = "-" if coverage is None else "/".join(f"{100 * coverage[level]:.0f}%"
                                                 for level in LEVELS)
    if unfinished:
        text += " (>= " + "/".join(f"{100 * bounds[level][0]:.0f}%" for level in LEVELS) + ")"
    return text


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _vs_paper(comparison: dict[str, Any] | None) -> str:
    """The error ratio on the launches both finished, and the bound counting the paper
    model's unfinished ones where it has any."""
    if comparison is None:
        return "-"
    ratio, bound = comparison["mean_abs_error_ratio"], comparison["mean_abs_error_ratio_bound"]
    # "-": no launch both finished (the paper model's every split ran past the logs)
    text = "-" if ratio is None else f"{ratio:.2f}x"
    if comparison["paper_unfinished"] and bound is not None:
        text += f" (<= {bound:.2f}x)"
    return text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot_backtest(result: dict[str, Any], path: str) -> str:
    """Observed against nominal coverage per predictor, and mean |error| against task length."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise GhsError("--plot needs matplotlib: pip install 'ghs[plot]'",
                       field="plot", value=path) from None
    figure = Figure(figsize=(11, 4.5))
    FigureCanvasAgg(figure)
    reliability, errors = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    reliability.plot([0, 1], [0, 1], color="grey", linewidth=0.8, label="nominal")
    predictors: dict[str, list[dict[str, Any]]] = {}
    for row in result["summary"]:
        predictors.setdefault(row["predictor"], []).append(row)
    for index, (name, rows) in enumerate(predictors.items()):
        colour = f"C{index}"
        covered = [r for r in rows if r["coverage"] is not None]
        if covered:
            total = sum(r["launches"] for r in covered)
            observed = [sum(r["coverage"][level] * r["launches"] for r in covered) / total
                        for level in LEVELS]
            reliability.plot(NOMINAL, observed, "o-", color=colour, label=name)
            if all(r.get("finished_before") for r in covered):
                # runs that end on their dedicated time (an atom of the law) sit on a
                # quantile at it: a right quantile has the nominal level inside this bar
                before = [sum(r["finished_before"][level] * r["launches"] for r in covered)
                          / total for level in LEVELS]
                # side by side, a little apart, so each predictor's bar can be read
                shift = 0.006 * (index - (len(predictors) - 1) / 2)
                reliability.vlines([level + shift for level in NOMINAL], before, observed,
                                   color=colour, alpha=0.6, linewidth=2)
        scored = [r for r in rows if r["mean_abs_error"] is not None]
        errors.plot([r["work"] / 3600.0 for r in scored], [r["mean_abs_error"] for r in scored],
                    "o-", color=colour, label=name)
    reliability.set_xlim(0.4, 1.0)
    reliability.set_ylim(0.0, 1.02)
    reliability.set_xlabel("nominal level")
    reliability.set_ylabel("fraction finished by (bar: before) the quantile")
    reliability.set_title("reliability")
    reliability.legend(fontsize="small")
    errors.set_xscale("log")
    errors.set_xlabel("task length (dedicated hours)")
    errors.set_ylabel("mean |predicted mean - realised| / realised")
    errors.set_title("error against task length")
    errors.legend(fontsize="small")
    figure.tight_layout()
    save_figure(figure, path, 110)
    return path
