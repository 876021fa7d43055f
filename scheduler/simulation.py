"""Discrete-event Monte Carlo of a divisible remote task on hosts shared with local jobs.

This is the oracle the analytical model is tested against, so it never uses the model's
formulas: it walks local arrivals one by one and lets them preempt the remote sub-task.

A CPU core is a work-conserving server. Local jobs have priority, and the order among them
does not change when the remote sub-task can run, so a core's state is its unfinished local
work ("backlog", seconds); between two arrivals the core first clears the backlog and gives
the rest of the gap to the remote sub-task. The arrays walk all runs and cores at once,
arrival by arrival, drawing inter-arrival gaps and demands in blocks and retiring the runs
whose sub-task has finished. The utilisation the simulator sees is lam * mean demand / cores;
``Host.rho`` is not read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.chain_walk import check_walk, check_warm_up, walk, warm_up
from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.workload import DEMAND_KINDS, Demand, demand_for_host, stationary_backlog

CORES_MODES = ("partitioned", "shared")
# runs x cores whose state (several float arrays of that size) stays within a few hundred MB
_MAX_CORE_RUNS = 2e7
# jobs a warm start's backlogs may draw in all (two arrays of that length)
_MAX_BACKLOG_JOBS = 2e7
_WARM_UP_RELAXATIONS = 8.0
_WARM_UP_MIN_DEMANDS = 50.0


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Simulated completion times (seconds from launch) of a task.

    ``completion_seconds``: (runs,), the task's completion, the latest of its hosts'.
    ``host_completion_seconds``: (runs, hosts); 0 for a host given no work.
    ``interruptions``: (runs, hosts), local arrivals that took a core from the remote
    sub-task (summed over a host's cores).
    """

    completion_seconds: np.ndarray
    host_completion_seconds: np.ndarray
    interruptions: np.ndarray
    host_names: tuple[str, ...]

    @property
    def runs(self) -> int:
        return int(self.completion_seconds.size)

    @property
    def mean(self) -> float:
        """Sample mean completion time, seconds."""
        return float(self.completion_seconds.mean())

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof=1; 0 for a single run), seconds."""
        if self.runs < 2:
            return 0.0
        return float(self.completion_seconds.std(ddof=1))

    def quantile(self, p: float) -> float:
        """Empirical p-quantile of the completion time, seconds (0 <= p <= 1)."""
        level = _number("p", p)
        if not 0.0 <= level <= 1.0:
            raise InvalidArgumentError(f"quantile level p must be in [0, 1], got {p!r}",
                                       field="p", value=p)
        return float(np.quantile(self.completion_seconds, level))

    def summary(self) -> dict[str, float | int]:
        """mean, std, cov (std / mean), p50, p90, p95, p99 in seconds, and runs."""
        mean, std = self.mean, self.std
        stats: dict[str, float | int] = {"mean": mean, "std": std,
                                         "cov": std / mean if mean > 0 else 0.0}
        for level in (50, 90, 95, 99):
            stats[f"p{level}"] = self.quantile(level / 100.0)
        stats["runs"] = self.runs
        return stats


def _number(field: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{field} must be a number, got {value!r}", field=field,
                                   value=value) from None
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{field} must be finite, got {value!r}", field=field,
                                   value=value)
    return number


def _finite_array(field: str, values: object) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{field} must be numbers, got {values!r}", field=field,
                                   value=values) from None
    if not np.isfinite(array).all():
        raise InvalidArgumentError(f"{field} must be finite", field=field, value=values)
    return array


def simulate(hosts: Sequence[Host], shares: Sequence[float], *, runs: int,
             rng: np.random.Generator, service: str | Sequence[Demand] = "exponential",
             warm: bool = False, cores_mode: str = "partitioned",
             initial_work_seconds: Sequence[object] | None = None,
             running_jobs: Sequence[Sequence[object]] | None = None) -> SimulationResult:
    """Simulate ``runs`` independent launches of a task split as ``shares`` over ``hosts``.

    shares: reference-CPU-seconds per host (0: the host gets nothing); host k needs
    share / tau of its CPU time. service: a demand kind (mean 1/mu, CoV sigma*mu of each
    host) or one :class:`Demand` per host. warm: start every queue in its stationary state
    instead of idle (partitioned: an exact draw of the M/G/1 backlog; shared: a warm-up run
    of the local queue from empty over 8 estimated relaxation times).

    cores_mode ``partitioned`` makes each of a host's c cores its own server with Poisson
    arrivals at lam/c and share/c of the work (the model's assumption). ``shared`` is one
    FCFS queue of local jobs at rate lam served by c cores (M/G/c, one core per job) while
    the remote work runs as c equal threads on whatever cores are free. Approximation: the
    threads are taken to share the free cores fairly and so to progress equally, so the host
    finishes when its cumulative free core-time reaches share / tau (scheduling granularity,
    affinity and migration costs are ignored).

    State at launch, one entry per host (added to the warm backlog when both are given):
    ``initial_work_seconds``: each host's local work per core, None, an array (cores,) or
    (runs, cores) in seconds. ``running_jobs``: each host's local jobs present at launch in
    FCFS order, each a remaining demand in seconds or an object with ``sample(rng, size)``
    drawing one per run; each job joins the core whose work ends first in that run.
    """
    hosts, share = _check_hosts_and_shares(hosts, shares)
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise InvalidArgumentError(f"runs must be a whole number >= 1, got {runs!r}",
                                   field="runs", value=runs)
    if not isinstance(rng, np.random.Generator):
        raise InvalidArgumentError(f"rng must be a numpy.random.Generator, got {rng!r}",
                                   field="rng", value=rng)
    if cores_mode not in CORES_MODES:
        raise InvalidArgumentError(f"unknown cores_mode {cores_mode!r}; allowed: "
                                   f"{', '.join(CORES_MODES)}", field="cores_mode",
                                   value=cores_mode)
    if not isinstance(warm, (bool, np.bool_)):
        raise InvalidArgumentError(f"warm must be True or False, got {warm!r}", field="warm",
                                   value=warm)
    demands = _demands(hosts, service)
    for host, load, work in zip(hosts, _utilisation(hosts, demands, range(len(hosts))), share,
                                strict=True):
        if work > 0 and load >= 1:
            raise InvalidArgumentError(
                f"host {host.name!r}: local utilisation lam * mean demand / cores = {load:g} "
                "must be < 1, or the remote sub-task may never finish", field="hosts",
                value=host.name)
    runs = int(runs)
    _check_memory(hosts, runs)
    state = _launch_state(hosts, runs, initial_work_seconds, running_jobs, rng)
    finish = np.zeros((runs, len(hosts)))
    hits = np.zeros((runs, len(hosts)), dtype=np.int64)
    used = [k for k in range(len(hosts)) if share[k] > 0]
    if cores_mode == "partitioned":
        _simulate_partitioned(hosts, share, demands, used, bool(warm), rng, finish, hits,
                              state)
    else:
        for width in sorted({hosts[k].cores for k in used}):
            batch = [k for k in used if hosts[k].cores == width]
            _simulate_shared(hosts, share, demands, batch, width, bool(warm), rng, finish,
                             hits, state)
    return SimulationResult(finish.max(axis=1), finish, hits, tuple(h.name for h in hosts))


def _check_hosts_and_shares(hosts: Sequence[Host],
                            shares: Sequence[float]) -> tuple[list[Host], np.ndarray]:
    hosts = list(hosts)
    if not hosts or not all(isinstance(h, Host) for h in hosts):
        raise InvalidArgumentError("hosts must be a non-empty sequence of Host",
                                   field="hosts", value=hosts)
    try:
        share = np.array(shares, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"shares must be numbers, got {shares!r}", field="shares",
                                   value=shares) from None
    if share.size != len(hosts):
        raise InvalidArgumentError(f"got {share.size} shares for {len(hosts)} hosts",
                                   field="shares", value=share.size)
    bad = ~np.isfinite(share) | (share < 0)
    if bad.any():
        k = int(np.argmax(bad))
        raise InvalidArgumentError(
            f"share of host {hosts[k].name!r} must be finite and >= 0 reference-CPU-seconds, "
            f"got {share[k]!r}", field="shares", value=share[k])
    return hosts, share


def _demands(hosts: list[Host], service: str | Sequence[Demand]) -> list[Demand]:
    if isinstance(service, str):
        if service not in DEMAND_KINDS:
            raise InvalidArgumentError(f"unknown service {service!r}; allowed: "
                                       f"{', '.join(DEMAND_KINDS)} or one Demand per host",
                                       field="service", value=service)
        return [demand_for_host(h, service) for h in hosts]
    laws = list(service)
    if len(laws) != len(hosts) or not all(isinstance(d, Demand) for d in laws):
        raise InvalidArgumentError(
            f"service must be a demand kind or {len(hosts)} Demand objects (one per host)",
            field="service", value=service)
    return laws


def _launch_state(hosts: list[Host], runs: int, initial: Sequence[object] | None,
                  jobs: Sequence[Sequence[object]] | None, rng: np.random.Generator
                  ) -> list[np.ndarray]:
    """(runs, cores) local work per core at launch for every host, seconds."""
    loads = [np.zeros((runs, host.cores)) for host in hosts]
    for field_name, given in (("initial_work_seconds", initial), ("running_jobs", jobs)):
        if given is not None and len(given) != len(hosts):
            raise InvalidArgumentError(f"{field_name} needs one entry per host ({len(hosts)})",
                                       field=field_name, value=len(given))
    for k, host in enumerate(hosts):
        if initial is not None and initial[k] is not None:
            work = _finite_array("initial_work_seconds", initial[k])
            try:
                loads[k] += np.broadcast_to(work, (runs, host.cores))
            except ValueError:
                raise InvalidArgumentError(
                    f"initial_work_seconds of host {host.name!r} must have shape "
                    f"({host.cores},) or ({runs}, {host.cores})", field="initial_work_seconds",
                    value=work.shape) from None
        for job in (() if jobs is None or jobs[k] is None else jobs[k]):
            remaining = (job.sample(rng, runs) if hasattr(job, "sample")
                         else np.full(runs, _number("running_jobs", job)))
            core = np.argmin(loads[k], axis=1)
            loads[k][np.arange(runs), core] += remaining
        if (loads[k] < 0).any():
            raise InvalidArgumentError(f"local work at launch of host {host.name!r} must be "
                                       ">= 0 seconds", field="initial_work_seconds",
                                       value=float(loads[k].min()))
    return loads


def _simulate_partitioned(hosts, share, demands, used, warm, rng, finish, hits,
                          state) -> None:
    # Each core is its own M/G/1 server; chains are laid out host by host, run-major.
    need, inv_rate, group, start = [], [], [], []
    for g, k in enumerate(used):
        host, cores = hosts[k], hosts[k].cores
        size = finish.shape[0] * cores
        rate = host.lam / cores
        need.append(np.full(size, share[k] / (host.tau * cores)))
        inv_rate.append(np.full(size, 1.0 / rate if rate > 0 else math.inf))
        group.append(np.full(size, g))
        if warm:
            _check_backlog_draws(host, rate * demands[k].mean_seconds, size)
        start.append((stationary_backlog(rate, demands[k], rng, size) if warm
                      else np.zeros(size)) + state[k].reshape(-1))
    if not used:
        return
    chains = (np.concatenate(start)[:, None], np.concatenate(need), np.concatenate(inv_rate),
              np.concatenate(group))
    check_walk(*chains, [hosts[k].name for k in used],
               _utilisation(hosts, demands, used)[chains[3]])
    elapsed, count = walk(*chains, [demands[k] for k in used], rng)
    offset = 0
    for k in used:
        cores = hosts[k].cores
        size = finish.shape[0] * cores
        finish[:, k] = elapsed[offset:offset + size].reshape(-1, cores).max(axis=1)
        hits[:, k] = count[offset:offset + size].reshape(-1, cores).sum(axis=1)
        offset += size


def _simulate_shared(hosts, share, demands, batch, width, warm, rng, finish, hits,
                     state) -> None:
    runs = finish.shape[0]
    laws = [demands[k] for k in batch]
    group = np.repeat(np.arange(len(batch)), runs)
    inv_rate = np.repeat([1.0 / hosts[k].lam if hosts[k].lam > 0 else math.inf
                          for k in batch], runs)
    need = np.repeat([share[k] / hosts[k].tau for k in batch], runs)
    start = np.zeros((need.size, width))
    if warm:
        horizon = np.repeat([_warm_up_seconds(hosts[k], demands[k]) for k in batch], runs)
        check_warm_up(horizon, inv_rate, group, [hosts[k].name for k in batch], width)
        start = warm_up(horizon, width, inv_rate, group, laws, rng)
    start = np.sort(start + np.concatenate([state[k] for k in batch]), axis=1)
    check_walk(start, need, inv_rate, group, [hosts[k].name for k in batch],
               _utilisation(hosts, demands, batch)[group])
    elapsed, count = walk(start, need, inv_rate, group, laws, rng)
    for g, k in enumerate(batch):
        finish[:, k] = elapsed[g * runs:(g + 1) * runs]
        hits[:, k] = count[g * runs:(g + 1) * runs]


def _utilisation(hosts: Sequence[Host], demands: Sequence[Demand], chosen: Sequence[int]
                 ) -> np.ndarray:
    """Local load per core, lam * mean demand / cores, of the ``chosen`` hosts."""
    return np.array([hosts[k].lam * demands[k].mean_seconds / hosts[k].cores for k in chosen])


def _check_memory(hosts: Sequence[Host], runs: int) -> None:
    """Refuse runs whose per-core state would not fit in memory: every run keeps a few
    numbers for each core of each host (a host of a million cores over 4,000 runs asked for
    tens of gigabytes and the process was killed)."""
    cells = runs * sum(host.cores for host in hosts)
    if cells > _MAX_CORE_RUNS:
        raise InvalidArgumentError(
            f"{runs} runs of hosts with {sum(h.cores for h in hosts)} cores in all would keep "
            f"{cells:.3g} cores' state (over {_MAX_CORE_RUNS:.0e}, gigabytes of memory): "
            "simulate fewer runs or fewer hosts", field="runs", value=runs)


def _check_backlog_draws(host: Host, utilisation: float, chains: int) -> None:
    """Refuse a warm start whose steady-state backlogs would draw over _MAX_BACKLOG_JOBS
    jobs' remaining work: a Geometric number a core, utilisation / (1 - utilisation) on
    average (4,096 cores at 0.996 over 1,000 runs asked for 7 GB of draws)."""
    if not 0 < utilisation < 1:
        return
    jobs = chains * utilisation / (1.0 - utilisation)
    if jobs > _MAX_BACKLOG_JOBS:
        raise InvalidArgumentError(
            f"host {host.name!r}: drawing its cores' steady-state backlogs would take some "
            f"{jobs:.3g} local jobs over the runs (over {_MAX_BACKLOG_JOBS:.0e}, gigabytes of "
            f"memory; utilisation {utilisation:.3g}): simulate fewer runs, or start idle",
            field="runs", value=host.name)


def _warm_up_seconds(host: Host, law: Demand) -> float:
    """A warm-up long against the queue's relaxation time.

    E[X] (1 + cov^2) / (2 (1 - sqrt(rho))^2) is the M/M/1 relaxation time E[X] / (1 -
    sqrt(rho))^2 for cov = 1 and tends to the heavy-traffic (reflected Brownian) value
    2 lam E[X^2] / (1 - rho)^2 as rho -> 1; c cores at the same per-core load relax faster.
    """
    rho = host.lam * law.mean_seconds / host.cores
    relaxation = law.mean_seconds * (1.0 + law._cov**2) / (2.0 * (1.0 - math.sqrt(rho)) ** 2)
    return max(_WARM_UP_RELAXATIONS * relaxation, _WARM_UP_MIN_DEMANDS * law.mean_seconds)
