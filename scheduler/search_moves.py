"""The candidate sets a round of the near-optimal search tries, as padded index arrays.

A batch of sets of different sizes is one (B, width) array of candidate indices and a
validity mask of the same shape, so that the set evaluator scores the whole batch in one call
(a batch's fixed cost is most of the cost of a few dozen small sets).
"""

from __future__ import annotations

import itertools

import numpy as np

# a small pool's first round tries the pairs of the _SMALL_PAIRS best singletons and the
# triples of the _SMALL_TRIPLES best
_SMALL_PAIRS = 5
_SMALL_TRIPLES = 4


def moves(chosen: np.ndarray, members: np.ndarray, outsiders: np.ndarray, width: int,
          swaps: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Every drop (of ``members``), add (of ``outsiders``) and, with ``swaps``, swap of one
    for one, from the sorted set ``chosen``, as one padded (B, width) index array and its
    validity mask (width > len(chosen))."""
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


def block_drops(chosen: np.ndarray, scores: np.ndarray, fractions: np.ndarray, width: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The sorted set ``chosen`` (at least two members) without its worst-``scores``d
    members, as many as each of the ``fractions`` of it (at least one, never all), as one
    padded (B, width) index array and its validity mask (``scores``: one per candidate, the
    highest worst)."""
    size = len(chosen)
    counts = np.unique(np.clip((size * fractions).round().astype(int), 1, size - 1))
    worst_first = chosen[np.argsort(-scores[chosen], kind="stable")]
    sets = np.zeros((len(counts), width), dtype=int)
    valid = np.zeros(sets.shape, dtype=bool)
    for row, count in enumerate(counts):
        sets[row, :size - count] = np.sort(worst_first[count:])
        valid[row, :size - count] = True
    return sets, valid


def double_flips(chosen: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Every drop of two members and add of two outsiders of m candidates, from the sorted
    set ``chosen`` (a drop of one and add of another is a swap: see :func:`moves`)."""
    k = len(chosen)
    inside = np.zeros(m, dtype=bool)
    inside[chosen] = True
    outsiders = np.flatnonzero(~inside)
    drops = np.array(list(itertools.combinations(range(k), 2)), dtype=int).reshape(-1, 2)
    if k <= 2:
        drops = drops[:0]  # a set keeps at least one member
    adds = np.array(list(itertools.combinations(outsiders, 2)), dtype=int).reshape(-1, 2)
    width = k + 2
    sets = np.zeros((len(drops) + len(adds), width), dtype=int)
    valid = np.zeros(sets.shape, dtype=bool)
    sets[:, :k] = chosen
    valid[:, :k] = True
    rows = np.arange(len(drops))
    valid[rows, drops[:, 0]] = False
    valid[rows, drops[:, 1]] = False
    sets[len(drops):, k:] = adds
    valid[len(drops):, k:] = True
    return sets, valid


def polish_moves(chosen: np.ndarray, m: int, double: bool = True
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Every single flip and swap (and with ``double`` every double flip) from the sorted
    set ``chosen`` among m candidates."""
    inside = np.zeros(m, dtype=bool)
    inside[chosen] = True
    single = moves(chosen, chosen, np.flatnonzero(~inside), len(chosen) + 1)
    return stacked(single, double_flips(chosen, m)) if double else single


def singletons(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of the m candidates alone, as a padded (m, 1) set array and its mask."""
    return np.arange(m)[:, None], np.ones((m, 1), dtype=bool)


def small_sets(alone: np.ndarray, every_pair: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of the _SMALL_PAIRS (``every_pair``: of all) and the triples of the
    _SMALL_TRIPLES best of the candidates whose criteria alone are ``alone``, padded to
    width 3 with a validity mask."""
    best = np.argsort(alone, kind="stable").tolist()
    rows = [*itertools.combinations(best if every_pair else best[:_SMALL_PAIRS], 2),
            *itertools.combinations(best[:_SMALL_TRIPLES], 3)]
    sets = np.zeros((len(rows), 3), dtype=int)
    valid = np.zeros(sets.shape, dtype=bool)
    for row, members in enumerate(rows):
        sets[row, :len(members)] = members
        valid[row, :len(members)] = True
    return sets, valid


def stacked(*batches: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Padded set arrays and their masks, one after the other at the widest width."""
    width = max(sets.shape[1] for sets, _ in batches)
    rows = sum(len(sets) for sets, _ in batches)
    out = np.zeros((rows, width), dtype=np.result_type(*(sets for sets, _ in batches)))
    out_valid = np.zeros((rows, width), dtype=bool)
    row = 0
    for sets, valid in batches:
        out[row:row + len(sets), :sets.shape[1]] = sets
        out_valid[row:row + len(sets), :sets.shape[1]] = valid
        row += len(sets)
    return out, out_valid


def keys(sets: np.ndarray, valid: np.ndarray) -> list[bytes]:
    """Each padded set's members, sorted, as bytes (one sort of the whole batch: padding
    sorts last)."""
    ordered = np.sort(np.where(valid, sets, np.iinfo(sets.dtype).max), axis=1)
    return [row[:count].tobytes() for row, count in zip(ordered, valid.sum(axis=1))]
