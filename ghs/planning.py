"""Answering "how long, and where?" from a list of hosts: predict, schedule and simulate.

The CLI and (later) the manager call these with hosts from a host file or from measurements;
defaults come from the one Config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ghs.config import Config
from ghs.hostfile import HostList
from scheduler import Host, Prediction, predict
from scheduler.hosts import HostArrays
from scheduler.partitioning import _partition, check_work
from scheduler.prediction import QUANTILE_LEVELS, check_hosts
from scheduler.selection import Plan, schedule
from scheduler.simulation import simulate
from scheduler.workload import Demand, demand, demand_for_host


def predict_hosts(host_list: HostList, work: float, config: Config, *,
                  names: Sequence[str] = (), dist: str | None = None,
                  partition: str | None = None) -> Prediction:
    """Predict ``work`` reference-CPU-seconds on the named hosts (all usable ones if none)."""
    chosen = host_list.select(names)
    chosen.require_usable()
    return predict(chosen.hosts, work, dist or config.scheduler.distribution,
                   partition or config.scheduler.partition)


def schedule_hosts(host_list: HostList, work: float, config: Config, *,
                   names: Sequence[str] = (), method: str | None = None,
                   dist: str | None = None, partition: str | None = None) -> Plan:
    """Choose where ``work`` should run among the (named) hosts."""
    chosen = host_list.select(names)
    excluded = host_list.excluded if not names else ()
    settings = config.scheduler
    if not chosen.hosts:
        chosen.require_usable()
    return schedule(chosen.hosts, work, method or settings.method,
                    dist or settings.distribution, partition or settings.partition,
                    rho_max=settings.rho_max, max_optimal_hosts=settings.optimal_max_hosts,
                    task_ratio=settings.task_ratio, excluded=excluded)


@dataclass(frozen=True)
class SimulationReport:
    """Monte Carlo completion times beside the model's prediction for the same split."""

    hosts: tuple[str, ...]
    work: float
    shares: np.ndarray
    runs: int
    service: str
    cov: float | None
    warm: bool
    cores_mode: str
    seed: int | None
    simulated: dict[str, Any]
    predicted: Prediction

    def to_dict(self) -> dict[str, Any]:
        predicted = self.predicted
        return {
            "work": self.work,
            "runs": self.runs,
            "service": self.service,
            "cov": self.cov,
            "warm": self.warm,
            "cores_mode": self.cores_mode,
            "seed": self.seed,
            "hosts": [{"name": n, "share": float(s)} for n, s in zip(self.hosts, self.shares)],
            **self.simulated,
            "predicted": {"mean": predicted.mean, "std": predicted.std,
                          "quantiles": dict(predicted.quantiles),
                          "distribution": predicted.distribution},
        }


def simulate_hosts(host_list: HostList, work: float, config: Config, *,
                   names: Sequence[str] = (), runs: int | None = None,
                   service: str | None = None, cov: float | None = None,
                   warm: bool | None = None, partition: str | None = None,
                   dist: str | None = None, cores_mode: str = "partitioned",
                   seed: int | None = None) -> SimulationReport:
    """Simulate ``runs`` launches of the task on the (named) hosts, split by ``partition``.

    ``cov`` overrides every host's demand CoV (sigma * mu) for kinds that take one.
    """
    chosen = host_list.select(names)
    chosen.require_usable()
    hosts = check_hosts(chosen.hosts)
    work = check_work(work)
    settings = config.simulation
    kind = service or settings.service
    partition = partition or config.scheduler.partition
    runs = settings.runs if runs is None else runs
    warm = settings.warm if warm is None else warm
    shares = _partition(HostArrays.from_hosts(hosts), work, partition)
    laws = [_law(host, kind, cov) for host in hosts]
    result = simulate(hosts, shares, runs=runs, rng=np.random.default_rng(seed), service=laws,
                      warm=warm, cores_mode=cores_mode)
    summary = result.summary()
    simulated = {"mean": summary["mean"], "std": summary["std"], "cov": summary["cov"],
                 "quantiles": {name: summary[name] for name in QUANTILE_LEVELS}}
    predicted = predict(hosts, work, dist or config.scheduler.distribution, shares=shares)
    return SimulationReport(tuple(h.name for h in hosts), work, shares, int(runs), kind, cov,
                            bool(warm), cores_mode, seed, simulated, predicted)


def _law(host: Host, kind: str, cov: float | None) -> Demand:
    if cov is None:
        return demand_for_host(host, kind)
    return demand(kind, 1.0 / host.mu, cov)
