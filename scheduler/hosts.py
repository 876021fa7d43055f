"""Host parameters as a validated frozen record, and as column arrays for vectorised code."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.errors import InvalidHostError

# Bounds far past any workstation (a million local jobs a second; a mean or spread of local
# demand of 31,700 years), inside which the model's moments stay finite in double precision:
# past them (a lam of 1e308, a sigma of 1e200) they overflowed and a prediction read NaN.
MAX_RATE_PER_SECOND = 1e6
MAX_DEMAND_SECONDS = 1e12
# The shortest mean local demand a host is given (a microsecond of CPU; the agent's
# accounting bins start at 10 ms). A mean from the utilisation law on a forecast load of
# 1e-178 beside an arrival an hour or two was 1e-175 s, whose square underflows: every
# fit of the demand law read NaN.
MIN_DEMAND_SECONDS = 1e-6
# A host's speed relative to the reference machine, within a million times either way: a tau
# of 1e308 made its capacity overflow, its equal-mean share read inf.
MAX_SPEED_RATIO = 1e6
# Cores of one host, as many as the protocol takes (protocol.messages.MAX_CORES, which this
# package may not import; tests/unit/test_choices.py proves them equal): a host file's
# 10^400 cores overflowed a float with a traceback.
MAX_CORES = 1 << 20


def utilisation_law_mu(lam_per_second: float, rho: float, cores: int = 1) -> float:
    """The service rate mu (1/s) that keeps ``cores`` CPUs at ``rho`` under arrivals at
    ``lam_per_second``: lam / (cores rho), its mean demand held within [MIN_DEMAND_SECONDS,
    MAX_DEMAND_SECONDS]; 1 where lam or rho is not positive (the demand law does not matter
    then). For a host that has seen no local job finish."""
    if not (lam_per_second > 0 and rho > 0 and cores > 0):
        return 1.0
    return min(max(lam_per_second / (cores * rho), 1.0 / MAX_DEMAND_SECONDS),
               1.0 / MIN_DEMAND_SECONDS)


def _check_finite(name: str, field: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidHostError(
            f"host {name!r}: {field} must be a number, got {value!r}", field=field, value=value
        ) from None
    except OverflowError:
        # an integer past any float (a JSON host file may hold one): not its hundreds of
        # digits in the message
        raise InvalidHostError(
            f"host {name!r}: {field} must be finite, got an integer of {len(str(value))} "
            f"digits", field=field, value=None) from None
    if not math.isfinite(number):
        raise InvalidHostError(
            f"host {name!r}: {field} must be finite, got {value!r}", field=field, value=value
        )
    return number


@dataclass(frozen=True)
class Host:
    """One workstation as the model sees it.

    lam: local job arrival rate (jobs per second, whole host); mu: local service rate
    (1 / mean CPU seconds of a local job); sigma: std dev of a local job's CPU demand
    (seconds); rho: CPU utilisation by local jobs in [0, 1); tau: speed relative to the
    reference machine; cores: identical CPU cores, each modelled as its own server;
    processes: how many processes run the host's share (1..cores, default all cores), each
    on one core (see ``with_processes`` for the load each one sees); core_rho: each core's
    local utilisation before the processes were placed, kept by
    :func:`scheduler.placement.migrating` for unpinned processes that move between cores
    (None otherwise; :mod:`scheduler.held_phase` reads it when jobs hold cores at launch);
    pooled: the processes share whichever cores local jobs leave free (set by ``migrating``),
    so the share is one server of their dedicated time at the host's all-busy fraction, not
    ``processes`` servers finishing with the slowest.
    """

    name: str
    lam: float
    mu: float
    sigma: float
    rho: float
    tau: float = 1.0
    cores: int = 1
    processes: int | None = None
    core_rho: float | None = None
    pooled: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidHostError(
                f"host name must be a non-empty string, got {self.name!r}",
                field="name",
                value=self.name,
            )
        name = self.name
        lam = _check_finite(name, "lam", self.lam)
        mu = _check_finite(name, "mu", self.mu)
        sigma = _check_finite(name, "sigma", self.sigma)
        rho = _check_finite(name, "rho", self.rho)
        tau = _check_finite(name, "tau", self.tau)
        if not 0 <= lam <= MAX_RATE_PER_SECOND:
            raise InvalidHostError(
                f"host {name!r}: lam must be in [0, {MAX_RATE_PER_SECOND:g}] jobs/s, "
                f"got {lam!r}", field="lam", value=lam
            )
        if not mu * MAX_DEMAND_SECONDS >= 1:
            raise InvalidHostError(
                f"host {name!r}: mu must be >= {1 / MAX_DEMAND_SECONDS:g} (1 / mean CPU "
                f"seconds, a mean of at most {MAX_DEMAND_SECONDS:g} s), got {mu!r}",
                field="mu",
                value=mu,
            )
        if not 0 <= sigma <= MAX_DEMAND_SECONDS:
            raise InvalidHostError(
                f"host {name!r}: sigma must be in [0, {MAX_DEMAND_SECONDS:g}] seconds, "
                f"got {sigma!r}",
                field="sigma",
                value=sigma,
            )
        if not 0.0 <= rho < 1.0:
            raise InvalidHostError(
                f"host {name!r}: rho must be in [0, 1), got {rho!r}", field="rho", value=rho
            )
        if not 1 / MAX_SPEED_RATIO <= tau <= MAX_SPEED_RATIO:
            raise InvalidHostError(
                f"host {name!r}: tau must be in [{1 / MAX_SPEED_RATIO:g}, "
                f"{MAX_SPEED_RATIO:g}] (speed relative to the reference machine), got {tau!r}",
                field="tau", value=tau
            )
        if isinstance(self.cores, bool) or not isinstance(self.cores, (int, np.integer)):
            raise InvalidHostError(
                f"host {name!r}: cores must be a whole number, got {self.cores!r}",
                field="cores",
                value=self.cores,
            )
        if not 1 <= self.cores <= MAX_CORES:
            raise InvalidHostError(
                f"host {name!r}: cores must be in [1, {MAX_CORES}], got "
                f"{self.cores if self.cores < 10**12 else f'{len(str(self.cores))} digits'}",
                field="cores", value=self.cores if self.cores < 10**12 else None)
        for field, number in (("lam", lam), ("mu", mu), ("sigma", sigma), ("rho", rho),
                              ("tau", tau)):
            object.__setattr__(self, field, number)
        object.__setattr__(self, "cores", int(self.cores))
        processes = self.cores if self.processes is None else self.processes
        if (isinstance(processes, bool) or not isinstance(processes, (int, np.integer))
                or not 1 <= processes <= self.cores):
            raise InvalidHostError(
                f"host {name!r}: processes must be a whole number from 1 to its "
                f"{self.cores} cores, got {processes!r}", field="processes", value=processes)
        object.__setattr__(self, "processes", int(processes))
        if self.core_rho is not None:
            core_rho = _check_finite(name, "core_rho", self.core_rho)
            if not 0.0 <= core_rho < 1.0:
                raise InvalidHostError(f"host {name!r}: core_rho must be in [0, 1), got "
                                       f"{core_rho!r}", field="core_rho", value=core_rho)
            object.__setattr__(self, "core_rho", core_rho)
        if not isinstance(self.pooled, (bool, np.bool_)):
            raise InvalidHostError(f"host {name!r}: pooled must be true or false, got "
                                   f"{self.pooled!r}", field="pooled", value=self.pooled)
        object.__setattr__(self, "pooled", bool(self.pooled))

    @property
    def capacity(self) -> float:
        """Reference-CPU-seconds of remote work the host completes per second on average."""
        processes = self.cores if self.processes is None else self.processes
        return processes * (1.0 - self.rho) * self.tau


@dataclass(frozen=True)
class HostArrays:
    """Hosts as parallel numpy columns, the form every hot path works on.

    ``backlog``: the local work each host's cores hold at launch (a
    ``scheduler.backlog.BacklogArrays``), or None for the paper's idle start.
    ``process_counts``: processes running each host's share (None: one per core).
    ``core_rho``: each host's ``Host.core_rho`` (NaN where None), or None where no host
    has one; ``pooled``: each host's ``Host.pooled``, or None where none is.
    """

    names: tuple[str, ...]
    lam: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    rho: np.ndarray
    tau: np.ndarray
    cores: np.ndarray
    backlog: Any = None
    process_counts: np.ndarray | None = None
    core_rho: np.ndarray | None = None
    pooled: np.ndarray | None = None

    @property
    def processes(self) -> np.ndarray:
        """Processes running each host's share (all its cores unless ``process_counts``)."""
        return self.cores if self.process_counts is None else self.process_counts

    @classmethod
    def from_hosts(cls, hosts: Sequence[Host]) -> HostArrays:
        return cls(
            names=tuple(h.name for h in hosts),
            lam=np.array([h.lam for h in hosts], dtype=float),
            mu=np.array([h.mu for h in hosts], dtype=float),
            sigma=np.array([h.sigma for h in hosts], dtype=float),
            rho=np.array([h.rho for h in hosts], dtype=float),
            tau=np.array([h.tau for h in hosts], dtype=float),
            cores=np.array([h.cores for h in hosts], dtype=float),
            process_counts=np.array([h.processes for h in hosts], dtype=float),
            core_rho=None if all(h.core_rho is None for h in hosts) else np.array(
                [np.nan if h.core_rho is None else h.core_rho for h in hosts], dtype=float),
            pooled=np.array([h.pooled for h in hosts]) if any(h.pooled for h in hosts)
            else None,
        )

    @property
    def server_processes(self) -> np.ndarray:
        """Servers each host's share runs as: its processes, one where they pool the free
        cores (``Host.pooled``)."""
        if self.pooled is None:
            return self.processes
        return np.where(self.pooled, 1.0, self.processes)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def capacity(self) -> np.ndarray:
        """Per-host mean remote throughput, reference-CPU-seconds per second."""
        processes = self.cores if self.processes is None else self.processes
        return processes * (1.0 - self.rho) * self.tau

    @property
    def spread(self) -> np.ndarray:
        """Share of each host's cores that run its processes (1 when all cores do)."""
        return self.processes / self.cores

    @property
    def demand_second_moment(self) -> np.ndarray:
        """E[X^2] of a local job's CPU demand, seconds squared."""
        return self.sigma**2 + (1.0 / self.mu) ** 2
