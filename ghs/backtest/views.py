"""Each predictor's view of a station at a launch: the model's host and its start.

- the 24-hour view: the manager's Adapt_avg estimate turned into a host by the manager's
  rules (:func:`ghs.manager.estimates.model_parameters`), as ``ghs predict`` does today;
- the forecast view: lam and rho forecast over the task's own run window by the NWS-selected
  forecaster of a :class:`scheduler.ForecastBank` fed hour by hour with the station's measured
  series, mu and sigma pooled over the 24 hours before launch;
- the start: idle (the paper), or the backlog of the jobs in the latest running snapshot, each
  job's remaining demand from the most specific demand template with enough jobs
  (:func:`scheduler.templates.choose_template`), else the two-moment law of the host.

A utilisation at or above 1 is capped at ``RHO_CAP`` (as the experiments do): a single-station
back-test must still predict something for a saturated day.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ghs.backtest.world import Known
from ghs.experiments.launches import RHO_CAP, host_from_estimate
from ghs.manager.shadow_start import arrivals_load
from scheduler import Host
from scheduler.backlog import Backlog
from scheduler.forecast import ForecastBank
from scheduler.hosts import utilisation_law_mu
from scheduler.templates import Histogram, TwoMomentDemand, choose_template
from scheduler.window_forecast import POOL_SECONDS, bin_series
from sensors.templates import bin_edges_seconds

MIN_TEMPLATE_JOBS = 20.0
IDLE = Host("idle", lam=0.0, mu=1.0, sigma=0.0, rho=0.0)
# The open ends of the agent's bins ([0, 0.01 s) and [1e7 s, inf)) become one decade each.
_EDGES = np.array([bin_edges_seconds()[1] / 10, *bin_edges_seconds()[1:-1],
                   bin_edges_seconds()[-2] * 10])


def day_host(name: str, estimate: Any) -> Host:
    """The 24-hour view (an idle host before any measurement)."""
    if estimate is None or estimate.lam is None:
        return Host(name, lam=0.0, mu=1.0, sigma=0.0, rho=0.0)
    return host_from_estimate(name, estimate)


def parameters_host(name: str, lam: float | None, rho: float | None, mu: float | None,
                    sigma: float | None) -> Host:
    """A host from possibly missing parameters, filled by the manager's rules."""
    if lam is None or rho is None or not (math.isfinite(lam) and math.isfinite(rho)):
        return Host(name, lam=0.0, mu=1.0, sigma=0.0, rho=0.0)
    if mu is None:
        # no job finished in the 24 hours before launch: the mean demand that keeps the CPU
        # at rho under arrivals at lam, at most any workstation's (a forecast of almost no
        # arrivals beside a busy CPU is one long job running; NASA cut 6 ways forecast lam
        # 1e-24/s at rho 0.54, and the host was refused and the whole back-test with it)
        mu = utilisation_law_mu(lam, rho)
    if sigma is None:
        sigma = 1.0 / mu
    return Host(name, lam=max(lam, 0.0), mu=mu, sigma=sigma, rho=min(max(rho, 0.0), RHO_CAP))


def _histogram(book: Any, scope: str, user: str = "", command: str = "") -> Histogram | None:
    found = book.histogram(scope, user, command)
    if found is None or not found.n > 0:
        return None
    return Histogram(_EDGES, np.asarray(found.dense_counts()))


def snapshot_backlog(known: Known, host: Host) -> tuple[Backlog, dict[str, int]]:
    """The backlog of the jobs in the latest snapshot, and how many jobs each template level
    served (``omitted`` jobs beyond the snapshot's cap count as new jobs of the pooled law)."""
    running = known.running
    if running is None:
        return Backlog.idle(), {}
    fallback = TwoMomentDemand(1.0 / host.mu, max(host.sigma, 0.0))
    book, laws, used = known.templates, [], {}
    jobs = [(job["cpu_seconds"], job["user"], job["command"]) for job in running["jobs"]]
    jobs += [(0.0, "", "")] * int(running.get("jobs_omitted", 0))
    for age, user, command in jobs:
        candidates = [("user-command", _histogram(book, "command", user, command) if user
                       else None),
                      ("user", _histogram(book, "user", user) if user else None),
                      ("pooled", _histogram(book, "pooled"))]
        choice = choose_template(candidates, MIN_TEMPLATE_JOBS, fallback, age)
        laws.append(choice.law)
        used[choice.level] = used.get(choice.level, 0) + 1
    if not laws:
        return Backlog.idle(), used
    return Backlog.from_laws(laws, [age for age, _, _ in jobs]), used


class Forecasts:
    """One forecast bank for all stations (rows 2k: lam, 2k + 1: rho), fed hour by hour."""

    def __init__(self, stations: int) -> None:
        self.bank = ForecastBank(2 * stations)
        self._next_bin: int | None = None

    def update(self, knowns: list[Known]) -> None:
        """Push every bin completed before the launch all ``knowns`` were taken at."""
        until = knowns[0].epoch_seconds
        series = []
        for known in knowns:
            m = known.measured
            for name in ("lam", "rho"):
                series.append(bin_series(m["end_time"], m[name], m["interval_seconds"],
                                         until_seconds=until, settings=self.bank.settings))
        stop = max(first + means.size for first, means in series)
        start = min(first for first, _ in series) if self._next_bin is None else self._next_bin
        for b in range(start, stop):
            rows = [r for r, (first, means) in enumerate(series) if first <= b < first + means.size]
            if rows:
                self.bank.push(np.array(rows), b, [series[r][1][b - series[r][0]] for r in rows])
        self._next_bin = max(stop, start)

    def hosts(self, stations: list[int], names: list[str], knowns: list[Known],
              launch_epoch: float, duration_seconds: float, *,
              arrivals_only: bool | list[bool] = False, held: bool = True) -> list[Host]:
        """The forecast view of ``stations`` for a run of ``duration_seconds`` from launch.

        ``arrivals_only`` (one flag, or one per station): the load is the forecast arrival
        rate times the pooled mean demand, with ``held`` at most the station's long-run
        utilisation, leaving out the running jobs' carried load (for a start that holds them
        as backlog); otherwise the forecast measured utilisation."""
        flags = arrivals_only if isinstance(arrivals_only, list) else [arrivals_only] * len(
            stations)
        rows = np.array([[2 * k, 2 * k + 1] for k in stations]).reshape(-1)
        found = self.bank.forecast(rows, launch_epoch, duration_seconds)
        values, long_run = found.value.reshape(-1, 2), found.long_run.reshape(-1, 2)[:, 1]
        hosts = []
        for (lam, rho), held_to, name, known, arrivals in zip(values, long_run, names, knowns,
                                                              flags):
            mu, sigma = pooled_demand(known)
            if arrivals and mu is not None:
                # as a manager's state view (ghs.manager.shadow_start.starts_of)
                lam, rho = arrivals_load(float(lam), mu,
                                         float(held_to) if held else math.nan)
            hosts.append(parameters_host(name, float(lam), float(rho), mu, sigma))
        return hosts


def pooled_demand(known: Known) -> tuple[float | None, float | None]:
    """(mu 1/s, sigma s) of the local jobs that finished in the 24 hours before launch."""
    m = known.measured
    recent = m["end_time"] > known.epoch_seconds - POOL_SECONDS
    n = m["service_count"][recent].sum()
    if not n > 0:
        return None, None
    mean = m["service_sum_seconds"][recent].sum() / n
    if not mean > 0:
        return None, None
    second = m["service_sum_squares"][recent].sum() / n
    return 1.0 / mean, math.sqrt(max(second - mean * mean, 0.0))


def last_utilisation(known: Known) -> float:
    """The last measured utilisation before launch (0 before any)."""
    rho = known.measured["rho"]
    return float(rho[-1]) if rho.size else 0.0
