"""A host's history for ``ghs history``: measurements, capacity series, latest running jobs.

The window counts back from the host's own latest record, so it works on replay clocks too.
The capacity series is cumulative available CPU seconds (summed over cores) at the end of each
interval, from the first interval in the window; older than the full-resolution retention, it
continues from the hourly sums. Tau changes are the points where the measured speed moved by
more than ``TAU_CHANGE`` relative (the agent re-measures it now and then).
"""

from __future__ import annotations

from typing import Any

from ghs.errors import GhsError
from ghs.manager.store import ManagerStore
from ghs.manager.streams import StreamTables

DEFAULT_SINCE_SECONDS = 86400.0
TAU_CHANGE = 0.01


class NoSuchHostError(GhsError):
    """A history was asked for a host the manager has never heard of."""

    code = "unknown_host"


def host_history(store: ManagerStore, streams: StreamTables, host_id: str,
                 since_seconds: float | None = None) -> dict[str, Any]:
    """The JSON body of ``ghs history --json`` for ``host_id`` (see the README)."""
    facts = store.host(host_id)
    if facts is None:
        raise NoSuchHostError(f"unknown host {host_id!r}", field="host", value=host_id)
    window = DEFAULT_SINCE_SECONDS if since_seconds is None else float(since_seconds)
    latest = _latest(store, streams, host_id)
    since = None if latest is None else latest - window
    rows = store.measurements(host_id, since_end=since)
    measurements = [{k: v for k, v in row.items() if k not in ("host_id",)} for row in rows]
    capacity: list[list[float]] = []
    cumulative = 0.0
    hourly_until = None
    full = streams.capacity(host_id, since)
    first_start = (full[0]["end_epoch_seconds"] - full[0]["interval_seconds"]) if full else None
    if first_start is not None and since is not None:
        # older than the full-resolution rows: the hourly sums
        for hour in streams.capacity_hourly(host_id):
            start = hour["hour_start_epoch_seconds"]
            if start < since or start + 3600.0 > first_start:
                continue
            if not capacity or capacity[-1][0] < start:
                capacity.append([start, round(cumulative, 3)])
            cumulative += hour["available_cpu_seconds"]
            capacity.append([start + 3600.0, round(cumulative, 3)])
            hourly_until = start + 3600.0
    for interval in full:
        start = interval["end_epoch_seconds"] - interval["interval_seconds"]
        if not capacity or capacity[-1][0] < start - 1e-3:
            # the series starts, or resumes after a gap, at the interval's start
            capacity.append([start, round(cumulative, 3)])
        cumulative += interval["available_cpu_seconds"]
        capacity.append([interval["end_epoch_seconds"], round(cumulative, 3)])
    running = streams.latest_running(host_id)
    return {
        "host": host_id,
        "replay_zero_epoch": facts.replay_zero_epoch_seconds,
        "simulated": facts.simulated,
        "cores": facts.cores,
        "latest_epoch_seconds": latest,
        "since_epoch_seconds": since,
        "hourly_until_epoch_seconds": hourly_until,
        "capacity": capacity,
        "capacity_per_core": [[i["end_epoch_seconds"], i["per_core_available_cpu_seconds"]]
                              for i in full] if facts.cores > 1 else None,
        "measurements": measurements,
        "running": None if running is None else {
            "epoch_seconds": running["epoch_seconds"],
            "age_seconds": None if latest is None else max(0.0,
                                                           latest - running["epoch_seconds"]),
            "run_queue_length": running["run_queue_length"],
            "jobs_omitted": running["jobs_omitted"],
            "jobs": running["jobs"]},
        "tau_changes": tau_changes(rows),
        "templates": [{k: t[k] for k in ("scope", "user", "command", "count")}
                      for t in streams.templates(host_id)],
    }


def _latest(store: ManagerStore, streams: StreamTables, host_id: str) -> float | None:
    ends = [store.db.execute("SELECT MAX(end_epoch_seconds) FROM measurements WHERE "
                             "host_id = ?", [host_id]).fetchone()[0],
            streams.latest_epoch_seconds(host_id)]
    found = [end for end in ends if end is not None]
    return max(found) if found else None


def tau_changes(rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Where a host's measured tau moved by more than TAU_CHANGE (relative)."""
    changes, previous = [], None
    for row in rows:
        tau = row.get("tau")
        if tau is None:
            continue
        if previous is not None and abs(tau - previous) > TAU_CHANGE * previous:
            changes.append({"epoch_seconds": row["end_epoch_seconds"], "from": previous,
                            "to": tau})
        previous = tau
    return changes
