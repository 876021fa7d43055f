"""Fewer unpinned processes than cores, launched while local jobs hold some cores: where the
processes run, and the load they meet while the other cores work off those jobs.

The kernel runs an unpinned process on whichever core local jobs leave free
(:func:`scheduler.placement.migrating`). A snapshot's jobs sit one per core (FCFS,
:mod:`scheduler.backlog`), so at launch:

- the processes take the least-held cores (the backlog's core groups in order of their mean
  held work), not a share of every group's backlog each (the geometric mix, which is what
  a host keeps when its processes do not migrate);
- while the other held cores work off their jobs, only the cores not held can take a
  process when a local job arrives on its own, so it meets more of the load than the
  all-cores figure ``migrating`` gives: a busy fraction 1 - E[min(n, F)] / n, F the free
  cores among the a not held, Binomial(a, 1 - r) with r each core's utilisation. A held core
  is taken as held for its work's mean busy period w / (1 - r). The host's lam and rho are
  scaled by the time-average of that fraction over the run, over its value with every core
  available; the run's length T = (t + w_own) / (1 - rho') is iterated with it (t the
  process's dedicated seconds, w_own the held work on the processes' own cores).

Against the migrating simulator started from the same held work
(:func:`scheduler.core_simulation.simulate_migrating` with ``start_seconds``) this stays
within a few percent of the mean on the long side where the geometric mix erred 10-50% long
(tests/integration/test_placement_vs_simulation.py; the measurement log's "Jobs held on
other cores at launch"). It applies to hosts that carry their cores' utilisation before
placement (``Host.core_rho``, set by ``migrating``) and whose backlog lists running jobs;
every other host keeps the geometric mix and its load as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

# Hosts with more cores than this keep the geometric mix: the binomial table is per core
# count (a workstation has far fewer).
MAX_TABLE_CORES = 256
# fixed-point steps on the run's length (each moves T by the change in 1 / (1 - rho'), which
# settles to well under a part in a thousand in a handful of steps)
_LENGTH_STEPS = 12


def applies(arrays: Any) -> np.ndarray:
    """Bool, the hosts' shape: the hosts the held-phase rule is for (see the module's
    docstring)."""
    backlog = arrays.backlog
    core_rho = getattr(arrays, "core_rho", None)
    if backlog is None or core_rho is None:
        return np.zeros(np.shape(arrays.lam), bool)
    return (np.isfinite(core_rho) & (arrays.processes < arrays.cores)
            & (arrays.cores <= MAX_TABLE_CORES) & backlog.jobs_running())


def process_mult(arrays: Any, least_held: np.ndarray | None = None) -> np.ndarray:
    """(..., H, G) processes per core group of the backlog: on the hosts the rule applies
    to, the processes fill the least-held groups first; elsewhere each group weighs n g / c
    (the geometric mix). Processes that pool the free cores (``Host.pooled``) are one
    server: the weights over their count. ``least_held``: :func:`least_held_mult` of the same
    hosts, if the caller has it."""
    mix = least_held_mult(arrays) if least_held is None else least_held
    if arrays.pooled is None:
        return mix
    # processes that pool the free cores are one server: each group's weight over them
    return np.where(arrays.pooled[..., None], mix / arrays.processes[..., None], mix)


def least_held_mult(arrays: Any) -> np.ndarray:
    """:func:`process_mult` before pooling: processes per group, the least-held first."""
    backlog = arrays.backlog
    mix = backlog.mult * arrays.spread[..., None]
    chosen = applies(arrays)
    if not chosen.any():
        return mix
    cores = _picked(backlog.mult, chosen, groups=True)
    held = np.where(cores > 0, _picked(backlog.low + backlog.extra_mean, chosen, True),
                    np.inf)
    order = np.argsort(held, axis=1, kind="stable")
    sorted_cores = np.take_along_axis(cores, order, axis=1)
    before = np.cumsum(sorted_cores, axis=1) - sorted_cores
    wanted = _picked(arrays.processes, chosen)[:, None]
    placed = np.clip(wanted - before, 0.0, sorted_cores)
    out = np.empty_like(placed)
    np.put_along_axis(out, order, placed, axis=1)
    mix = np.array(np.broadcast_to(mix, (*chosen.shape, mix.shape[-1])))
    mix[chosen] = out
    return mix


def load_ratio(arrays: Any, dedicated_seconds: np.ndarray,
               least_held: np.ndarray | None = None) -> np.ndarray | None:
    """Factor on each host's lam and rho (the shape of ``dedicated_seconds`` and the hosts'
    broadcast) for processes of ``dedicated_seconds`` each on the least-held cores: the
    time-average over the run of the busy fraction the processes meet, over its value with
    every core available; 1 where the rule does not apply (None where it applies to no
    host, so the usual path does no arithmetic for it). ``least_held``: as in
    :func:`process_mult`."""
    chosen = applies(arrays)
    if not chosen.any():
        return None
    t = np.asarray(dedicated_seconds, dtype=float)
    shape = np.broadcast_shapes(t.shape, chosen.shape)
    where = np.broadcast_to(chosen, shape)
    core_rho, rho = _picked(arrays.core_rho, where), _picked(arrays.rho, where)
    placed = _picked(least_held_mult(arrays) if least_held is None else least_held, where,
                     groups=True)
    edges, busy, all_free = _held_segments(arrays, where, core_rho, placed)
    # the processes start once their own cores' held work is done
    held = _picked(arrays.backlog.low + arrays.backlog.extra_mean, where, groups=True)
    own = np.max(np.where(placed > 0, held, 0.0), axis=1)
    work = _picked(t, where) + own
    scale = np.divide(1.0, all_free, out=np.zeros_like(all_free), where=all_free > 0)
    # never more than the process's own core's load (a host whose cores' free spans are
    # correlated can sit above the binomial all-cores figure)
    cap = np.divide(core_rho, rho, out=np.ones_like(rho), where=rho > 0)
    factor = np.ones(work.shape)
    for _ in range(_LENGTH_STEPS):
        # the run's mean length at the load as it stands (rho' < 1: the factor is capped)
        length = work / np.maximum(1.0 - rho * factor, 1e-9)
        spent = np.diff(np.minimum(edges, length[:, None]), axis=1)
        mean_busy = (spent * busy).sum(axis=1) / np.maximum(length, 1e-300)
        factor = np.minimum(np.where(all_free > 0, mean_busy * scale, 1.0), cap)
    ratio = np.ones(shape)
    ratio[where] = np.where(work > 0, factor, 1.0)
    return ratio


def _held_segments(arrays: Any, where: np.ndarray, core_rho: np.ndarray,
                   placed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the problems ``where``, with ``placed`` (n, G) processes per group: (n, G + 2)
    times (seconds from launch) at which the held cores not running processes come free,
    from 0 to infinity; (n, G + 1) the busy fraction the processes meet between each two;
    (n,) that fraction with every core available."""
    backlog = arrays.backlog
    cores = _picked(arrays.cores, where).astype(int)
    table = _busy_table(core_rho, cores, _picked(arrays.processes, where).astype(int))
    rows = np.arange(cores.size)
    held = _picked(backlog.low + backlog.extra_mean, where, groups=True)
    others = np.maximum(_picked(backlog.mult, where, groups=True) - placed, 0.0)
    # each held core is held for its work's mean busy period
    drains = np.where((others > 0) & (held > 0), held / (1.0 - core_rho[:, None]), 0.0)
    order = np.argsort(drains, axis=1)
    ends = np.take_along_axis(drains, order, axis=1)
    counts = np.take_along_axis(np.where(drains > 0, others, 0.0), order, axis=1)
    total = counts.sum(axis=1, keepdims=True)
    # cores held on [e_j, e_j+1): those of the groups not yet come free
    still = np.concatenate([total, total - np.cumsum(counts, axis=1)], axis=1)
    available = np.clip(cores[:, None] - still, 0, None).astype(int)
    edges = np.concatenate([np.zeros((cores.size, 1)), ends,
                            np.full((cores.size, 1), np.inf)], axis=1)
    return edges, table[rows[:, None], available], table[rows, cores]


def _picked(values: Any, where: np.ndarray, groups: bool = False) -> np.ndarray:
    """A host's figure for every problem it is in (``where``'s shape), at ``where`` only:
    (n,), or with ``groups`` its (G,) row of core groups, (n, G)."""
    values = np.asarray(values)
    shape = (*where.shape, values.shape[-1]) if groups else where.shape
    return np.broadcast_to(values, shape)[where]


def _busy_table(core_rho: np.ndarray, cores: np.ndarray, processes: np.ndarray) -> np.ndarray:
    """(n, max cores + 1): 1 - E[min(n, F)] / n for F ~ Binomial(a, 1 - r) free cores, at
    each a from 0 to the host's cores (n its processes, r its cores' utilisation). Worked
    out once per distinct host (a selection's batches repeat each host many times)."""
    keys, inverse = np.unique(np.stack([core_rho, cores, processes], axis=1), axis=0,
                              return_inverse=True)
    rates, counts, wanted = keys[:, 0], keys[:, 1].astype(int), keys[:, 2].astype(int)
    available = np.arange(int(counts.max()) + 1)
    below = np.arange(int(wanted.max()))
    # E[min(n, F)] = sum over k < n of P(F > k)
    tail = stats.binom.sf(below[None, None, :], available[None, :, None],
                          1.0 - rates[:, None, None])
    tail = np.where(below[None, None, :] < wanted[:, None, None], tail, 0.0)
    return (1.0 - tail.sum(axis=2) / wanted[:, None])[inverse.reshape(-1)]
