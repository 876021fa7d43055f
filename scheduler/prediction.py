"""``predict``: the completion-time distribution of a divisible task on a set of hosts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from scheduler import backlog as backlog_laws
from scheduler import completion
from scheduler.backlog import Backlog
from scheduler.choices import DISTRIBUTIONS
from scheduler.errors import InvalidArgumentError
from scheduler.host_cdf import hosts_cdf
from scheduler.hosts import Host, HostArrays
from scheduler.mixture_moments import as_mixture, single_core_moments, task_moments
from scheduler.model import (
    _FIELDS,
    DEFAULT_DIST,
    AnyServers,
    MixtureServers,
    Servers,
    build_servers,
    distribution_codes,
)
from scheduler.partitioning import _partition, check_partition, check_work
from scheduler.placement import ProcessCounts, with_processes

QUANTILE_LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
REL_TOL = 1e-5
# Backlog atoms (summed over the used hosts' core groups) up to which a prediction keeps the
# exact mixture over the backlog; beyond it, each core group's law is fitted to the
# mixture's exact moments (heavy-tailed backlogs lose some accuracy in the quantiles, see
# scheduler.model.collapsed_servers), which costs what an idle start costs.
MIXTURE_MAX_COMPONENTS = 256


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predicted completion time of a task split over ``hosts`` (all times in seconds)."""

    hosts: tuple[str, ...]
    work: float
    shares: np.ndarray
    dedicated_seconds: np.ndarray
    mean: float
    std: float
    quantiles: dict[str, float]
    distribution: str
    partition: str
    _servers: Servers | MixtureServers = field(repr=False)
    _host_servers: Servers | MixtureServers = field(repr=False)
    backlog_mean_seconds: np.ndarray | None = None
    backlog_sources: tuple[str, ...] | None = None
    backlog_law: str | None = None
    processes: np.ndarray | None = None

    @property
    def cov(self) -> float:
        """Coefficient of variation std / mean."""
        return self.std / self.mean

    @property
    def criterion(self) -> float:
        """The selection criterion E[T] (1 + CoV) = E[T] + std[T], seconds."""
        return self.mean + self.std

    def cdf(self, x: Any) -> np.ndarray:
        """P(T <= x) for any array of times x (seconds)."""
        x = np.asarray(x, dtype=float)
        flat = x.reshape(1, -1)
        values = np.exp(completion.log_cdf(self._servers, flat))
        return values.reshape(x.shape)

    def host_cdf(self, x: Any) -> np.ndarray:
        """P(host k has finished its share by x): shape (hosts, len(x)) for times x (seconds)."""
        flat = np.asarray(x, dtype=float).reshape(-1)
        if (np.diff(flat) >= 0).all():
            return hosts_cdf(self._host_servers, flat, len(self.hosts))
        order = np.argsort(flat, kind="stable")
        cdf = np.empty((len(self.hosts), flat.size))
        cdf[:, order] = hosts_cdf(self._host_servers, flat[order], len(self.hosts))
        return cdf

    def host_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) of each host's own completion time (the max over its cores)."""
        means, stds = self._host_moments
        return means.copy(), stds.copy()

    @cached_property
    def _host_moments(self) -> tuple[np.ndarray, np.ndarray]:
        # integrated host by host for a backlog: worked out once, asked for several times
        if isinstance(self._host_servers, MixtureServers):
            return _mixture_host_moments(self._host_servers, len(self.hosts))
        if self.backlog_law is not None:
            return _mixture_host_moments(_as_mixture(self._host_servers), len(self.hosts))
        return _host_moments(self._host_servers)

    def backlog(self) -> list[dict[str, Any]]:
        """Per host the backlog assumed at launch: mean seconds per core, and its source."""
        if self.backlog_mean_seconds is None or self.backlog_sources is None:
            return [{"mean_seconds": 0.0, "source": "idle"} for _ in self.hosts]
        return [{"mean_seconds": float(mean), "source": source}
                for mean, source in zip(self.backlog_mean_seconds, self.backlog_sources)]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of SPEC section 7."""
        means, stds = self.host_moments()
        processes = [None] * len(self.hosts) if self.processes is None else self.processes
        return {
            "work": self.work,
            "hosts": [
                {"name": name, "share": float(share), "dedicated_seconds": float(dedicated),
                 "mean": float(mean), "std": float(std), "backlog": backlog,
                 **({} if count is None else {"processes": int(count)})}
                for name, share, dedicated, mean, std, backlog, count in zip(
                    self.hosts, self.shares, self.dedicated_seconds, means, stds,
                    self.backlog(), processes)
            ],
            "mean": self.mean,
            "std": self.std,
            "cov": self.cov,
            "criterion": self.criterion,
            "quantiles": dict(self.quantiles),
            "distribution": self.distribution,
            "partition": self.partition,
            "backlog_law": self.backlog_law or "idle",
        }


def check_hosts(hosts: Sequence[Host]) -> tuple[Host, ...]:
    """``hosts`` as a tuple after checking it is a non-empty sequence of uniquely named Host."""
    if isinstance(hosts, Host):
        hosts = (hosts,)
    hosts = tuple(hosts)
    if not hosts:
        raise InvalidArgumentError("at least one host is needed", field="hosts", value=[])
    for host in hosts:
        if not isinstance(host, Host):
            raise InvalidArgumentError(f"expected Host objects, got {host!r}",
                                       field="hosts", value=host)
    names = [host.name for host in hosts]
    if len(set(names)) != len(names):
        duplicate = next(name for name in names if names.count(name) > 1)
        raise InvalidArgumentError(f"host name {duplicate!r} appears more than once",
                                   field="hosts", value=duplicate)
    return hosts


def check_dist(dist: str) -> str:
    if dist not in DISTRIBUTIONS:
        raise InvalidArgumentError(
            f"unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}",
            field="dist", value=dist)
    return dist


def predict(hosts: Sequence[Host], work: float, dist: str = DEFAULT_DIST,
            partition: str = "equal-mean", *, shares: Sequence[float] | None = None,
            backlog: Sequence[Backlog] | Mapping[str, Backlog] | None = None,
            processes_per_host: ProcessCounts = None) -> Prediction:
    """Predict the completion time of ``work`` reference-CPU-seconds split over ``hosts``.

    ``shares`` (reference-CPU-seconds per host, summing to ``work``) overrides ``partition``.
    ``backlog``: what each host holds at launch (scheduler.backlog.Backlog), a sequence
    aligned with ``hosts`` or a mapping by name (hosts left out start idle); None starts
    every host idle, the paper's model. ``processes_per_host``: how many processes run each
    host's share (scheduler.placement; None: each host's own ``processes``, all its cores
    unless set).
    """
    arrays, work, share_array = _task(hosts, work, dist, partition, shares, backlog,
                                      processes_per_host)
    return _predict(arrays, work, share_array, dist, partition)


def _task(hosts: Sequence[Host], work: float, dist: str, partition: str,
          shares: Sequence[float] | None,
          backlog: Sequence[Backlog] | Mapping[str, Backlog] | None,
          processes_per_host: ProcessCounts) -> tuple[HostArrays, float, np.ndarray]:
    """``predict``'s arguments checked: (host arrays with their backlog laws, the work, each
    host's share in reference-CPU-seconds)."""
    hosts = with_processes(check_hosts(hosts), processes_per_host)
    work = check_work(work)
    check_dist(dist)
    check_partition(partition)
    arrays = host_arrays(hosts, backlog)
    if shares is None:
        return arrays, work, _partition(arrays, work, partition)
    return arrays, work, _check_shares(shares, len(hosts), work)


def predict_hosts(hosts: Sequence[Host], shares: Sequence[float], dist: str = DEFAULT_DIST, *,
                  backlog: Sequence[Backlog] | Mapping[str, Backlog] | None = None
                  ) -> Prediction:
    """Many single-host tasks at once: host k runs ``shares[k]`` reference-CPU-seconds. The
    result's ``host_cdf``, ``host_moments`` and per-host fields are those of
    ``predict(hosts, sum(shares), dist, shares=shares, backlog=backlog)``; the law of the
    slowest share over all hosts, which such a batch does not need, is not worked out (mean
    and std NaN, no quantiles)."""
    hosts = with_processes(check_hosts(hosts), None)
    check_dist(dist)
    work = check_work(float(np.sum(np.asarray(shares, dtype=float))))
    share_array = _check_shares(shares, len(hosts), work)
    return _predict(host_arrays(hosts, backlog), work, share_array, dist, "equal-mean",
                    task_law=False)


def single_process_means(hosts: Sequence[Host], shares: Sequence[float],
                         dist: str = DEFAULT_DIST, *,
                         backlog: Sequence[Backlog] | Mapping[str, Backlog] | None = None
                         ) -> np.ndarray:
    """Many single-host tasks' means at once (seconds): host k, of one core, runs
    ``shares[k]`` reference-CPU-seconds as one process; each is the fitted law's own mean,
    exact, what ``predict_mean([hosts[k]], shares[k], dist, backlog=[backlog[k]])`` gives,
    without the integrals ``predict_hosts`` works out for the laws."""
    hosts = with_processes(check_hosts(hosts), None)
    several = [h.name for h in hosts if h.cores != 1]
    if several:
        raise InvalidArgumentError(f"single_process_means takes hosts of one core; "
                                   f"{several[0]!r} has more", field="hosts", value=several[0])
    check_dist(dist)
    work = check_work(float(np.sum(np.asarray(shares, dtype=float))))
    share_array = _check_shares(shares, len(hosts), work)
    means = _host_servers(host_arrays(hosts, backlog), share_array, dist).mean[0]
    return np.where(share_array > 0, means, 0.0)


def host_arrays(hosts: Sequence[Host],
                backlog: Sequence[Backlog] | Mapping[str, Backlog] | None) -> HostArrays:
    """Column arrays of ``hosts`` with their backlog laws (None: idle, no backlog arrays)."""
    arrays = HostArrays.from_hosts(hosts)
    if backlog is None:
        return arrays
    items = backlog_laws.align(hosts, backlog)
    return replace(arrays, backlog=backlog_laws.build(hosts, items, arrays))


def _check_shares(shares: Sequence[float], count: int, work: float) -> np.ndarray:
    array = np.asarray(shares, dtype=float)
    if array.shape != (count,):
        raise InvalidArgumentError(f"expected {count} shares, got shape {array.shape}",
                                   field="shares", value=list(array.ravel()))
    if not np.all(np.isfinite(array)) or np.any(array < 0) or array.sum() <= 0:
        raise InvalidArgumentError("shares must be finite, non-negative and not all zero",
                                   field="shares", value=list(array))
    if not math.isclose(array.sum(), work, rel_tol=1e-9):
        raise InvalidArgumentError(f"shares sum to {array.sum():g}, not the work {work:g}",
                                   field="shares", value=list(array))
    return array


def predict_mean(hosts: Sequence[Host], work: float, dist: str = DEFAULT_DIST,
                 partition: str = "equal-mean", *, shares: Sequence[float] | None = None,
                 backlog: Sequence[Backlog] | Mapping[str, Backlog] | None = None,
                 processes_per_host: ProcessCounts = None) -> float:
    """E[T] (seconds) of the task ``predict`` with the same arguments describes, without its
    quantiles: for iterating a run window on the mean alone
    (``scheduler.window_forecast.settle_duration``). When one process on one host runs the
    whole task, T is that process's completion and its mean is the fitted law's own (exact;
    ``predict`` integrates the same law to ``REL_TOL``); otherwise the same integral as
    ``predict``'s mean."""
    arrays, work, share_array = _task(hosts, work, dist, partition, shares, backlog,
                                      processes_per_host)
    host_servers = _host_servers(arrays, share_array, dist)
    used = host_servers.mult[0] > 0
    if used.sum() == 1 and host_servers.mult[0][used][0] == 1:
        return float(host_servers.mean[0][used][0])
    mean, _, _ = completion.moments(_task_servers(host_servers), REL_TOL)
    return float(mean[0])


def _host_servers(arrays: HostArrays, shares: np.ndarray, dist: str) -> AnyServers:
    codes = distribution_codes(dist, arrays.rho)
    backlog = arrays.backlog
    # the exact mixture over the backlog atoms while it stays cheap, else the moment fit
    mixture = backlog is not None and backlog.spread_atoms(shares > 0) <= MIXTURE_MAX_COMPONENTS
    return build_servers(arrays, shares[None, :], codes[None, :], mixture)


def _task_servers(host_servers: AnyServers) -> AnyServers:
    """The used servers, whose slowest finishes the task."""
    if isinstance(host_servers, MixtureServers):
        used = host_servers.mult[0] > 0
        return MixtureServers(Servers(**{name: getattr(host_servers.parts, name)[:, used]
                                         for name in _FIELDS}),
                              host_servers.weight[:, used], host_servers.mult[:, used])
    return _merge_identical(host_servers)


def _predict(arrays: HostArrays, work: float, shares: np.ndarray, dist: str,
             partition: str, task_law: bool = True) -> Prediction:
    backlog = arrays.backlog
    host_servers = _host_servers(arrays, shares, dist)
    mixture = isinstance(host_servers, MixtureServers)
    servers = _task_servers(host_servers) if task_law else host_servers
    mean, std, quantiles = math.nan, math.nan, {}
    if task_law:
        moments, var, _, samples = completion.moments_and_samples(servers, REL_TOL)
        mean, std = float(moments[0]), math.sqrt(max(float(var[0]), 0.0))
        # one server finishes the task: its closed-form moments, which the host's row
        # gives (the integral missed them by 1.4% at a demand CoV of 1e4, whose tail past
        # 1 - F = 1e-10 still holds percent of the mean; a std by 4% at a CoV of 18 behind
        # a known backlog)
        exact = task_moments(servers)
        if exact is not None:
            mean, std = exact
        levels = np.array(list(QUANTILE_LEVELS.values()))
        points = completion.quantiles(servers, levels, moments, np.sqrt(var),
                                      samples=samples)[0]
        quantiles = {name: float(value) for name, value in zip(QUANTILE_LEVELS, points)}
    return Prediction(
        hosts=arrays.names,
        work=work,
        shares=shares,
        dedicated_seconds=shares / (arrays.processes * arrays.tau),
        mean=mean,
        std=std,
        quantiles=quantiles,
        distribution=dist,
        partition=partition,
        _servers=servers,
        _host_servers=host_servers,
        backlog_mean_seconds=None if backlog is None else backlog.core_mean,
        backlog_sources=None if backlog is None else tuple(backlog.sources.tolist()),
        backlog_law=None if backlog is None else ("mixture" if mixture else "moment-fit"),
        processes=arrays.processes.astype(int),
    )


def _merge_identical(servers: Servers) -> Servers:
    """One server type per distinct law (a lab of identical machines costs one evaluation)."""
    used = servers.mult[0] > 0
    dedicated = servers.t[0][used]
    if np.unique(dedicated).size == dedicated.size:
        # distinct dedicated times make distinct laws (the usual case), seen by one sort
        return Servers(**{name: getattr(servers, name)[:, used]
                          for name in ("t", "q", "code", "p1", "p2", "mult")})
    rows = np.column_stack([servers.t[0], servers.q[0], servers.code[0], servers.p1[0],
                            servers.p2[0]])[used]
    # rows sorted as np.unique(axis=0) sorts them (first column first): a distinct set, the
    # usual case, is seen without np.unique's sort of whole rows
    order = np.lexsort(rows.T[::-1])
    if (np.diff(rows[order], axis=0) != 0).any(axis=1).all():
        return Servers(**{name: getattr(servers, name)[:, used]
                          for name in ("t", "q", "code", "p1", "p2", "mult")})
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    mult = np.bincount(inverse.ravel(), servers.mult[0][used], len(unique))
    return Servers(t=unique[None, :, 0], q=unique[None, :, 1],
                   code=unique[None, :, 2].astype(int), p1=unique[None, :, 3],
                   p2=unique[None, :, 4], mult=mult[None, :])


def _host_moments(host_servers: Servers) -> tuple[np.ndarray, np.ndarray]:
    """Each host's completion (max over its cores): closed form for one core, else integrated."""
    # each host its own problem of one group (scheduler.mixture_moments)
    closed, means, variances = single_core_moments(as_mixture(Servers(
        **{name: getattr(host_servers, name)[0][:, None] for name in _FIELDS})))
    multi = np.flatnonzero(~closed & (host_servers.mult[0] > 0))
    if multi.size:
        batch = Servers(**{name: getattr(host_servers, name)[0][multi][:, None]
                           for name in _FIELDS})
        multi_mean, multi_var, _ = completion.moments(batch, REL_TOL)
        means[multi] = multi_mean
        variances[multi] = multi_var
    return means, np.sqrt(np.maximum(variances, 0.0))


def _host_batch(host_servers: MixtureServers, hosts: int) -> MixtureServers:
    """(hosts, groups, atoms): each host a problem of its core groups."""
    groups = host_servers.mult.shape[-1] // hosts
    parts = Servers(**{name: getattr(host_servers.parts, name).reshape(hosts, groups, -1)
                       for name in _FIELDS})
    return MixtureServers(parts, host_servers.weight.reshape(hosts, groups, -1),
                          host_servers.mult.reshape(hosts, groups))


def _mixture_host_moments(host_servers: MixtureServers, hosts: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Each host's completion (max over its core groups), integrated host by host."""
    return _host_moments_of(_host_batch(host_servers, hosts))


def _host_moments_of(batch: MixtureServers) -> tuple[np.ndarray, np.ndarray]:
    # one process on one core: closed form (scheduler.mixture_moments); else integrated
    closed, means, variances = single_core_moments(batch)
    used = (batch.mult.sum(axis=1) > 0) & ~closed
    if used.any():
        rows = np.flatnonzero(used)
        mean, var, _ = completion.moments(batch.take(rows), REL_TOL)
        means[rows], variances[rows] = mean, var
    return means, np.sqrt(np.maximum(variances, 0.0))


_as_mixture = as_mixture
