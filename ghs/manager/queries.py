"""Answers to status, predict and schedule queries, from the current host estimates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ghs.config import SchedulerConfig
from ghs.errors import GhsError
from ghs.manager.estimates import EstimateCache, HostState
from ghs.manager.state import host_backlog
from ghs.placement import placed
from scheduler import Backlog, Host, predict, schedule
from scheduler.selection import Exclusion


class UnknownHostError(GhsError):
    """A query named a host the manager has never heard of, or one it cannot use."""

    code = "unknown_host"


def host_parameters(hosts: Sequence[Host], backlogs: Sequence[Backlog] | None = None,
                    described: Mapping[str, dict[str, Any]] | None = None
                    ) -> list[dict[str, Any]]:
    """Hosts as plain maps, with the state each started from, so a client can rebuild the
    same Prediction locally and a person can see why."""
    rows = []
    for index, h in enumerate(hosts):
        row = {"name": h.name, "lam": h.lam, "mu": h.mu, "sigma": h.sigma, "rho": h.rho,
               "tau": h.tau, "cores": h.cores}
        if backlogs is not None:
            row["backlog"] = backlogs[index].to_dict()
            row["start"] = (described or {}).get(h.name)
        rows.append(row)
    return rows


class QueryService:
    """Status, predict and schedule from ``cache``; ``clock`` is real epoch seconds."""

    def __init__(self, cache: EstimateCache, settings: SchedulerConfig, *,
                 stale_after_seconds: float, clock: Callable[[], float],
                 snapshot_fresh_seconds: float = 180.0) -> None:
        self.cache = cache
        self.settings = settings
        self.stale_after_seconds = stale_after_seconds
        self.snapshot_fresh_seconds = snapshot_fresh_seconds
        self.clock = clock

    def backlogs(self, hosts: Sequence[Host]) -> tuple[list[Backlog] | None,
                                                      dict[str, dict[str, Any]]]:
        """Each host's state at launch (see ghs.manager.state) and its description."""
        if self.settings.start_state == "idle":
            return None, {}
        streams = self.cache.store.streams
        backlogs, described = [], {}
        for host in hosts:
            if self.settings.start_state == "steady-state":
                running, fresh = None, False
            else:
                running = streams.latest_running(host.name)
                latest = streams.latest_epoch_seconds(host.name)
                fresh = (running is not None and latest is not None and
                         latest - running["epoch_seconds"] <= self.snapshot_fresh_seconds)
            templates = streams.templates(host.name) if fresh else []
            backlog, description = host_backlog(host, running, templates, fresh=fresh)
            backlogs.append(backlog)
            described[host.name] = description
        return backlogs, described

    def states(self) -> list[HostState]:
        return self.cache.states(self.clock(), self.stale_after_seconds)

    def status(self, counters: Mapping[str, Any]) -> dict[str, Any]:
        return {"hosts": [state.to_dict() for state in self.states()],
                "counters": dict(counters), "time": self.clock()}

    def _usable(self, names: Sequence[str] | None
                ) -> tuple[list[Host], list[Exclusion], list[str]]:
        """Usable hosts, the ones left out, and which usable ones have provisional estimates."""
        states = self.states()
        provisional = [state.facts.host_id for state in states
                       if state.host is not None and state.estimate is not None
                       and state.estimate.provisional]
        if names:
            by_name = {state.facts.host_id: state for state in states}
            chosen = []
            for name in names:
                state = by_name.get(name)
                if state is None:
                    raise UnknownHostError(f"unknown host {name!r}", field="hosts", value=name)
                if state.host is None:
                    raise UnknownHostError(f"host {name!r} is unusable: {state.reason}",
                                           field="hosts", value=name)
                chosen.append(state.host)
            return chosen, [], provisional
        usable = [state.host for state in states if state.host is not None]
        excluded = [Exclusion(state.facts.host_id, state.reason or "unusable")
                    for state in states if state.host is None]
        if not usable:
            detail = "; ".join(f"{e.name}: {e.reason}" for e in excluded[:3])
            raise UnknownHostError("no usable hosts" + (f" ({detail})" if detail else
                                                        ": no agent has reported yet"),
                                   field="hosts", value=None)
        return usable, excluded, provisional

    def predict(self, work_seconds: float, hosts: Sequence[str] | None = None,
                distribution: str | None = None, partition: str | None = None,
                processes_per_host: int | None = None, pinned: bool | None = None
                ) -> dict[str, Any]:
        chosen, excluded, provisional = self._usable(hosts)
        chosen, placement = placed(chosen, self.cache.store.streams, processes_per_host, pinned)
        backlogs, described = self.backlogs(chosen)
        result = predict(chosen, work_seconds, distribution or self.settings.distribution,
                         partition or self.settings.partition, backlog=backlogs)
        body = result.to_dict()
        body["host_parameters"] = host_parameters(chosen, backlogs, described)
        body["excluded"] = [{"name": e.name, "reason": e.reason} for e in excluded]
        body["provisional"] = provisional
        body["placement"] = placement
        return body

    def schedule(self, work_seconds: float, hosts: Sequence[str] | None = None,
                 distribution: str | None = None, partition: str | None = None,
                 method: str | None = None, units: int | None = None,
                 rho_max: float | None = None, processes_per_host: int | None = None,
                 pinned: bool | None = None) -> dict[str, Any]:
        chosen, excluded, provisional = self._usable(hosts)
        chosen, placement = placed(chosen, self.cache.store.streams, processes_per_host, pinned)
        settings = self.settings
        backlogs, described = self.backlogs(chosen)
        by_name = dict(zip((h.name for h in chosen), backlogs)) if backlogs else None
        plan = schedule(chosen, work_seconds, method or settings.method,
                        distribution or settings.distribution, partition or settings.partition,
                        rho_max=settings.rho_max if rho_max is None else rho_max,
                        max_optimal_hosts=settings.optimal_max_hosts,
                        task_ratio=settings.task_ratio, excluded=excluded, backlog=by_name)
        body = plan.to_dict(units)
        body["host_parameters"] = host_parameters(
            plan.hosts, None if by_name is None else [by_name[h.name] for h in plan.hosts],
            described)
        body["provisional"] = provisional
        body["placement"] = {name: placement[name] for name in
                             (h.name for h in plan.hosts) if name in placement}
        return body
