"""The experiments' results as rich tables: one ``show_NAME(console, result)`` per experiment.

Each takes the plain data its experiment's ``run`` returned (``ghs.experiments.NAME``) and
prints it; nothing here computes a result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.table import Table

from ghs.experiments import (
    distributions,
    envelope,
    error_vs_length,
    partition,
    sampling_cost,
    selection,
    trace_study,
)
from ghs.experiments.figures import counted
from ghs.experiments.launches import LEVELS


def show_distributions(console: Any, result: dict[str, Any]) -> None:
    """The per-fit summary (worst and mean |error|), then each case's p90/p99 errors."""
    table = Table(title=f"|predicted / simulated - 1|, {result['runs']:,} runs a case "
                        "(worst / mean over 9 cases)", title_justify="left")
    table.add_column("fit")
    for hours in distributions.HOURS:
        for level in ("p90", "p99"):
            table.add_column(f"{level} {hours}h", justify="right")
    for fit, row in result["summary"].items():
        cells = [f"{row[f'{level}_worst_{hours}h']:.1%} / {row[f'{level}_mean_{hours}h']:.1%}"
                 for hours in distributions.HOURS for level in ("p90", "p99")]
        table.add_row(fit + (" *" if fit == result["recommended"] else ""), *cells)
    console.print(table)
    console.print(f"* recommended default: {result['recommended']}")
    cases = Table(title="Per case: p90 / p99 error", title_justify="left")
    for column in ("h", "demand", "rho", *distributions.FITS):
        cases.add_column(column, justify="right")
    for case in result["cases"]:
        cases.add_row(str(case["hours"]), case["demand"][:6], f"{case['rho']:.1f}",
                      *(f"{case['errors'][f]['p90']:+.1%}/{case['errors'][f]['p99']:+.1%}"
                        for f in distributions.FITS))
    console.print(cases)


def show_envelope(console: Any, result: dict[str, Any]) -> None:
    """The worst p90 and p95 error per demand CoV and task length, then every case."""
    ratios = sorted({row["ratio"] for row in result["worst"]})
    table = Table(title=f"Worst p90 / p95 error (predicted / simulated - 1) over the "
                        f"utilisations, {result['runs']:,} runs a case; "
                        f"{'steady-state' if result.get('warm') else 'idle'} start, lognormal "
                        f"demands of mean {result['mean_demand_seconds']:g} s",
                  title_justify="left")
    table.add_column("demand CoV")
    for ratio in ratios:
        table.add_column(f"task {ratio:g}x demand", justify="right")
    for cov in sorted({row["cov"] for row in result["worst"]}):
        cells = []
        for ratio in ratios:
            row = next(r for r in result["worst"] if r["cov"] == cov and r["ratio"] == ratio)
            cells.append("-" if row["p90"] is None else f"{row['p90']:+.1%} / {row['p95']:+.1%}")
        table.add_row(f"{cov:g}", *cells)
    console.print(table)
    cases = Table(title="Per case: error of the mean and quantiles", title_justify="left")
    for column in ("rho", "CoV", "task/demand", "mean", *envelope.LEVELS):
        cases.add_column(column, justify="right")
    for case in result["cases"]:
        errors = case["errors"]
        cells = (["not simulated: too long to walk"] + [""] * len(envelope.LEVELS)
                 if errors is None else
                 [f"{errors[key]:+.1%}" for key in ("mean", *envelope.LEVELS)])
        cases.add_row(f"{case['rho']:g}", f"{case['cov']:g}", f"{case['ratio']:g}", *cells)
    console.print(cases)


def show_partition(console: Any, result: dict[str, Any]) -> None:
    """Per reading of the speed ratio: completion per partition and the savings, then errors."""
    for scenario in result["scenarios"]:
        hosts = ", ".join(f"{h['name']} rho {h['rho']:.1f} tau {h['tau']:.2f}"
                          for h in scenario["hosts"])
        table = Table(title=f"{scenario['faster']} faster ({hosts}); simulated mean, "
                            f"{result['runs']:,} runs, warm / idle start", title_justify="left")
        for column in ("work", *partition.PARTITIONS, "saving vs equal-load", "saving vs speed",
                       "model err", "naive err", "naive at rho"):
            table.add_column(column, justify="right")
        for row in scenario["rows"]:
            parts = row["partitions"]
            cells = [f"{parts[m]['simulated']['warm']['mean']:,.0f} / "
                     f"{parts[m]['simulated']['idle']['mean']:,.0f}" for m in partition.PARTITIONS]
            saving = row["saving"]
            model = [np.mean([p["model_error"][s] for p in parts.values()])
                     for s in partition.STARTS]
            naive = [np.mean([p["naive"][k] for p in parts.values()])
                     for k in ("mean_abs_error", "median_abs_error")]
            at_rho = np.mean([p["naive"]["at_true_utilisation_error"] for p in parts.values()])
            table.add_row(f"{row['hours']} h", *cells,
                          f"{saving['warm']['vs_equal_load']:.1%} / "
                          f"{saving['idle']['vs_equal_load']:.1%}",
                          f"{saving['warm']['vs_speed']:.1%} / {saving['idle']['vs_speed']:.1%}",
                          f"{model[0]:.1%} / {model[1]:.1%}",
                          f"{naive[0]:.0%} / {naive[1]:.0%}", f"{at_rho:.1%}")
        console.print(table)
        asym = scenario["asymptotic_saving"]
        console.print(f"  long-task limit: {asym['vs_equal_load']:.1%} vs equal-load, "
                      f"{asym['vs_speed']:.1%} vs speed")
    console.print(f"paper (Fig. 7): {partition.PAPER['text']}.\n"
                  "model err: |predicted mean / simulated "
                  "mean - 1|, warm / idle, averaged over the partitions; naive err: the same "
                  f"for dedicated / (1 - last {result['measure_seconds']:g} s utilisation) "
                  "against the warm mean, mean / median over readings; naive at rho: fed the "
                  "long-run utilisation instead.")


def show_selection(console: Any, result: dict[str, Any]) -> None:
    """Table 1 beside ours, then the methods' costs and the predictors' errors."""
    names = [f"R{n}" for n in selection.RANDOM_SIZES] + ["all", *selection.METHODS]
    table = Table(title=f"Average completion (s) over {result['repetitions']} repetitions, "
                        f"{result['work_seconds'] / 3600:g} h task, {result['runs']:,} runs a "
                        f"set ({result['source']['kind']})", title_justify="left")
    table.add_column("pool", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for pool in result["pools"]:
        columns = pool["columns"]
        for start in ("warm", "idle"):
            table.add_row(f"{pool['hosts']} {start}", *(
                f"{columns[n][f'{start}_mean']:,.0f} ({columns[n]['hosts']:.1f})"
                if n in columns else "" for n in names))
        paper = result["paper"].get(str(pool["hosts"]), {})
        hosts = paper.get("hosts", {})
        table.add_row(f"{pool['hosts']} paper", *(
            (f"{paper[n]:,.1f}" + (f" ({hosts[n]})" if n in hosts else "")) if n in paper
            else "" for n in names), style="dim", end_section=True)
    console.print(table)
    console.print("(n): hosts used, averaged; warm: hosts mid-workload at launch, idle: empty. "
                  "paper: SDSC Paragon / CTC SP2 workload on Sunwulf; its heuristic is 4.6% "
                  "above optimal at 20 machines (486.1 s vs 464.9 s).")
    cost = Table(title="Selection cost and prediction error (|predicted mean / simulated warm "
                       "mean - 1|)", title_justify="left")
    for column in ("pool", "method", "cost", "sets", "vs optimal warm / idle",
                   "criterion vs optimal", "model err warm / idle", "naive err mean / median",
                   "naive at rho"):
        cost.add_column(column, justify="right")
    for pool in result["pools"]:
        columns, ratios = pool["columns"], pool["ratios"]
        for method in selection.METHODS:
            row = columns[method]
            versus = ("" if method == "optimal" else
                      f"{ratios[f'{method}_vs_optimal_warm']:+.1%} / "
                      f"{ratios[f'{method}_vs_optimal_idle']:+.1%}")
            criterion = ("" if method == "optimal" else
                         f"{ratios[f'{method}_criterion_vs_optimal']:+.1%}")
            cost.add_row(str(pool["hosts"]), method, f"{row['cost_seconds']:.3f} s",
                         f"{row['evaluations']:,.0f}", versus, criterion,
                         f"{row['model_error']:.1%} / {row['model_error_idle']:.1%}",
                         f"{row['naive_error']:.0%} / {row['naive_median_error']:.0%}",
                         f"{row['naive_at_rho_error']:.1%}")
    console.print(cost)
    console.print(f"naive: dedicated / (1 - utilisation of the last {result['measure_seconds']:g}"
                  " s), the slowest host deciding; 'at rho' feeds it the long-run utilisation.")
    paper_cost = result["paper"]["cost_seconds"]
    console.print(f"paper cost: optimal {paper_cost['optimal'][0]} s to "
                  f"{paper_cost['optimal'][1]} s, heuristic {paper_cost['heuristic'][0]} s to "
                  f"{paper_cost['heuristic'][1]} s (10 to 20 machines).")


def _paper_error(section: str, hours: float) -> str:
    return error_vs_length.PAPER[section].get(f"{hours:g}", "")


def _percent(summary: dict[str, float] | None, digits: int = 1) -> str:
    return "-" if summary is None else f"{summary['mean']:.{digits}%}"


def show_error_vs_length(console: Any, result: dict[str, Any]) -> None:
    """Per family: one table for one workstation and one for 32, the paper's figure beside."""
    for family in result["families"]:
        info = family["info"]
        what = (f"{info['source']}, {info['jobs']:,} jobs" if info["kind"] == "trace"
                else f"Poisson, {info['demand']} demands")
        for section, title in (("single", "one workstation"),
                               ("parallel", counted(result["stations"], "workstation"))):
            table = Table(title=f"{family['name']} ({what}), {title}: mean |predicted mean - "
                                f"simulated| / simulated, "
                                f"{counted(family['launches'], 'launch', 'launches')}",
                          title_justify="left")
            for column in ("work", "tasks", "ours", "var", "median", "naive", "naive/ours",
                           "past 24h", "true", "clairv.", "idle start", "ours p50/p90/p95",
                           "default", "default/ours", "default p50/p90/p95",
                           "p90/p50 ours/default", "paper"):
                table.add_column(column, justify="right")
            for row in family[section]:
                ours, cover = row["ours"], row["coverage"]["ours"]
                tasks = f"{row['tasks']}" + (f" (-{row['censored']})" if row["censored"] else "")
                ratio = row["naive_over_ours"]
                versus = row.get("default_over_ours")
                table.add_row(
                    f"{row['hours']:g} h", tasks, _percent(ours),
                    "-" if ours is None else f"{ours['variance']:.4f}",
                    "-" if ours is None else f"{ours['median']:.1%}",
                    _percent(row["naive"], 0), "-" if ratio is None else f"{ratio:.1f}x",
                    _percent(row["past"]), _percent(row["true"]), _percent(row["clairvoyant"]),
                    _percent(row["ours_idle_start"]),
                    "-" if cover is None else "/".join(f"{cover[lv]:.0%}" for lv in LEVELS),
                    _percent(row.get("default")), "-" if versus is None else f"{versus:.2f}x",
                    _coverage_cell(row["coverage"].get("default")),
                    _widths(row.get("width", {})), _paper_error(section, row["hours"]))
            console.print(table)
        sampling = info["sampling"]
        console.print(f"  sampler: {sampling['mean_per_hour']:.1f} measurements an hour on "
                      f"average, {sampling['at_max_share']:.0%} of hours at the maximum")
    console.print(
        f"paper: {error_vs_length.PAPER['text']}\n"
        "ours: the model fed the sampler's 24-hour estimate; naive: "
        "dedicated / (1 - the last measured utilisation); past 24h: the model fed the exact "
        "parameters of the jobs of the 24 hours before launch (a noiseless sampler); true: the "
        "station's long-run parameters (Poisson only); clairv.: the parameters of the task's "
        "own run window (its mean misses by the backlog at launch alone); idle start: ours "
        "against the same task on the machine emptied at launch. ours p50/p90/p95: "
        "share of tasks finished by the predicted quantile. (-n): tasks censored (still "
        "running when the known stream ended). default: the served predictor (calibrated: "
        "forecast of the run window's load, quantiles calibrated per host on its record; "
        "split tasks as a manager serves them: each station's law from its state, calibrated on "
        "its own record, the laws recombined), back-tested on the same stations, "
        "launches and lengths; p90/p50: median width of the predicted interval.")


def _coverage_cell(cover: dict[str, float] | None) -> str:
    return "-" if cover is None else "/".join(f"{cover[lv]:.0%}" for lv in LEVELS)


def _widths(widths: dict[str, float | None]) -> str:
    cells = [widths.get(name) for name in ("ours", "default")]
    return " / ".join("-" if w is None else f"{w:.2f}" for w in cells)


def _shares(values: dict[str, float] | None) -> str:
    return "-" if values is None else "/".join(f"{100 * values[lv]:.0f}" for lv in LEVELS)


def show_calibration(console: Any, result: dict[str, Any]) -> None:
    """Per family: coverage rows (pooled first, then per length) for one workstation and for
    ``stations``."""
    for family in result["families"]:
        table = Table(title=f"{family['name']}: % of tasks finished by the predicted "
                            f"p50/p90/p95 (nominal 50/90/95), "
                            f"{counted(family['launches'], 'launch', 'launches')}",
                          title_justify="left")
        for column in ("section", "work", "tasks", "ours", "past 24h", "true",
                       "naive by point", "default", "p90/p50 ours/default"):
            table.add_column(column, justify="right")
        for section, label in (("single", "1 ws"), ("parallel", f"{result['stations']} ws")):
            rows = [("all", family[section]["pooled"])] + [
                (f"{entry['hours']:g} h", entry) for entry in family[section]["per_length"]]
            for index, (work, entry) in enumerate(rows):
                naive = entry["naive_by_point"]
                table.add_row(label if index == 0 else "", work, str(entry["tasks"]),
                              _shares(entry["ours"]), _shares(entry["past"]),
                              _shares(entry["true"]),
                              "-" if naive is None else f"{100 * naive:.0f}",
                              _shares(entry.get("default")), _widths(entry.get("width", {})),
                              end_section=index == len(rows) - 1, style="bold" if index == 0
                              else None)
        console.print(table)
        if len(family.get("paths", ())) > 1:
            _show_paths(console, family, result["stations"])
    console.print("ours: the model fed the sampler's 24-hour estimate; past 24h: the exact "
                  "parameters of the 24 hours before launch; true: the long-run parameters "
                  "(Poisson only); naive by point: share finished by dedicated / (1 - last "
                  "measured utilisation); default: the served predictor (calibrated), "
                  "back-tested on the same stations, launches and lengths; p90/p50: median "
                  "width of the predicted interval.")


def _show_paths(console: Any, family: dict[str, Any], stations: int) -> None:
    """Each draw of the workstations' own pooled coverage: how far one path's luck moves it."""
    table = Table(title=f"{family['name']}: each draw of the workstations (seed), pooled over "
                        "the lengths", title_justify="left")
    for column in ("seed", "1 ws tasks", "ours", "default", f"{stations} ws tasks", "ours",
                   "default"):
        table.add_column(column, justify="right")
    for path in family["paths"]:
        single, split = path["single"], path["parallel"]
        table.add_row(str(path["seed"]), str(single["tasks"]), _shares(single["ours"]),
                      _shares(single.get("default")), str(split["tasks"]),
                      _shares(split["ours"]), _shares(split.get("default")))
    console.print(table)


def show_trace_study(console: Any, result: dict[str, Any]) -> None:
    """Each variant's errors per task length, then the costs and the largest source."""
    info = result["info"]
    table = Table(title=f"{info['source']}: one-workstation tasks on "
                        f"{counted(len(result['stations']), 'workstation')} x "
                        f"{counted(result['launches'], 'launch', 'launches')}, mean |error| "
                        "(median)",
                  title_justify="left")
    for column in ("variant", "work", "tasks", "ours", "naive", "past 24h", "true",
                   "clairv.", "ours p50/p90/p95", "default", "default p50/p90/p95",
                   "p90/p50 ours/default"):
        table.add_column(column, justify="right")
    for name, rows in result["variants"].items():
        for index, row in enumerate(rows):
            cover = row["coverage"]["ours"]
            table.add_row(
                name if index == 0 else "", f"{row['hours']:g} h",
                f"{row['tasks']}" + (f" (-{row['censored']})" if row["censored"] else ""),
                _cell(row["ours"]), _cell(row["naive"]), _cell(row["past"]), _cell(row["true"]),
                _cell(row["clairvoyant"]), _coverage_cell(cover), _cell(row.get("default")),
                _coverage_cell(row["coverage"].get("default")),
                _widths(row.get("width", {})), end_section=index == len(rows) - 1)
    console.print(table)
    for name, text in result["descriptions"].items():
        console.print(f"  {name}: {text}")
    costs = Table(title="What each assumption costs: drop of our mean |error| (median) when "
                        "it is removed", title_justify="left")
    sources = [*trace_study.SOURCES, "non-stationarity", "sampler noise", "stationary replay"]
    costs.add_column("work", justify="right")
    for source in sources:
        costs.add_column(source, justify="right")
    for entry in result["costs"]["per_length"]:
        costs.add_row(f"{entry['hours']:g} h", *(
            f"{entry['mean'][s]:+.1%} ({entry['median'][s]:+.1%})" for s in sources))
        default = entry.get("default_mean", {})
        costs.add_row("  default", *(
            "" if default.get(s) is None else f"{default[s]:+.1%}" for s in sources),
            style="dim")
    console.print(costs)
    console.print(f"largest source of error (mean over lengths): {result['largest']}; "
                  "non-stationarity = ours - clairvoyant, sampler noise = ours - past 24h, "
                  "the others = ours on the log - ours on the replay without the violation; "
                  "default: the same drops for the served predictor (calibrated, back-tested "
                  "on each replay but idle).")


def _cell(summary: dict[str, float] | None) -> str:
    if summary is None:
        return "-"
    return f"{summary['mean']:.0%} ({summary['median']:.0%})"


def show_sampling_cost(console: Any, result: dict[str, Any]) -> None:
    """Per phase: measurements an hour (adaptive vs fixed) and the estimates' errors."""
    table = Table(title=f"Measurements an hour and |utilisation estimate - truth|, "
                        f"{result['size']} virtual day(s) a phase, "
                        f"{result['sampling']['interval_seconds']:g} s measurements, bounds "
                        f"{result['sampling']['min_per_hour']}-"
                        f"{result['sampling']['max_per_hour']}", title_justify="left")
    for column in ("phase", "part", "adaptive/h (min-max)", "fixed/h", "saving",
                   "24h err adaptive", "fixed", "naive", "next-hour err adaptive", "fixed ",
                   "naive "):
        table.add_column(column, justify="right")
    for row in result["summary"]:
        table.add_row(row["phase"], row["part"],
                      f"{row['adaptive_per_hour']:.1f} ({row['adaptive_min']}-"
                      f"{row['adaptive_max']})", f"{row['fixed_per_hour']:.1f}",
                      f"{row['saving']:.0%}",
                      *(f"{row[f'{name}_error_past_24h']:.3f}"
                        for name in ("adaptive", "fixed", "naive")),
                      *(f"{row[f'{name}_error_next_hour']:.3f}"
                        for name in ("adaptive", "fixed", "naive")))
    console.print(table)
    counts = [h["adaptive_count"] for h in result["hours"]]
    console.print("adaptive measurements per hour: " + " ".join(str(c) for c in counts))
    phases = ", ".join(f"{p['name']} at utilisation "
                       f"{'/'.join(f'{u:g}' for u in p['utilisation'])}"
                       for p in result["phases"])
    console.print(f"phases: {phases}. fixed: a sampler pinned at the maximum rate; naive: the "
                  "last single reading. 24h err: against the true busy fraction of the previous "
                  "24 hours; next-hour err: against the next hour's.\n"
                  f"paper ({sampling_cost.PAPER['text']}).")
