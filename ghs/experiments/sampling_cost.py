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
