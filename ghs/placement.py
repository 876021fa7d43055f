"""Each core's local load from a host's capacity series, and hosts as a request places its
processes on them (``--processes-per-host``, pinned or not; see scheduler.placement)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from scheduler import Host, migrating, pinned, with_processes

# The per-core split is read over the same span as the paper's 24-hour estimates.
CORE_WINDOW_SECONDS = 24 * 3600.0


def core_free_fractions(streams: Any, host_id: str,
                        window_seconds: float = CORE_WINDOW_SECONDS
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """Each capacity interval's free fraction per core (CPU a lowest-priority task could have
    had there, over the interval's length), shape (intervals, cores), and the intervals'
    lengths in seconds, over the host's last ``window_seconds`` of records (``streams``: the
    manager's record streams, None when there are none); None for a one-core host or no
    records."""
    if streams is None:
        return None
    latest = streams.latest_epoch_seconds(host_id)
    if latest is None:
        return None
    rows = streams.capacity(host_id, since_epoch_seconds=latest - window_seconds)
    split = [row for row in rows if len(row["per_core_available_cpu_seconds"]) > 1
             and row["interval_seconds"] > 0]
    if not split:
        return None
    cores = len(split[-1]["per_core_available_cpu_seconds"])
    split = [row for row in split if len(row["per_core_available_cpu_seconds"]) == cores]
    lengths = np.array([row["interval_seconds"] for row in split], dtype=float)
    free = np.array([row["per_core_available_cpu_seconds"] for row in split], dtype=float)
    return np.clip(free / lengths[:, None], 0.0, 1.0), lengths


def core_utilisation(streams: Any, host_id: str,
                     window_seconds: float = CORE_WINDOW_SECONDS) -> list[float] | None:
    """Each core's busy fraction (CPU a lowest-priority task could not get) over the host's
    last ``window_seconds`` of capacity records (see :func:`core_free_fractions`)."""
    found = core_free_fractions(streams, host_id, window_seconds)
    if found is None:
        return None
    free, lengths = found
    return (1.0 - lengths @ free / lengths.sum()).tolist()


def placed(hosts: Sequence[Host], streams: Any, processes_per_host: int | None,
           is_pinned: bool | None) -> tuple[list[Host], dict[str, str]]:
    """``hosts`` with their share run by ``processes_per_host`` processes (None: one per
    core): unpinned, on whichever cores local jobs leave free (the average core when that is
    every core, or no per-core records are known); pinned, on the least-loaded cores (from
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
            found = core_free_fractions(streams, host.name) if host.processes < host.cores \
                else None
            if found is None or found[0].shape[1] != host.cores:
                assumed[host.name] = (f"{_processes(host)} per host, unpinned: each sees its "
                                      "host's average core load")
                continue
            chosen[index] = migrating(host, *found)
            assumed[host.name] = (
                f"{_processes(host)} per host, unpinned: run on whichever of its {host.cores} "
                f"cores local jobs leave free (busy {1 - chosen[index].rho / host.rho:.0%} "
                "less than its average core; cores taken as free independently within each "
                "capacity interval)" + (
                    "; the processes share the free cores, taken as one server"
                    if host.processes > 1 else "") + (
                    "; with jobs running at launch, on the least-held cores, meeting the load of "
                    "the cores not held while the others work off their jobs (cores evenly "
                    "loaded)" if chosen[index].core_rho is not None else "")
                if host.rho > 0 else
                f"{_processes(host)} per host, unpinned, on an idle host")
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


def load_scales(before: Sequence[Host], after: Sequence[Host]) -> list[float]:
    """How much placing each host's processes scaled its local load (lam after over lam
    before; 1 for a host with no local arrivals). A view that estimates the load afresh (the
    calibrated predictor's window forecast) applies the same scaling to its own figures."""
    return [a.lam / b.lam if b.lam > 0 else 1.0 for b, a in zip(before, after, strict=True)]


def scaled(hosts: Sequence[Host], scales: Sequence[float] | None) -> list[Host]:
    """``hosts`` with lam and rho times ``scales`` (None: unchanged). A host that keeps its
    cores' own load (``Host.core_rho``, unpinned processes on evenly loaded cores) keeps its
    unscaled rho there: a view's forecast is its cores' load."""
    if scales is None:
        return list(hosts)
    return [h if s == 1.0 else replace(h, lam=h.lam * s, rho=h.rho * s,
                                       core_rho=None if h.core_rho is None else h.rho)
            for h, s in zip(hosts, scales, strict=True)]
