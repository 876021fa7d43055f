"""How many processes run each host's share, and which cores' load they see.

A host's share is split evenly over its ``processes`` (each one on one core at a time). The
load a process meets depends on where it runs:

- unpinned (the default): Linux moves a runnable process between cores, and its balancer pulls
  it to a core that falls idle, so the processes run on whichever cores the local jobs leave
  free (:func:`migrating`: from how often each core was free, the processes together get
  E[min(processes, free cores)] cores). With one process per core that is the host's average
  core: local arrivals at lam / cores and utilisation rho, the model's own per-core view, which
  needs nothing but the host's estimates and is also the answer when no per-core load is known.
- pinned: the processes sit on the host's ``processes`` least-loaded cores for the whole run,
  so they meet those cores' own load. Given each core's share of the local utilisation (from
  the capacity series), a pinned host is the same host with lam and rho scaled by the mean
  load of the chosen cores over the mean of all (local jobs are assumed to have the same
  demand law on every core, so a core's arrival rate follows its utilisation). Exact for one
  process; for several, the chosen cores are represented by their average.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host

ProcessCounts = int | Sequence[int] | Mapping[str, int] | None
"""One count for every host, one per host in order, or counts by host name (others: all
cores); None: every host runs one process per core."""

# below this a pinned core is taken as idle rather than dividing by a vanishing mean load
_IDLE_UTILISATION = 1e-9
# cores whose utilisation is within this of their mean count as evenly loaded (migrating)
EVEN_LOAD_TOLERANCE = 0.1


def _count(value: object, host: Host, field: str) -> int:
    # the message names the command-line flag too: the same words reach the CLI from a manager
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(f"processes per host ({field}, --processes-per-host) must "
                                   f"be a whole number >= 1, got {value!r}", field=field,
                                   value=value)
    if value > host.cores:
        raise InvalidArgumentError(
            f"processes per host ({field}, --processes-per-host) {value} is more than host "
            f"{host.name!r}'s {host.cores} cores", field=field, value=value)
    return int(value)


def with_processes(hosts: Sequence[Host], processes: ProcessCounts,
                   field: str = "processes_per_host") -> tuple[Host, ...]:
    """``hosts`` with their share run by ``processes`` processes each (see ProcessCounts).

    InvalidArgumentError names ``field`` (the caller's name for the option) when a count is
    not a whole number from 1 to the host's cores.
    """
    hosts = tuple(hosts)
    if processes is None:
        return hosts
    if isinstance(processes, Mapping):
        unknown = set(processes) - {h.name for h in hosts}
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidArgumentError(f"{field} names unknown host {name!r}", field=field,
                                       value=name)
        counts = [processes.get(h.name, h.cores) for h in hosts]
    elif isinstance(processes, (int, np.integer)) and not isinstance(processes, bool):
        counts = [processes] * len(hosts)
    else:
        try:
            counts = list(processes)  # type: ignore[arg-type]
        except TypeError:
            raise InvalidArgumentError(f"processes per host ({field}, --processes-per-host) "
                                       f"must be a whole number, one per host or a map by "
                                       f"host name, got {processes!r}", field=field,
                                       value=processes) from None
        if len(counts) != len(hosts):
            raise InvalidArgumentError(f"{field}: expected {len(hosts)} counts (one per "
                                       f"host), got {len(counts)}", field=field,
                                       value=len(counts))
    return tuple(replace(h, processes=_count(n, h, field)) for h, n in zip(hosts, counts))


def pinned(host: Host, core_utilisation: Sequence[float]) -> Host:
    """``host`` as its ``host.processes`` processes see it pinned to its least-loaded cores.

    ``core_utilisation``: each core's local busy fraction (any scale: only the ratios
    matter), one per core. The host's lam and rho are scaled by the chosen cores' mean over
    the mean of all cores.
    """
    try:
        loads = np.asarray(core_utilisation, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"core_utilisation must be numbers, got "
                                   f"{core_utilisation!r}", field="core_utilisation",
                                   value=core_utilisation) from None
    if loads.size != host.cores:
        raise InvalidArgumentError(f"host {host.name!r}: expected {host.cores} core "
                                   f"utilisations, got {loads.size}", field="core_utilisation",
                                   value=loads.size)
    if not np.isfinite(loads).all() or (loads < 0).any():
        raise InvalidArgumentError("core_utilisation must be finite and >= 0",
                                   field="core_utilisation", value=loads.tolist())
    average = float(loads.mean())
    if average <= _IDLE_UTILISATION:
        return host
    ratio = float(np.sort(loads)[:host.processes].mean()) / average
    # the chosen cores are the least loaded, so ratio <= 1 and rho stays below 1
    return replace(host, lam=host.lam * ratio, rho=host.rho * ratio)


def migrating(host: Host, free_fractions: Any, weights: Any = None) -> Host:
    """``host`` as its ``host.processes`` unpinned processes see it when the kernel runs them
    on whichever cores local jobs leave free.

    ``free_fractions``: (intervals, cores) fraction of each interval that each core was free of
    local jobs (a capacity series; one row: stationary probabilities); ``weights``: each
    interval's length in seconds (default equal). Within an interval the cores are taken to be
    free independently, so the number F of free cores is Poisson-binomial and the processes
    together get E[min(processes, F)] cores: each meets a busy fraction
    1 - E[min(processes, F)] / processes. The host's lam and rho are scaled by that over the
    mean core's busy fraction (the demand law kept), as :func:`pinned` scales them. One
    process per core: unchanged (the average core). Fewer processes than cores share the
    free cores: the host is marked ``pooled`` (one server of their dedicated time, not N
    finishing with the slowest). Where the cores are evenly loaded (each within
    ``EVEN_LOAD_TOLERANCE`` of their mean utilisation) the host keeps its cores' own
    utilisation as ``core_rho``, for jobs held at launch (:mod:`scheduler.held_phase`).
    """
    free = _fractions(free_fractions, host)
    span = np.ones(free.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    if span.shape != (free.shape[0],) or not np.isfinite(span).all() or (span < 0).any() \
            or span.sum() <= 0:
        raise InvalidArgumentError(f"weights must be {free.shape[0]} lengths >= 0 with a "
                                   "positive sum", field="weights", value=None)
    average = 1.0 - float(span @ free.mean(axis=1)) / float(span.sum())
    processes = int(host.processes or host.cores)
    if average <= _IDLE_UTILISATION or processes >= host.cores:
        return host
    each = 1.0 - float(span @ _expected_running(free, processes)) / float(span.sum())
    ratio = max(each, 0.0) / average
    # Evenly loaded cores keep their own load for jobs held at launch (scheduler.held_phase).
    # On uneven ones the held phase turns on which core a job holds, which a snapshot does
    # not say: a job on the idle one of (0.6, 0) left the process on the loaded core, 13%
    # longer on the mean than the rule's average core gave; the geometric mix errs long.
    busy = 1.0 - span @ free / float(span.sum())
    even = bool(np.abs(busy - busy.mean()).max() <= EVEN_LOAD_TOLERANCE)
    return replace(host, lam=host.lam * ratio, rho=host.rho * ratio,
                   core_rho=host.core_rho if host.core_rho is not None or not even
                   else host.rho, pooled=True)


def _fractions(free_fractions: Any, host: Host) -> np.ndarray:
    try:
        free = np.asarray(free_fractions, dtype=float)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"free_fractions must be numbers, got {free_fractions!r}",
                                   field="free_fractions", value=None) from None
    if free.ndim == 1:
        free = free[None, :]
    if free.ndim != 2 or free.shape[0] == 0 or free.shape[1] != host.cores:
        raise InvalidArgumentError(f"host {host.name!r}: free_fractions must be (intervals, "
                                   f"{host.cores}), got shape {free.shape}",
                                   field="free_fractions", value=None)
    if not (np.isfinite(free).all() and ((free >= 0) & (free <= 1)).all()):
        raise InvalidArgumentError("free_fractions must be in [0, 1]", field="free_fractions",
                                   value=None)
    return free


def _expected_running(free: np.ndarray, processes: int) -> np.ndarray:
    """E[min(processes, F)] / processes per interval, F the number of free cores
    (Poisson-binomial over the cores' free fractions)."""
    count = np.zeros((free.shape[0], free.shape[1] + 1))
    count[:, 0] = 1.0
    for j in range(free.shape[1]):  # one pass per core; the intervals are the array axis
        count[:, 1:] = count[:, 1:] * (1.0 - free[:, j:j + 1]) + count[:, :-1] * free[:, j:j + 1]
        count[:, 0] *= 1.0 - free[:, j]
    running = np.minimum(np.arange(free.shape[1] + 1), processes)
    return count @ running / processes
