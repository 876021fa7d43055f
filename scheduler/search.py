"""The default machine-set selection (``auto``): exact when small, else a near-optimal search.

The paper's Fig. 3 heuristic and the best capacity prefix both assume the best set is a prefix
of the hosts sorted by (1 - rho) tau. It often is not: a fast host whose owners run long jobs
adds more spread than its speed saves. The search weighs each host by what it costs the set's
criterion against what it brings:

- its *damage* at the set's current share scale: joining a set S with completion law F_S, host
  k raises E[T] by exactly  int F_S (1 - F_k) dx  and E[T^2] by  int 2x F_S (1 - F_k) dx
  (for a member, the same with S without k); to first order that moves E[T] + std[T] by
  dE + (dE2 - 2 E dE) / (2 std);
- its share at that scale, the work it takes off the others when it joins.

The start is the best prefix of the hosts sorted by damage per share (scored beside all the
others) or in the candidates' capacity order. Each round then scores the hosts beside the
current set and evaluates, in one batch, the prefixes of that new order near the current size
and the single moves (drop one member, add one host, swap one for one) among the worst-scored
members and best-scored outsiders; the best replaces the set while it lowers the criterion.

Every criterion that decides anything comes from the caller's set evaluator, the one the exact
and prefix methods use, so a change to the completion model (such as an initial backlog passed
to it) reaches every method at once; the damage scores, built from the same evaluator's laws,
only order the candidates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from scheduler import completion
from scheduler.model import Servers

if TYPE_CHECKING:  # the evaluator lives in scheduler.selection, which imports this module
    from scheduler.selection import SetEvaluator

# at or below this many candidates the exact branch and bound costs no more than the search
EXACT_MAX_HOSTS = 8
# Up to this many candidates the start tries a coarse grid of _FIRST_SIZES prefix sizes (the
# rounds try every size near the best); beyond, a grid of _GRID_SIZES refined around its best
# until the neighbours are within _SIZE_SLACK of its size.
_ALL_PREFIXES = 64
_GRID_SIZES = 12
_FIRST_SIZES = 10
_REFINE_SIZES = 7
_SIZE_SLACK = 0.2
# later orderings try sizes near the current set's: within _NEAR when it is small, else
# these multiples of it (a large set's criterion is flat in its size)
_NEAR = 3
_NEAR_FACTORS = np.array([0.7, 0.85, 1.0, 1.2, 1.4])
# members and outsiders a round of single moves may touch (the worst and best scored), fewer
# as the set grows so that a round costs at most about _MOVE_BUDGET host evaluations (in a
# set of thousands one host moves the criterion by less than the search's tolerance)
_MOVE_POOL = 3
_MOVE_BUDGET = 2000
# with a calibrated criterion, pools up to this size try every single drop and add a round
_FLIP_ALL = 16
# with a calibrated criterion, pools up to _ALL_PREFIXES try in their first round the pairs of
# the _SMALL_PAIRS best singletons and the triples of the _SMALL_TRIPLES best (a batch's fixed
# cost is most of the cost of a few dozen small sets)
_SMALL_PAIRS = 5
_SMALL_TRIPLES = 4
# The search asks the quadrature for this tolerance, which its first rule meets without the
# finer ones (the error estimate is pessimistic): over 10,000 random sets of 1-40 hosts (a
# quarter started in their steady state) the criteria were within 1e-8 of converged values at
# the median, 4e-5 at the 99th percentile and 1.5e-3 at worst (at 1e-2, which retries a third
# of the sets with the finer rule: 2e-5 and 6e-4), and the sets chosen on 450 pools of 9-40
# hosts, by the model's criterion and by a calibrated one, were those chosen at 1e-2. A move
# must gain more than _GAIN to count (more in sets wider than _ALL_PREFIXES, flat in any one
# host); the chosen set is then predicted to full accuracy.
_SEARCH_TOL = 5e-2
_GAIN = 2e-4
_WIDE_GAIN = 1e-3
_MAX_ROUNDS = 40
# points of the damage integrals: fractions of the way from the set's start to its tail
_DAMAGE_FRACTIONS = np.concatenate([[0.0], np.geomspace(1e-4, 1.0, 24), [1.5, 2.5, 4.0]])
_DAMAGE_TAIL = 1e-6


def near_optimal(evaluator: SetEvaluator, exact: Callable[[SetEvaluator], list[int]],
                 exact_max_hosts: int = EXACT_MAX_HOSTS) -> list[int]:
    """Indices (into the evaluator's candidate list, sorted by capacity) of the chosen set.

    ``exact`` is the exact minimiser, used when there are at most ``exact_max_hosts``
    candidates.
    """
    m = len(evaluator.arrays.lam)
    if m <= exact_max_hosts:
        return exact(evaluator)
    # Start from prefixes of two orders: the hosts scored beside all the others, and the
    # candidates' own capacity order (with shares that ignore the spread, equal-load and
    # speed, the slowest member sets the pace and the scores beside everyone see only it).
    # A small pool's first sizes are a coarse grid: the rounds try every size near the best.
    everyone = np.arange(m)
    beside_everyone = _damage_per_share(evaluator, everyone)
    orderings = np.argsort(beside_everyone, kind="stable")[None, :]
    if evaluator.partition != "equal-mean":
        orderings = np.concatenate([orderings, everyone[None, :]])
    # sets already scored (sorted members -> criterion): a round's neighbours overlap the
    # first prefixes and the earlier rounds' sets
    seen: dict[bytes, float] = {}
    # A calibrated law can make one host alone, or two or three, beat every set around the
    # best prefix (its record says the model is pessimistic there), several moves away and
    # each move on the way worse: in a small pool the start also scores each host alone, and
    # the first round the pairs and triples of the best of them.
    alone = evaluator.calibration is not None and m <= _ALL_PREFIXES
    chosen, value = _best_prefix(evaluator, orderings, _sizes(m, None), m > _ALL_PREFIXES,
                                 seen, alone)
    # in a small pool the first round's moves rank hosts by the scores beside everyone (the
    # set is one of their prefixes); a large set's scores beside itself differ (2-8% worse
    # sets at 1,000-10,000 hosts without them), as after a round that moves to a new prefix
    ratio = beside_everyone if len(orderings) == 1 and m <= _ALL_PREFIXES else None
    chosen, value = _descend(evaluator, chosen, value, ratio, seen, alone)
    return [int(i) for i in chosen]


def _descend(evaluator: SetEvaluator, chosen: np.ndarray, value: float,
             ratio: np.ndarray | None, seen: dict[bytes, float], alone: bool
             ) -> tuple[np.ndarray, float]:
    """Rounds of moves from ``chosen`` (criterion ``value``) while one gains: the set found
    and its criterion. ``ratio``: the scores to rank the first round by (None: beside
    ``chosen``); ``alone``: the first round also scores each host alone (scored by the
    start) and the small sets of the best of them."""
    m = len(evaluator.arrays.lam)
    polish = evaluator.calibration is not None and m <= _FLIP_ALL
    for _ in range(_MAX_ROUNDS):
        if ratio is None:
            ratio = _damage_per_share(evaluator, chosen)
        sets, valid = _neighbours(evaluator, chosen, ratio)
        if alone:
            # in the same batch as the round's moves: a batch's fixed cost is most of a
            # calibrated criterion's at a few dozen small sets
            sets, valid = _stacked(*_stacked(sets, valid, *_singletons(m)),
                                   *_small_sets(seen, m))
            alone = False
        values = _scored(evaluator, sets, valid, seen)
        index = int(np.argmin(values))
        gain = _GAIN if sets.shape[1] <= _ALL_PREFIXES else _WIDE_GAIN
        if values[index] >= value * (1 - gain) and polish:
            # where the rounds settle in a small pool: every swap, once
            polish = False
            inside = np.zeros(m, dtype=bool)
            inside[chosen] = True
            sets, valid = _moves(chosen, chosen, np.flatnonzero(~inside), len(chosen) + 1)
            values = _scored(evaluator, sets, valid, seen)
            index = int(np.argmin(values))
        if values[index] >= value * (1 - gain):
            break
        step = np.sort(sets[index][valid[index]])
        # after a single move the scores beside the old set still rank the hosts (one host
        # moves each score by little); a new prefix is scored afresh
        moved = len(np.setxor1d(step, chosen, assume_unique=True))
        chosen, value = step, float(values[index])
        if moved > 2:
            ratio = None
    return chosen, value


def _small_sets(seen: dict[bytes, float], m: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of the _SMALL_PAIRS and the triples of the _SMALL_TRIPLES best-scored
    singletons in ``seen``, padded to width 3 with a validity mask."""
    alone = np.array([seen[np.array([k]).tobytes()] for k in range(m)])
    best = np.argsort(alone, kind="stable").tolist()
    rows = [*itertools.combinations(best[:_SMALL_PAIRS], 2),
            *itertools.combinations(best[:_SMALL_TRIPLES], 3)]
    sets = np.zeros((len(rows), 3), dtype=int)
    valid = np.zeros(sets.shape, dtype=bool)
    for row, members in enumerate(rows):
        sets[row, :len(members)] = members
        valid[row, :len(members)] = True
    return sets, valid


def _scored(evaluator: SetEvaluator, sets: np.ndarray, valid: np.ndarray,
            seen: dict[bytes, float]) -> np.ndarray:
    """Criteria of the padded ``sets``, scoring only those not in ``seen`` (updated)."""
    keys = _keys(sets, valid)
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    fresh = [i for key, i in first.items() if key not in seen]
    if fresh:
        seen.update(zip((keys[i] for i in fresh),
                        evaluator.dense(sets[fresh], valid[fresh], _SEARCH_TOL)))
    return np.array([seen[key] for key in keys])


def _keys(sets: np.ndarray, valid: np.ndarray) -> list[bytes]:
    """Each padded set's members, sorted, as bytes (one sort of the whole batch: padding
    sorts last)."""
    ordered = np.sort(np.where(valid, sets, np.iinfo(sets.dtype).max), axis=1)
    return [row[:count].tobytes() for row, count in zip(ordered, valid.sum(axis=1))]


def _neighbours(evaluator: SetEvaluator, chosen: np.ndarray, ratio: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """One round's candidate sets, padded to one width with a validity mask: the prefixes
    near the current size of the hosts re-sorted by their ``ratio`` (score beside
    ``chosen``), and the single moves among the worst-scored members and best-scored
    outsiders."""
    m = len(evaluator.arrays.lam)
    ordering = np.argsort(ratio, kind="stable")
    sizes = _sizes(m, len(chosen))
    width = max(int(sizes[-1]), len(chosen) + 1)
    prefixes = np.zeros((len(sizes), width), dtype=int)
    prefixes[:, :sizes[-1]] = ordering[:sizes[-1]]
    prefix_valid = np.arange(width)[None, :] < sizes[:, None]
    pool = _pool_size(len(chosen))
    inside = np.zeros(m, dtype=bool)
    inside[chosen] = True
    outsiders = np.flatnonzero(~inside)
    members = chosen[np.argsort(-ratio[chosen], kind="stable")[:pool]]
    outsiders = outsiders[np.argsort(ratio[outsiders], kind="stable")[:pool]]
    moves, move_valid = _moves(chosen, members, outsiders, width)
    sets, valid = [prefixes, moves], [prefix_valid, move_valid]
    if evaluator.calibration is not None and m <= _FLIP_ALL:
        # the model's laws rank hosts for the calibrated criterion only roughly (each host's
        # level map bends its law): a small pool also tries every single drop and add
        flips, flip_valid = _moves(chosen, chosen, np.flatnonzero(~inside), width, swaps=False)
        sets.append(flips)
        valid.append(flip_valid)
    return np.concatenate(sets), np.concatenate(valid)


def _singletons(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of the m candidates alone, as a padded (m, 1) set array and its mask."""
    return np.arange(m)[:, None], np.ones((m, 1), dtype=bool)


def _stacked(sets: np.ndarray, valid: np.ndarray, more: np.ndarray, more_valid: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Two padded set arrays and their masks, one after the other at the wider width."""
    width = max(sets.shape[1], more.shape[1])

    def padded(array: np.ndarray) -> np.ndarray:
        return np.pad(array, ((0, 0), (0, width - array.shape[1])))

    return (np.concatenate([padded(sets), padded(more)]),
            np.concatenate([padded(valid), padded(more_valid)]))


def _sizes(m: int, near: int | None) -> np.ndarray:
    """Prefix sizes to try: a geometric grid over all sizes, or those around ``near``."""
    if near is None:
        count = _GRID_SIZES if m > _ALL_PREFIXES else _FIRST_SIZES
        return np.unique(np.geomspace(1, m, count).round().astype(int))
    if near <= _ALL_PREFIXES:
        return np.arange(max(1, near - _NEAR), min(m, near + _NEAR) + 1)
    return np.unique(np.clip((near * _NEAR_FACTORS).round().astype(int), 1, m))


def _best_prefix(evaluator: SetEvaluator, orderings: np.ndarray, sizes: np.ndarray,
                 refine: bool, seen: dict[bytes, float], singles: bool = False
                 ) -> tuple[np.ndarray, float]:
    """The best prefix of any of the (R, m) ``orderings`` among ``sizes`` (with ``refine``,
    refined on the best ordering between the neighbours of its best size until every size
    there is tried): (members, criterion). With ``singles`` (``sizes`` up to _ALL_PREFIXES),
    each candidate alone is scored in the first batch too, into ``seen`` only."""
    best_value, best_set = np.inf, orderings[0, :1]
    while True:
        values = _prefix_criteria(evaluator, orderings, sizes, singles)  # (R, sizes)
        if singles:
            values, alone = values[:-1, :len(sizes)], values[-1, :orderings.shape[1]]
            seen.update((np.array([k]).tobytes(), float(v)) for k, v in enumerate(alone))
            singles = False
        for row, ordering in enumerate(orderings):
            seen.update((np.sort(ordering[:size]).tobytes(), float(value))
                        for size, value in zip(sizes, values[row]))
        row, column = (int(i) for i in np.unravel_index(int(np.argmin(values)), values.shape))
        if values[row, column] < best_value:
            best_value = float(values[row, column])
            best_set = orderings[row, :sizes[column]]
        low = int(sizes[max(column - 1, 0)])
        high = int(sizes[min(column + 1, len(sizes) - 1)])
        # a large set's criterion is flat in its size: a tenth either way is close enough
        if (not refine or high - low + 1 <= 2 or high - low <= _SIZE_SLACK * len(best_set)
                or np.all(np.isin(np.arange(low, high + 1), sizes))):
            break
        orderings = orderings[row:row + 1]
        sizes = np.unique(np.linspace(low, high, min(high - low + 1, _REFINE_SIZES))
                          .round().astype(int))
        sizes = sizes[(sizes != low) & (sizes != high)] if len(sizes) > 2 else sizes
    return np.sort(best_set), best_value


def _prefix_criteria(evaluator: SetEvaluator, orderings: np.ndarray, sizes: np.ndarray,
                     singles: bool = False) -> np.ndarray:
    """(R, S) criteria of the first ``sizes`` hosts of each ordering; with ``singles`` (sizes
    up to _ALL_PREFIXES) and then (R + 1, max(S, m)), the last row's first m each candidate
    alone (in the same batch)."""
    count = len(orderings)
    if sizes[-1] <= _ALL_PREFIXES:
        # few and short: one padded batch
        width = int(sizes[-1])
        members = np.repeat(orderings[:, :width], len(sizes), axis=0)
        valid = np.tile(np.arange(width)[None, :] < sizes[:, None], (count, 1))
        if not singles:
            return evaluator.dense(members, valid, _SEARCH_TOL).reshape(count, len(sizes))
        m = orderings.shape[1]
        members, valid = _stacked(members, valid, *_singletons(m))
        values = evaluator.dense(members, valid, _SEARCH_TOL)
        out = np.full((count + 1, max(len(sizes), m)), np.inf)
        out[:count, :len(sizes)] = values[:-m].reshape(count, len(sizes))
        out[count, :m] = values[-m:]
        return out
    # long prefixes differ in width by orders of magnitude: one call per size, no padding
    return np.stack([evaluator.dense(orderings[:, :size], rel_tol=_SEARCH_TOL)
                     for size in sizes], axis=1)


def _damage_per_share(evaluator: SetEvaluator, chosen: np.ndarray) -> np.ndarray:
    """First-order change of the criterion per reference-CPU-second of share, for every
    candidate: for an outsider, joining ``chosen``; for a member, its part in it (see the
    module docstring)."""
    hosts = evaluator.every_host_servers(chosen)  # (1, m), the set's members among them
    member = np.zeros(hosts.t.shape[1], dtype=bool)
    member[chosen] = True
    in_set = Servers(t=hosts.t, q=hosts.q, code=hosts.code, p1=hosts.p1, p2=hosts.p2,
                     mult=np.where(member, hosts.mult, 0.0))
    x0 = completion.start_point(in_set)
    tail = completion.tail_point(in_set, _DAMAGE_TAIL)
    grid = x0[0] + (tail[0] - x0[0]) * _DAMAGE_FRACTIONS
    # a calibrated criterion's level maps rank a small pool's hosts better (of 30 random
    # pools of 9-13 hosts, 1 missed the optimum by over 1% against 3, and the bench's
    # 20-host lab's set is 6% better); they misled the search of a 200-host lab (a set 10%
    # worse)
    log_host = evaluator.every_host_log_cdf(chosen, hosts, grid,
                                            calibrated=len(member) <= _ALL_PREFIXES)
    log_set = np.sum(log_host[:, member], axis=1)
    # F of the set without the host (members) or as it is (outsiders), beside 1 - F_host
    with np.errstate(invalid="ignore"):
        others = np.exp(np.minimum(np.where(member[None, :], log_set[:, None] - log_host,
                                            log_set[:, None]), 0.0))
    others[np.isnan(others)] = 0.0  # -inf - -inf: a member that cannot have finished
    running = -np.expm1(log_host)
    # trapezoid weights on the grid, for integrals of f and of 2x f
    step = np.diff(grid)
    weights = np.concatenate([step, [0.0]]) / 2 + np.concatenate([[0.0], step]) / 2
    weights_x = 2 * grid * weights
    joint = others * running
    d_mean, d_square = weights @ joint, weights_x @ joint
    survival = -np.expm1(log_set)
    mean = x0[0] + weights @ survival
    square = x0[0] ** 2 + weights_x @ survival
    std = np.sqrt(max(square - mean**2, (1e-6 * mean) ** 2))
    damage = d_mean + (d_square - 2 * mean * d_mean) / (2 * std)
    # what a host brings is the work it takes at this scale (joining, it lowers every other
    # share by that much over the total): its share, reference-CPU-seconds
    share = hosts.t[0] * hosts.mult[0] * evaluator.arrays.tau
    # a host that would get no work (its backlog outlasts the set's finish) brings nothing:
    # it ranks last
    return np.divide(damage, share, out=np.full_like(damage, np.inf), where=share > 0)


def _pool_size(k: int) -> int:
    """Largest P <= _MOVE_POOL with (P^2 + 2P) sets of k + 1 hosts within _MOVE_BUDGET."""
    room = _MOVE_BUDGET / (k + 1)
    return int(min(_MOVE_POOL, np.floor(np.sqrt(1 + room) - 1)))


def _moves(chosen: np.ndarray, members: np.ndarray, outsiders: np.ndarray, width: int,
           swaps: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Every drop, add and (with ``swaps``) swap as one padded (B, width) index array and
    its validity mask (width > len(chosen))."""
    k = len(chosen)
    n_drop = len(members) if k > 1 else 0
    n_add = len(outsiders)
    n_swap = len(members) * len(outsiders) if swaps else 0
    sets = np.zeros((n_drop + n_add + n_swap, width), dtype=int)
    valid = np.zeros(sets.shape, dtype=bool)
    sets[:, :k] = chosen
    valid[:, :k] = True
    position = np.searchsorted(chosen, members)
    valid[np.arange(n_drop), position[:n_drop]] = False
    adds = slice(n_drop, n_drop + n_add)
    sets[adds, k] = outsiders
    valid[adds, k] = True
    if n_swap:
        swap_rows = np.arange(n_drop + n_add, len(sets))
        sets[swap_rows, np.repeat(position, len(outsiders))] = np.tile(outsiders, len(members))
    return sets, valid
