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

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.simulation import _walk
from scheduler.workload import Demand, demand_for_host, stationary_backlog


def simulate_cores(host: Host, share: float, *, core_rates_per_second: Sequence[float],
                   process_cores: Sequence[int], runs: int, rng: np.random.Generator,
                   service: str | Demand = "exponential", warm: bool = False) -> np.ndarray:
    """Completion times (seconds, shape (runs,)) of ``share`` reference-CPU-seconds on
    ``host`` run by one process on each core of ``process_cores`` (distinct core indices),
    ``share / (tau * processes)`` CPU seconds each, while core j receives local jobs at
    ``core_rates_per_second[j]``. ``service``: a demand kind (the host's mu and sigma) or a
    Demand. ``warm``: each core starts in its stationary state instead of idle."""
    rates = np.asarray(core_rates_per_second, dtype=float).reshape(-1)
    if rates.size != host.cores or not np.isfinite(rates).all() or (rates < 0).any():
        raise InvalidArgumentError(f"core_rates_per_second needs {host.cores} finite rates "
                                   ">= 0", field="core_rates_per_second", value=rates.tolist())
    cores = [int(c) for c in process_cores]
    if not cores or len(set(cores)) != len(cores) or not all(
            0 <= c < host.cores for c in cores):
        raise InvalidArgumentError(f"process_cores must be distinct cores in [0, "
                                   f"{host.cores})", field="process_cores", value=cores)
    if not (math.isfinite(share) and share > 0):
        raise InvalidArgumentError(f"share must be > 0, got {share!r}", field="share",
                                   value=share)
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise InvalidArgumentError(f"runs must be a whole number >= 1, got {runs!r}",
                                   field="runs", value=runs)
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
    elapsed, _ = _walk(start[:, None], need, inv_rate, np.zeros(rate.size, dtype=int), [law],
                       rng)
    return elapsed.reshape(len(cores), runs).max(axis=0)
