"""Machine-set selection: which hosts should share the task (paper Fig. 2 and Fig. 3)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import numpy as np

from scheduler import backlog as backlog_laws
from scheduler import completion
from scheduler.backlog import ATOMS, Backlog, BacklogArrays
from scheduler.calibrated_screen import screen_moments
from scheduler.calibrated_selection import (
    SelectionCalibration,
    calibrated_host_log_cdf,
    calibrated_moments,
    length_factors,
    shared_table,
)
from scheduler.choices import METHODS
from scheduler.compact_servers import compacted
from scheduler.errors import InvalidArgumentError, NoUsableHostsError, TooManyHostsError
from scheduler.exact import Budget, optimal
from scheduler.hosts import Host, HostArrays
from scheduler.model import (
    DEFAULT_DIST,
    Servers,
    build_servers,
    distribution_codes,
    with_vanishing_interruption,
)
from scheduler.no_delay import chances_at
from scheduler.partitioning import _partition, check_partition, check_work, whole_units
from scheduler.placement import ProcessCounts, with_processes
from scheduler.prediction import (
    MIXTURE_MAX_COMPONENTS,
    Prediction,
    _predict,
    check_dist,
    check_hosts,
    host_arrays,
)
from scheduler.prefix_methods import heuristic, prefix
from scheduler.search import EXACT_MAX_HOSTS, near_optimal

SET_TOL = 1e-5
# the model moments under a calibrated criterion: its spread is a small difference of second
# moments, and at this tolerance it was within 4e-5 of the served law's (at 1e-2: 2e-2)
_CALIBRATED_TOL = 1e-4
# (or the tighter one asked), except when a search screens sets (asks for a looser
# criterion). Without a backlog the screen is scheduler.calibrated_screen (the served grid's
# figures without the quadrature: within 4e-6 of these at the median, 4e-4 at worst over 200
# random sets of 9-12-host pools). With one, the model's moments at this tolerance moved the
# calibrated criterion by at most 1.6e-5 over 4,800 random sets of 1-20 hosts against 1e-4 (a
# quarter started in their steady state; at 1e-2: 1e-3), and spare some sets the
# quadrature's finer rule
_CALIBRATED_SCREEN_TOL = 1e-3
# with a calibration, ``optimal`` scores every subset: 2^14 sets take seconds
CALIBRATED_OPTIMAL_MAX_HOSTS = 14
# and with each host's state at launch every subset's exact backlog mixture: 2^9 sets took
# 2.3 s a round on a manager's 12-host demo lab, 2^12 sets 138 s (its queries wait meanwhile)
CALIBRATED_BACKLOG_OPTIMAL_MAX_HOSTS = 9
# on the model's criterion with jobs running at launch (a snapshot's), each set's law is a
# mixture over their remaining demands and the bounds prune less: 1.0-11 s at 16 hosts over
# six pools, 79 s at 20 (3.2 s at 20 without a state at launch)
BACKLOG_OPTIMAL_MAX_HOSTS = 16
_CHUNK = 4096


@dataclass(frozen=True)
class Exclusion:
    """A host left out of the candidates, and why."""

    name: str
    reason: str


@dataclass(frozen=True, eq=False)
class Plan:
    """The chosen machine set, its prediction and what choosing it cost."""

    hosts: tuple[Host, ...]
    prediction: Prediction
    method: str
    evaluations: int
    elapsed_seconds: float
    excluded: tuple[Exclusion, ...] = field(default=())

    def units(self, count: int) -> dict[str, int]:
        """Split ``count`` indivisible work units over the chosen hosts like the shares."""
        split = whole_units(self.prediction.shares, count)
        return {host.name: int(n) for host, n in zip(self.hosts, split)}

    def to_dict(self, units: int | None = None) -> dict[str, Any]:
        payload = self.prediction.to_dict()
        if units is not None:
            for row, n in zip(payload["hosts"], whole_units(self.prediction.shares, units)):
                row["units"] = int(n)
            payload["units"] = units
        payload.update(method=self.method, evaluations=self.evaluations,
                       elapsed_seconds=self.elapsed_seconds,
                       excluded=[{"name": e.name, "reason": e.reason} for e in self.excluded])
        return payload


def candidates(hosts: Sequence[Host], rho_max: float) -> tuple[list[Host], list[Exclusion]]:
    """Hosts with rho below ``rho_max``, and the ones left out with the reason."""
    kept, excluded = [], []
    for host in hosts:
        if host.rho >= rho_max:
            excluded.append(Exclusion(host.name, f"rho {host.rho:.3g} >= rho_max {rho_max:g}"))
        else:
            kept.append(host)
    return kept, excluded


def schedule(hosts: Sequence[Host], work: float, method: str = "auto",
             dist: str = DEFAULT_DIST, partition: str = "equal-mean", *, rho_max: float = 0.9,
             max_optimal_hosts: int = 22, task_ratio: float = 4.0,
             excluded: Sequence[Exclusion] = (),
             clock: Callable[[], float] = time.perf_counter,
             backlog: Sequence[Backlog] | Mapping[str, Backlog] | None = None,
             processes_per_host: ProcessCounts = None,
             calibration: SelectionCalibration | None = None,
             optimal_budget_seconds: float | None = None) -> Plan:
    """Choose the hosts minimising E[T] (1 + CoV) for ``work`` reference-CPU-seconds.

    ``method``: ``auto`` (exact up to 8 candidates, else a search within 1% of the optimum
    wherever measured against brute force, pools of up to 20 hosts; see scheduler.search),
    ``heuristic`` (the paper's Fig. 3), ``optimal``
    (exact; refuses above ``max_optimal_hosts``) or ``prefix``.

    ``excluded`` lists hosts the caller already dropped (e.g. saturated ones read from a host
    file); they are reported with the plan. ``clock`` times the selection. ``backlog`` is the
    state at launch as in ``predict`` (the candidates are still ordered by capacity).
    ``processes_per_host``: as in ``predict``. ``calibration``: per-host quantile factors;
    sets are then ranked by the calibrated law's mean + std (what ``calibrated_prediction``
    serves, see scheduler.calibrated_selection); the plan's prediction stays the model's, to
    be calibrated with the chosen hosts' factors. ``optimal`` then scores every subset (the
    model's pruning bounds do not hold for the calibrated law), up to
    ``CALIBRATED_OPTIMAL_MAX_HOSTS`` candidates (``CALIBRATED_BACKLOG_OPTIMAL_MAX_HOSTS``
    with a ``backlog``, each subset then scored with its exact backlog mixture). On the
    model's criterion ``optimal`` takes up to ``BACKLOG_OPTIMAL_MAX_HOSTS`` candidates when
    a ``backlog`` has jobs running at launch. ``optimal_budget_seconds``: how long (on
    ``clock``) ``optimal`` may search before it gives up with BudgetExceededError (None: no
    limit).
    """
    started = clock()
    budget = None if optimal_budget_seconds is None else Budget(
        float(optimal_budget_seconds), clock, started)
    hosts = with_processes(check_hosts(hosts), processes_per_host)
    states = None if backlog is None else dict(zip((h.name for h in hosts),
                                                   backlog_laws.align(hosts, backlog)))
    work = check_work(work)
    check_dist(dist)
    check_partition(partition)
    if method not in METHODS:
        raise InvalidArgumentError(f"unknown method {method!r}; choose one of "
                                   f"{', '.join(METHODS)}", field="method", value=method)
    if not 0 < rho_max <= 1:
        raise InvalidArgumentError(f"rho_max must be in (0, 1], got {rho_max!r}",
                                   field="rho_max", value=rho_max)
    kept, dropped = candidates(hosts, rho_max)
    dropped = [*excluded, *dropped]
    if not kept:
        raise NoUsableHostsError(
            f"no usable hosts: all {len(hosts) + len(excluded)} are at or above rho_max "
            f"{rho_max:g}", excluded=tuple(dropped))
    limit, why = max_optimal_hosts, ""
    if calibration is not None:
        limit, why = ((CALIBRATED_OPTIMAL_MAX_HOSTS, " with a calibrated criterion")
                      if states is None else (CALIBRATED_BACKLOG_OPTIMAL_MAX_HOSTS,
                                              " with a calibrated criterion and each host's "
                                              "state at launch"))
    elif method == "optimal" and len(kept) > BACKLOG_OPTIMAL_MAX_HOSTS and states is not None:
        backlog_arrays = _arrays(kept, states).backlog
        if backlog_arrays is not None and backlog_arrays.jobs_running().any():
            limit, why = BACKLOG_OPTIMAL_MAX_HOSTS, " with jobs running at launch"
    if limit >= max_optimal_hosts:
        limit, why = max_optimal_hosts, ""
    if method == "optimal" and len(kept) > limit:
        configured = not why
        raise TooManyHostsError(
            f"optimal selection over {len(kept)} hosts would evaluate 2^{len(kept)} sets"
            f"{why}; the limit is {limit} (use auto, within 1% of the optimum wherever "
            f"measured, or heuristic or prefix"
            f"{', or raise optimal_max_hosts' if configured else ''})",
            field="hosts", value=len(kept))
    max_optimal_hosts = limit
    # Order by (1 - rho) tau capacity, the paper's priority; ties keep the given order.
    order = sorted(range(len(kept)), key=lambda i: -kept[i].capacity)
    ordered = [kept[i] for i in order]
    evaluator = SetEvaluator(_arrays(ordered, states), work, dist, partition, calibration,
                             [host.name for host in ordered])
    if method == "heuristic":
        chosen = heuristic(evaluator, ordered, work, task_ratio)
    elif method == "prefix":
        chosen = prefix(evaluator)
    elif method == "auto":
        chosen = near_optimal(evaluator, partial(optimal, set_tol=SET_TOL),
                              min(EXACT_MAX_HOSTS, max_optimal_hosts))
    else:
        chosen = optimal(evaluator, SET_TOL, budget)
    chosen = sorted(chosen)
    members = [ordered[i] for i in chosen]
    arrays = _arrays(members, states)
    shares = _partition(arrays, work, partition)
    if not shares.all():
        # a host whose backlog outlasts the others' finish gets no work: leave it out
        members = [host for host, share in zip(members, shares) if share > 0]
        arrays = _arrays(members, states)
        shares = _partition(arrays, work, partition)
    prediction = _predict(arrays, work, shares, dist, partition)
    return Plan(hosts=tuple(members), prediction=prediction, method=method,
                evaluations=evaluator.evaluations, elapsed_seconds=clock() - started,
                excluded=tuple(dropped))


class SetEvaluator:
    """Criterion E[T] + std[T] of machine sets over one candidate list, with a cache; with a
    ``calibration`` (and the candidates' ``names``), of the calibrated law."""

    def __init__(self, arrays: HostArrays, work: float, dist: str, partition: str,
                 calibration: SelectionCalibration | None = None,
                 names: Sequence[str] = ()) -> None:
        self.arrays = arrays
        self.work = work
        self.partition = partition
        self.codes = distribution_codes(dist, arrays.rho)
        self.calibration = calibration
        # (candidates, lengths, levels) factors, in the candidates' order
        self.factor_table = None if calibration is None else calibration.table(names)
        self.no_delay_table = None if calibration is None else calibration.no_delay_table(names)
        # the calibrated law maps each host's quantiles, which a moment fit of the backlog
        # mixture moves: use the exact mixture where ``predict`` would, set by set (the
        # whole pool's count moved criteria by up to 8% from the served law's)
        self._atoms = None if arrays.backlog is None else _host_atoms(arrays.backlog)
        self.evaluations = 0
        # members of the sets scored (the search's measure of its work)
        self.host_laws = 0
        self._cache: dict[tuple[int, ...], float] = {}

    def criteria(self, sets: Sequence[Sequence[int]]) -> np.ndarray:
        """Criterion of each set (host indices into the candidate list), seconds."""
        keys = [tuple(sorted(s)) for s in sets]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            # one padded batch: a short set's spare columns carry no work
            width = max(len(key) for key in missing)
            members = np.zeros((len(missing), width), dtype=int)
            valid = np.zeros((len(missing), width), dtype=bool)
            for row, key in enumerate(missing):
                members[row, :len(key)] = key
                valid[row, :len(key)] = True
            self._cache.update(zip(missing, self.dense(members, valid)))
        return np.array([self._cache[k] for k in keys])

    def dense(self, members: np.ndarray, valid: np.ndarray | None = None,
              rel_tol: float = SET_TOL) -> np.ndarray:
        """Criteria of B sets given as a (B, k) index array (``valid`` marks real members),
        each to relative accuracy ``rel_tol``."""
        out = np.empty(len(members))
        for start in range(0, len(members), _CHUNK):
            block = slice(start, start + _CHUNK)
            sub, shares, servers = self._laws(members[block],
                                              None if valid is None else valid[block])
            if self.calibration is None:
                mean, var, _ = completion.moments(servers, rel_tol)
            else:
                mean, var = self._calibrated(members[block], sub, shares, servers, rel_tol)
            out[block] = mean + np.sqrt(var)
        self.evaluations += len(members)
        self.host_laws += int(members.size if valid is None else np.count_nonzero(valid))
        return out

    def servers(self, members: np.ndarray, valid: np.ndarray | None = None):
        return self._laws(members, valid)[2]

    def _laws(self, members: np.ndarray, valid: np.ndarray | None
              ) -> tuple[HostArrays, np.ndarray, Any]:
        """The sets' hosts, their shares and their servers."""
        sub = _gather(self.arrays, members)
        mask = np.ones(members.shape, bool) if valid is None else valid
        shares = _partition(sub, self.work, self.partition, mask)
        return sub, shares, build_servers(sub, shares, self.codes[members])

    def _calibrated(self, members: np.ndarray, sub: HostArrays, shares: np.ndarray,
                    servers: Any, rel_tol: float) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated law's (mean, variance) of the sets, from the model's."""
        assert self.calibration is not None and self.factor_table is not None
        dedicated = shares / (sub.processes * sub.tau)
        # the hosts with work share their factors, as the served split (shared_table)
        factors = length_factors(shared_table(self.factor_table[members], shares > 0),
                                 np.asarray(self.calibration.lengths_seconds), dedicated)
        factors = np.where(shares[..., None] > 0, factors, 1.0)
        no_delay = None if self.no_delay_table is None else chances_at(
            self.no_delay_table[members], self.calibration.lengths_seconds, dedicated)
        screen = self._atoms is None and self.partition == "equal-mean"
        if rel_tol > _CALIBRATED_TOL and screen:
            # a search screening sets: the served grid's figures without the quadrature.
            # Not with a backlog (its mixtures have no closed-form quantiles) nor other
            # partitions: with equal shares a set of narrow and wide laws had its model
            # moments up to 2% off on the screen's short grid (equal-mean: 4e-4)
            return screen_moments(servers, np.where(shares > 0, dedicated, 0.0), factors,
                                  np.asarray(self.calibration.levels), no_delay)
        tol = rel_tol if rel_tol <= _CALIBRATED_TOL else _CALIBRATED_SCREEN_TOL
        exact = np.zeros(len(members), dtype=bool) if self._atoms is None else (
            np.where(shares > 0, self._atoms[members], 0).sum(axis=1) <= MIXTURE_MAX_COMPONENTS)
        mean, var = np.empty(len(members)), np.empty(len(members))
        for rows, mixture in ((np.flatnonzero(~exact), False), (np.flatnonzero(exact), True)):
            if rows.size == 0:
                continue
            # the model's moments must be the served law's (the exact mixture), not the fit's
            laws = build_servers(_gather(self.arrays, members[rows]), shares[rows],
                                 self.codes[members[rows]], mixture=True) if mixture else (
                servers if rows.size == len(members) else servers.take(rows))
            model_mean, model_var, _ = completion.moments(compacted(laws, split=True), tol)
            mean[rows], var[rows] = calibrated_moments(
                laws, np.where(shares[rows] > 0, dedicated[rows], 0.0), factors[rows],
                np.asarray(self.calibration.levels), model_mean, model_var,
                None if no_delay is None else no_delay[rows])
        return mean, var

    def every_host_servers(self, members: np.ndarray) -> Servers:
        """Each candidate's law at the share it would get if it joined (or stayed in) the
        set ``members``, the common scale of the set's own shares: (1, m x groups) servers,
        each host's core groups side by side (one group each without a backlog)."""
        # without mixture=True build_servers gives plain servers (moment-fitted backlogs)
        return cast(Servers, build_servers(self.arrays, self._every_host_shares(members),
                                           self.codes[None, :]))

    def every_host_log_cdf(self, members: np.ndarray, hosts: Servers, grid: np.ndarray,
                           calibrated: bool = True) -> np.ndarray:
        """(K, m) log CDF at the times ``grid`` (seconds) of each candidate's completion
        (the product over its core groups in ``hosts``, from ``every_host_servers(members)``):
        the model's, or with a calibration (and ``calibrated``) the calibrated law's, so that
        hosts are ranked as sets are scored."""
        if self.calibration is None or self.factor_table is None or not calibrated:
            return self._host_log_cdf(hosts, grid)
        # a pure atom mapped as the served law maps it (scheduler.model)
        hosts = with_vanishing_interruption(hosts)
        log_cdf = self._host_log_cdf(hosts, grid)
        dedicated = self._every_host_shares(members)[0] / (self.arrays.processes
                                                            * self.arrays.tau)
        lengths = np.asarray(self.calibration.lengths_seconds)
        # beside a set of several hosts a candidate would take the set's shared factors
        table = self.factor_table if len(members) < 2 else np.broadcast_to(
            shared_table(self.factor_table[members])[0], self.factor_table.shape)
        return calibrated_host_log_cdf(hosts, log_cdf, length_factors(
            table, lengths, dedicated), np.asarray(self.calibration.levels),
            dedicated, grid)

    def _host_log_cdf(self, hosts: Servers, grid: np.ndarray) -> np.ndarray:
        """(K, m) the model's log CDF of each candidate: its groups' mult x log F summed (a
        group without work, mult 0, is finished from the start)."""
        per_group = completion.servers_log_cdf(hosts, grid[None, :])[0]
        with np.errstate(invalid="ignore"):
            weighted = np.where(hosts.mult[0] > 0, hosts.mult[0] * per_group, 0.0)
        m = len(self.arrays.lam)
        return weighted if weighted.shape[1] == m else weighted.reshape(
            len(grid), m, -1).sum(axis=2)

    def _every_host_shares(self, members: np.ndarray) -> np.ndarray:
        """(1, m) shares of every candidate at the common scale of the set ``members``."""
        full = _partition(self.arrays, self.work, self.partition)
        mask = np.zeros((1, len(full)), dtype=bool)
        mask[0, members] = True
        inside = _partition(self.arrays, self.work, self.partition, mask)[0]
        # scale by a member that has work in both (with a backlog, water-filling can leave a
        # host with none)
        reference = members[np.argmax(np.minimum(full[members], inside[members]))]
        if full[reference] > 0:
            return (full * (inside[reference] / full[reference]))[None, :]
        # no member has work in the whole pool's split (a set of hosts whose jobs running
        # outlast it): the members keep their own shares, or the set would read as one
        # without work (its score 0 / 0), and the others stay at the pool's scale
        shares = full.copy()
        shares[members] = inside[members]
        return shares[None, :]

    def lower_bound(self, members: np.ndarray) -> np.ndarray:
        """max_k E[T_k] of each set: a bound below its criterion (free of integration)."""
        sub = _gather(self.arrays, members)
        shares = _partition(sub, self.work, self.partition, np.ones(members.shape, bool))
        return np.max(shares / (sub.processes * sub.tau) / (1.0 - sub.rho), axis=-1)


def _host_atoms(backlog: BacklogArrays) -> np.ndarray:
    """Atoms each host adds to the exact backlog mixture (``BacklogArrays.spread_atoms`` of
    a set is their sum over its hosts with work)."""
    atoms = ((backlog.extra_var > 0) & (backlog.mult > 0)).sum(axis=1) * (1 + ATOMS)
    for k, (values, _) in backlog.explicit.items():
        atoms[k] += values.size
    return atoms


def _arrays(hosts: Sequence[Host], states: dict[str, Backlog] | None) -> HostArrays:
    return host_arrays(hosts, None if states is None else [states[h.name] for h in hosts])


def _gather(arrays: HostArrays, members: np.ndarray) -> HostArrays:
    return HostArrays(names=(), lam=arrays.lam[members], mu=arrays.mu[members],
                      sigma=arrays.sigma[members], rho=arrays.rho[members],
                      tau=arrays.tau[members], cores=arrays.cores[members],
                      process_counts=arrays.processes[members],
                      core_rho=None if arrays.core_rho is None else arrays.core_rho[members],
                      pooled=None if arrays.pooled is None else arrays.pooled[members],
                      backlog=None if arrays.backlog is None else arrays.backlog.take(members))
