"""Discrete-event Monte Carlo of one host whose cores receive local jobs at different rates.

The oracle for ``--processes-per-host`` and pinned processes (scheduler.placement): each core
is its own preemptive-priority server with its own Poisson stream of local jobs, and the
host's share runs as processes each held on one given core for the whole run (a pinned
process; an unpinned one that never migrates is a random choice of core). It walks the same
arrival-by-arrival chains as :func:`scheduler.simulation.simulate` and never uses the model's
formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler.chain_walk import walk
from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.workload import Demand, demand_for_host, stationary_backlog


def simulate_cores(host: Host, share: float, *, core_rates_per_second: Sequence[float],
                   process_cores: Sequence[int], runs: int, rng: np.random.Generator,
                   service: str | Demand = "exponential", warm: bool = False) -> np.ndarray:
    """Completion times (seconds, shape (runs,)) of ``share`` reference-CPU-seconds on
    ``host`` run by one process on each core of ``process_cores`` (distinct core indices),
    ``share / (tau * processes)`` CPU seconds each, while core j receives local jobs at
    ``core_rates_per_second[j]``. ``service``: a demand kind (the host's mu and sigma) or a
    Demand. ``warm``: each core starts in its stationary state instead of idle."""
    rates = _checked(host, core_rates_per_second, share, runs)
    cores = [int(c) for c in process_cores]
    if not cores or len(set(cores)) != len(cores) or not all(
            0 <= c < host.cores for c in cores):
        raise InvalidArgumentError(f"process_cores must be distinct cores in [0, "
                                   f"{host.cores})", field="process_cores", value=cores)
    law = demand_for_host(host, service) if isinstance(service, str) else service
    chosen = rates[cores]
    if (chosen * law.mean_seconds >= 1).any():
        raise InvalidArgumentError("a process's core is saturated (rate * mean demand >= 1)",
                                   field="core_rates_per_second", value=chosen.tolist())
    # chains run-major per process: (process, run) flattened
    rate = np.repeat(chosen, runs)
    start = np.concatenate([stationary_backlog(r, law, rng, runs) if warm and r > 0
                            else np.zeros(runs) for r in chosen])
    need = np.full(rate.size, share / (host.tau * len(cores)))
    with np.errstate(divide="ignore"):
        inv_rate = np.where(rate > 0, 1.0 / rate, math.inf)
    elapsed, _ = walk(start[:, None], need, inv_rate, np.zeros(rate.size, dtype=int), [law],
                       rng)
    return elapsed.reshape(len(cores), runs).max(axis=0)


def simulate_migrating(host: Host, share: float, *, core_rates_per_second: Sequence[float],
                       runs: int, rng: np.random.Generator,
                       service: str | Demand = "exponential", warm: bool = False,
                       start_seconds: Sequence[float] | None = None) -> np.ndarray:
    """Completion times (seconds, shape (runs,)) of ``share`` reference-CPU-seconds on
    ``host`` run by ``host.processes`` unpinned processes that the kernel moves at once to
    whichever cores local jobs leave free, while core j receives its own local jobs (FCFS,
    preemptive priority) at ``core_rates_per_second[j]``: the task progresses at
    min(processes, free cores) cores and needs ``share / tau`` CPU seconds in all.

    ``start_seconds``: the local work each core holds at launch (seconds, one per core: the
    jobs running then, ahead of every later arrival), instead of idle or ``warm`` cores.

    Each core's busy periods are walked job by job from its own arrivals (departure times by
    the running-maximum form of Lindley's recursion) and the cores' free spans are swept
    together; migration is instant and free (the kernel's balancing delay is ignored).
    """
    rates = _checked(host, core_rates_per_second, share, runs)
    held = _held(start_seconds, host, warm)
    law = demand_for_host(host, service) if isinstance(service, str) else service
    if (rates * law.mean_seconds >= 1).any():
        raise InvalidArgumentError("a core is saturated (rate * mean demand >= 1)",
                                   field="core_rates_per_second", value=rates.tolist())
    need = share / host.tau
    processes = int(host.processes or host.cores)
    # long enough for most runs; a run that has not finished is walked again twice as long
    horizon = 2.0 * need / (processes * max(1.0 - float(rates.max()) * law.mean_seconds,
                                                 0.05)) + 20.0 * law.mean_seconds
    out = np.empty(int(runs))
    for run in range(int(runs)):
        span = horizon
        while True:
            done = _migrating_run(rates, law, need, processes, span + float(held.max()), warm,
                                  rng, held)
            if done is not None:
                out[run] = done
                break
            span *= 2.0
    return out


def _migrating_run(rates: np.ndarray, law: Demand, need: float, processes: int,
                   horizon: float, warm: bool, rng: np.random.Generator,
                   held: np.ndarray) -> float | None:
    """One run's completion time, or None if the task has not finished by ``horizon``;
    ``held``: each core's work at launch (seconds)."""
    times, steps = [np.zeros(1)], [np.array([float(rates.size)])]  # every core free at 0
    for core, rate in enumerate(rates):
        start = float(stationary_backlog(rate, law, rng, 1)[0]) if warm and rate > 0 \
            else float(held[core])
        count = int(rng.poisson(rate * horizon)) if rate > 0 else 0
        arrivals = np.sort(rng.uniform(0.0, horizon, count))
        demands = law.sample(rng, count)
        total = np.cumsum(demands)
        # departure of job n: S_n + max(start, max over k <= n of (a_k - S_{k-1}))
        departures = total + np.maximum(start, np.maximum.accumulate(arrivals - total
                                                                     + demands))
        previous = np.concatenate([[start], departures[:-1]])
        idle = arrivals > previous  # the core was free from previous[n] until arrivals[n]
        begins, ends = arrivals[idle], previous[idle]
        if start > 0:
            begins = np.concatenate([[0.0], begins])
        elif ends.size:
            ends = ends[1:]  # the first job found the core free since time 0
        last = departures[-1:] if count else np.array([start] if start > 0 else [])
        ends = np.concatenate([ends, last])
        times += [begins, ends]
        steps += [np.full(begins.size, -1.0), np.full(ends.size, 1.0)]
    t = np.concatenate(times)
    order = np.argsort(t, kind="stable")
    t, free = t[order], np.cumsum(np.concatenate(steps)[order])
    running = np.minimum(free, processes)
    progress = np.cumsum(running * np.diff(np.append(t, horizon)))
    k = int(np.searchsorted(progress, need))
    if k >= progress.size:
        return None
    before = progress[k - 1] if k else 0.0
    return float(t[k] + (need - before) / running[k])


def _held(start_seconds: Sequence[float] | None, host: Host, warm: bool) -> np.ndarray:
    """Each core's work at launch (seconds; zeros when not given), after checking it."""
    if start_seconds is None:
        return np.zeros(host.cores)
    try:
        held = np.asarray(start_seconds, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        held = np.array([np.nan])
    if held.size != host.cores or not np.isfinite(held).all() or (held < 0).any():
        raise InvalidArgumentError(f"start_seconds needs {host.cores} finite seconds >= 0, "
                                   "one per core", field="start_seconds", value=start_seconds)
    if warm:
        raise InvalidArgumentError("start_seconds and warm are two starts: give one",
                                   field="start_seconds", value=start_seconds)
    return held


def _checked(host: Host, core_rates_per_second: Sequence[float], share: float,
             runs: object) -> np.ndarray:
    """The per-core arrival rates (1/s) as an array, after checking them, ``share`` and
    ``runs``."""
    rates = np.asarray(core_rates_per_second, dtype=float).reshape(-1)
    if rates.size != host.cores or not np.isfinite(rates).all() or (rates < 0).any():
        raise InvalidArgumentError(f"core_rates_per_second needs {host.cores} finite rates "
                                   ">= 0", field="core_rates_per_second", value=rates.tolist())
    if not (math.isfinite(share) and share > 0):
        raise InvalidArgumentError(f"share must be > 0, got {share!r}", field="share",
                                   value=share)
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise InvalidArgumentError(f"runs must be a whole number >= 1, got {runs!r}",
                                   field="runs", value=runs)
    return rates
