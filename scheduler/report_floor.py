"""A floor under a host's calibrated quantiles from its real tasks' completion reports.

The calibrators learn mostly from shadow launches read off the capacity series, which counts
every idle moment of a core as free for a lowest-priority task. A real task does not get all
of them. On a 2-core Linux host whose owners ran on one core, 60 s tasks on the other core
took 0.4-2.6% longer than their CPU time on a quiet machine (51 tasks of ``ghs experiment
live``, seeds 41, 43 and 47). The model saw a free core, and the capacity series saw one
too. Adaptive conformal inference learns such an offset only slowly from a few outcomes, and
the shadow launches pull the factors back towards the model's time.

A host's reports measure the offset directly. For each served level, a report gives the
factor its share's model quantile would have needed: realised / model quantile. Take n such
ratios that are exchangeable with the next task's. The ceil(q (n + 1))-th smallest bounds
the next ratio with probability at least q, and at most q + 1 / (n + 1), whatever the model
(split conformal). So a host's factor at level q is held at least at that ratio once it has
enough reports: 9 for the p90, 19 for the p95, 1 for the p50.

The ratios count only when they are comparable:
- Only the latest ``REPORT_WINDOW`` reports are kept, because a host's load drifts.
- Only shares within a factor ``LENGTH_SPAN`` of the queried share's dedicated time count,
  because a short task's ratio spreads wider than a long one's.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError

__all__ = ["LENGTH_SPAN", "REPORT_WINDOW", "ReportRatios", "conformal_floors"]

# the latest reports a host keeps (a host's load drifts: older ones stop being exchangeable)
REPORT_WINDOW = 50
# reports of shares whose dedicated time is within this factor of the query's count
LENGTH_SPAN = 2.0


def conformal_floors(ratios: Any, levels: Any) -> np.ndarray:
    """(levels,) split-conformal bounds on the next ratio: for n rows of ``ratios`` (n,
    levels), each > 0, the ceil(q (n + 1))-th smallest of column q; NaN where n is too small
    for that level (fewer than ceil(q (n + 1)) rows)."""
    q = np.asarray(levels, dtype=float)
    if q.ndim != 1 or q.size == 0 or not ((q > 0) & (q < 1)).all():
        raise InvalidArgumentError("levels must be numbers in (0, 1)", field="levels",
                                   value=levels)
    r = np.asarray(ratios, dtype=float)
    if r.ndim != 2 or r.shape[1] != q.size or not (np.isfinite(r).all() and (r > 0).all()):
        raise InvalidArgumentError(f"ratios must be positive finite numbers, shape (reports, "
                                   f"{q.size})", field="ratios", value=None)
    return _conformal_floors(r, q)


def _conformal_floors(ratios: np.ndarray, levels: np.ndarray) -> np.ndarray:
    n = ratios.shape[0]
    # the rank in exact arithmetic: 0.9 * 10 is 9.000000000000002 in floating point
    rank = np.array([math.ceil(round(float(q) * (n + 1), 9)) for q in levels])
    out = np.full(levels.size, np.nan)
    enough = rank <= n
    if enough.any():
        ordered = np.sort(ratios, axis=0)
        out[enough] = ordered[rank[enough] - 1, np.flatnonzero(enough)]
    return out


class ReportRatios:
    """One host's latest reports: each share's dedicated time (seconds) and its realised
    time over the model quantile it was served at each of ``levels``."""

    def __init__(self, levels: Any, window: int = REPORT_WINDOW,
                 span: float = LENGTH_SPAN) -> None:
        self.levels = np.asarray(levels, dtype=float)
        self.span = float(span)
        self._dedicated: deque[float] = deque(maxlen=int(window))
        self._ratios: deque[np.ndarray] = deque(maxlen=int(window))

    def __len__(self) -> int:
        return len(self._dedicated)

    def add(self, dedicated_seconds: float, realised_seconds: float,
            model_quantiles: Any) -> bool:
        """Keep one report; False (not kept) when a figure is missing or not positive."""
        model = np.asarray(model_quantiles, dtype=float)
        if model.shape != self.levels.shape or not (
                np.isfinite(model).all() and (model > 0).all()
                and math.isfinite(dedicated_seconds) and dedicated_seconds > 0
                and math.isfinite(realised_seconds) and realised_seconds > 0):
            return False
        self._dedicated.append(float(dedicated_seconds))
        self._ratios.append(realised_seconds / model)
        return True

    def floors(self, dedicated_seconds: float) -> tuple[np.ndarray, int]:
        """(levels,) factor floors for a share of ``dedicated_seconds`` (NaN where its
        comparable reports are too few for the level), and how many reports were
        comparable."""
        if not self._dedicated or not dedicated_seconds > 0:
            return np.full(self.levels.size, np.nan), 0
        lengths = np.fromiter(self._dedicated, dtype=float, count=len(self._dedicated))
        near = np.abs(np.log(lengths / dedicated_seconds)) <= math.log(self.span)
        if not near.any():
            return np.full(self.levels.size, np.nan), 0
        ratios = np.stack(list(self._ratios))[near]
        return _conformal_floors(ratios, self.levels), int(near.sum())
