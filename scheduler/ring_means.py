"""Means over a forecast bank's ring of bins (rows of hosts, a circular window of bins per
row, NaN for an empty bin): what the day-average and profile forecasters read, and the range
of window means a forecast is held within.

Both are laid out with the bins averaged on the middle axis, (rows, sources, targets): the
sums then run as a few whole-slice additions (a reduction over a short last axis costs a
loop per output value), and when every row's cells sit alike (one launch for all) the cell
pattern is worked out once and shifted to each row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def nanmean(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the finite ``values`` where ``valid`` (NaN: none)."""
    return _middle_nanmean(np.swapaxes(values, -1, -2) if values.ndim > 1 else values,
                           np.swapaxes(valid, -1, -2) if valid.ndim > 1 else valid)


def _middle_nanmean(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Mean over axis -2 (axis 0 of a vector) of the finite ``values`` where ``valid``."""
    ok = np.isfinite(values)
    ok &= valid
    axis = -2 if values.ndim > 1 else 0
    count = np.count_nonzero(ok, axis=axis)
    total = np.where(ok, values, 0.0).sum(axis=axis)
    return np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)


def day_mean(ring: np.ndarray, idx: np.ndarray, boundary: np.ndarray, bins: int
             ) -> np.ndarray:
    """Mean of the last ``bins`` bins before each row's boundary (NaN where none is observed;
    a bin as old as the ring's length is not held), for the ``idx`` rows of ``ring``."""
    h = ring.shape[1]
    back = np.arange(1, bins + 1)
    cells = _cells(boundary[:, None], back, h, idx)
    return _middle_nanmean(np.take(ring, cells), (back < h)[None, :, None])[:, 0]


def profile(ring: np.ndarray, idx: np.ndarray, targets: np.ndarray, boundary: np.ndarray,
            period: int, span: int) -> np.ndarray:
    """Mean of the bins one or more periods before each target, within ``span`` bins before
    the boundary (NaN where none is observed), for the ``idx`` rows of ``ring``."""
    offsets = targets - boundary[:, None]
    ahead = int(np.max(offsets)) if targets.size else 0
    back = period * np.arange(1, (span + max(ahead, 0)) // period + 2)
    # which sources count depends on the target's offset from the boundary alone: when
    # every row's targets sit alike (one launch for all), one mask serves every row
    alike = offsets[:1] if (offsets == offsets[:1]).all() else offsets
    before = alike[:, None, :] - back[None, :, None]
    valid = (before < 0) & (before >= -span)
    # sources valid for no target of any row are not read
    used = valid.any(axis=(0, 2))
    if not used.all():
        back, valid = back[used], valid[:, used]
    return _middle_nanmean(np.take(ring, _cells(targets, back, ring.shape[1], idx)), valid)


def _cells(targets: np.ndarray, back: np.ndarray, h: int, idx: np.ndarray) -> np.ndarray:
    """(rows, sources, targets) cells of the flattened ring holding bin target - back of each
    row. The remainders are taken on the small factors (an int64 remainder per cell costs
    more than the rest of the mean), and on the first row alone when every row's targets
    are the first's (the common case of one launch for all)."""
    top = targets[:1] if (targets == targets[:1]).all() else targets
    cells = (top % h)[:, None, :] - (back % h)[None, :, None]
    cells += np.where(cells < 0, h, 0)
    return cells + (idx * h)[:, None, None]


def profile_tables(ring: np.ndarray, idx: np.ndarray, boundary: np.ndarray, per_day: int,
                   span: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What the day-average and profile forecasters read for any bin from each row's
    ``boundary`` on: the day mean (rows,), the hour-of-day (rows, per_day) and
    hour-of-week (rows, 7 per_day) means (column m holds the phase of bin boundary - 1 - m),
    and the mean of the ``span`` bins (rows,).

    A profile of a target at or past the boundary averages the bins of its phase within
    ``span`` bins before the boundary, the same bins whatever its distance. Those ``span``
    bins, newest first, laid out as (rows, periods, period) hold each phase's bins down a
    column in :func:`profile`'s order, and summed down it as :func:`profile` sums its sources
    (the same values to the bit). Worked out when a row's bins change, so a query reads them
    instead of the ring.
    """
    h = ring.shape[1]
    day = day_mean(ring, idx, boundary, per_day)
    week = 7 * per_day
    periods = -(-span // week)
    back = np.arange(1, periods * week + 1)
    cells = (boundary[:, None] - back[None, :]) % h + (idx * h)[:, None]
    values = np.take(ring, cells)
    ok = np.isfinite(values)
    ok &= (back <= span)[None, :]
    count = np.count_nonzero(ok, axis=1)
    span_mean = np.divide(np.where(ok, values, 0.0).sum(axis=1), count,
                          out=np.full(count.shape, np.nan), where=count > 0)
    tables = []
    for period in (per_day, week):
        shape = (idx.size, periods * week // period, period)
        seen = ok.reshape(shape)
        count = np.count_nonzero(seen, axis=1)
        total = np.where(seen, values.reshape(shape), 0.0).sum(axis=1)
        tables.append(np.divide(total, count, out=np.full(count.shape, np.nan),
                                where=count > 0))
    return day, tables[0], tables[1], span_mean


def window_range(ring: np.ndarray, idx: np.ndarray, pushed: np.ndarray,
                 lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, classes) lowest and highest mean over windows of each of ``lengths`` bins
    within the history up to each row's bin ``pushed`` (NaN where none counts); a window
    counts when at least half its bins hold data."""
    h = ring.shape[1]
    back = pushed[:, None] - np.arange(h)[None, :]
    recent = ring[idx[:, None], back % h]
    seen = np.isfinite(recent)
    zero = np.zeros((idx.size, 1))
    total = np.concatenate([zero, np.cumsum(np.where(seen, recent, 0.0), axis=1)], axis=1)
    count = np.concatenate([zero, np.cumsum(seen, axis=1)], axis=1)
    low, high = np.empty((idx.size, len(lengths))), np.empty((idx.size, len(lengths)))
    for c, length in enumerate(lengths):
        n = count[:, length:] - count[:, :-length]
        ok = 2 * n >= length
        mean = np.divide(total[:, length:] - total[:, :-length], n,
                         out=np.zeros(n.shape), where=ok)
        any_ok = ok.any(axis=1)
        low[:, c] = np.where(any_ok, np.min(np.where(ok, mean, np.inf), axis=1), np.nan)
        high[:, c] = np.where(any_ok, np.max(np.where(ok, mean, -np.inf), axis=1), np.nan)
    return low, high
