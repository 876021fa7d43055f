"""Reading a per-length table at any task length: calibrators learn at a few fixed lengths,
a share has its own dedicated time (used by the calibrated law's factors and by each host's
chance of no delay, :mod:`scheduler.no_delay`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError


def length_weights(lengths_seconds: Any, dedicated_seconds: Any
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, weight of the upper) calibrated lengths around each dedicated time:
    linear in log length between the two neighbours (at least 1 s), the end lengths beyond
    them. ``lengths_seconds`` increasing."""
    lengths = np.asarray(lengths_seconds, dtype=float)
    if lengths.ndim != 1 or lengths.size == 0 or not (
            np.isfinite(lengths).all() and (lengths > 0).all() and (np.diff(lengths) > 0).all()):
        raise InvalidArgumentError("lengths_seconds must be increasing positive seconds, at "
                                   "least one", field="lengths_seconds", value=None)
    log_length = np.log(lengths)
    x = np.log(np.maximum(np.asarray(dedicated_seconds, dtype=float), 1.0))
    upper = np.clip(np.searchsorted(log_length, x), 1, max(log_length.size - 1, 1))
    upper = np.minimum(upper, log_length.size - 1)
    lower = np.maximum(upper - 1, 0)
    span = log_length[upper] - log_length[lower]
    weight = np.clip(np.divide(x - log_length[lower], span, out=np.zeros_like(x),
                               where=span > 0), 0.0, 1.0)
    return lower, upper, weight


def length_factors(table: np.ndarray, lengths_seconds: Any, dedicated_seconds: Any
                   ) -> np.ndarray:
    """(..., levels) factors at each dedicated time: geometric interpolation in log length
    between the two calibrated lengths around it (:func:`length_weights`), the end
    lengths' own beyond them. ``table`` is (..., lengths, levels), broadcast against
    ``dedicated_seconds``. A nearest-length rule made the factors jump where a share
    crossed the midpoint between two lengths (a p90 factor of 2.1 at 1 h and 1.0 at 4 h:
    a task of 2 h 1 min was served an earlier p90 than one of 1 h 59 min)."""
    lower, upper, weight = length_weights(lengths_seconds, dedicated_seconds)
    table = np.asarray(table, dtype=float)
    shape = np.broadcast_shapes(table.shape[:-2], np.shape(lower))
    table = np.broadcast_to(table, shape + table.shape[-2:])
    low = np.take_along_axis(table, np.broadcast_to(lower, shape)[..., None, None], axis=-2)
    high = np.take_along_axis(table, np.broadcast_to(upper, shape)[..., None, None], axis=-2)
    w = np.broadcast_to(weight, shape)[..., None]
    low, high = low[..., 0, :], high[..., 0, :]
    between = np.exp((1.0 - w) * np.log(low) + w * np.log(high))
    # at a calibrated length its calibrator's own factors, to the bit
    return np.where(w <= 0.0, low, np.where(w >= 1.0, high, between))
