"""Are the predicted quantiles honest? (``ghs experiment calibration``)

Over the tasks of ``error-vs-length`` (the same families, launches and sampler; see
:mod:`ghs.experiments.error_vs_length`), the fraction that finished by the predicted p50, p90
and p95, against the nominal 50%, 90% and 95%: pooled over the task lengths and per length,
for one workstation and for 32. Beside our prediction (the sampler's 24-hour estimate), the
same quantiles from the exact parameters of the 24 hours before launch ("past") and from the
station's long-run parameters ("true", Poisson only) show whether a miss comes from the
parameters or from the shape of the model's distribution. The clairvoyant model's quantiles
are in the JSON only: its parameters are measured over the very run being predicted, so they
already hold that run's luck and their spread means nothing (its mean is the outcome less the
backlog, so almost no task finishes by its p50). The naive predictor gives no quantiles; its
column is the fraction of tasks that finished by its point prediction. The served default
(``default``: run-window forecast, calibrated per host; see
:mod:`ghs.experiments.default_scores`) is scored by the back-test engine on the same stations,
launches and lengths, with the median p90/p50 width beside each coverage (``width``).

One draw of the workstations is one sample path: its launches, 3 hours apart, share most of
their run windows, so a split task's coverage over them moves with that path's luck (on 8
Poisson workstations the model fed the true parameters covered 78-97% at p90 over eight
seeds). ``paths`` draws the workstations again with the next seeds, pools every task, and
keeps each path's own pooled coverage (``paths``) so the spread is shown beside the pooled
figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.experiments.error_vs_length import (
    ENGINE_NAMES,
    PARALLEL_HOURS,
    SINGLE_HOURS,
    STATIONS,
    collect_paths,
    family_names,
    path_seeds,
)
from ghs.experiments.launches import (
    LEVELS,
    MODELS,
    SAMPLING,
    Sampling,
    coverage,
    outcomes,
    width,
)
from ghs.traces import JobLog

NOMINAL = {"p50": 0.5, "p90": 0.9, "p95": 0.95}


def run(size: int = 48, seed: int = 7, *, paths: int = 1, log: JobLog | None = None,
        stations: int = STATIONS, single_hours: Sequence[float] = SINGLE_HOURS,
        parallel_hours: Sequence[float] = PARALLEL_HOURS,
        poisson_kinds: Sequence[str] = ("loguniform",), sampling: Sampling = SAMPLING,
        dist: str = "lognormal", rho_max: float = 0.9, spacing_hours: int = 3
        ) -> dict[str, Any]:
    """Per family and section: coverage of each predictor's quantiles, pooled over the
    lengths and ``paths`` independent draws of the workstations (seeds ``seed``,
    ``seed + 1``, ...), per length, and per path (``paths``: each draw's pooled coverage)."""
    seeds = path_seeds(seed, paths)
    families = []
    for name in family_names(poisson_kinds, log):
        pooled, drawn = collect_paths(name, size, seeds, log=log, stations=stations,
                                      single_hours=single_hours, parallel_hours=parallel_hours,
                                      sampling=sampling, dist=dist, rho_max=rho_max,
                                      spacing_hours=spacing_hours)
        families.append({
            "name": name, "info": pooled["info"], "launches": pooled["launches"],
            "single": _section(pooled["single"], pooled["single_hours"]),
            "parallel": _section(pooled["parallel"], pooled["parallel_hours"]),
            "paths": [{"seed": each, "launches": family["launches"],
                       "single": _coverages(family["single"]),
                       "parallel": _coverages(family["parallel"])}
                      for each, family in zip(seeds, drawn)]})
    return {"size": size, "seed": seed, "seeds": seeds, "stations": stations, "dist": dist,
            "nominal": NOMINAL, "families": families}


def _section(tasks: dict[str, np.ndarray], hours: Sequence[float]) -> dict[str, Any]:
    pooled = _coverages(tasks)
    per_length = []
    for k, length in enumerate(hours):
        column = {key: value[:, k:k + 1] for key, value in tasks.items()}
        per_length.append({"hours": length, **_coverages(column)})
    return {"pooled": pooled, "per_length": per_length}


def _coverages(tasks: dict[str, np.ndarray]) -> dict[str, Any]:
    valid = tasks["valid"]
    entry: dict[str, Any] = {"tasks": int(valid.sum())}
    for name in (*MODELS, *ENGINE_NAMES):
        entry[name] = coverage(tasks, name) if name in tasks else None
    entry["width"] = {name: width(tasks, name) if name in tasks else None
                      for name in ("ours", *ENGINE_NAMES)}
    entry["default_tasks"] = (int(outcomes(tasks, "default")[0].sum()) if "default" in tasks
                              else 0)
    entry["naive_by_point"] = (float(np.mean(tasks["simulated"][valid] <= tasks["naive"][valid]))
                               if valid.any() else None)
    for name in ("ours", "default"):
        found = entry[name]
        entry[f"{name}_worst_gap"] = (max(abs(found[lv] - NOMINAL[lv]) for lv in LEVELS)
                                      if found else None)
    return entry
