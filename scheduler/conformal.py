"""Adaptive conformal calibration of predicted quantiles, per host, with a pooled prior.

The score is the ratio realised / predicted quantile. For each host h and level q the
calibrator keeps a log time-scale correction theta[h, q]; the reported quantile is the model's
times exp(theta_eff), theta_eff = (n theta[h, q] + k theta_pool[q]) / (n + k), n the host's
scored launches and k ``prior_launches``: a host with a short record leans on the pool's
correction, one with a long record on its own. Each scored launch moves the corrections by the
adaptive-conformal rule (Gibbs & Candes 2021, in the score-space form of online quantile
tracking): theta += step x (miss - (1 - q)), miss = 1 if the realised time exceeded the
reported quantile. A miss raises the factor by step q, a hit lowers it by step (1 - q), so the
long-run fraction of misses is 1 - q whatever the data do (the bound is
(range of theta + step) / (step x launches)).

The pool's correction follows the same rule on the pool's own reported quantiles, each batch of
updates moving it by step x (mean miss over the batch - (1 - q)).

Monotone quantiles: the corrected quantiles of one host are made non-decreasing in q by a
running maximum (a monotone rearrangement), so p50 <= p90 <= p95 always. For a parallel task's
law, scale each host's law by :func:`level_map`: the host's calibrated CDF is phi(F(x)), with
phi the piecewise-linear map of [0, 1] onto itself through (F(reported q-quantile), q); F and
phi are both non-decreasing, so their composition is a CDF whose q-quantiles are the reported
ones, and the product over hosts is again a CDF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.row_state import RowState, check_hosts

LEVELS = (0.5, 0.9, 0.95)
# The far-tail levels a host's law is also calibrated at, one correction per level shared by
# every host (:func:`pooled_calibrator`). A task split over n hosts finishes by its p90 when
# every share does by about its 0.9 ** (1 / n) quantile: 0.990 for 10 hosts, 0.9967 for 32,
# 0.9990 for 100. On the split back-tests the served p90 missed there (per-share exceedance
# 0.9-1.3% at 32 hosts' point, the law's 0.44%) while the hosts' own p90 and p95 held; one
# host's record is too short to learn a 1-in-250 level. Pooled levels at 0.99 and 0.999 as
# well covered more (a split of 16: p90 .83 where 0.996 alone gives .75) but one factor for
# all hosts at 0.99 widened every split (32 CTC stations: p90 16 times the p50, against 7).
TAIL_LEVELS = (0.996,)
# The far tail's adaptive step (log units per launch). A miss raises a level's correction by
# about the step and a cover lowers it by step x (1 - level), so a far level climbs to a
# bursty log's factor (10-30 at 15 minutes on LCG) only after some log(factor) / step misses,
# each a 1-in-250 event: with 0.1 the far tail of 8 LCG stations was still climbing after 12
# days (its launches covered .981-.989), and their split's p90 covered .78. With 0.3 (split
# back-tests, 2026-11-25): 8 LCG stations .84, 16 LCG .86 (was .84), 32 CTC .90 (.87),
# 32 RICC .87 (.85), 32 LCG .94 (.92), at p90/p50 widths 12-24% larger; Poisson draws
# about unchanged.
TAIL_STEP = 0.3
_STATE_FIELDS = ("theta", "scored", "covered", "pool_theta", "pool_batches")


@dataclass(frozen=True)
class ConformalSettings:
    """levels: quantile levels in (0, 1), increasing; step: the adaptive step (log units per
    launch); prior_launches: how many launches the pool's correction is worth;
    young_launches: until a row has scored this many launches its step is larger, step x
    sqrt(young_launches / (n + 1)) for its n-th (0: the plain step always). A record split
    into several calibrators climbs from the model's factor on fewer outcomes each; the
    larger early steps let it, and from then on the rule is plain ACI with its guarantee.
    Where a miss's overrun is known (log realised / reported), the larger step raises the
    correction by at most the plain step's raise plus the overrun: a near miss moves it
    about as far as would have covered it (two 1% misses had made a p90 factor 1.4)."""

    levels: tuple[float, ...] = field(default=LEVELS)
    step: float = 0.1
    prior_launches: float = 10.0
    young_launches: float = 0.0

    def __post_init__(self) -> None:
        try:
            levels = np.asarray(self.levels, dtype=float)
        except (TypeError, ValueError):
            levels = np.array([np.nan])
        # A tuple whatever came in (a list from a stored state), so settings stay hashable.
        object.__setattr__(self, "levels", tuple(levels.ravel().tolist()))
        if levels.ndim != 1 or levels.size == 0 or not ((levels > 0) & (levels < 1)).all() \
                or (np.diff(levels) <= 0).any():
            raise InvalidArgumentError(f"levels must be increasing numbers in (0, 1), got "
                                       f"{self.levels!r}", field="levels", value=self.levels)
        for name, value, low, high in (("step", self.step, 1e-6, 2.0),
                                       ("prior_launches", self.prior_launches, 0.0, 1e6),
                                       ("young_launches", self.young_launches, 0.0, 1e6)):
            if not (isinstance(value, (int, float)) and low <= value <= high):
                raise InvalidArgumentError(f"{name} must be in [{low:g}, {high:g}], got "
                                           f"{value!r}", field=name, value=value)


class Calibrator(RowState):
    """Per-host, per-level corrections for ``hosts`` rows; state is plain arrays."""

    FIELDS = _STATE_FIELDS
    ROW_FIELDS = ("theta", "scored", "covered")
    SETTINGS = ConformalSettings

    def __init__(self, hosts: int, settings: ConformalSettings | None = None) -> None:
        hosts = check_hosts(hosts)
        self.settings = settings or ConformalSettings()
        levels = len(self.settings.levels)
        self.theta = np.zeros((int(hosts), levels))
        self.scored = np.zeros((int(hosts), levels), dtype=np.int64)
        self.covered = np.zeros((int(hosts), levels), dtype=np.int64)
        self.pool_theta = np.zeros(levels)
        self.pool_batches = np.zeros(1, dtype=np.int64)

    @property
    def levels(self) -> np.ndarray:
        return np.asarray(self.settings.levels, dtype=float)

    def factors(self, host_indices: Any) -> np.ndarray:
        """(hosts, levels) time-scale factors exp(theta_eff) applied to the model's quantiles."""
        return np.exp(self._effective(self.rows(host_indices)))

    def adjust(self, host_indices: Any, quantiles: Any) -> np.ndarray:
        """Calibrated quantiles (seconds), shape (hosts, levels): the model's ``quantiles``
        (same shape, at ``levels``) times each host's factors, then made non-decreasing."""
        idx = self.rows(host_indices)
        q = self._quantiles(quantiles, idx.size)
        return np.maximum.accumulate(q * np.exp(self._effective(idx)), axis=1)

    def pool_adjust(self, quantiles: Any) -> np.ndarray:
        """The pool's calibrated quantiles (no host's own record), non-decreasing."""
        q = np.asarray(quantiles, dtype=float)
        q = self._quantiles(q, q.shape[0] if q.ndim == 2 else 1)
        return np.maximum.accumulate(q * np.exp(self.pool_theta), axis=1)

    def adjust_and_pool(self, host_index: int, quantiles: Any) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`adjust`, :meth:`pool_adjust`) of one host's (levels,) model quantiles,
        each (levels,): the same figures, checked once (a refresh asks for both for every
        host, length and view)."""
        q = self._quantiles(quantiles, 1)[0]
        own, pool = self.factors_and_pool(host_index)
        return np.maximum.accumulate(q * own), np.maximum.accumulate(q * pool)

    def factors_and_pool(self, host_index: int) -> tuple[np.ndarray, np.ndarray]:
        """(levels,) factors of one host (:meth:`factors`) and of the pool, to the bit those
        :meth:`adjust_and_pool` scales by (a refresh scoring a host's pending launches one
        after another reads them again only after each outcome moves them)."""
        idx = self.rows([host_index])
        row, pool = int(idx[0]), self.pool_theta
        n = float(self.scored[row, 0]) if (self.scored[row] == self.scored[row, 0]).all() \
            else None
        if n is None:
            effective = self._effective(idx)[0]
        else:
            # _effective for a host whose levels were scored alike (every launch a refresh
            # records is known at every level): the same operations on one row
            k = self.settings.prior_launches
            own = self.theta[row] if n > 0 else pool
            effective = own if k == 0 else (n * own + k * pool) / (n + k)
        return np.exp(effective), np.exp(pool)

    def update(self, host_indices: Any, realised: Any, quantiles: Any) -> np.ndarray:
        """Score finished launches (one per entry; a host may repeat) and move the corrections.

        ``realised``: each launch's realised time (seconds); ``quantiles``: the model's
        quantiles for it, shape (launches, levels), reported against the state before the
        call. Returns the misses (realised above the reported quantile), (launches, levels).
        """
        idx = self.rows(host_indices)
        q = self._quantiles(quantiles, idx.size)
        actual = np.broadcast_to(np.asarray(realised, dtype=float), idx.shape)
        if not (np.isfinite(actual).all() and (actual > 0).all()):
            raise InvalidArgumentError("realised times must be positive and finite",
                                       field="realised", value=None)
        reported = self.adjust(idx, q)
        missed = actual[:, None] > reported
        pool_missed = actual[:, None] > self.pool_adjust(q)
        self.record(idx, missed, pool_missed, overrun=np.log(actual[:, None] / reported))
        return missed

    def record(self, host_indices: Any, missed: Any, pool_missed: Any,
               decided: Any = None, pool_decided: Any = None, weight: Any = None,
               overrun: Any = None) -> None:
        """Move the corrections by known outcomes, (launches, levels) booleans each.

        ``missed``: the launch overran the quantile reported for it (:meth:`adjust` at launch);
        ``pool_missed``: it overran the pool's (:meth:`pool_adjust` at launch); ``decided``:
        which entries are known (default all), ``pool_decided`` the same for the pool's
        (default ``decided``). A miss is known as soon as the task has run
        longer than the reported quantile, before it finishes: recording it then, rather
        than at completion, keeps the feedback from lagging behind a burst of load.

        ``weight``: each launch's share in this calibrator, in [0, 1] (default 1): its step
        is scaled by it, the pool's too. A quantile served from two calibrators' factors (a
        task length between theirs) teaches each in proportion to its part in what was
        served. A launch counts as one of this calibrator's scored launches (the prior's n
        and the coverage) where its weight is at least a half.

        ``overrun``: log(realised / reported quantile) of each entry where the realised time
        is known (NaN or inf where not: a miss known before the task ended); it bounds a young
        record's larger step (:class:`ConformalSettings`).
        """
        idx = self.rows(host_indices)
        shape = (idx.size, self.levels.size)
        try:
            miss = np.broadcast_to(np.asarray(missed, dtype=bool), shape)
            pool_miss = np.broadcast_to(np.asarray(pool_missed, dtype=bool), shape)
            known = np.ones(shape, bool) if decided is None else np.broadcast_to(
                np.asarray(decided, dtype=bool), shape)
            pool_known = known if pool_decided is None else np.broadcast_to(
                np.asarray(pool_decided, dtype=bool), shape)
        except ValueError:
            raise InvalidArgumentError(f"outcomes must have shape {shape}", field="missed",
                                       value=None) from None
        share = self._weights(weight, idx.size)
        step, target = self.settings.step, 1.0 - self.levels
        counted = known & (share >= 0.5)[:, None]
        moving = known & (share > 0)[:, None]
        newcomer = (self.scored[idx] == 0) & moving
        rows, cols = np.nonzero(newcomer)
        self.theta[idx[rows], cols] = self.pool_theta[cols]
        own_move = self._bounded(self._steps(self.scored[idx]) * (miss - target), miss,
                                 overrun, shape)
        np.add.at(self.theta, idx, np.where(known, share[:, None] * own_move, 0.0))
        np.add.at(self.scored, idx, counted.astype(np.int64))
        np.add.at(self.covered, idx, (counted & ~miss).astype(np.int64))
        counts = pool_known.sum(axis=0)
        if counts.any():
            # the batch's mean of weight x (miss - target) (with every weight 1, the miss
            # rate less the target, to the bit)
            weighted = np.where(pool_known, share[:, None], 0.0)
            rate = np.divide((weighted * pool_miss).sum(axis=0), counts, out=target.copy(),
                             where=counts > 0)
            part = np.divide(weighted.sum(axis=0), counts, out=np.ones_like(target),
                             where=counts > 0)
            self.pool_theta += step * (rate - target * part)
            self.pool_batches += 1

    def record_each(self, host_indices: Any, missed: Any, pool_missed: Any,
                    overrun: Any = None) -> None:
        """Move the corrections by known outcomes one launch at a time, in order: the state
        :meth:`record` leaves when called once per launch (the pool moved once per launch),
        worked out as one scan. ``missed`` and ``pool_missed``: (launches, levels) booleans,
        every entry known; ``overrun`` as :meth:`record`'s."""
        idx = self.rows(host_indices)
        shape = (idx.size, len(self.settings.levels))
        try:
            miss, pool_miss = (np.asarray(given, dtype=bool) for given in (missed, pool_missed))
            # (broadcast only when needed: a refresh calls this for every host and length)
            miss, pool_miss = (given if given.shape == shape else np.broadcast_to(given, shape)
                               for given in (miss, pool_miss))
        except ValueError:
            raise InvalidArgumentError(f"outcomes must have shape {shape}", field="missed",
                                       value=None) from None
        if idx.size:
            self._scan(idx, miss, pool_miss, overrun)

    def coverage(self, host_indices: Any) -> np.ndarray:
        """(hosts, levels) fraction of scored launches within the reported quantile (NaN:
        none scored)."""
        idx = self.rows(host_indices)
        n = self.scored[idx].astype(float)
        return np.divide(self.covered[idx], n, out=np.full(n.shape, np.nan), where=n > 0)

    # -- private ------------------------------------------------------------------------------

    def _scan(self, idx: np.ndarray, miss: np.ndarray, pool_miss: np.ndarray,
              overrun: Any = None) -> None:
        """:meth:`record_each`'s updates, launch by launch: a one-launch batch moves the pool
        by step x (miss - target) (its mean miss is the miss itself), so each launch costs a
        few row operations instead of :meth:`record`'s general batch (the same bits)."""
        step, target = self.settings.step, 1.0 - np.asarray(self.settings.levels)
        moves, pool_moves = step * (miss - target), step * (pool_miss - target)
        young = self.settings.young_launches > 0
        hits = ~miss
        theta, scored, covered, pool = self.theta, self.scored, self.covered, self.pool_theta
        for k, row in enumerate(idx.tolist()):
            fresh = scored[row] == 0
            if fresh.any():
                # a level never scored starts from the pool's correction
                theta[row] = np.where(fresh, pool, theta[row])
            if young:
                move = self._steps(scored[row]) * (miss[k] - target)
                theta[row] += move if overrun is None else self._bounded(
                    move, miss[k], overrun[k], move.shape)
            else:
                theta[row] += moves[k]
            pool += pool_moves[k]
            scored[row] += 1
            covered[row] += hits[k]
        self.pool_batches += idx.size

    def _bounded(self, move: np.ndarray, miss: np.ndarray, overrun: Any,
                 shape: tuple[int, ...]) -> np.ndarray:
        """``move`` with each miss's raise at most the plain step's plus its ``overrun``
        (log realised / reported; NaN or inf: unknown, not bounded)."""
        if overrun is None:
            return move
        try:
            known = np.broadcast_to(np.asarray(overrun, dtype=float), shape)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"overrun must have shape {shape}", field="overrun",
                                       value=None) from None
        plain = self.settings.step * self.levels
        # never below the plain step's raise; fmin: a NaN bound leaves the move as it is
        return np.where(miss, np.fmin(move, plain + np.maximum(known, 0.0)), move)

    def _steps(self, scored: np.ndarray) -> np.ndarray:
        """The adaptive step of rows with ``scored`` launches so far: ``step``, larger while
        a record is young (step x sqrt(young_launches / (scored + 1)) before then)."""
        step, young = self.settings.step, self.settings.young_launches
        if young <= 0:
            return np.full(np.shape(scored), step)
        return step * np.sqrt(np.maximum(1.0, young / (np.asarray(scored) + 1.0)))

    @staticmethod
    def _weights(weight: Any, launches: int) -> np.ndarray:
        """(launches,) weights in [0, 1] (1 where not given), or a clear error."""
        if weight is None:
            return np.ones(launches)
        try:
            share = np.broadcast_to(np.asarray(weight, dtype=float), (launches,))
        except (TypeError, ValueError):
            share = np.array([np.nan])
        if share.shape != (launches,) or not ((share >= 0) & (share <= 1)).all():
            raise InvalidArgumentError(f"weights must be numbers in [0, 1], one per launch "
                                       f"({launches})", field="weight", value=None)
        return share

    def _effective(self, idx: np.ndarray) -> np.ndarray:
        n = self.scored[idx].astype(float)
        k = self.settings.prior_launches
        own = np.where(n > 0, self.theta[idx], self.pool_theta)
        if k == 0:
            return own
        return (n * own + k * self.pool_theta) / (n + k)

    def _quantiles(self, quantiles: Any, rows: int) -> np.ndarray:
        q = np.asarray(quantiles, dtype=float)
        if q.ndim == 1 and rows == 1:
            q = q[None, :]
        if q.shape != (rows, self.levels.size) or not (np.isfinite(q).all() and (q > 0).all()):
            raise InvalidArgumentError(f"quantiles must be positive, finite, shape "
                                       f"({rows}, {self.levels.size}); got shape {q.shape}",
                                       field="quantiles", value=None)
        return q


def level_name(level: float) -> str:
    """A level's name in JSON: 0.9 -> "p90", 0.996 -> "p99.6"."""
    return f"p{100.0 * float(level):.10g}"


def pooled_calibrator(levels: tuple[float, ...] = TAIL_LEVELS,
                      step: float = TAIL_STEP) -> Calibrator:
    """One correction per level of ``levels`` shared by every host: a single row that every
    host's launches score, with no prior, moving by ``step`` (``TAIL_STEP``: a far level
    must climb quickly on a bursty host). Its users score each outcome at the factor as it
    stands when the outcome is known, one after another (the manager and the back-test):
    then it tracks the level's quantile of realised over base time. Scored at the factor a
    launch was made with, launches in flight before the first outcomes ran a far level's
    factor away (a miss moves it (level / (1 - level)) times as far as a cover)."""
    return Calibrator(1, ConformalSettings(levels=levels, step=step, prior_launches=0.0))


def with_pooled(own: Calibrator, pooled: Calibrator, host_indices: Any) -> np.ndarray:
    """(hosts, own levels + pooled levels) factors: each host's from ``own``, then the
    :func:`pooled_calibrator` ``pooled``'s, the same for every host."""
    factors = own.factors(host_indices)
    shared = np.broadcast_to(pooled.factors([0]), (factors.shape[0], pooled.levels.size))
    return np.concatenate([factors, shared], axis=1)


def level_map(cdf_values: Any, model_levels: Any, levels: Any = LEVELS) -> np.ndarray:
    """phi(F): a host's calibrated CDF from its model CDF values.

    ``cdf_values``: F(x) per host, shape (hosts, points); ``model_levels``: F at each of the
    host's reported quantiles, shape (hosts, levels), non-decreasing; ``levels``: the nominal
    levels. phi is piecewise linear through (0, 0), (model_levels, levels), (1, 1); a knot
    of 0 (a reported quantile at or before the host's start) makes phi jump just above 0,
    never at it: the calibrated law has not finished where the model's cannot have.
    """
    f = np.asarray(cdf_values, dtype=float)
    m = np.asarray(model_levels, dtype=float)
    nominal = np.asarray(levels, dtype=float)
    if f.ndim != 2 or m.shape != (f.shape[0], nominal.size) or (np.diff(m, axis=1) < 0).any() \
            or not ((m >= 0) & (m <= 1)).all():
        raise InvalidArgumentError("model_levels must be (hosts, levels) in [0, 1], "
                                   "non-decreasing, and cdf_values (hosts, points)",
                                   field="model_levels", value=None)
    knots_x = np.concatenate([np.zeros((m.shape[0], 1)), m, np.ones((m.shape[0], 1))], axis=1)
    knots_y = np.concatenate([[0.0], nominal, [1.0]])
    # the segment of each value: how many inner knots it has reached (the last one wins a tie)
    segment = np.zeros(f.shape, dtype=np.int64)
    for j in range(1, knots_y.size - 1):
        segment += f >= knots_x[:, j:j + 1]
    lo = np.take_along_axis(knots_x, segment, axis=1)
    hi = np.take_along_axis(knots_x, segment + 1, axis=1)
    width = hi - lo
    frac = np.divide(f - lo, width, out=np.ones_like(f), where=width > 0)
    out = knots_y[segment] + np.clip(frac, 0.0, 1.0) * (knots_y[segment + 1] - knots_y[segment])
    return np.where(f > 0, np.clip(out, 0.0, 1.0), 0.0)


def interval_summary(realised: Any, reported: Any, levels: Any = LEVELS) -> dict[str, Any]:
    """Coverage of each level and the median width p_last / p_first of reported quantiles."""
    actual = np.asarray(realised, dtype=float)
    q = np.asarray(reported, dtype=float)
    if q.ndim != 2 or q.shape[0] != actual.size or q.shape[0] == 0:
        raise InvalidArgumentError("reported must be (launches, levels) for launches >= 1",
                                   field="reported", value=None)
    names = [level_name(level) for level in levels]
    coverage = (actual[:, None] <= q).mean(axis=0)
    return {"launches": int(actual.size),
            "coverage": {n: float(c) for n, c in zip(names, coverage)},
            f"median_{names[-1]}_over_{names[0]}": float(np.median(q[:, -1] / q[:, 0]))}
