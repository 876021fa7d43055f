"""The paper's Fig. 4-6: prediction error against task length (``ghs experiment error-vs-length``).

Error = |predicted mean - simulated completion| / simulated completion, its mean and variance
over many tasks, for one workstation (tasks of 0.5 to 8 hours of dedicated time) and for 32
workstations (4 to 256 hours of work split by the equal-mean partition). The prediction uses the
parameters the Part 2 sampler estimated over the 24 hours before the launch on the same
workstation, and the task then runs into the following hours of the same job stream (see
:mod:`ghs.experiments.launches`). The naive predictor (dedicated / (1 - the sampler's last
utilisation reading)) and the clairvoyant model (parameters of the task's own run window) are
scored on the same tasks, and so is the served default (``default``: calibrated, back-tested
on the same streams and launches by :mod:`ghs.experiments.default_scores`; split tasks are
split by its own view, so their realised times are its own).

Families of workstations (32 of each; every one of them also serves for one-workstation tasks):

- ``poisson-loguniform``: Poisson arrivals, log-uniform demands of mean 120 s and CoV 1.5 (the
  Fig. 7 law: 1.2 s to 779 s), utilisation uniform on [0.05, 0.5] per workstation;
- ``poisson-lognormal``: Poisson arrivals, lognormal demands with a mean log-uniform on
  [10 s, 120 s] and a CoV uniform on [1, 3] per workstation (the selection experiment's pool),
  utilisation uniform on [0.05, 0.5];
- ``trace``: a real log cut into 32 workstations by user (:mod:`ghs.traces`), each scaled to a
  utilisation uniform on [0.05, 0.5] over the whole log, so the load still rises and falls
  with the log; a random stretch of the log is replayed.

Launches are ``spacing`` hours apart (default 3) after a first day of sampling, on one
continuous stretch per family: the sampler runs as an agent would, and the same launches serve
both the one- and the 32-workstation tasks. Tasks still running when the known stream ends
are censored (dropped and counted).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.errors import GhsError, TraceError
from ghs.experiments import default_scores
from ghs.experiments.launches import (
    HOUR_SECONDS,
    MODELS,
    SAMPLING,
    Sampling,
    Station,
    coverage,
    error_summary,
    errors,
    launch_times,
    outcomes,
    parallel_tasks,
    single_tasks,
    watch,
    width,
)
from ghs.experiments.partition import case_seed
from ghs.traces import JobLog, workstation_traces
from scheduler import Host
from scheduler.workload import Trace, demand, poisson_jobs

SINGLE_HOURS = (0.5, 1.0, 2.0, 4.0, 8.0)
PARALLEL_HOURS = (4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
STATIONS = 32
RHO_RANGE = (0.05, 0.5)
POISSON_KINDS = ("loguniform", "lognormal")
SPACING_HOURS = 3
POISSON_WARM_HOURS = 6.0
TRACE_WARM_HOURS = 24.0
TAIL_HOURS = 48.0  # stream kept after the last launch, for the tasks to finish in
NAMES = ("ours", "naive", "past", "true", "clairvoyant")
ENGINE_NAMES = tuple(default_scores.ENGINE_PREDICTORS)  # the back-tested default, paper
PAPER: dict[str, Any] = {
    "single": {"8": "< 10%"},
    "parallel": {"8": "9.31% (Fig. 6, 8 CPUs)", "16": "4.18% (Fig. 6, 8 CPUs)"},
    "text": "Fig. 4 (one workstation, 0.5-8 h): mean and variance fall with length, mean under "
            "10% at 8 h; Fig. 5 (32 Sunwulf nodes, 4-256 h): falls faster than on one "
            "workstation; Fig. 6 (pitcairn, 8 CPUs): 9.31% at 8 h, 4.18% at 16 h.",
}


def run(size: int = 48, seed: int = 7, *, paths: int = 1, log: JobLog | None = None,
        stations: int = STATIONS, single_hours: Sequence[float] = SINGLE_HOURS,
        parallel_hours: Sequence[float] = PARALLEL_HOURS,
        poisson_kinds: Sequence[str] = POISSON_KINDS, sampling: Sampling = SAMPLING,
        dist: str = "lognormal", rho_max: float = 0.9,
        spacing_hours: int = SPACING_HOURS) -> dict[str, Any]:
    """Per family, per task length: error summaries of ours, naive, clairvoyant and the
    served default, with coverage and median p90/p50 width of each model's quantiles.

    ``size``: launches per family (each launch gives ``stations`` one-workstation tasks and
    one 32-workstation task per length). ``log``: add the trace family from this log.
    ``paths``: draw each family's workstations this many times (seeds ``seed``, ``seed + 1``,
    ...) and pool their tasks (:func:`collect_paths`).
    """
    seeds = path_seeds(seed, paths)
    families = [collect_paths(kind, size, seeds, log=log, stations=stations,
                              single_hours=single_hours, parallel_hours=parallel_hours,
                              sampling=sampling, dist=dist, rho_max=rho_max,
                              spacing_hours=spacing_hours)[0]
                for kind in family_names(poisson_kinds, log)]
    return {"size": size, "seed": seed, "seeds": seeds, "stations": stations, "dist": dist,
            "spacing_hours": spacing_hours, "sampling": sampling.__dict__, "paper": PAPER,
            "families": [summarise(family) for family in families]}


def path_seeds(seed: int, paths: int) -> list[int]:
    """The seeds of ``paths`` independent draws of the workstations: ``seed``, ``seed + 1``,
    ... One draw is one sample path: its launches, hours apart, share most of their run
    windows, so a split's figures over them move with that path's luck."""
    if isinstance(paths, bool) or not isinstance(paths, int) or paths < 1:
        raise GhsError(f"paths must be a whole number >= 1, got {paths!r}", field="paths",
                       value=paths)
    return [seed + k for k in range(paths)]


def collect_paths(name: str, size: int, seeds: Sequence[int], **options: Any
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`collect_family` once per seed (``options`` as there): (the draws' tasks pooled
    into one family, with the first draw's ``info``; each draw's own family)."""
    drawn = [collect_family(name, size, seed, **options) for seed in seeds]
    first = drawn[0]
    if len(drawn) == 1:
        return first, drawn
    pooled = {**first, "launches": sum(family["launches"] for family in drawn)}
    for section in ("single", "parallel"):
        pooled[section] = {key: np.concatenate([family[section][key] for family in drawn])
                           for key in first[section]}
    return pooled, drawn


def family_names(poisson_kinds: Sequence[str], log: JobLog | None) -> list[str]:
    """The families a run covers: the Poisson kinds, then ``trace`` if a log is given."""
    unknown = [kind for kind in poisson_kinds if kind not in POISSON_KINDS]
    if unknown:
        raise GhsError(f"unknown Poisson family {unknown[0]!r}; choose from "
                       f"{', '.join(POISSON_KINDS)}", field="poisson_kinds", value=unknown[0])
    names = [f"poisson-{kind}" for kind in poisson_kinds]
    if log is not None:
        names.append("trace")
    if not names:
        raise GhsError("nothing to run: no Poisson family and no trace", field="poisson_kinds")
    return names


def collect_family(name: str, size: int, seed: int, *, log: JobLog | None, stations: int,
                   single_hours: Sequence[float], parallel_hours: Sequence[float],
                   sampling: Sampling, dist: str, rho_max: float,
                   spacing_hours: int) -> dict[str, Any]:
    """Stations of one family, watched by the sampler, and every task's raw outcome."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GhsError(f"size (launches) must be a whole number >= 1, got {size!r}",
                       field="size", value=size)
    rng = np.random.default_rng(case_seed(seed, name))
    if name == "trace":
        if log is None:
            raise GhsError("the trace family needs a log", field="log")
        built, start, launches, info = trace_stations(log, stations, size, rng,
                                                      spacing_hours=spacing_hours)
    else:
        built, start, launches, info = poisson_stations(name.split("-", 1)[1], stations, size,
                                                        rng, spacing_hours=spacing_hours)
    watches = [watch(station, start_seconds=start, end_seconds=float(launches[-1]),
                     sampling=sampling, rng=random.Random(case_seed(seed, name, k)))
               for k, station in enumerate(built)]
    single_seconds = np.asarray(single_hours, dtype=float) * HOUR_SECONDS
    parts = [single_tasks(station, watched, launches, single_seconds, dist=dist)
             for station, watched in zip(built, watches)]
    single = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    parallel = parallel_tasks(built, watches, launches,
                              np.asarray(parallel_hours, dtype=float) * HOUR_SECONDS,
                              dist=dist, rho_max=rho_max)
    boot = start - TRACE_WARM_HOURS * HOUR_SECONDS if name == "trace" else 0.0
    for section, hours, split in ((single, single_hours, False),
                                  (parallel, parallel_hours, True)):
        section.update(default_scores.score(
            built, launches, np.asarray(hours, dtype=float) * HOUR_SECONDS,
            boot_seconds=boot, sampling=sampling, seed=case_seed(seed, name, "engine"),
            parallel=split))
    counts = np.concatenate([w.counts for w in watches])
    info["sampling"] = {"mean_per_hour": float(counts.mean()),
                        "at_max_share": float(np.mean(counts >= sampling.max_per_hour))}
    return {"name": name, "info": info, "launches": int(launches.size),
            "single_hours": list(single_hours), "parallel_hours": list(parallel_hours),
            "single": single, "parallel": parallel}


def poisson_stations(kind: str, count: int, launches: int, rng: np.random.Generator, *,
                     spacing_hours: int) -> tuple[list[Station], float, np.ndarray, dict]:
    """``count`` Poisson workstations, each its own utilisation and demand law."""
    start = POISSON_WARM_HOURS * HOUR_SECONDS
    times = launch_times(start + 24 * HOUR_SECONDS, launches, spacing_hours)
    end = float(times[-1]) + TAIL_HOURS * HOUR_SECONDS
    stations, described = [], []
    for index in range(count):
        rho = float(rng.uniform(*RHO_RANGE))
        if kind == "loguniform":
            law = demand("loguniform", 120.0, 1.5)
        else:
            law = demand("lognormal", math.exp(rng.uniform(math.log(10.0), math.log(120.0))),
                         float(rng.uniform(1.0, 3.0)))
        arrivals, demands = poisson_jobs(rho / law.mean_seconds, law, rng, 0.0, end)
        truth = Host(f"ws{index:02d}", lam=rho / law.mean_seconds, mu=1.0 / law.mean_seconds,
                     sigma=law.mean_seconds * law.cov, rho=rho)
        stations.append(Station(truth.name, Trace(arrivals, demands), end, truth))
        described.append({"rho": rho, "mean_seconds": law.mean_seconds, "cov": law.cov})
    info = {"kind": "poisson", "demand": kind, "stations": described,
            "mean_rho": float(np.mean([d["rho"] for d in described]))}
    return stations, start, times, info


def trace_stations(log: JobLog, count: int, launches: int, rng: np.random.Generator, *,
                   spacing_hours: int) -> tuple[list[Station], float, np.ndarray, dict]:
    """``count`` workstations of ``log`` (by user, scaled over the whole log), one stretch.

    The stretch starts at a random whole hour; launches that would not leave ``TAIL_HOURS``
    before the end of the log are dropped.
    """
    targets = rng.uniform(*RHO_RANGE, count)
    cut = workstation_traces(log, count, targets)
    first, last = float(log.submit_seconds[0]), float(log.submit_seconds[-1])
    lead = (TRACE_WARM_HOURS + 24.0) * HOUR_SECONDS
    room = last - first - lead - TAIL_HOURS * HOUR_SECONDS
    fit = int(room // (spacing_hours * HOUR_SECONDS)) + 1 if room >= 0 else 0
    if fit < 1:
        raise TraceError(f"{log.source} spans {(last - first) / 3600:.0f} h; it needs "
                         f"{lead / 3600 + TAIL_HOURS:.0f} h for one launch", field="log",
                         value=log.source)
    launches = min(launches, fit)
    spare = room - (launches - 1) * spacing_hours * HOUR_SECONDS
    offset = rng.uniform(0.0, spare)
    start = math.ceil((first + TRACE_WARM_HOURS * HOUR_SECONDS + offset) / HOUR_SECONDS) \
        * HOUR_SECONDS
    times = launch_times(start + 24 * HOUR_SECONDS, launches, spacing_hours)
    boot = start - TRACE_WARM_HOURS * HOUR_SECONDS
    end = min(float(times[-1]) + TAIL_HOURS * HOUR_SECONDS, last)
    stations = []
    for index, trace in enumerate(cut.traces):
        a, b = np.searchsorted(trace.arrival_seconds, [boot, end], side="left")
        stations.append(Station(f"ws{index:02d}", Trace(trace.arrival_seconds[a:b],
                                                        trace.cpu_seconds[a:b]), end))
    info = {"kind": "trace", **log.summary(), "targets": targets.tolist(),
            "stretch_hours": [(start - first) / HOUR_SECONDS, (end - first) / HOUR_SECONDS],
            "mean_rho": float(np.mean(targets)),
            "stretch_offered_load": [float(s.trace.cpu_seconds.sum() / (end - boot))
                                     for s in stations]}
    return stations, start, times, info


def summarise(family: dict[str, Any]) -> dict[str, Any]:
    """Per task length: error summaries, the ratio naive / ours, coverage, counts."""
    return {"name": family["name"], "info": family["info"], "launches": family["launches"],
            "single": length_rows(family["single"], family["single_hours"]),
            "parallel": length_rows(family["parallel"], family["parallel_hours"])}


def length_rows(tasks: dict[str, np.ndarray], hours: Sequence[float]) -> list[dict[str, Any]]:
    """Per task length (column of ``tasks``): each predictor's error summary (against its own
    realised times where it ran its own tasks), coverage and median p90/p50 width."""
    rows = []
    for k, length in enumerate(hours):
        valid = tasks["valid"][:, k]
        row: dict[str, Any] = {"hours": length, "tasks": int(valid.sum()),
                               "censored": int((~valid).sum()),
                               "capped": float(tasks["capped"][valid, k].mean())
                               if valid.any() else 0.0}
        for name in (*NAMES, *ENGINE_NAMES):
            counted, realised = outcomes(tasks, name) if name in tasks else (valid, None)
            if realised is None:  # a run without the back-tested default
                row[name] = None
                continue
            predicted, actual = tasks[name][counted[:, k], k], realised[counted[:, k], k]
            row[name] = error_summary(errors(predicted, actual))
            if row[name] is not None:
                signed = (predicted - actual) / actual
                row[name]["signed_median"] = float(np.nanmedian(signed))
        # our prediction against the same task on a machine emptied at launch
        row["ours_idle_start"] = error_summary(errors(tasks["ours"][valid, k],
                                                      tasks["simulated_idle"][valid, k]))
        ours = row["ours"]["mean"] if row["ours"] else 0.0
        row["naive_over_ours"] = row["naive"]["mean"] / ours if ours > 0 else None
        row["default_over_ours"] = (row["default"]["mean"] / ours
                                    if ours > 0 and row["default"] else None)
        column = {key: value[:, k] for key, value in tasks.items()}
        scored = [name for name in (*MODELS, *ENGINE_NAMES) if name in column]
        row["coverage"] = {name: coverage(column, name) for name in scored}
        row["width"] = {name: width(column, name) for name in scored}
        row["mean_backlog_seconds"] = float(tasks["backlog"][valid, k].mean()) \
            if valid.any() else 0.0
        rows.append(row)
    return rows
