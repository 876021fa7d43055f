"""A forecast's mean over a window far longer than its period, without a value per bin.

Every forecaster's path (:meth:`scheduler.forecast.ForecastBank._paths`) repeats with the
week from the bank's newest bin on: the flat ones are constant, the hour-of-day and
hour-of-week profiles read the same bins for a target as for the target a period later.
A window of months is then its first bins, whole weeks and a remainder; working out a value
per bin of it went to memory (a manager asked for 1e12 s of work over six hosts reached
24 GB and was killed).
"""

from __future__ import annotations

import numpy as np

from scheduler.errors import InvalidArgumentError


def folded_window_means(paths: np.ndarray, offset_bins: np.ndarray, length_bins: np.ndarray,
                        lead: int, period: int) -> np.ndarray:
    """(rows, forecasters) mean of each row's path over the window from ``offset_bins``
    (rows,), in bins from the start of the path's first bin, lasting ``length_bins`` (rows,):
    ``paths`` (rows, forecasters, lead + period) gives the first ``lead`` bins and then one
    period, which repeats."""
    rows, _, size = paths.shape
    if size != lead + period:
        raise InvalidArgumentError(f"paths must hold lead + period = {lead + period} bins, "
                                   f"got {size}", field="paths", value=size)
    cumulative = np.concatenate([np.zeros((*paths.shape[:2], 1)), np.cumsum(paths, axis=2)],
                                axis=2)
    whole = cumulative[:, :, lead + period] - cumulative[:, :, lead]
    every = np.arange(rows)

    def integral(at: np.ndarray) -> np.ndarray:
        # the path's integral from its first bin to ``at`` bins, in bins x value
        periods = np.where(at > size, np.floor((at - lead) / period), 0.0)
        inside = at - periods * period
        k = np.clip(np.floor(inside).astype(np.int64), 0, size - 1)
        part = inside - k
        return (cumulative[every, :, k] + part[:, None] * paths[every, :, k]
                + periods[:, None] * whole)

    start = np.asarray(offset_bins, dtype=float)
    length = np.asarray(length_bins, dtype=float)
    return (integral(start + length) - integral(start)) / length[:, None]
