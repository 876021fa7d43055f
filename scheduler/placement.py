"""How many processes run each host's share, and which cores' load they see.

A host's share is split evenly over its ``processes`` (each one on one core at a time). The
load a process meets depends on where it runs:

- unpinned (the default): Linux moves a runnable process between cores, so it is taken to
  meet the host's average core: local arrivals at lam / cores and utilisation rho. This is the
  model's own per-core view and needs nothing but the host's estimates.
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

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host

ProcessCounts = int | Sequence[int] | Mapping[str, int] | None
"""One count for every host, one per host in order, or counts by host name (others: all
cores); None: every host runs one process per core."""

# below this a pinned core is taken as idle rather than dividing by a vanishing mean load
_IDLE_UTILISATION = 1e-9


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
