"""What costs the model its accuracy on real logs (``ghs experiment error-sources``).

The model assumes Poisson arrivals, stationary parameters, an idle machine at launch, and uses
only two moments of the demand. A real log breaks all four. This study takes the trace family
of ``error-vs-length`` (same log, cut, stretch, launches and sampler seeds) and replays the
same one-workstation tasks with one violation removed at a time:

- ``spread`` (burstiness within an hour): each hour's jobs get new arrival times, uniform
  over that hour (a Poisson process with the same hourly rates); demands are kept;
- ``spread-day`` (burstiness within a day): the same with days, so on/off periods of a few
  hours go too and only the daily rates stay;
- ``light`` (heavy tails): each demand becomes an exponential draw with the mean of its
  station's demands that day (log clock), so the daily load stays, the tail goes;
- ``idle`` (idle at launch): the jobs that arrived before the launch are removed, so the
  task starts on an idle machine; the sampler's estimates are those of the original;
- ``stationary`` (a cross-check): Poisson arrivals at the station's mean rate over the
  stretch with demands drawn from its own, which removes bursts and non-stationarity at once
  and gives the station's true parameters (``true`` column).

Every replay is watched afresh by the sampler. The cost of a violation is the drop of our mean
error when it is removed. Non-stationarity is measured as the brief defines it, on the
original: our error (24-hour estimate) minus the clairvoyant's (parameters of the task's own
run window); the sampler's measurement noise as ours minus "past" (the exact parameters of the
24 hours before launch). The largest of the bursts (either scale), heavy tails, idle at launch and
non-stationarity, averaged over the task lengths, is named. The served default
(:mod:`ghs.experiments.default_scores`) is scored on every replay but ``idle`` (the engine
walks the whole stream, so it cannot start a task on an emptied machine), and the drop of its
mean error per violation is given beside ours (``default_mean``). Bursts and non-stationarity
shade into each other: what the day-scale spread removes and the hour-scale one keeps (load
coming and going within a day) is both, and the 24-hour estimate cannot follow it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.errors import GhsError
from ghs.experiments import default_scores
from ghs.experiments.error_vs_length import (
    SINGLE_HOURS,
    STATIONS,
    TRACE_WARM_HOURS,
    length_rows,
    trace_stations,
)
from ghs.experiments.launches import (
    DAY_SECONDS,
    HOUR_SECONDS,
    SAMPLING,
    Sampling,
    Station,
    single_tasks,
    watch,
)
from ghs.experiments.partition import case_seed
from ghs.traces import JobLog
from scheduler import Host
from scheduler.workload import Trace

VARIANTS = {
    "original": "the log as cut",
    "spread": "bursts spread: each hour's jobs at uniform times within that hour",
    "spread-day": "bursts spread: each day's jobs at uniform times within that day",
    "light": "light tails: exponential demands with the station's daily mean",
    "idle": "idle at launch: jobs that arrived before the launch removed",
    "stationary": "stationary: Poisson at the mean rate, demands redrawn from the station's",
}
SOURCES = {"bursts within an hour": "spread", "bursts within a day": "spread-day",
           "heavy tails": "light", "idle at launch": "idle"}
STUDY_STATIONS = 8


def run(log: JobLog, size: int = 48, seed: int = 7, *, stations: int = STUDY_STATIONS,
        hours: Sequence[float] = SINGLE_HOURS, sampling: Sampling = SAMPLING,
        dist: str = "lognormal", spacing_hours: int = 3) -> dict[str, Any]:
    """Per variant and task length: error summaries; then each assumption's cost."""
    if isinstance(stations, bool) or not isinstance(stations, int) \
            or not 1 <= stations <= STATIONS:
        raise GhsError(f"stations must be a whole number from 1 to {STATIONS}, got "
                       f"{stations!r}", field="stations", value=stations)
    # the same draws as error-vs-length's trace family, so the original variant matches it
    built, start, launches, info = trace_stations(
        log, STATIONS, size, np.random.default_rng(case_seed(seed, "trace")),
        spacing_hours=spacing_hours)
    step = len(built) // stations
    chosen = list(range(0, len(built), step))[:stations]
    lengths = np.asarray(hours, dtype=float) * HOUR_SECONDS
    replay_rng = np.random.default_rng(case_seed(seed, "replay"))
    variants: dict[str, list[dict[str, Any]]] = {}
    original_watches = {}
    for name in VARIANTS:
        parts, streams = [], []
        for k in chosen:
            station = built[k]
            if name in ("original", "idle"):
                replayed = station
            else:
                replayed = replay(name, station, start - TRACE_WARM_HOURS * HOUR_SECONDS,
                                  replay_rng)
            if name == "idle":
                watched = original_watches[k]
            else:
                watched = watch(replayed, start_seconds=start, end_seconds=float(launches[-1]),
                                sampling=sampling, rng=random.Random(case_seed(seed, "trace",
                                                                               k)))
            if name == "original":
                original_watches[k] = watched
            parts.append(single_tasks(replayed, watched, launches, lengths, dist=dist,
                                      idle_at_launch=name == "idle"))
            streams.append(replayed)
        tasks = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
        if name != "idle":  # the engine walks the whole stream: it has no emptied start
            tasks.update(default_scores.score(
                streams, launches, lengths, boot_seconds=start - TRACE_WARM_HOURS * HOUR_SECONDS,
                sampling=sampling, seed=case_seed(seed, "engine", name), parallel=False))
        variants[name] = length_rows(tasks, list(hours))
    costs = _costs(variants)
    return {"size": size, "seed": seed, "stations": [built[k].name for k in chosen],
            "launches": int(launches.size), "dist": dist, "info": info,
            "variants": variants, "descriptions": VARIANTS, "costs": costs,
            "largest": max(costs["mean_over_lengths"], key=costs["mean_over_lengths"].get)}


def replay(name: str, station: Station, boot_seconds: float,
           rng: np.random.Generator) -> Station:
    """``station`` with one property of its stream replaced (see the module docstring)."""
    trace = station.trace
    arrivals, demands = trace.arrival_seconds, trace.cpu_seconds
    if arrivals.size == 0:
        return station
    if name in ("spread", "spread-day"):
        width = HOUR_SECONDS if name == "spread" else DAY_SECONDS
        slot = np.floor(arrivals / width)
        moved = (slot + rng.random(arrivals.size)) * width
        # sort within each slot only; the slots stay in order, so demands keep their slot
        order = np.lexsort((moved, slot))
        return Station(station.name, Trace(moved[order], demands), station.known_until)
    if name == "light":
        day = np.floor(arrivals / DAY_SECONDS).astype(np.int64)
        _, index = np.unique(day, return_inverse=True)
        means = np.bincount(index, demands) / np.bincount(index)
        drawn = rng.exponential(means[index])
        return Station(station.name, Trace(arrivals, drawn), station.known_until)
    if name == "stationary":
        begin = min(float(arrivals[0]), boot_seconds)
        span = station.known_until - begin
        rate = arrivals.size / span
        count = int(rng.poisson(rate * span))
        new_arrivals = np.sort(rng.uniform(begin, station.known_until, count))
        drawn = rng.choice(demands, count)
        mean = float(demands.mean())
        truth = Host(station.name, lam=rate, mu=1.0 / mean, sigma=float(demands.std()),
                     rho=min(rate * mean, 0.95))
        return Station(station.name, Trace(new_arrivals, drawn), station.known_until, truth)
    raise GhsError(f"unknown replay {name!r}; choose from spread, spread-day, light, "
                   "stationary",
                   field="name", value=name)


def row_error(row: dict[str, Any], name: str, key: str = "mean") -> float:
    """A predictor's error statistic ``key`` in one length row, NaN when it has none."""
    return row[name][key] if row[name] else float("nan")


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _costs(variants: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Drop of our mean (and median) error when each violation is removed, per length."""
    original = variants["original"]
    per_length = []
    for index, row in enumerate(original):
        entry: dict[str, Any] = {"hours": row["hours"]}
        for key in ("mean", "median"):
            ours = row_error(row, "ours", key)
            costs = {source: ours - row_error(variants[name][index], "ours", key)
                     for source, name in SOURCES.items()}
            costs["non-stationarity"] = ours - row_error(row, "clairvoyant", key)
            costs["sampler noise"] = ours - row_error(row, "past", key)
            costs["stationary replay"] = ours - row_error(variants["stationary"][index], "ours",
                                                          key)
            entry[key] = costs
        default = row_error(row, "default")
        # what each violation costs the default; an emptied start it cannot replay
        entry["default_mean"] = {source: _finite(default - row_error(variants[name][index],
                                                                     "default"))
                                 for source, name in SOURCES.items() if name != "idle"}
        per_length.append(entry)
    named = [*SOURCES, "non-stationarity"]
    return {"per_length": per_length,
            "mean_over_lengths": {source: float(np.mean([e["mean"][source] for e in per_length]))
                                  for source in named},
            "median_over_lengths": {source: float(np.mean([e["median"][source]
                                                           for e in per_length]))
                                    for source in named}}
