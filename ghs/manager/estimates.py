"""Per-host current estimates (24-hour Adapt_avg) from the stored measurements.

Each host's window ends at its own latest measurement: simulated agents run on accelerated
clocks, so their measurements carry their own (virtual) times. Staleness, in contrast, is about
the manager's real clock: a host is stale when it has been silent for ``stale_after_seconds``.
Estimates are cached per host and recomputed only when the host's measurements changed.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass
from typing import Any

from ghs.manager.store import HostFacts, ManagerStore
from ghs.record import sensor_measurement
from scheduler import Host, InvalidHostError
from scheduler.backlog import steady_state_within_range
from scheduler.hosts import utilisation_law_mu
from sensors.estimates import DAY_SECONDS, Estimate, adapt_avg


@dataclass(frozen=True)
class HostState:
    """A host as the manager sees it: facts, estimate, and whether the scheduler can use it.

    ``host`` is None when it cannot; ``reason`` then says why (no data yet, saturated, stale).
    """

    facts: HostFacts
    estimate: Estimate | None
    measurements: int
    stale: bool
    host: Host | None
    reason: str | None
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "name": self.facts.host_id,
            "hostname": self.facts.hostname,
            "lam": None if estimate is None else estimate.lam,
            "mu": None if estimate is None else estimate.mu,
            "sigma": None if estimate is None else estimate.sigma,
            "rho": None if estimate is None else estimate.rho,
            "tau": self.facts.tau,
            "cores": self.facts.cores,
            "stale": self.stale,
            "measurements": self.measurements,
            "last_seen": self.facts.last_seen,
            "provisional": True if estimate is None else estimate.provisional,
            "history_hours": 0.0 if estimate is None else estimate.history_seconds / 3600.0,
            "simulated": self.facts.simulated,
            "usable": self.host is not None,
            "parameters": None if self.host is None else {
                "lam": self.host.lam, "mu": self.host.mu, "sigma": self.host.sigma,
                "rho": self.host.rho, "tau": self.host.tau, "cores": self.host.cores},
            "reason": self.reason,
            "notes": list(self.notes),
        }


class EstimateCache:
    """Estimates per host, recomputed when the host's (count, last end) changes."""

    def __init__(self, store: ManagerStore, window_seconds: float = DAY_SECONDS) -> None:
        self.store = store
        self.window_seconds = window_seconds
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, float], Estimate, float | None]] = {}

    def states(self, now: float, stale_after_seconds: float) -> list[HostState]:
        """Every known host's state at real time ``now`` (epoch seconds)."""
        summary = self.store.summary()
        states = []
        for facts in self.store.hosts():
            count, first, last = summary.get(facts.host_id, (0, None, None))
            estimate, tau = (None, None) if count == 0 else self._estimate(facts, count, first,
                                                                           last)
            stale = now - facts.last_seen > stale_after_seconds
            states.append(_state(facts, estimate, tau, count, stale, now))
        return _within_range(states)

    def _estimate(self, facts: HostFacts, count: int, first: float, last: float
                  ) -> tuple[Estimate, float | None]:
        version = (count, last)
        with self._lock:
            cached = self._cache.get(facts.host_id)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        rows = self.store.measurements(facts.host_id, since_end=last - self.window_seconds)
        measurements = [sensor_measurement(row, facts.cores) for row in rows]
        estimate = adapt_avg(measurements, now=last, window_seconds=self.window_seconds,
                             history_start=first)
        taus = [row["tau"] for row in rows if row["tau"]]
        tau = taus[-1] if taus else None
        with self._lock:
            self._cache[facts.host_id] = (version, estimate, tau)
        return estimate, tau


def model_parameters(estimate: Estimate, cores: int
                     ) -> tuple[float, float, float, tuple[str, ...]]:
    """(lam, mu, sigma, notes): what the scheduler uses for a host's 24-hour estimate.

    No finished job seen: mu from the utilisation law, lam / (cores rho); no arrivals: any mu
    (the demand law does not matter then); spread unknown: exponential, sigma = 1/mu.
    """
    notes: list[str] = []
    lam, rho = estimate.lam or 0.0, estimate.rho or 0.0
    mu, sigma = estimate.mu, estimate.sigma
    if lam == 0 or mu is None:
        if lam > 0:
            notes.append("no finished local jobs seen: service rate assumed from rho")
        mu = utilisation_law_mu(lam, rho, cores)
    if sigma is None:
        sigma = 1.0 / mu
        notes.append("demand spread unknown: exponential assumed (sigma = 1/mu)")
    return lam, mu, sigma, tuple(notes)


def _within_range(states: list[HostState]) -> list[HostState]:
    """``states`` with the hosts whose steady-state backlog is past any workstation left out
    with the reason: every prediction may start a host there, and one such host (an agent's
    lam and demand contradicting its rho) failed every query that named it."""
    usable = [k for k, state in enumerate(states) if state.host is not None]
    within = steady_state_within_range([states[k].host for k in usable])
    for k, fine in zip(usable, within):
        if not fine:
            states[k] = dataclasses.replace(
                states[k], host=None,
                reason="estimate out of range: its steady-state backlog (Pollaczek-Khinchine) "
                       "is past any workstation's")
    return states


def _state(facts: HostFacts, estimate: Estimate | None, tau: float | None, count: int,
           stale: bool, now: float) -> HostState:
    notes: list[str] = []
    if tau is not None:
        facts = dataclasses.replace(facts, tau=tau)
    if stale:
        return HostState(facts, estimate, count, True, None,
                         f"stale: silent for {now - facts.last_seen:.0f} s", ())
    if estimate is None or estimate.lam is None or estimate.rho is None:
        return HostState(facts, estimate, count, False, None, "no measurements yet", ())
    if estimate.provisional:
        notes.append(f"provisional: {estimate.history_seconds / 3600:.1f} h of history")
    if estimate.rho >= 1.0:
        return HostState(facts, estimate, count, False, None,
                         f"rho {estimate.rho:.3g} >= 1: saturated by local jobs", tuple(notes))
    lam, mu, sigma, filled = model_parameters(estimate, facts.cores)
    notes.extend(filled)
    if not all(math.isfinite(v) for v in (lam, mu, sigma, estimate.rho)):
        return HostState(facts, estimate, count, False, None, "estimate not finite",
                         tuple(notes))
    try:
        host = Host(facts.host_id, lam=lam, mu=mu, sigma=sigma, rho=estimate.rho,
                    tau=facts.tau, cores=facts.cores)
    except InvalidHostError as exc:
        # past the bounds of any workstation (an agent's sums gone wrong): the host is left
        # out with the reason, as a non-finite one is, and the other hosts are answered
        return HostState(facts, estimate, count, False, None,
                         f"estimate out of range: {exc.message}", tuple(notes))
    return HostState(facts, estimate, count, False, host, None, tuple(notes))
