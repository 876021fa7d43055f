"""Each host's own completion-time quantiles, many predictions' hosts read together: what
the manager's shadow launches and track record store per host (a split's one-host laws,
before any calibration)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from scheduler.calibrated import GRID_POINTS, _monotone_rows, _row_quantiles
from scheduler.conformal import LEVELS
from scheduler.host_cdf import many_hosts_cdf

# a host's CDF is first worked out on every this-many-th point of its grid, then around each level
_COARSE = 16


def host_quantiles(prediction: Any, levels: Any = LEVELS) -> np.ndarray:
    """(hosts, levels) quantiles (seconds) of each host's own completion time: with explicit
    shares, one prediction gives many single-host tasks at once (hosts with no share: 0)."""
    return joint_host_quantiles([prediction], levels)[0]


def joint_host_quantiles(predictions: Sequence[Any], levels: Any = LEVELS) -> list[np.ndarray]:
    """:func:`host_quantiles` of each of ``predictions``, on the one grid a prediction of all
    their hosts together would use (so the hosts may be predicted in groups, each the cheapest
    way, and give what one prediction of them all gives)."""
    return grouped_host_quantiles([predictions], levels)[0]


def grouped_host_quantiles(groups: Sequence[Sequence[Any]], levels: Any = LEVELS
                           ) -> list[list[np.ndarray]]:
    """:func:`joint_host_quantiles` of each group of predictions (each group on its own
    grid), every host CDF evaluated together (:func:`scheduler.host_cdf.many_hosts_cdf`)
    and every host's quantiles read in one pass: the same figures, to the bit, for one
    evaluation's calls.

    A quantile is read between the two grid points around its level, so each host's CDF is
    worked out on every ``_COARSE``-th point first and then only on the points between the
    two of those around each level: the same points around each level, so the same figures
    (a CDF is non-decreasing), on at most 65 points a host and 15 a level, where it was
    worked out on every one of the 1,024 where it can move."""
    nominal = np.asarray(levels, dtype=float)
    grids = [_joint_grid(predictions) for predictions in groups]
    kept = {g: grid for g, grid in enumerate(grids) if grid is not None}
    shaped = [(g, p) for g in kept for p in groups[g]]
    found: Any = iter([])
    if shaped:
        problems = [(p._host_servers, kept[g], len(p.hosts)) for g, p in shaped]
        sizes = [len(p.hosts) for _, p in shaped]
        cdf = _bracketed_cdf(problems, sizes, nominal)
        # every grid has as many points: the hosts' rows stacked, each reading its own grid
        position = {g: k for k, g in enumerate(kept)}
        stacked = _row_quantiles(np.stack(list(kept.values())), cdf, nominal,
                                 np.repeat([position[g] for g, _ in shaped], sizes))
        found = iter(np.split(stacked, np.cumsum(sizes)[:-1]))
    out = []
    for predictions, grid in zip(groups, grids):
        quantiles = []
        for prediction in predictions:
            shares = np.asarray(prediction.dedicated_seconds, dtype=float)
            quantiles.append(np.zeros((shares.size, nominal.size)) if grid is None
                             else np.where(shares[:, None] > 0, next(found), 0.0))
        out.append(quantiles)
    return out


def _bracketed_cdf(problems: list[tuple[Any, np.ndarray, int]], sizes: list[int],
                   levels: np.ndarray) -> np.ndarray:
    """(hosts of every problem, points) CDFs, clipped to [0, 1] and non-decreasing, that
    cross each of ``levels`` between the same points as the CDFs worked out on every point
    (and with the same values there): every ``_COARSE``-th point and the last are worked out,
    then the points between the two of those around each level; the rest carry the last
    value worked out before them (each lies between two that do not straddle a level). Each
    pass evaluates a problem on its own points only (a point's value does not depend on the
    others evaluated beside it)."""
    points = problems[0][1].size  # every grid has as many
    coarse = np.zeros(points, bool)
    coarse[::_COARSE] = coarse[-1] = True
    on = np.flatnonzero(coarse)
    first = np.concatenate(many_hosts_cdf([(servers, x[on], n) for servers, x, n in problems]))
    rough = np.maximum.accumulate(np.clip(first, 0.0, 1.0), axis=1)
    # each level's first coarse point at or above it; the points between it and the one
    # before are worked out (none where the level is met at the first point or never)
    above = (rough[:, :, None] < levels).sum(axis=1)
    row, level = np.nonzero((above > 0) & (above < on.size))
    edges = np.zeros((first.shape[0], points + 1), int)
    np.add.at(edges, (row, on[above[row, level] - 1] + 1), 1)
    np.add.at(edges, (row, on[above[row, level]]), -1)
    between = np.cumsum(edges[:, :-1], axis=1) > 0
    values = np.zeros(between.shape)
    values[:, on] = first
    # each problem on the union of its hosts' brackets, each host on its own
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    chosen = [np.flatnonzero(between[a:b].any(axis=0)) for a, b in pairwise(bounds)]
    wanted = [k for k, columns in enumerate(chosen) if columns.size]
    second = many_hosts_cdf([(problems[k][0], problems[k][1][chosen[k]], problems[k][2])
                             for k in wanted],
                            [between[bounds[k]:bounds[k + 1], chosen[k]] for k in wanted])
    for k, cdf in zip(wanted, second):
        block = values[bounds[k]:bounds[k + 1]]
        block[:, chosen[k]] = np.where(between[bounds[k]:bounds[k + 1], chosen[k]], cdf,
                                       block[:, chosen[k]])
    # each point not worked out takes the last value worked out before it (point 0 is)
    known = coarse[None, :] | between
    last = np.maximum.accumulate(np.where(known, np.arange(points)[None, :], 0), axis=1)
    return _monotone_rows(np.clip(np.take_along_axis(values, last, axis=1), 0.0, 1.0))


def _joint_grid(predictions: Sequence[Any]) -> np.ndarray | None:
    """The grid (seconds) on which the hosts of ``predictions`` are read as one prediction's
    (None: no host has a share)."""
    every = np.concatenate([np.asarray(p.dedicated_seconds, dtype=float) for p in predictions])
    positive = every[every > 0]
    if positive.size == 0:
        return None
    high = max(float(np.max(means + 12.0 * stds))
               for means, stds in (p.host_moments() for p in predictions)) * 1.5
    return np.geomspace(0.5 * positive.min(), max(high, 4.0 * positive.min()),
                        4 * GRID_POINTS)
