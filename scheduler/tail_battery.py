"""The pooled far tail's calibration: several adaptive steps, each scored, the best one served.

A far level (p99.6, :data:`scheduler.conformal.TAIL_LEVELS`) is learnt by adaptive conformal
inference on every host's outcomes pooled. Its step decides two things at once. A bursty
log's factor is 10-30 at short lengths and climbs there by about one step per miss, each a
1-in-250 event: a small step leaves a young record's far tail short for weeks (a split over 8
LCG stations covered .83 at p90 after 12 days with step 0.3). A stationary host's factor is
1.1 and a large step leaves it wherever an early burst threw it: a cover lowers it by only a
250th of what a miss raises it (a split over 8 Poisson workstations covered .95 at p90, its
p99.6 factor at 1.33 where draws that did not over-cover read 1.11-1.14). No one step serves
both, so each step is run as an expert on the same outcomes and the one whose quantiles had
the lowest recent pinball loss is served (the Network Weather Service's rule, applied to the
calibrator; Gibbs and Candes' dynamically-tuned ACI weighs experts the same way). Every
expert keeps the adaptive-conformal rule, so whichever is served, its long-run miss rate is
the level's.

The loss is the quantile (pinball) loss in log time of each expert's quantile as it stands
when the outcome is known, discounted by ``decay`` per outcome: about 1 / (1 - decay)
outcomes count, enough to hold some exceedances of a 1-in-250 level.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.conformal import TAIL_LEVELS, ConformalSettings
from scheduler.errors import InvalidArgumentError

# The steps run side by side (log units per launch). The first is served until outcomes
# tell them apart (the single step used before the battery).
TAIL_STEPS = (0.3, 1.0, 0.1, 0.03)
# the loss's discount per outcome: some 500 outcomes count (2.6 days of hourly launches of
# 8 hosts at one task length, 16 hours of 32)
TAIL_DECAY = 0.998


class TailBattery:
    """Pooled far-tail corrections at ``levels`` under each of ``steps`` (one row per step,
    each the adaptive rule of :func:`scheduler.conformal.pooled_calibrator` to the bit:
    the same state arrays, theta, scored, covered and pool_theta, a row per step); the
    row of lowest discounted pinball loss is served (:meth:`factors`). Scoring, per
    outcome: every row's quantiles as they stand (:meth:`expert_quantiles`), their misses
    where known (:meth:`record`), and once the task has finished its realised time
    (:meth:`score`)."""

    def __init__(self, levels: tuple[float, ...] = TAIL_LEVELS,
                 steps: tuple[float, ...] = TAIL_STEPS, decay: float = TAIL_DECAY) -> None:
        values = np.asarray(steps, dtype=float) if len(steps) else np.array([np.nan])
        if values.ndim != 1 or not ((values > 0) & (values <= 2.0)).all():
            raise InvalidArgumentError(f"steps must be one or more numbers in (0, 2], got "
                                       f"{steps!r}", field="steps", value=steps)
        if not (isinstance(decay, (int, float)) and 0.0 < decay <= 1.0):
            raise InvalidArgumentError(f"decay must be in (0, 1], got {decay!r}",
                                       field="decay", value=decay)
        # the levels checked as a calibrator's are
        self.settings = ConformalSettings(levels=levels, prior_launches=0.0)
        self.steps = tuple(values.tolist())
        self.decay = float(decay)
        shape = (values.size, len(self.settings.levels))
        self.theta = np.zeros(shape)
        self.scored = np.zeros(shape, dtype=np.int64)
        self.covered = np.zeros(shape, dtype=np.int64)
        self.pool_theta = np.zeros(shape)
        self.loss = np.zeros(values.size)

    @property
    def levels(self) -> np.ndarray:
        return np.asarray(self.settings.levels, dtype=float)

    @property
    def served(self) -> int:
        """The row (step) served: the first among equal losses."""
        return int(np.argmin(self.loss))

    def factors(self, host_indices: Any) -> np.ndarray:
        """(hosts, levels) time-scale factors of the served step, the same for every host
        (``host_indices``: any whole numbers, one row each)."""
        return np.broadcast_to(self.expert_factors()[self.served],
                               (self._count(host_indices), self.levels.size)).copy()

    def adjust(self, host_indices: Any, quantiles: Any) -> np.ndarray:
        """(hosts, levels) the model's ``quantiles`` (same shape) times the served factors,
        non-decreasing in the level (:meth:`Calibrator.adjust`)."""
        q = np.asarray(quantiles, dtype=float)
        if q.shape != (self._count(host_indices), self.levels.size) or not (
                np.isfinite(q).all() and (q > 0).all()):
            raise InvalidArgumentError(f"quantiles must be positive, finite, shape (hosts, "
                                       f"{self.levels.size}); got shape {q.shape}",
                                       field="quantiles", value=None)
        return np.maximum.accumulate(q * self.expert_factors()[self.served], axis=1)

    def coverage(self, host_indices: Any) -> np.ndarray:
        """(hosts, levels) the served step's fraction of scored launches within its
        quantile (NaN: none scored)."""
        n = self.scored[self.served].astype(float)
        own = np.divide(self.covered[self.served], n, out=np.full(n.shape, np.nan),
                        where=n > 0)
        return np.broadcast_to(own, (self._count(host_indices), own.size)).copy()

    def expert_factors(self) -> np.ndarray:
        """(steps, levels) each step's factors as they stand."""
        return np.exp(np.where(self.scored > 0, self.theta, self.pool_theta))

    def expert_quantiles(self, base: Any) -> np.ndarray:
        """(steps, levels) each step's quantiles (seconds) of the model's ``base``
        (levels,), non-decreasing in the level."""
        return np.maximum.accumulate(self._base(base)[None, :] * self.expert_factors(),
                                     axis=1)

    def record(self, missed: Any, decided: Any) -> None:
        """Move each step's corrections by one outcome: ``missed`` (steps, levels), whether
        the task overran that step's quantile, where ``decided`` (the same shape) says it is
        known (each entry once; :meth:`Calibrator.record` of one launch, row by row)."""
        shape = self.theta.shape
        try:
            miss = np.broadcast_to(np.asarray(missed, dtype=bool), shape)
            known = np.broadcast_to(np.asarray(decided, dtype=bool), shape)
        except ValueError:
            raise InvalidArgumentError(f"outcomes must have shape {shape}", field="missed",
                                       value=None) from None
        newcomer = (self.scored == 0) & known
        self.theta[newcomer] = self.pool_theta[newcomer]
        move = np.asarray(self.steps)[:, None] * (miss - (1.0 - self.levels))
        self.theta += np.where(known, move, 0.0)
        self.pool_theta += np.where(known, move, 0.0)
        self.scored += known
        self.covered += known & ~miss

    def score(self, realised_seconds: float, base: Any,
              quantiles: np.ndarray | None = None) -> None:
        """Add a finished task's pinball loss (log time) to each step's: its realised
        seconds against each step's quantiles of the model's ``base``, as they stood when
        the outcome was known (``quantiles``, :meth:`expert_quantiles`; default: as they
        stand now)."""
        if not (isinstance(realised_seconds, (int, float)) and np.isfinite(realised_seconds)
                and realised_seconds > 0):
            raise InvalidArgumentError(f"realised_seconds must be positive and finite, got "
                                       f"{realised_seconds!r}", field="realised_seconds",
                                       value=realised_seconds)
        reported = self.expert_quantiles(base) if quantiles is None else quantiles
        gap = np.log(float(realised_seconds)) - np.log(reported)
        level = self.levels[None, :]
        pinball = np.maximum(level * gap, (level - 1.0) * gap).sum(axis=1)
        self.loss = self.decay * self.loss + pinball

    # -- private ------------------------------------------------------------------------------

    def _base(self, base: Any) -> np.ndarray:
        q = np.asarray(base, dtype=float)
        if q.shape != (self.levels.size,) or not (np.isfinite(q).all() and (q > 0).all()):
            raise InvalidArgumentError(f"base quantiles must be positive, finite, shape "
                                       f"({self.levels.size},); got shape {q.shape}",
                                       field="base", value=None)
        return q

    @staticmethod
    def _count(host_indices: Any) -> int:
        idx = np.asarray(host_indices)
        if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
            raise InvalidArgumentError(f"host indices must be a list of whole numbers, got "
                                       f"{host_indices!r}", field="host_indices", value=None)
        return int(idx.size)
