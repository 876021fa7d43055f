"""The capacity-prefix selections: the paper's Fig. 3 heuristic and the best prefix.

Both take the candidates sorted by (1 - rho) tau capacity, the paper's priority, and score
prefixes C(x) with the caller's set evaluator (:class:`scheduler.selection.SetEvaluator`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scheduler.hosts import Host

if TYPE_CHECKING:  # the evaluator lives in scheduler.selection, which imports this module
    from scheduler.selection import SetEvaluator

# prefix scans every prefix up to this many hosts, and a coarse grid plus refinement beyond
_PREFIX_EXHAUSTIVE = 256
_SWAP_POOL = 8
_SWAP_ROUNDS = 10
# the heuristic evaluates all prefixes up to b at once when b is at most this
_HEURISTIC_PREFETCH = 32


def heuristic(evaluator: SetEvaluator, ordered: Sequence[Host], work: float,
               task_ratio: float) -> list[int]:
    """Paper Fig. 3 over prefixes C(x) of the capacity-ordered candidates."""
    m = len(ordered)
    mean_demand = float(np.mean([1.0 / host.mu for host in ordered]))
    upper = heuristic_upper(m, work, mean_demand, task_ratio)

    def f(sizes: Sequence[int]) -> list[float]:
        return list(evaluator.criteria([range(size) for size in sizes]))

    if upper <= _HEURISTIC_PREFETCH:
        # one vectorised batch of every prefix the search can touch costs less than its
        # sequential steps; the search below then runs on those values unchanged
        f(range(1, min(upper + 1, m) + 1))
    size, _ = binary_search_sizes(f, m, upper)
    return list(range(size))


def heuristic_upper(m: int, work: float, mean_demand_seconds: float, task_ratio: float) -> int:
    """b = min(m, floor(W / (task_ratio * mean local demand))), at least 1 (Fig. 3)."""
    return max(1, min(m, math.floor(work / (task_ratio * mean_demand_seconds))))


def binary_search_sizes(f: Callable[[Sequence[int]], Sequence[float]], m: int, upper: int
                        ) -> tuple[int, list[tuple[int, int, int]]]:
    """The search of Fig. 3 as SPEC section 4 spells it out; f maps sizes to criteria.

    Returns the chosen prefix size and the trace of (a, b, c) at each step.
    """
    a, b = 1, upper
    trace = []
    while True:
        c = (a + b) // 2
        wanted = [a, b, c] + ([c + 1] if c + 1 <= m else [])
        values = dict(zip(wanted, f(wanted)))
        trace.append((a, b, c))
        fa, fb, fc = values[a], values[b], values[c]
        smallest = min(fa, fb, fc)
        if fa == smallest:
            b = c
        elif fb == smallest:
            a = c
        elif c + 1 <= m and fc < values[c + 1]:
            b = c
        else:
            a = c
        if a + 1 >= b:
            break
    fa, fb = f([a, b])
    return (a if fa < fb else b), trace


def prefix(evaluator: SetEvaluator) -> list[int]:
    """Best prefix C(x), then swap improvement of the boundary."""
    m = len(evaluator.arrays.lam)
    if m <= _PREFIX_EXHAUSTIVE:
        sizes = np.arange(1, m + 1)
    else:
        sizes = np.unique(np.geomspace(1, m, 64).round().astype(int))
    values = evaluator.criteria([range(int(size)) for size in sizes])
    best = int(np.argmin(values))
    while m > _PREFIX_EXHAUSTIVE:
        low = int(sizes[max(best - 1, 0)])
        high = int(sizes[min(best + 1, len(sizes) - 1)])
        if high - low <= 2:
            break
        sizes = np.unique(np.linspace(low, high, min(high - low + 1, 64)).round().astype(int))
        values = evaluator.criteria([range(int(size)) for size in sizes])
        best = int(np.argmin(values))
        if high - low + 1 <= 64:
            break
    chosen = list(range(int(sizes[best])))
    return _improve_by_swaps(evaluator, chosen, float(values[best]))


def _improve_by_swaps(evaluator: SetEvaluator, chosen: list[int], value: float) -> list[int]:
    m = len(evaluator.arrays.lam)
    for _ in range(_SWAP_ROUNDS):
        inside = chosen[-_SWAP_POOL:]
        outside = [i for i in range(m) if i not in set(chosen)][:_SWAP_POOL]
        moves: list[list[int]] = []
        if len(chosen) > 1:
            moves += [[i for i in chosen if i != drop] for drop in inside]
        moves += [[*chosen, add] for add in outside]
        moves += [[i for i in chosen if i != drop] + [add] for drop in inside for add in outside]
        if not moves:
            break
        values = evaluator.criteria(moves)
        best = int(np.argmin(values))
        if values[best] >= value * (1 - 1e-9):
            break
        chosen, value = sorted(moves[best]), float(values[best])
    return chosen
