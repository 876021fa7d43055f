"""The near-optimal search's start (:mod:`scheduler.search`): the best prefix of an ordering.

A prefix is the first k candidates of an ordering (by damage per share, or by capacity). A
small pool's start scores a coarse grid of sizes (the search's rounds then try every size
near the best); a large one's a geometric grid below the whole pool, refined around its best:
the criterion of a set of thousands is flat in its size, and a set is dearer to score the
larger it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler import search_moves as moves_of

if TYPE_CHECKING:  # the evaluator lives in scheduler.selection, which imports the search
    from scheduler.selection import SetEvaluator

# Up to this many candidates the start tries a coarse grid of FIRST_SIZES prefix sizes (the
# rounds try every size near the best); beyond, a grid of GRID_SIZES refined around its best
# until the neighbours are within SIZE_SLACK of its size, each refine REFINE_SIZES sizes
# geometric between the neighbours (the best's own not scored again). Spaced evenly, the
# refine's sizes and most of its cost fell on the large side (at 10,000 hosts 0.27 s of a
# calibrated search of 1 s); on 84 labs of 300-10,000 hosts this found better sets on
# average with the same total time (README, "Pools of hundreds to thousands of hosts").
ALL_PREFIXES = 64
GRID_SIZES = 12
FIRST_SIZES = 10
REFINE_SIZES = 9
SIZE_SLACK = 0.2
# later orderings try sizes near the current set's: within NEAR when it is small, else
# these multiples of it (a large set's criterion is flat in its size, and the start's refine
# has put the size within SIZE_SLACK). With 0.7 and 1.4 as well, neither ever won a round on
# 136 labs of 100-10,000 hosts, and each round cost 40% more (README, "Pools of hundreds to
# thousands of hosts").
NEAR = 3
NEAR_FACTORS = np.array([0.85, 1.0, 1.2])
# The search asks the quadrature for this tolerance, which its first rule meets without the
# finer ones (the error estimate is pessimistic): over 10,000 random sets of 1-40 hosts (a
# quarter started in their steady state) the criteria were within 1e-8 of converged values at
# the median, 4e-5 at the 99th percentile and 1.5e-3 at worst (at 1e-2, which retries a third
# of the sets with the finer rule: 2e-5 and 6e-4), and the sets chosen on 450 pools of 9-40
# hosts, by the model's criterion and by a calibrated one, were those chosen at 1e-2. A move
# of the search must gain more than its threshold to count (scheduler.search._GAIN); the
# chosen set is then predicted to full accuracy.
SEARCH_TOL = 5e-2


def prefix_sizes(m: int, near: int | None) -> np.ndarray:
    """Prefix sizes to try: a geometric grid over all sizes, or those around ``near``."""
    if near is None:
        count = GRID_SIZES if m > ALL_PREFIXES else FIRST_SIZES
        return np.unique(np.geomspace(1, m, count).round().astype(int))
    if near <= ALL_PREFIXES:
        return np.arange(max(1, near - NEAR), min(m, near + NEAR) + 1)
    return np.unique(np.clip((near * NEAR_FACTORS).round().astype(int), 1, m))


def best_prefix(evaluator: SetEvaluator, orderings: np.ndarray, sizes: np.ndarray,
                refine: bool, seen: dict[bytes, float], singles: bool = False
                ) -> tuple[np.ndarray, float]:
    """The best prefix of any of the (R, m) ``orderings`` among ``sizes`` (with ``refine``,
    refined on the best ordering between the neighbours of its best size until every size
    there is tried): (members, criterion). With ``singles`` (``sizes`` up to ALL_PREFIXES),
    each candidate alone is scored in the first batch too, into ``seen`` only."""
    best_value, best_set = np.inf, orderings[0, :1]
    # From the first refine on, the best size so far (scored already). A refined grid's top,
    # the whole pool, only bounds the first refine and is not scored: it is the dearest set
    # (at 10,000 hosts 0.13 s of a calibrated search of about 0.9 s) and on the generated labs
    # 6-10 times the best prefix; where it is best, the refine's sizes reach 0.9 of it and
    # the rounds' larger prefixes the pool itself.
    carried = orderings.shape[1] if refine else 0
    while True:
        fresh = sizes[sizes != carried]
        values = prefix_criteria(evaluator, orderings, fresh, singles)  # (R, sizes)
        if carried in sizes:
            values = np.insert(values, int(np.searchsorted(fresh, carried)),
                               best_value, axis=1)
        if singles:
            values, alone = values[:-1, :len(sizes)], values[-1, :orderings.shape[1]]
            seen.update((np.array([k]).tobytes(), float(v)) for k, v in enumerate(alone))
            singles = False
        for row, ordering in enumerate(orderings):
            seen.update((np.sort(ordering[:size]).tobytes(), float(value))
                        for size, value in zip(sizes, values[row]) if value < np.inf)
        row, column = (int(i) for i in np.unravel_index(int(np.argmin(values)), values.shape))
        if values[row, column] < best_value:
            best_value = float(values[row, column])
            best_set = orderings[row, :sizes[column]]
        low = int(sizes[max(column - 1, 0)])
        high = int(sizes[min(column + 1, len(sizes) - 1)])
        # a large set's criterion is flat in its size: a tenth either way is close enough
        if (not refine or high - low + 1 <= 2 or high - low <= SIZE_SLACK * len(best_set)
                or np.all(np.isin(np.arange(low, high + 1), sizes))):
            break
        orderings = orderings[row:row + 1]
        sizes = np.unique(np.geomspace(low, high, min(high - low + 1, REFINE_SIZES))
                          .round().astype(int))
        sizes = sizes[(sizes != low) & (sizes != high)] if len(sizes) > 2 else sizes
        # the best joins the sizes, so that the next refine is around whichever is best
        carried = len(best_set)
        sizes = np.union1d(sizes, [carried])
    return np.sort(best_set), best_value


def prefix_criteria(evaluator: SetEvaluator, orderings: np.ndarray, sizes: np.ndarray,
                    singles: bool = False) -> np.ndarray:
    """(R, S) criteria of the first ``sizes`` hosts of each ordering; with ``singles`` (sizes
    up to ALL_PREFIXES) and then (R + 1, max(S, m)), the last row's first m each candidate
    alone (in the same batch)."""
    count = len(orderings)
    if sizes[-1] <= ALL_PREFIXES:
        # few and short: one padded batch
        width = int(sizes[-1])
        members = np.repeat(orderings[:, :width], len(sizes), axis=0)
        valid = np.tile(np.arange(width)[None, :] < sizes[:, None], (count, 1))
        if not singles:
            return evaluator.dense(members, valid, SEARCH_TOL).reshape(count, len(sizes))
        m = orderings.shape[1]
        members, valid = moves_of.stacked((members, valid), moves_of.singletons(m))
        values = evaluator.dense(members, valid, SEARCH_TOL)
        out = np.full((count + 1, max(len(sizes), m)), np.inf)
        out[:count, :len(sizes)] = values[:-m].reshape(count, len(sizes))
        out[count, :m] = values[-m:]
        return out
    # long prefixes differ in width by orders of magnitude: one call per size, no padding;
    # the whole pool is one set in every ordering, and the dearest to score
    rows = [evaluator.dense(orderings[:1 if size == orderings.shape[1] else count, :size],
                            rel_tol=SEARCH_TOL) for size in sizes]
    return np.stack([np.broadcast_to(row, (count,)) for row in rows], axis=1)
