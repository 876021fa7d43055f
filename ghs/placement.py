"""Each core's local load from a host's capacity series, and hosts as a request places its
processes on them (``--processes-per-host``, pinned or not; see scheduler.placement)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler import Host, pinned, with_processes

# The per-core split is read over the same span as the paper's 24-hour estimates.
CORE_WINDOW_SECONDS = 24 * 3600.0


def core_utilisation(streams: Any, host_id: str,
                     window_seconds: float = CORE_WINDOW_SECONDS) -> list[float] | None:
    """Each core's busy fraction (CPU a lowest-priority task could not get) over the host's
    last ``window_seconds`` of capacity records (``streams``: the manager's record streams,
    None when there are none); None for a one-core host or no records."""
    if streams is None:
        return None
    latest = streams.latest_epoch_seconds(host_id)
    if latest is None:
        return None
    rows = streams.capacity(host_id, since_epoch_seconds=latest - window_seconds)
    split = [row for row in rows if len(row["per_core_available_cpu_seconds"]) > 1]
    if not split:
        return None
    cores = len(split[-1]["per_core_available_cpu_seconds"])
    split = [row for row in split if len(row["per_core_available_cpu_seconds"]) == cores]
    covered = sum(row["interval_seconds"] for row in split)
    if covered <= 0:
        return None
    available = [sum(row["per_core_available_cpu_seconds"][j] for row in split)
                 for j in range(cores)]
    return [min(1.0, max(0.0, 1.0 - free / covered)) for free in available]


def placed(hosts: Sequence[Host], streams: Any, processes_per_host: int | None,
           is_pinned: bool | None) -> tuple[list[Host], dict[str, str]]:
    """``hosts`` with their share run by ``processes_per_host`` processes (None: one per
    core), each seeing the host's average core or, pinned, its least-loaded cores (from
    ``streams``, the manager's record streams; None: no per-core records); and per host what
    was assumed (for the answer's assumptions)."""
    if processes_per_host is None and not is_pinned:
        return list(hosts), {}
    chosen = list(with_processes(hosts, processes_per_host))
    assumed: dict[str, str] = {}
    for index, host in enumerate(chosen):
        if host.cores == 1:
            continue
        if not is_pinned:
            assumed[host.name] = (f"{_processes(host)} per host, unpinned: each sees its "
                                  "host's average core load")
            continue
        loads = core_utilisation(streams, host.name)
        if loads is None or len(loads) != host.cores:
            assumed[host.name] = (f"{_processes(host)} per host, pinned, but no per-core "
                                  "load known: each sees its host's average core load")
            continue
        chosen[index] = pinned(host, loads)
        shown = ", ".join(f"{load:.2f}" for load in sorted(loads)[:host.processes])
        assumed[host.name] = (f"{_processes(host)} pinned to the least-loaded of "
                              f"{host.cores} cores (busy {shown})")
    return chosen, assumed


def _processes(host: Host) -> str:
    return f"{host.processes} process" + ("es" if host.processes != 1 else "")
