"""The points a served calibrated law's CDF passes through, besides its grid.

A calibrated law (:class:`scheduler.calibrated.CalibratedLaw`) is worked out on a geometric grid
of times and read between its points by linear interpolation. Its served quantiles are not read
off that grid: they are held to the hosts' reported quantiles and to the task's earliest finish
(:func:`held_to_hosts`). Where a host's law is nearly an atom at its
dedicated time (a task alone on a free core), the grid's interpolation and those quantiles
disagree by up to a grid step: a one-host law whose p50 was its start read P(T <= p50) = 0.06,
and others 0.44-0.56 at their p50. ``ghs predict --by`` and the plots read the CDF, so the two
must say the same thing. The CDF served passes through the law's value at its start (worked
out there, not interpolated from a grid point before it) and is held at each served quantile
q_l of level l: at most l before q_l, at least l from it on (the grid's mass before q_l moved
onto it where the grid's law reached l sooner).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def served_knots(grid_seconds: np.ndarray, cdf_values: np.ndarray, start_seconds: float,
                 start_value: float | None, quantiles: Mapping[str, float],
                 levels_by_name: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(times in seconds, CDF values) the served law interpolates between: the grid's, with
    ``start_value`` at ``start_seconds`` (where given) and each served quantile inserted,
    made to agree with ``quantiles`` (name -> seconds; levels from ``levels_by_name``).
    Quantiles outside the grid are left to the law's tails."""
    grid = np.asarray(grid_seconds, dtype=float)
    values = np.asarray(cdf_values, dtype=float)
    low, high = float(grid[0]), float(grid[-1])
    extra_times, extra_values = [], []
    if start_value is not None and low < start_seconds < high:
        extra_times.append(start_seconds)
        extra_values.append(float(start_value))
    held = sorted((float(quantiles[name]), float(level))
                  for name, level in levels_by_name.items()
                  if name in quantiles and low < float(quantiles[name]) <= high)
    for seconds, _ in held:
        # a point just before the quantile too: where the grid's law had reached the level
        # sooner, the mass it put before the quantile is moved onto it (a step there), not
        # spread over the grid step after it
        for at in (float(np.nextafter(seconds, -np.inf)), seconds):
            extra_times.append(at)
            extra_values.append(float(np.interp(at, grid, values)))
    if not extra_times:
        return grid, values
    times = np.concatenate([grid, extra_times])
    order = np.argsort(times, kind="stable")
    times, values = times[order], np.concatenate([values, extra_values])[order]
    # the start's own value replaces the ramp the grid drew up to it from the point before
    if start_value is not None and low < start_seconds < high:
        values = np.where(times < start_seconds, 0.0, values)
        values = np.maximum.accumulate(values)
    for seconds, level in held:
        before = times < seconds
        values = np.where(before, np.minimum(values, level), np.maximum(values, level))
    return times, values


def held_to_hosts(values: np.ndarray, wanted: np.ndarray, reported: np.ndarray,
                   at_reported: np.ndarray, levels: np.ndarray, working: np.ndarray
                   ) -> np.ndarray:
    """The task's quantiles ``values`` at ``wanted`` levels, held to its hosts' calibrated
    ones (``reported``, where each host's model CDF is ``at_reported``).

    A task ends with its slowest share, so at a calibrated level it ends no sooner than any
    working host's reported quantile. A task of one host ends exactly there: its law is the
    level map of its model CDF through those points. The exception is a reported quantile
    where the model CDF is still 0, because a factor below 1 put it before the host's start
    (jobs running at launch). There the law's own reading stands.

    Read off the grid alone, a quantile moved by up to a grid step where a host's model law
    is nearly an atom at its dedicated time (a task alone on a free core). Between the atom
    and the reported quantile the level map is almost flat. On a real kernel a p50 reported
    at 60.7 s was read at 60.0-60.6 s (4 of 22 tasks by it), and p90s reported at 60.7-61.2 s
    at 60.9-61.7 s."""
    if not working.any():
        return values
    out = values.copy()
    alone = int(np.flatnonzero(working)[0]) if working.sum() == 1 else None
    for j, level in enumerate(wanted):
        at = np.flatnonzero(np.isclose(levels, level, rtol=0.0, atol=1e-12))
        if not at.size:
            continue
        if alone is not None and at_reported[alone, at[0]] > 0.0:
            out[j] = float(reported[alone, at[0]])
        else:
            out[j] = max(out[j], float(reported[working, at[0]].max()))
    return np.maximum.accumulate(out)
