"""The experiments' results as PNG figures: one ``plot_NAME(result, path)`` per experiment.

Each draws the plain data its experiment's ``run`` returned and returns ``path``, or None when
matplotlib is not installed (it is optional: ``pip install 'ghs[plot]'``).
"""

from __future__ import annotations

import math
from typing import Any

from ghs.experiments import (
    calibration,
    partition,
    selection,
    trace_study,
)
from ghs.experiments.figures import counted, legend_beside, log_limits, note_off_axis
from ghs.experiments.launches import LEVELS
from ghs.figure_file import save_figure


def _figure(width_inches: float, height_inches: float) -> Any:
    """A constrained-layout figure drawn by Agg (no display needed), or None without
    matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    figure = Figure(figsize=(width_inches, height_inches), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_partition(result: dict[str, Any], path: str) -> str | None:
    """Fig. 7 as a PNG at ``path`` (simulated warm mean against work); None if no matplotlib."""
    figure = _figure(10, 4.5)
    if figure is None:
        return None
    for index, scenario in enumerate(result["scenarios"]):
        axes = figure.add_subplot(1, len(result["scenarios"]), index + 1)
        hours = [row["hours"] for row in scenario["rows"]]
        for method in partition.PARTITIONS:
            means = [row["partitions"][method]["simulated"]["warm"]["mean"] / 3600
                     for row in scenario["rows"]]
            axes.plot(hours, means, marker="o", label=method)
        axes.set_title(f"{scenario['faster']} faster")
        axes.set_xlabel("work (reference hours)")
        axes.set_ylabel("simulated completion (hours)")
    # the same partitions in every panel: one legend, below them, covering no line
    figure.legend(*axes.get_legend_handles_labels(), loc="outside lower center",
                  ncol=len(partition.PARTITIONS))
    save_figure(figure, path, 100)
    return path


def plot_selection(result: dict[str, Any], path: str) -> str | None:
    """Grouped bars of the warm simulated means per pool size; None if no matplotlib."""
    figure = _figure(9, 4.5)
    if figure is None:
        return None
    axes = figure.add_subplot(1, 1, 1)
    names = [f"R{n}" for n in selection.RANDOM_SIZES] + ["all", *selection.METHODS]
    width = 0.8 / len(names)
    for offset, name in enumerate(names):
        xs, ys = [], []
        for position, pool in enumerate(result["pools"]):
            if name in pool["columns"]:
                xs.append(position + offset * width)
                ys.append(pool["columns"][name]["warm_mean"])
        if xs:
            axes.bar(xs, ys, width, label=name, color=f"C{offset}")
    axes.set_xticks([p + 0.4 - width / 2 for p in range(len(result["pools"]))],
                    [f"{pool['hosts']} hosts" for pool in result["pools"]])
    axes.set_ylabel("simulated completion (s)")
    legend_beside(axes, fontsize="small")
    save_figure(figure, path, 100)
    return path


def plot_error_vs_length(result: dict[str, Any], path: str) -> str | None:
    """Mean error against work, one panel per section, ours solid, naive dashed."""
    figure = _figure(11, 5)
    if figure is None:
        return None
    for index, (section, title) in enumerate((("single", "one workstation"),
                                              ("parallel", counted(result["stations"],
                                                                   "workstation")))):
        axes = figure.add_subplot(1, 2, index + 1)
        lines = {(family["name"], colour, name): [row[name]["mean"] if row[name] else math.nan
                                                  for row in family[section]]
                 for colour, family in enumerate(result["families"])
                 for name in ("ours", "default", "naive", "true", "clairvoyant")
                 if any(row.get(name) for row in family[section])}  # "true": Poisson only
        # the clairvoyant's near-zero error would stretch the log axis over decades
        limits = log_limits(v for key, values in lines.items() if key[2] != "clairvoyant"
                            for v in values)
        styles = {"ours": "-o", "default": "-s", "naive": "--", "true": "-.",
                  "clairvoyant": ":"}
        for (family_name, colour, name), values in lines.items():
            hours = [row["hours"] for row in result["families"][colour][section]]
            axes.plot(hours, values, styles[name], color=f"C{colour}",
                      label=f"{family_name} {name}")
        note_off_axis(axes, "clairvoyant", (v for key, values in lines.items()
                                            if key[2] == "clairvoyant" for v in values), limits)
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_ylim(*limits)
        axes.set_title(title)
        axes.set_xlabel("work (hours of dedicated CPU)")
        axes.set_ylabel("mean |error|")
    # the same lines in both panels: one legend below them, covering neither
    figure.legend(*axes.get_legend_handles_labels(), loc="outside lower center", ncol=4,
                  fontsize="small")
    save_figure(figure, path, 100)
    return path


def plot_calibration(result: dict[str, Any], path: str) -> str | None:
    """Pooled coverage against nominal per family and section; None if no matplotlib."""
    figure = _figure(11, 4.5)
    if figure is None:
        return None
    nominal = [calibration.NOMINAL[lv] for lv in LEVELS]
    for index, section in enumerate(("single", "parallel")):
        axes = figure.add_subplot(1, 2, index + 1)
        axes.plot([0.0, 1.0], [0.0, 1.0], color="grey", linewidth=0.8)
        for colour, family in enumerate(result["families"]):
            pooled = family[section]["pooled"]
            for name, marker, line in (("ours", "o", "-"), ("true", "x", ":"),
                                       ("default", "s", "--")):
                if pooled.get(name):
                    axes.plot(nominal, [pooled[name][lv] for lv in LEVELS], marker=marker,
                              color=f"C{colour}", linestyle=line,
                              label=f"{family['name']} {name}")
        axes.set_xlabel("nominal")
        axes.set_ylabel("share finished by the predicted quantile")
        axes.set_title("one workstation" if section == "single"
                       else counted(result["stations"], "workstation"))
        legend_beside(axes, fontsize="x-small")
    save_figure(figure, path, 100)
    return path


def plot_trace_study(result: dict[str, Any], path: str) -> str | None:
    """Mean error against task length for each variant; None if no matplotlib."""
    figure = _figure(9, 4.5)
    if figure is None:
        return None
    axes = figure.add_subplot(1, 1, 1)
    for index, (name, rows) in enumerate(result["variants"].items()):
        hours = [row["hours"] for row in rows]
        axes.plot(hours, [trace_study.row_error(row, "ours") for row in rows], "-o",
                  color=f"C{index}", label=f"ours, {name}")
    original = result["variants"]["original"]
    clairvoyant = [trace_study.row_error(row, "clairvoyant") for row in original]
    # the axis follows our errors; the clairvoyant's near-zero ones would squash them
    limits = log_limits(trace_study.row_error(row, "ours") for rows in result["variants"].values()
                        for row in rows)
    axes.plot([row["hours"] for row in original], clairvoyant, ":", color="black",
              label="clairvoyant, original")
    if any(row.get("default") for row in original):
        axes.plot([row["hours"] for row in original],
                  [trace_study.row_error(row, "default") for row in original], "--s",
                  color="black", label="default, original")
    note_off_axis(axes, "clairvoyant", clairvoyant, limits)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_ylim(*limits)
    axes.set_xlabel("task (hours of dedicated CPU)")
    axes.set_ylabel("mean |error|")
    axes.set_title(f"{result['info']['source']}: error sources")
    legend_beside(axes, fontsize="small")
    save_figure(figure, path, 100)
    return path


def plot_sampling_cost(result: dict[str, Any], path: str) -> str | None:
    """Counts per hour (top) and utilisation estimates against the truth (bottom)."""
    figure = _figure(11, 6)
    if figure is None:
        return None
    hours = [h["hour"] for h in result["hours"]]
    top = figure.add_subplot(2, 1, 1)
    top.step(hours, [h["adaptive_count"] for h in result["hours"]], where="post",
             label="adaptive")
    top.step(hours, [h["fixed_count"] for h in result["hours"]], where="post", label="fixed")
    top.set_ylabel("measurements in the hour")
    bottom = figure.add_subplot(2, 1, 2, sharex=top)
    for key, label in (("rho_past_24h", "true (previous 24 h)"), ("rho_adaptive", "adaptive"),
                       ("rho_fixed", "fixed"), ("rho_naive", "naive (last reading)")):
        bottom.plot(hours, [h[key] for h in result["hours"]], label=label,
                    linewidth=0.6 if key == "rho_naive" else 1.2)
    bottom.set_ylabel("utilisation")
    bottom.set_xlabel("hour")
    phase_hours = result["size"] * 24
    for axes in (top, bottom):
        for boundary in range(1, len(result["phases"])):
            axes.axvline(boundary * phase_hours, color="grey", linestyle=":")
        legend_beside(axes, fontsize="small")
    # name each phase above its stretch of the top panel, so the dotted lines read
    for index, phase in enumerate(result["phases"]):
        top.annotate(phase["name"], xy=((index + 0.5) * phase_hours, 1.0),
                     xycoords=("data", "axes fraction"), xytext=(0, 3),
                     textcoords="offset points", ha="center", va="bottom", fontsize="small")
    save_figure(figure, path, 100)
    return path
