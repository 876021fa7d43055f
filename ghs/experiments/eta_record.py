"""The calibration a manager would hold for the ETA: each station's own record, replayed.

The manager serves an ETA with each host's quantile factors (``ghs.manager.calibration``):
adaptive conformal calibrators (:class:`scheduler.Calibrator`, one per task length, a row per
host, a pooled prior) fed with shadow launches on the host's own record. This module gives the
eta-coverage experiment the same thing from a station's job stream: at each given launch time a
shadow launch of a single-host task of each length (``LENGTHS_SECONDS``, dedicated seconds)
is predicted the way the ETA predicts (the station's parameters and demand template of the
24 hours before, the jobs present with their ages) and its realised time is read off the same
one-core FCFS queue the stops run on (:mod:`scheduler.stops`). An outcome reaches the
calibrator only once it is known: when the task finishes, or, a miss of every level, once the
task has run past its reported p95 (as the manager records it). :func:`factors_at` returns the
factors each calibrator held at given query times, so a stopped task is calibrated on its
stations' earlier record, never on what came after its stop.

:func:`calibrated_quantiles` applies them to a remaining-time law: each host's factors for the
remaining dedicated time (interpolated in log length between the calibrated lengths around
it), the hosts' laws recombined
(:func:`scheduler.calibrated.calibrated_prediction`, which holds no host's calibrated
quantile below its dedicated time, and no task quantile below the slowest share's).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ghs.errors import GhsError
from scheduler import Calibrator, Host, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import calibrated_prediction
from scheduler.calibrated_selection import length_factors, shared_table
from scheduler.host_quantiles import host_quantiles
from scheduler.prediction import Prediction
from scheduler.stops import queue_of

# the manager's default shadow lengths (ghs.manager.calibration.Calibration)
LENGTHS_SECONDS = (900.0, 3600.0, 4 * 3600.0, 16 * 3600.0)
HOUR_SECONDS = 3600.0
DIST = "lognormal"

# (station index, launch time in seconds, CPU seconds used by the jobs present then)
#   -> (the station's Host then, its Backlog then)
StateAt = Callable[[int, float, np.ndarray], tuple[Host, Backlog]]


def factors_at(streams: Sequence[tuple[np.ndarray, np.ndarray]], launch_seconds: np.ndarray,
               query_seconds: np.ndarray, state_at: StateAt, *,
               lengths_seconds: Sequence[float] = LENGTHS_SECONDS) -> np.ndarray:
    """(queries, stations, lengths, levels) quantile factors the calibrators held at each
    query time (seconds, the launches' clock).

    ``streams``: per station, (launches, jobs) arrival times relative to each shadow launch
    and CPU demands (seconds), as :func:`scheduler.stops.trace_streams` cuts them at
    ``launch_seconds``; ``state_at(k, launch, ages)``: station k's Host and Backlog at a
    launch, given the CPU seconds used by the jobs present then.
    """
    launches = np.asarray(launch_seconds, dtype=float)
    queries = np.asarray(query_seconds, dtype=float)
    lengths = np.asarray(lengths_seconds, dtype=float)
    if launches.ndim != 1 or launches.size == 0 or (np.diff(launches) <= 0).any():
        raise GhsError("shadow launches must be increasing times", field="launch_seconds",
                       value=None)
    model_q, realised = _shadow_outcomes(streams, launches, state_at, lengths)
    stations = len(streams)
    calibrators = [Calibrator(stations) for _ in lengths]
    levels = calibrators[0].levels.size
    out = np.empty((queries.size, stations, lengths.size, levels))
    # events: (time, order, kind, payload); an outcome sorts before a query at the same time
    events: list[tuple[float, int, int, Any]] = [(t, 1, 0, r) for r, t in enumerate(launches)]
    events += [(t, 2, 1, i) for i, t in enumerate(queries)]
    heapq.heapify(events)
    every = np.arange(stations)
    while events:
        time, _, kind, payload = heapq.heappop(events)
        if kind == 0:  # a launch: report, and schedule when its outcome becomes known
            r = payload
            for j, calibrator in enumerate(calibrators):
                reported = calibrator.adjust(every, model_q[r, :, j])
                pooled = calibrator.pool_adjust(model_q[r, :, j])
                for k in range(stations):
                    late = realised[r, k, j] > reported[k, -1]
                    known = time + (reported[k, -1] if late else realised[r, k, j])
                    heapq.heappush(events, (known, 0, 2, (j, k, late, realised[r, k, j],
                                                          reported[k], pooled[k])))
        elif kind == 2:  # an outcome
            j, k, late, actual, reported, pooled = payload
            if late:  # overran every reported level; the pool's levels below it are known
                passed = pooled <= reported[-1]
                calibrators[j].record([k], np.ones((1, levels), bool), passed[None],
                                      pool_decided=passed[None])
            else:
                calibrators[j].record([k], (actual > reported)[None], (actual > pooled)[None])
        else:
            out[payload] = np.stack([c.factors(every) for c in calibrators], axis=1)
    return out


def _shadow_outcomes(streams: Sequence[tuple[np.ndarray, np.ndarray]], launches: np.ndarray,
                     state_at: StateAt, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model quantiles (launches, stations, lengths, levels) of each shadow launch and its
    realised time (launches, stations, lengths), seconds."""
    stations = len(streams)
    queues = [queue_of(*stream) for stream in streams]
    realised = np.stack([np.column_stack([q.time_of_idle(np.full(launches.size, length))
                                          for length in lengths]) for q in queues], axis=1)
    model_q = np.empty((launches.size, stations, lengths.size, 3))
    for r, launch in enumerate(launches):
        hosts, starts, shares = [], [], []
        for k, q in enumerate(queues):
            ages, _ = q.present(r, 0.0)
            host, backlog = state_at(k, float(launch), ages)
            for j in range(lengths.size):
                hosts.append(replace(host, name=f"s{k}l{j}"))
                starts.append(backlog)
            # the lengths are dedicated seconds on the station's one core
            shares.append(lengths * host.tau)
        work = np.concatenate(shares)
        law = predict(hosts, float(work.sum()), DIST, shares=work, backlog=starts)
        model_q[r] = host_quantiles(law).reshape(stations, lengths.size, 3)
    return model_q, realised


def calibrated_quantiles(law: Prediction, factors: np.ndarray,
                         lengths_seconds: Sequence[float] = LENGTHS_SECONDS) -> dict[str, float]:
    """The quantiles (seconds) of ``law`` after each host's calibration. ``factors``:
    (hosts, lengths, levels) as :func:`factors_at` gives them for one query."""
    dedicated = np.asarray(law.dedicated_seconds, dtype=float)
    # a split's hosts share their factors, as a manager serves them
    chosen = length_factors(shared_table(factors, dedicated > 0), lengths_seconds, dedicated)
    # the calibrated law holds each host's quantiles, and the task's, at or above the
    # dedicated times (scheduler.calibrated.reported_quantiles)
    chosen = np.where(dedicated[:, None] > 0, chosen, 1.0)
    return dict(calibrated_prediction(law, chosen).quantiles)
