"""The paper's Fig. 8: measurements per hour as a workstation settles, then changes
(``ghs experiment sampling-cost``).

One single-core workstation with many short local jobs (Poisson arrivals, log-uniform demands
of mean 0.15 s and CoV 1.5, i.e. 1.5 ms to 1 s: shell commands, compilers, editors) goes
through three phases of ``days`` virtual days each:

1. ``steady``: utilisation 0.3;
2. ``step``: utilisation 0.6 (the owner starts heavier work);
3. ``hourly``: utilisation alternating hourly between 0.1 and 0.7 (mean 0.4).

The Part 2 sampler (:class:`sensors.sampler.AdaptiveSampler` on a simulated host, memory
store, the configured bounds) plans each hour's measurements from the previous 24 hours; the
per-hour counts are its plans. The same stream is also watched by a sampler fixed at the
maximum rate (what sampling without adaptation would cost), and both 24-hour utilisation
estimates are scored hour by hour against the truth (the busy fraction of the previous 24
hours, from the stream itself), beside the naive estimate: the last single reading. Against
the next hour's busy fraction (what a prediction needs) all three are scored too.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ghs.errors import GhsError
from ghs.experiments.figures import legend_beside
from ghs.experiments.launches import HOUR_SECONDS, SAMPLING, Sampling, Station, watch
from ghs.experiments.partition import case_seed
from ghs.traces import busy_fraction
from scheduler.workload import Trace, demand, poisson_jobs

MEAN_DEMAND_SECONDS = 0.15
DEMAND_COV = 1.5
PHASES = (("steady", (0.3,)), ("step", (0.6,)), ("hourly", (0.1, 0.7)))
PAPER = {"text": "Fig. 8: the number of measurements an hour falls while the machine becomes "
                 "steady (utilisation staying at one level)"}


def run(size: int = 3, seed: int = 7, *, sampling: Sampling = SAMPLING) -> dict[str, Any]:
    """Hourly counts and estimate errors over 3 x ``size`` virtual days."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GhsError(f"size (days per phase) must be a whole number >= 1, got {size!r}",
                       field="size", value=size)
    trace, phase_of_hour, level_of_hour = workstation_stream(
        size, np.random.default_rng(case_seed(seed, "sampling-cost")))
    end = len(phase_of_hour) * HOUR_SECONDS
    station = Station("ws", trace, end)
    adaptive = watch(station, start_seconds=0.0, end_seconds=end, sampling=sampling,
                     rng=random.Random(case_seed(seed, "adaptive")))
    fixed_settings = Sampling(sampling.interval_seconds, sampling.max_per_hour,
                              sampling.max_per_hour, sampling.window_hours)
    fixed = watch(station, start_seconds=0.0, end_seconds=end, sampling=fixed_settings,
                  rng=random.Random(case_seed(seed, "fixed")))
    hour_ends = adaptive.hour_ends
    window = sampling.window_hours * HOUR_SECONDS
    past = busy_fraction(trace, hour_ends, window)
    early = hour_ends < window  # the window reaches before the first job: use all history
    past[early] = [busy_fraction(trace, [end], end)[0] for end in hour_ends[early]]
    upcoming = busy_fraction(trace, hour_ends + HOUR_SECONDS, HOUR_SECONDS)
    estimates = {"adaptive": np.array([e.rho or 0.0 for e in adaptive.estimates]),
                 "fixed": np.array([e.rho or 0.0 for e in fixed.estimates]),
                 "naive": np.array([adaptive.last_rho(at) for at in hour_ends])}
    hours = []
    for index in range(hour_ends.size):
        hours.append({"hour": index, "phase": phase_of_hour[index],
                      "utilisation": level_of_hour[index],
                      "adaptive_count": int(adaptive.counts[index]),
                      "fixed_count": int(fixed.counts[index]),
                      "rho_past_24h": float(past[index]), "rho_next_hour": float(upcoming[index]),
                      **{f"rho_{name}": float(values[index])
                         for name, values in estimates.items()}})
    return {"size": size, "seed": seed, "sampling": sampling.__dict__,
            "demand": {"kind": "loguniform", "mean_seconds": MEAN_DEMAND_SECONDS,
                       "cov": DEMAND_COV},
            "phases": [{"name": name, "utilisation": list(levels), "days": size}
                       for name, levels in PHASES],
            "summary": _summary(hours, size, estimates, past, upcoming),
            "hours": hours, "paper": PAPER}


def workstation_stream(days: int, rng: np.random.Generator
                       ) -> tuple[Trace, list[str], list[float]]:
    """The three phases' jobs as one trace, with each hour's phase and utilisation."""
    law = demand("loguniform", MEAN_DEMAND_SECONDS, DEMAND_COV)
    arrivals, demands, phases, levels = [], [], [], []
    hour = 0
    for name, utilisations in PHASES:
        for offset in range(int(days * 24)):
            level = utilisations[offset % len(utilisations)]
            start = hour * HOUR_SECONDS
            a, d = poisson_jobs(level / law.mean_seconds, law, rng, start, start + HOUR_SECONDS)
            arrivals.append(a)
            demands.append(d)
            phases.append(name)
            levels.append(level)
            hour += 1
    return Trace(np.concatenate(arrivals), np.concatenate(demands)), phases, levels


def _summary(hours: list[dict[str, Any]], days: int, estimates: dict[str, np.ndarray],
             past: np.ndarray, upcoming: np.ndarray) -> list[dict[str, Any]]:
    """Per phase (its first day and the rest): counts and mean absolute estimate errors."""
    rows = []
    phase = np.array([h["phase"] for h in hours])
    first_day = np.array([h["hour"] % (days * 24) < 24 for h in hours])
    for name, _ in PHASES:
        for label, mask in (("first day", first_day), ("settled", ~first_day)):
            chosen = (phase == name) & mask
            if not chosen.any():
                continue
            adaptive = np.array([h["adaptive_count"] for h in hours])[chosen]
            fixed = np.array([h["fixed_count"] for h in hours])[chosen]
            row = {"phase": name, "part": label, "hours": int(chosen.sum()),
                   "adaptive_per_hour": float(adaptive.mean()),
                   "adaptive_min": int(adaptive.min()), "adaptive_max": int(adaptive.max()),
                   "fixed_per_hour": float(fixed.mean()),
                   "saving": float(1 - adaptive.sum() / fixed.sum()) if fixed.sum() else 0.0}
            for estimator, values in estimates.items():
                row[f"{estimator}_error_past_24h"] = float(np.mean(np.abs(values - past)[chosen]))
                row[f"{estimator}_error_next_hour"] = float(
                    np.mean(np.abs(values - upcoming)[chosen]))
            rows.append(row)
    return rows


def show(console: Any, result: dict[str, Any]) -> None:
    """Per phase: measurements an hour (adaptive vs fixed) and the estimates' errors."""
    from rich.table import Table

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
                  f"paper ({PAPER['text']}).")


def plot(result: dict[str, Any], path: str) -> str | None:
    """Counts per hour (top) and utilisation estimates against the truth (bottom)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    figure = Figure(figsize=(11, 6), layout="constrained")
    FigureCanvasAgg(figure)
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
    figure.savefig(path, dpi=100)
    return path
