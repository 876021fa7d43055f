"""Remote sub-tasks replayed into a recorded log of local jobs (one core, exact).

The back-test's and the experiments' ground truth: a lowest-priority sub-task launched at a
moment of a real log waits behind the backlog the log's earlier jobs left and yields to every
later job, so its completion time follows from the log alone, with no model and no draw.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.simulation import _finite_array, _number
from scheduler.workload import Trace


def simulate_trace_many(trace: Trace, dedicated_seconds: object,
                        launch_seconds: object) -> np.ndarray:
    """Completion times (seconds from launch) of remote sub-tasks launched into ``trace``.

    One core, deterministic: each sub-task needs ``dedicated_seconds`` of CPU (a scalar or
    one per launch) and starts behind the backlog the trace's earlier jobs left at its
    launch time. Sub-tasks do not interact; each sees the trace alone.
    """
    if not isinstance(trace, Trace):
        raise InvalidArgumentError(f"expected a Trace, got {trace!r}", field="trace",
                                   value=trace)
    launch = _finite_array("launch_seconds", launch_seconds)
    need = _finite_array("dedicated_seconds", dedicated_seconds)
    try:
        need, launch = np.broadcast_arrays(need, launch)
    except ValueError:
        raise InvalidArgumentError(
            f"dedicated_seconds (shape {need.shape}) does not match launch_seconds "
            f"(shape {launch.shape})", field="dedicated_seconds", value=need.shape) from None
    if (need < 0).any():
        raise InvalidArgumentError("dedicated_seconds must be >= 0", field="dedicated_seconds",
                                   value=float(need.min()))
    shape, launch, need = launch.shape, launch.reshape(-1), need.reshape(-1)
    arrivals = np.append(trace.arrival_seconds, math.inf)  # past the end: no more jobs
    demands = np.append(trace.cpu_seconds, 0.0)
    elapsed = np.zeros(launch.size)
    ids = np.flatnonzero(need > 0)
    now, left = launch[ids], need[ids].copy()
    load = trace.backlog_seconds(now)
    nxt = np.searchsorted(trace.arrival_seconds, now, side="left")
    while ids.size:
        gap = arrivals[nxt] - now
        free = gap - load
        done = free >= left
        if done.any():
            elapsed[ids[done]] = (now[done] - launch[ids[done]]) + load[done] + left[done]
            keep = ~done
            ids, now, left, load, nxt = ids[keep], now[keep], left[keep], load[keep], nxt[keep]
            free = free[keep]
        left -= np.maximum(free, 0.0)
        load = np.maximum(-free, 0.0) + demands[nxt]
        now = arrivals[nxt]
        nxt = nxt + 1
    return elapsed.reshape(shape)


def simulate_trace(trace: Trace, dedicated_seconds: float, launch_seconds: float) -> float:
    """Completion time (seconds from launch) of one remote sub-task launched into ``trace``."""
    need = _number("dedicated_seconds", dedicated_seconds)
    launch = _number("launch_seconds", launch_seconds)
    return float(simulate_trace_many(trace, need, launch))
