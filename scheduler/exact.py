"""Exact machine-set selection (``optimal``): branch and bound over every subset of hosts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations, islice
from math import comb
from typing import TYPE_CHECKING

import numpy as np

from scheduler import completion
from scheduler.errors import BudgetExceededError, InvalidArgumentError

if TYPE_CHECKING:  # the evaluator lives with the selection that builds it
    from scheduler.selection import SetEvaluator


@dataclass(frozen=True)
class Budget:
    """How long an exact selection may run: ``seconds`` on ``clock`` (seconds) from
    ``started``. The branch and bound's cost depends on the pool as much as on its size
    (three pools of 22 hosts took 59-112 s, the first 16 hosts of one of them 2.9 s), so a
    limit on hosts alone cannot keep a manager's worker, or a client waiting 30 s, from
    being held for minutes."""

    seconds: float
    clock: Callable[[], float]
    started: float

    def __post_init__(self) -> None:
        if not (self.seconds > 0):  # also refuses nan
            raise InvalidArgumentError(f"the time budget must be > 0 seconds, got "
                                       f"{self.seconds!r}", field="budget_seconds",
                                       value=self.seconds)

    def check(self, hosts: int, size: int) -> None:
        """Raise BudgetExceededError if the budget is spent, once every set of fewer than
        ``size`` of the ``hosts`` has been ruled on."""
        spent = self.clock() - self.started
        if spent > self.seconds:
            done = sum(comb(hosts, k) for k in range(1, size))
            raise BudgetExceededError(
                f"optimal selection over {hosts} hosts passed its time budget of "
                f"{self.seconds:g} s (sets of up to {size - 1} hosts ruled on, {done:,} of "
                f"{2 ** hosts - 1:,}); use auto, within 1% of the optimum wherever "
                "measured, or raise optimal_budget_seconds", field="hosts", value=hosts)


def optimal(evaluator: SetEvaluator, set_tol: float, budget: Budget | None = None
            ) -> list[int]:
    """Exact minimum over all non-empty subsets, by branch and bound over batches.

    Bounds (each below the criterion, so pruning never loses the optimum):
    E[T] >= max_k E[T_k]; E[T] + std[T] >= median(T), so F(f*) < 1/2 rules a set out; and
    E[T] >= x0 + a right Riemann sum of the decreasing 1 - F on [x0, f*]. ``set_tol``: the
    relative accuracy of each set's criterion, kept as slack so a tie is never pruned.
    ``budget``: checked before each batch (None: no limit).
    """
    m = len(evaluator.arrays.lam)
    if evaluator.calibration is not None:
        return _every_subset(evaluator, budget)
    # a good incumbent first: every prefix
    prefix_sizes = [range(size) for size in range(1, m + 1)]
    prefix_values = evaluator.criteria(prefix_sizes)
    best_value = float(np.min(prefix_values))
    best_set = list(range(int(np.argmin(prefix_values)) + 1))
    for size in range(1, m + 1):
        for number, members in enumerate(_combinations_chunks(m, size)):
            if budget is not None:
                budget.check(m, size)
            if number == 0:
                members = members[1:]  # the prefix C(size) comes first and is known
            bound = evaluator.lower_bound(members)
            members = members[bound < best_value]
            if len(members) == 0:
                continue
            members = members[_bounded_survivors(evaluator, members, best_value, set_tol)]
            if len(members) == 0:
                continue
            values = evaluator.dense(members)
            index = int(np.argmin(values))
            if values[index] < best_value:
                best_value = float(values[index])
                best_set = [int(i) for i in members[index]]
    return best_set


def _every_subset(evaluator: SetEvaluator, budget: Budget | None) -> list[int]:
    """The minimum over every non-empty subset, each scored (the calibrated law has no
    bounds of its own here)."""
    m = len(evaluator.arrays.lam)
    best_value, best_set = np.inf, [0]
    for size in range(1, m + 1):
        for members in _combinations_chunks(m, size, 4096):
            if budget is not None:
                budget.check(m, size)
            values = evaluator.dense(members)
            index = int(np.argmin(values))
            if values[index] < best_value:
                best_value, best_set = float(values[index]), [int(i) for i in members[index]]
    return best_set


# Probe points as multiples of (f* - x0) past x0, for the bounds in ``_bounded_survivors``:
# a cheap pass at x0 and f* only, then a finer one for the sets that pass it.
_COARSE_FRACTIONS = np.array([0.0, 1.0])
_FINE_FRACTIONS = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.3, 1.7, 2.5])


def _bounded_survivors(evaluator: SetEvaluator, members: np.ndarray, best_value: float,
                       set_tol: float) -> np.ndarray:
    """Which sets might still beat ``best_value`` (see ``_probe_bounds``)."""
    keep = _probe_bounds(evaluator, members, best_value, _COARSE_FRACTIONS, set_tol)
    index = np.flatnonzero(keep)
    if index.size:
        keep[index] = _probe_bounds(evaluator, members[index], best_value, _FINE_FRACTIONS,
                                    set_tol)
    return keep


def _probe_bounds(evaluator: SetEvaluator, members: np.ndarray, best_value: float,
                  fractions: np.ndarray, set_tol: float) -> np.ndarray:
    """Which sets might still beat ``best_value``, judged from 1 - F at a few points.

    With points x_0 < ... < x_J and S = 1 - F (decreasing):
    E[T] >= x0 + sum_j (x_{j+1} - x_j) S(x_{j+1})  (right Riemann sum), and for any a < b,
    Var[T] >= p r (b - a)^2 / (p + r) with p = F(a), r = S(b) (the mass on either side must
    sit at least that far apart). E + std below those bounds' sum is impossible; so is
    E + std < median, which rules out sets with S(f*) > 1/2.
    """
    servers = evaluator.servers(members)
    x0 = completion.start_point(servers)
    reach = np.maximum(best_value - x0, 0.0)
    x = x0[:, None] + reach[:, None] * fractions[None, :]
    cdf = np.exp(completion.log_cdf(servers, x))
    survival = 1.0 - cdf
    mean_bound = x0 + np.sum(np.diff(x, axis=1) * survival[:, 1:], axis=1)
    p = cdf[:, :, None]
    r = survival[:, None, :]
    gap = x[:, None, :] - x[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        var_bound = np.where((gap > 0) & (p + r > 0), p * r * gap**2 / (p + r), 0.0)
    std_bound = np.sqrt(np.max(var_bound.reshape(len(members), -1), axis=1))
    median_above = survival[:, fractions.tolist().index(1.0)] > 0.5
    # slack keeps sets whose bound ties the incumbent within integration error
    beaten = (mean_bound + std_bound) > best_value * (1 + 10 * set_tol)
    return ~(median_above | beaten)


def _combinations_chunks(m: int, size: int, chunk: int = 65536):
    """All size-k subsets of range(m) as (B, k) index arrays, in chunks."""
    iterator = combinations(range(m), size)
    while True:
        block = list(islice(iterator, chunk))
        if not block:
            return
        yield np.array(block, dtype=int)
