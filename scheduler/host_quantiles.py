"""Each host's own completion-time quantiles, many predictions' hosts read together: what
the manager's shadow launches and track record store per host (a split's one-host laws,
before any calibration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.calibrated import GRID_POINTS, _monotone_rows, _row_quantiles
from scheduler.conformal import LEVELS
from scheduler.host_cdf import many_hosts_cdf


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
    evaluation's calls."""
    nominal = np.asarray(levels, dtype=float)
    grids = [_joint_grid(predictions) for predictions in groups]
    kept = {g: grid for g, grid in enumerate(grids) if grid is not None}
    shaped = [(g, p) for g in kept for p in groups[g]]
    cdfs = many_hosts_cdf([(p._host_servers, kept[g], len(p.hosts)) for g, p in shaped])
    found: Any = iter([])
    if shaped:
        # every grid has as many points: the hosts' rows stacked, each reading its own grid
        position = {g: k for k, g in enumerate(kept)}
        sizes = [c.shape[0] for c in cdfs]
        stacked = _row_quantiles(np.stack(list(kept.values())),
                                 _monotone_rows(np.clip(np.concatenate(cdfs), 0.0, 1.0)),
                                 nominal, np.repeat([position[g] for g, _ in shaped], sizes))
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
