"""The back-test's predictors and how their launches are scored.

Each predictor is a model view (its load window and start) with, for the calibrated ones, the
view whose quantiles it corrects; :func:`summarise` scores the launch records per predictor
and task length (see :mod:`ghs.backtest.engine` for how they are made).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LEVELS = ("p50", "p90", "p95")
NOMINAL = (0.5, 0.9, 0.95)
# a realised time counts as before a quantile below this fraction of it (not on it)
_BEFORE = 1.0 - 1e-9
# view -> (load window, start: idle / the snapshot's backlog / it weighted by the record)
MODEL_VIEWS = {"paper": ("day", "idle"), "state": ("day", "state"),
               "forecast": ("forecast", "idle"), "uncalibrated": ("forecast", "state"),
               "weighted": ("forecast", "weighted")}
# calibrated predictor -> the model view whose quantiles it corrects
CALIBRATED = {"calibrated": "forecast", "calibrated-state": "weighted",
              "calibrated-held": "uncalibrated"}
# On a launch that found local jobs running, the default's p90 and p95 are the upper envelope of
# its own calibrated quantiles and those of the view that holds the jobs as a backlog (its
# p50 stays its own: the envelope's median covered .86 of such launches on RICC): the
# carried view (idle start) is calibrated mostly on launches without running jobs, and alone it
# covered only .55-.80 at p90 of the launches with some (the README's back-test section).
ENVELOPE = {"calibrated": "calibrated-held"}
# The default's calibrators are kept apart for launches that found local jobs running and for
# those that did not, as a manager's are (ghs.manager.calibrated_views.BUSY_VIEW): the
# carried view is late when a host is idle and early when it is busy, and one calibrator for
# both made its p50 cover .22-.41 of the busy launches and .60-.90 of the idle ones. The busy
# launches' calibrators are these names with ``JOBS_RUNNING`` added.
BY_JOBS_RUNNING = ("calibrated",)
JOBS_RUNNING = "+jobs-running"
# the default corrects the view the manager serves: for one host the carried load, for a task
# split over several hosts the state start (the split must see which hosts are busy now)
PARALLEL_CALIBRATED = {"calibrated": "uncalibrated", "calibrated-state": "weighted"}
DEFAULT_PREDICTOR = "calibrated"
# the paper's model, the one the others' errors are compared with
PAPER = "paper"
# the view whose mean the default's is combined with at a launch after a snapshot
# (scheduler.combined_mean): the start the station's record chose where jobs run, idle under
# the arrivals' load where none does, as a manager's ``record`` view
RECORD_VIEW = "weighted"
PREDICTORS = ("paper", "naive", "state", "forecast", "uncalibrated", "weighted", *CALIBRATED)
# With ``parallel``, what a manager serves for a split: each station's law calibrated on its
# own single-host record (the state start, as a manager's answer for several hosts), at the
# manager's task lengths, and the calibrated laws recombined (scheduler.calibrated)
RECOMBINED = "calibrated-hosts"
RECOMBINED_VIEW = "uncalibrated"
# the same without the split's chance of no delay from the stations' records
# (scheduler.no_delay): the law as the stations' level maps alone give it
RECOMBINED_UNFLOORED = f"{RECOMBINED}-unfloored"
PARALLEL_PREDICTORS = (*(p for p in PREDICTORS if p not in CALIBRATED
                         or p in PARALLEL_CALIBRATED), RECOMBINED, RECOMBINED_UNFLOORED)
DIST = "lognormal"


def summarise(records: Sequence[dict[str, Any]],
              unfinished: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Per predictor and task length: mean and median relative |error| of the mean, the
    predicted means' total over the realised total, coverage of each quantile (the share
    finished by it), the share finished strictly before it, the median p90/p50 width
    (None where the predictor gives none), how many of its tasks ran past their stations'
    logs (``unfinished``: records with ``known_seconds``, a split's only), the coverage
    counting those (``coverage_bounds``, :func:`_coverage_bounds`) and its error against
    the paper model's (``vs_paper``, :func:`_vs_paper`).

    The relative error weighs a run by 1 / its realised time, so it forgives a mean that
    misses the rare long waits; the totals do not: below 1, a batch of these tasks takes
    longer than their means add up to.

    A task that meets no local job finishes at its dedicated time exactly, an atom of the
    law: a quantile q_L at that time is right when P(T < q_L) <= L <= P(T <= q_L), and on
    hosts where most runs go uninterrupted the coverage alone can only read above L."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((record["predictor"], record["work"]), []).append(record)
    open_ended: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for record in unfinished:
        open_ended.setdefault((record["predictor"], record["work"]), []).append(record)
    order = {name: i for i, name in enumerate((*PREDICTORS, RECOMBINED,
                                                RECOMBINED_UNFLOORED))}
    rows = []
    # a predictor whose every task ran past the logs still gets its row: it was asked, and
    # what is known of its launches (none finished by their quantiles' times) is a bound
    for name, work in sorted({*groups, *open_ended}, key=lambda g: (order.get(g[0], 99), g[1])):
        chosen = groups.get((name, work), [])
        row: dict[str, Any] = {"predictor": name, "work": work, "launches": len(chosen),
                               "mean_abs_error": None, "median_abs_error": None,
                               "total_mean_over_realised": None,
                               "coverage": None, "finished_before": None,
                               "median_p90_over_p50": None, "coverage_bounds": None}
        open_records = open_ended.get((name, work), [])
        if chosen:
            realised = np.array([r["realised_seconds"] for r in chosen])
            mean = np.array([r["mean"] for r in chosen])
            error = _relative_errors(chosen)
            row.update(mean_abs_error=float(error.mean()),
                       median_abs_error=float(np.median(error)),
                       total_mean_over_realised=float(mean.sum() / realised.sum()))
        if (chosen or open_records)[0]["quantiles"] is not None:
            met = np.zeros(len(LEVELS), dtype=int)
            if chosen:
                q = np.array([[r["quantiles"][level] for level in LEVELS] for r in chosen])
                met = (realised[:, None] <= q).sum(axis=0)
                row["coverage"] = {level: float(met[i] / len(chosen))
                                   for i, level in enumerate(LEVELS)}
                # before, by more than rounding: a run ending on its dedicated time is "by" it
                row["finished_before"] = {level: float(np.mean(realised < q[:, i] * _BEFORE))
                                          for i, level in enumerate(LEVELS)}
                row["median_p90_over_p50"] = float(np.median(q[:, 1] / q[:, 0]))
            row["coverage_bounds"] = _coverage_bounds(met, len(chosen), open_records)
        row["unfinished"] = len(open_records)
        # (a paper model whose every split ran past the logs is still compared, by bound)
        paper, paper_open = groups.get((PAPER, work), []), open_ended.get((PAPER, work), [])
        row["vs_paper"] = None if name == PAPER or not (paper or paper_open) else _vs_paper(
            chosen, paper, paper_open)
        rows.append(row)
    return rows


def _relative_errors(records: Sequence[dict[str, Any]]) -> np.ndarray:
    """|mean - realised| / realised of each finished launch."""
    realised = np.array([r["realised_seconds"] for r in records], dtype=float)
    mean = np.array([r["mean"] for r in records], dtype=float)
    return np.abs(mean - realised) / realised


def _coverage_bounds(met: np.ndarray, finished: int,
                     unfinished: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Each quantile's coverage over every launch, the unfinished ones too: [low, high],
    from ``met``, the count of the ``finished`` launches done by each quantile. An
    unfinished task ran past ``known_seconds``, so a quantile at or before that time is
    missed; one after it may be met or not (low counts it missed, high met)."""
    known = np.array([r["known_seconds"] for r in unfinished])
    open_q = np.array([[r["quantiles"][level] for level in LEVELS] for r in unfinished]
                      ).reshape(len(unfinished), len(LEVELS))
    undecided = (open_q > known[:, None]).sum(axis=0)
    total = finished + len(unfinished)
    return {level: [float(met[i] / total), float((met[i] + undecided[i]) / total)]
            for i, level in enumerate(LEVELS)}


def _vs_paper(chosen: Sequence[dict[str, Any]], paper: Sequence[dict[str, Any]],
              paper_unfinished: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A predictor's mean relative |error| over the paper model's on the launches both
    finished (``launches``, ``mean_abs_error_ratio``), and counting the launches where
    only the paper model's split ran past its stations' logs (``paper_unfinished``): there
    its realised time is only known to exceed ``known_seconds``, so its error is at least
    1 - mean / known_seconds, and ``mean_abs_error_ratio_bound`` is at least the true ratio
    over those launches. The paper model's split runs past the log most often (on 32 NASA
    stations at 374 of 448 launches, on 32 RICC stations at all): on the launches both
    finish, it is scored on its luckiest launches only."""
    def key(record: dict[str, Any]) -> tuple[Any, ...]:
        return record["launch_seconds"], tuple(sorted(record["shares"]))

    own = dict(zip(map(key, chosen), _relative_errors(chosen).tolist()))
    theirs = dict(zip(map(key, paper), _relative_errors(paper).tolist()))
    # the paper model's error at a launch it did not finish: a bound below it
    bounds = {key(r): max(0.0, 1.0 - r["mean"] / r["known_seconds"])
              for r in paper_unfinished}
    shared = [k for k in own if k in theirs]
    censored = [k for k in own if k in bounds]

    def ratio(keys: list[Any], paper_errors: dict[Any, float]) -> float | None:
        denominator = sum(paper_errors[k] for k in keys)
        return None if not keys or denominator == 0 else float(
            sum(own[k] for k in keys) / denominator)

    return {"launches": len(shared), "mean_abs_error_ratio": ratio(shared, theirs),
            "paper_unfinished": len(censored),
            "mean_abs_error_ratio_bound": ratio(shared + censored, {**theirs, **bounds})}
