"""Answering "how long, and where?" from a list of hosts: predict, schedule and simulate.

The CLI and (later) the manager call these with hosts from a host file or from measurements;
defaults come from the one Config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ghs.answers import Answer, Assumptions, answer, model_assumptions
from ghs.config import Config
from ghs.hostfile import HostList
from ghs.placement import placed
from scheduler import Backlog, Host, Prediction, predict
from scheduler.partitioning import check_work
from scheduler.prediction import QUANTILE_LEVELS, check_hosts
from scheduler.selection import Exclusion, schedule
from scheduler.simulation import simulate
from scheduler.workload import _FIXED_COV, Demand, demand, demand_for_host


def file_backlog(hosts: Sequence[Host], config: Config) -> list[Backlog] | None:
    """A host file says nothing of the jobs running now: each host starts in its steady
    state (a machine at a random moment), unless the config asks for the paper's idle start."""
    if config.scheduler.start_state == "idle":
        return None
    return [Backlog.steady_state() for _ in hosts]


def predict_hosts(host_list: HostList, work: float, config: Config, *,
                  names: Sequence[str] = (), dist: str | None = None,
                  partition: str | None = None, processes_per_host: int | None = None,
                  pinned: bool = False) -> Answer:
    """Predict ``work`` reference-CPU-seconds on the named hosts (all usable ones if none);
    ``processes_per_host`` and ``pinned`` as in ``ghs.placement.placed`` (a host file has no
    per-core load, so pinned processes see the host's average core)."""
    chosen = host_list.select(names)
    chosen.require_usable()
    hosts, placement = placed(chosen.hosts, None, processes_per_host, pinned)
    prediction = predict(hosts, work, dist or config.scheduler.distribution,
                         partition or config.scheduler.partition,
                         backlog=file_backlog(hosts, config))
    return answer(prediction, "host file", excluded=chosen.excluded, placement=placement,
                  hosts=hosts)


def schedule_hosts(host_list: HostList, work: float, config: Config, *,
                   names: Sequence[str] = (), method: str | None = None,
                   dist: str | None = None, partition: str | None = None,
                   processes_per_host: int | None = None, pinned: bool = False) -> Answer:
    """Choose where ``work`` should run among the (named) hosts (``processes_per_host`` and
    ``pinned`` as in ``predict_hosts``)."""
    chosen = host_list.select(names)
    settings = config.scheduler
    if not chosen.hosts:
        chosen.require_usable()
    hosts, placement = placed(chosen.hosts, None, processes_per_host, pinned)
    plan = schedule(hosts, work, method or settings.method,
                    dist or settings.distribution, partition or settings.partition,
                    rho_max=settings.rho_max, max_optimal_hosts=settings.optimal_max_hosts,
                    optimal_budget_seconds=settings.optimal_budget_seconds,
                    task_ratio=settings.task_ratio, excluded=chosen.excluded,
                    backlog=file_backlog(hosts, config))
    return answer(plan, "host file", placement={
        h.name: placement[h.name] for h in plan.hosts if h.name in placement},
        hosts=plan.hosts)


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
    excluded: tuple[Exclusion, ...] = ()
    model: Assumptions | None = None

    @property
    def start_state(self) -> str:
        """How the simulated queues start: warm (stationary backlog) or idle (empty)."""
        return "warm" if self.warm else "idle"

    @property
    def demands(self) -> str:
        """The local jobs' demand law, in words."""
        if self.cov is not None:
            return f"{self.service}, CoV {self.cov:g} on every host"
        if self.service in _FIXED_COV:
            return f"{self.service} (each host's mean 1/mu; sigma not used)"
        return f"{self.service} (each host's mean 1/mu and sigma)"

    def to_dict(self) -> dict[str, Any]:
        predicted = self.predicted
        return {
            "work": self.work,
            "runs": self.runs,
            "service": self.service,
            # "cov" below is the completion time's; this is the override of demands' CoV
            "demand_cov": self.cov,
            "demands": self.demands,
            "warm": self.warm,
            "start_state": self.start_state,
            "cores_mode": self.cores_mode,
            "seed": self.seed,
            "hosts": [{"name": n, "share": float(s)} for n, s in zip(self.hosts, self.shares)],
            **self.simulated,
            "predicted": {"mean": predicted.mean, "std": predicted.std,
                          "quantiles": dict(predicted.quantiles),
                          "distribution": predicted.distribution,
                          "assumptions": None if self.model is None else self.model.to_dict()},
            "excluded": [{"name": e.name, "reason": e.reason} for e in self.excluded],
        }


def simulate_hosts(host_list: HostList, work: float, config: Config, *,
                   names: Sequence[str] = (), runs: int | None = None,
                   service: str | None = None, cov: float | None = None,
                   warm: bool | None = None, partition: str | None = None,
                   dist: str | None = None, cores_mode: str = "partitioned",
                   seed: int | None = None, source: str = "host file") -> SimulationReport:
    """Simulate ``runs`` launches of the task on the (named) hosts, split by ``partition``.

    ``cov`` overrides every host's demand CoV (sigma * mu) for kinds that take one; ``source``
    (a key of ``ghs.answers.LOAD_MODELS``) is where the hosts' parameters came from.
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
    # The model starts the way the simulated queues do (steady state beside a warm start),
    # and the simulated task is split as that model splits it: the shares `ghs predict`
    # gives. A split that ignored the backlog gave a host at utilisation 0.95 a share the
    # model, seeing its backlog, leaves out.
    predicted = predict(hosts, work, dist or config.scheduler.distribution, partition,
                        backlog=[Backlog.steady_state() for _ in hosts] if warm else None)
    shares = np.asarray(predicted.shares, dtype=float)
    laws = [_law(host, kind, cov) for host in hosts]
    result = simulate(hosts, shares, runs=runs, rng=np.random.default_rng(seed), service=laws,
                      warm=warm, cores_mode=cores_mode)
    summary = result.summary()
    simulated = {"mean": summary["mean"], "std": summary["std"], "cov": summary["cov"],
                 "quantiles": {name: summary[name] for name in QUANTILE_LEVELS}}
    return SimulationReport(tuple(h.name for h in hosts), work, shares, int(runs), kind, cov,
                            bool(warm), cores_mode, seed, simulated, predicted,
                            excluded=chosen.excluded,
                            model=model_assumptions(predicted, source, hosts=hosts))


def _law(host: Host, kind: str, cov: float | None) -> Demand:
    if cov is None:
        return demand_for_host(host, kind)
    return demand(kind, 1.0 / host.mu, cov)
