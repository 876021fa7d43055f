"""Answers to status, predict and schedule queries, from the current host estimates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ghs.config import SchedulerConfig
from ghs.errors import GhsError
from ghs.manager.estimates import EstimateCache, HostState
from scheduler import Host, predict, schedule
from scheduler.selection import Exclusion


class UnknownHostError(GhsError):
    """A query named a host the manager has never heard of, or one it cannot use."""

    code = "unknown_host"


def host_parameters(hosts: Sequence[Host]) -> list[dict[str, Any]]:
    """Hosts as plain maps, so a client can rebuild the same Prediction locally."""
    return [{"name": h.name, "lam": h.lam, "mu": h.mu, "sigma": h.sigma, "rho": h.rho,
             "tau": h.tau, "cores": h.cores} for h in hosts]


class QueryService:
    """Status, predict and schedule from ``cache``; ``clock`` is real epoch seconds."""

    def __init__(self, cache: EstimateCache, settings: SchedulerConfig, *,
                 stale_after_seconds: float, clock: Callable[[], float]) -> None:
        self.cache = cache
        self.settings = settings
        self.stale_after_seconds = stale_after_seconds
        self.clock = clock

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
                distribution: str | None = None, partition: str | None = None
                ) -> dict[str, Any]:
        chosen, excluded, provisional = self._usable(hosts)
        result = predict(chosen, work_seconds, distribution or self.settings.distribution,
                         partition or self.settings.partition)
        body = result.to_dict()
        body["host_parameters"] = host_parameters(chosen)
        body["excluded"] = [{"name": e.name, "reason": e.reason} for e in excluded]
        body["provisional"] = provisional
        return body

    def schedule(self, work_seconds: float, hosts: Sequence[str] | None = None,
                 distribution: str | None = None, partition: str | None = None,
                 method: str | None = None, units: int | None = None) -> dict[str, Any]:
        chosen, excluded, provisional = self._usable(hosts)
        settings = self.settings
        plan = schedule(chosen, work_seconds, method or settings.method,
                        distribution or settings.distribution, partition or settings.partition,
                        rho_max=settings.rho_max, max_optimal_hosts=settings.optimal_max_hosts,
                        task_ratio=settings.task_ratio, excluded=excluded)
        body = plan.to_dict(units)
        body["host_parameters"] = host_parameters(plan.hosts)
        body["provisional"] = provisional
        return body
