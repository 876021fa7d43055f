"""Means over a forecast bank's ring of bins (rows of hosts, a circular window of bins per
row, NaN for an empty bin): what the day-average and profile forecasters read."""

from __future__ import annotations

import numpy as np


def nanmean(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the finite ``values`` where ``valid`` (NaN: none)."""
    ok = valid & np.isfinite(values)
    count = np.count_nonzero(ok, axis=-1)
    total = np.where(ok, values, 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)


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
    before = alike[:, :, None] - back[None, None, :]
    valid = (before < 0) & (before >= -span)
    # each source's cell in the flattened ring; the remainders are taken on the small
    # factors (an int64 remainder per cell costs more than the rest of the profile)
    h = ring.shape[1]
    cells = (targets % h)[:, :, None] - (back % h)[None, None, :]
    cells += np.where(cells < 0, h, 0) + (idx * h)[:, None, None]
    return nanmean(np.take(ring, cells), valid)
