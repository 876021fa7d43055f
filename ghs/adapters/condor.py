"""HTCondor machine attributes from ghs's view of a host, for a startd cron hook.

``ghs condor-attrs`` prints them one ``Name = value`` per line in ClassAd syntax, so a
startd's ``START`` and a job's ``RANK``/``REQUIREMENTS`` can use ghs's forecasts. Times are
seconds; ``GhsP90SecondsPerHourOfWork`` is the p90 wall time of a task of ``work_seconds``
reference-CPU-seconds on this host alone, per hour of that work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ghs.adapters.errors import AdapterError
from ghs.config import Config
from ghs.hostfile import load_hosts
from scheduler import Host, predict

HOUR_SECONDS = 3600.0


def host_attributes(host: Host | None, *, name: str, rho: float | None, tau: float | None,
                    stale: bool, provisional: bool, updated_epoch: float | None,
                    work_seconds: float, dist: str, reason: str | None = None
                    ) -> dict[str, Any]:
    """The attributes of one host; ``host`` is None when ghs cannot schedule on it now
    (``reason`` says why) and its forecasts are then ``undefined``."""
    if not (isinstance(work_seconds, (int, float)) and math.isfinite(work_seconds)
            and work_seconds > 0):
        raise AdapterError(f"work_seconds must be > 0, got {work_seconds!r}",
                           field="work_seconds", value=work_seconds)
    mean = p90 = None
    if host is not None:
        prediction = predict([host], work_seconds, dist)
        scale = HOUR_SECONDS / work_seconds
        mean, p90 = prediction.mean * scale, prediction.quantiles["p90"] * scale
    attributes: dict[str, Any] = {
        "GhsHost": name,
        "GhsUsable": host is not None,
        "GhsAvailableFraction": None if rho is None else max(0.0, 1.0 - rho),
        "GhsRho": rho,
        "GhsTau": tau,
        "GhsStale": stale,
        "GhsProvisional": provisional,
        "GhsMeanSecondsPerHourOfWork": mean,
        "GhsP90SecondsPerHourOfWork": p90,
        "GhsUpdatedEpoch": None if updated_epoch is None else int(updated_epoch),
    }
    if reason:
        attributes["GhsReason"] = reason
    return attributes


def status_attributes(row: Mapping[str, Any], *, work_seconds: float, dist: str
                      ) -> dict[str, Any]:
    """Attributes from one host of a manager's status reply (``Status.hosts`` entry)."""
    parameters = row.get("parameters")
    host = None if not parameters else Host(row["name"], **parameters)
    return host_attributes(host, name=row["name"], rho=row.get("rho"), tau=row.get("tau"),
                           stale=bool(row.get("stale")),
                           provisional=bool(row.get("provisional")),
                           updated_epoch=row.get("last_seen"), work_seconds=work_seconds,
                           dist=dist, reason=row.get("reason"))


def attributes_for(config: Config, name: str, *, endpoint: str | None = None,
                   hosts_file: str | None = None, work_seconds: float, dist: str
                   ) -> dict[str, Any]:
    """Host ``name``'s attributes from a host file, else from the manager (flag, GHS_MANAGER
    or config). A host file has no staleness or history: it counts as fresh and final, and
    its modification time is the update time."""
    if hosts_file is not None:
        host_list = load_hosts(hosts_file)
        updated = Path(hosts_file).stat().st_mtime
        reasons = {e.name: e.reason for e in host_list.excluded}
        if name in reasons:
            return host_attributes(None, name=name, rho=None, tau=None, stale=False,
                                   provisional=False, updated_epoch=updated,
                                   work_seconds=work_seconds, dist=dist, reason=reasons[name])
        host = host_list.select([name]).hosts[0]
        return host_attributes(host, name=name, rho=host.rho, tau=host.tau, stale=False,
                               provisional=False, updated_epoch=updated,
                               work_seconds=work_seconds, dist=dist)
    from ghs.remote import open_client

    with open_client(config, endpoint) as client:
        rows = client.status().hosts
    for row in rows:
        if name in (row.get("name"), row.get("hostname")):
            return status_attributes(row, work_seconds=work_seconds, dist=dist)
    known = ", ".join(sorted(str(row.get("name")) for row in rows)[:8]) or "none"
    raise AdapterError(f"unknown host {name!r} at the manager (known: {known})", field="host",
                       value=name)


def format_classad(attributes: Mapping[str, Any]) -> str:
    """``Name = value`` lines (booleans true/false, None and non-finite numbers undefined,
    strings quoted, on one line)."""
    return "".join(f"{name} = {_literal(value)}\n" for name, value in attributes.items())


def _literal(value: Any) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "undefined"
    # the startd reads cron output in the old ClassAd syntax: only a quote is escaped there
    text = " ".join(str(value).replace('"', '\\"').splitlines()).rstrip("\\")
    return f'"{text}"'
