"""The simulator's engine: chains of one core (or one host's cores) walked arrival by arrival.

Each chain is a remote sub-task's work behind a per-core local backlog; local jobs arrive
in a Poisson stream and are served first. The chains are walked together, a block of draws
at a time (:func:`walk`); :func:`warm_up` runs local queues alone from empty. Used by
:mod:`scheduler.simulation` and :mod:`scheduler.core_simulation`; never the model's formulas.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError

_BLOCK_ELEMENTS = 1 << 20  # gap/demand draws held at once, bounds memory of a block
_MIN_STEPS, _MAX_STEPS = 8, 64
# A run whose remote work could not finish before this many local arrivals (those while it
# clears its start backlog and its own work, stretched by the jobs that arrive meanwhile) is
# refused at once: the walk steps arrival by arrival, the slowest run last, and one at
# utilisation 0.999 expecting 3.6e5 took 73 s over 10 runs (a sigma of 1e9 s on a mean of
# 10 s put a warm start's backlog near 1e15 s and the walk did not end). Legitimate runs
# are below it (a 128 h task at 0.1 arrivals/s and utilisation 0.5: 92,000).
_MAX_ARRIVALS_PER_RUN = 2e5
# ... and every run together, at some 10 million arrivals a second of CPU: a host at
# utilisation 0.999 and the default 4,000 runs would have met 1.4e9 (hours)
_MAX_ARRIVALS_IN_ALL = 3e8
# A shared queue of c cores sorts its cores' work at every arrival: past this many cores an
# arrival costs c / _CORES_PER_ARRIVAL arrivals' time (about 8 ns a core against 80 ns an
# arrival), so the limit in all counts them so. A 4,096-core host warmed up for 200 runs
# met 2e7 arrivals, under the limit, and ran for many minutes (8 ms a step).
_CORES_PER_ARRIVAL = 8


def _draw_block(rng, inv_rate, group, laws, steps) -> tuple[np.ndarray, np.ndarray]:
    """Inter-arrival gaps and demands (seconds) for ``steps`` arrivals of every chain.

    ``group`` is sorted, so each demand law fills one contiguous slab of rows.
    """
    gaps = rng.standard_exponential((inv_rate.size, steps)) * inv_rate[:, None]
    sizes = np.empty_like(gaps)
    bounds = np.searchsorted(group, np.arange(len(laws) + 1))
    for g, law in enumerate(laws):
        if bounds[g + 1] > bounds[g]:
            sizes[bounds[g]:bounds[g + 1]] = law.sample(rng, (bounds[g + 1] - bounds[g], steps))
    return gaps, sizes


def _block_steps(chains: int) -> int:
    return int(np.clip(_BLOCK_ELEMENTS // max(chains, 1), _MIN_STEPS, _MAX_STEPS))


def time_to_free(load: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Seconds u until the free core-time sum_i max(0, u - load_i) reaches ``need``.

    ``load`` (chains x cores) is sorted per row; the free core-time is piecewise linear
    with slope j + 1 after the j-th smallest backlog (0-based) has cleared.
    """
    total = np.cumsum(load, axis=1)
    slope = np.arange(1, load.shape[1] + 1)
    at_breaks = slope * load - total  # free core-time when each core clears
    j = (at_breaks <= need[:, None]).sum(axis=1) - 1
    rows = np.arange(load.shape[0])
    return (need + total[rows, j]) / (j + 1)


def check_walk(load: np.ndarray, need: np.ndarray, inv_rate: np.ndarray, group: np.ndarray,
                names: list[str], utilisation: np.ndarray) -> None:
    """Refuse chains that would meet over _MAX_ARRIVALS_PER_RUN local arrivals before they
    could finish, or over _MAX_ARRIVALS_IN_ALL together: the time to clear their start
    ``load`` (chains, cores; sorted) and ``need``, stretched by the local jobs that arrive
    meanwhile (1 / (1 - ``utilisation``), each chain's local load per core, < 1), over the
    mean gap ``inv_rate`` (seconds). ``group`` indexes ``names``, the hosts of the chains."""
    walked = (need > 0) & np.isfinite(inv_rate)
    if not walked.any():
        return
    arrivals = (time_to_free(load[walked], need[walked]) / inv_rate[walked]
                / (1.0 - utilisation[walked]))
    worst = int(np.argmax(arrivals))
    name = names[int(group[walked][worst])]
    utilisation = utilisation[walked][worst]
    _refuse_past_limits(
        arrivals, name, load.shape[1],
        lambda count: f"host {name!r}: a run would meet some {count:.3g} local arrivals "
        f"before its share could finish (over {_MAX_ARRIVALS_PER_RUN:.0e}; its local work "
        f"at launch up to {float(load[walked][worst].max()):.3g} s, utilisation "
        f"{float(utilisation):.3g}): too long to simulate; check its lam, mu and sigma",
        lambda total: f"the runs would take {total} (over {_MAX_ARRIVALS_IN_ALL:.0e}, minutes "
        f"to hours; host {name!r} the most, at utilisation {float(utilisation):.3g}): "
        "simulate fewer runs or a shorter task")


def check_warm_up(horizon: np.ndarray, inv_rate: np.ndarray, group: np.ndarray,
                  names: list[str], width: int = 1) -> None:
    """Refuse warm-ups (:func:`warm_up`) that would meet over _MAX_ARRIVALS_PER_RUN local
    arrivals in a run or over _MAX_ARRIVALS_IN_ALL together: ``horizon`` (seconds) over the
    mean gap ``inv_rate`` (seconds; inf: no local jobs). A queue whose demands spread far
    relaxes slowly (a demand CoV of 12,000 asked 1e8 arrivals of one run: 231 s). ``width``:
    the cores a queue sorts at each arrival."""
    with np.errstate(divide="ignore", invalid="ignore"):
        arrivals = np.where(np.isfinite(inv_rate), horizon / inv_rate, 0.0)
    if not arrivals.size:
        return
    worst = int(np.argmax(arrivals))
    name = names[int(group[worst])]
    _refuse_past_limits(
        arrivals, name, width,
        lambda count: f"host {name!r}: warming its shared queue up to steady state would "
        f"meet some {count:.3g} local arrivals a run (over {_MAX_ARRIVALS_PER_RUN:.0e}; "
        f"{float(horizon[worst]):.3g} s, long against how slowly its queue relaxes): too long "
        "to simulate; start idle, or take the partitioned cores mode (its steady state is "
        "drawn, not walked), or check its lam, mu and sigma",
        lambda total: f"warming the hosts up would take {total} (over "
        f"{_MAX_ARRIVALS_IN_ALL:.0e}, minutes to hours; host {name!r} the most): simulate "
        "fewer runs, or start idle")


def _refuse_past_limits(arrivals: np.ndarray, name: str, width: int, run_reason: Any,
                        all_reason: Any) -> None:
    """Raise with ``run_reason(most)`` (field hosts) if a run would meet over
    _MAX_ARRIVALS_PER_RUN local arrivals, with ``all_reason(total)`` (field runs) if all
    together would meet over _MAX_ARRIVALS_IN_ALL, each counted for the ``width`` cores it
    sorts past _CORES_PER_ARRIVAL: the walk steps arrival by arrival."""
    most = float(arrivals.max())
    if most > _MAX_ARRIVALS_PER_RUN:
        raise InvalidArgumentError(run_reason(most), field="hosts", value=name)
    total = float(arrivals.sum())
    weighted = total * max(1.0, width / _CORES_PER_ARRIVAL)
    if weighted > _MAX_ARRIVALS_IN_ALL:
        said = (f"as long as some {weighted:.3g} local arrivals in all ({total:.3g}, each "
                f"sorting {width} shared cores)" if weighted > total else
                f"some {total:.3g} local arrivals in all")
        raise InvalidArgumentError(all_reason(said), field="runs", value=total)


def walk(load, need, inv_rate, group, laws, rng) -> tuple[np.ndarray, np.ndarray]:
    """Run every chain until its remote sub-task finishes.

    load: (chains, cores) sorted backlog per core at launch (seconds); need: core-seconds of
    remote work; inv_rate: mean inter-arrival seconds (inf: no local jobs). Returns the
    completion (seconds from launch) and the count of arrivals that found a core free.
    """
    elapsed = np.zeros(need.size)
    count_all = np.zeros(need.size, dtype=np.int64)
    walked = (need > 0) & np.isfinite(inv_rate)  # chains that meet local arrivals at all
    quiet = (need > 0) & ~walked
    if quiet.any():
        elapsed[quiet] = time_to_free(load[quiet], need[quiet])
    ids = np.flatnonzero(walked)
    load, left, inv_rate, group = load[ids], need[ids].copy(), inv_rate[ids], group[ids]
    single = load.shape[1] == 1
    if single:
        load = load[:, 0].copy()
    now = np.zeros(ids.size)
    while ids.size:
        steps = _block_steps(ids.size)
        gaps, sizes = _draw_block(rng, inv_rate, group, laws, steps)
        alive = np.ones(ids.size, dtype=bool)
        count = np.zeros(ids.size, dtype=np.int64)
        for k in range(steps):
            gap = gaps[:, k]
            free = (gap - load) if single else (gap[:, None] - load)
            spare = np.maximum(free, 0.0)
            free_time = spare if single else spare.sum(axis=1)
            done = alive & (free_time >= left)
            if done.any():
                if single:
                    elapsed[ids[done]] = now[done] + load[done] + left[done]
                else:
                    elapsed[ids[done]] = now[done] + time_to_free(load[done], left[done])
                alive &= ~done
                if not alive.any():
                    break
            # The arrival takes a core from the remote task if one has no local backlog.
            count += alive & ((free if single else free[:, 0]) > 0)
            left -= free_time
            load = spare - free  # = max(load - gap, 0)
            if single:
                load += sizes[:, k]
            else:
                load[:, 0] += sizes[:, k]
                load.sort(axis=1)
            now += gap
        count_all[ids] += count
        ids, load, left, now = ids[alive], load[alive], left[alive], now[alive]
        inv_rate, group = inv_rate[alive], group[alive]
    return elapsed, count_all


def warm_up(horizon, width, inv_rate, group, laws, rng) -> np.ndarray:
    """Sorted per-core backlog after running each M/G/c queue from empty for ``horizon`` s."""
    result = np.zeros((inv_rate.size, width))
    ids = np.flatnonzero(np.isfinite(inv_rate))
    inv_rate, group, horizon = inv_rate[ids], group[ids], horizon[ids]
    load = np.zeros((ids.size, width))
    now = np.zeros(ids.size)
    while ids.size:
        steps = _block_steps(ids.size)
        gaps, sizes = _draw_block(rng, inv_rate, group, laws, steps)
        alive = np.ones(ids.size, dtype=bool)
        for k in range(steps):
            gap = gaps[:, k]
            over = alive & (now + gap >= horizon)
            if over.any():
                rest = (horizon[over] - now[over])[:, None]
                result[ids[over]] = np.maximum(load[over] - rest, 0.0)
                alive &= ~over
                if not alive.any():
                    break
            load = np.maximum(load - gap[:, None], 0.0)
            load[:, 0] += sizes[:, k]
            load.sort(axis=1)
            now += gap
        ids, load, now = ids[alive], load[alive], now[alive]
        inv_rate, group, horizon = inv_rate[alive], group[alive], horizon[alive]
    return result
