"""The calibrated predictor's costs (``ghs bench --part calibration``).

- query: a prediction with state, forecast and calibration for N hosts (the forecast bank's
  window forecast for every host, each host's steady-state backlog, the calibrated laws
  combined), against the straightforward per-host scipy.stats loop of the plain model run in
  this process (``ghs.benchmarks.scheduling.baseline_predict``);
- refresh: the manager's shadow launches (``ghs.manager.calibration``, all hosts in one
  ``advance_hosts`` as the manager's refresh does) on simulated hosts fed through the real
  sampler and record streams: CPU seconds per host and hour of record, and what that is for
  1,000 hosts, for a catch-up over the last 48 hours of record and for the hourly refresh of
  a running manager (the record grown by an hour at a time).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ghs.benchmarks.scheduling import _timed, baseline_predict, lab
from ghs.manager.calibration import Calibration
from ghs.manager.simulated_feed import ZERO_EPOCH_SECONDS, ManagerFeed, poisson_jobs
from ghs.manager.store import ManagerStore
from scheduler import ForecastBank, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS, calibrated_prediction

HOUR_SECONDS = 3600.0


def _filled_bank(hosts: int, rng: np.random.Generator) -> ForecastBank:
    """A bank with 8 days of hourly lam and rho for every host (rows 2k, 2k + 1)."""
    bank = ForecastBank(2 * hosts)
    rows = np.arange(2 * hosts)
    level = rng.uniform(0.05, 0.6, 2 * hosts)
    for b in range(8 * 24):
        daily = 1.0 + 0.5 * np.sin(2 * np.pi * b / 24.0)
        bank.push(rows, b, level * daily * rng.uniform(0.8, 1.2, 2 * hosts))
    return bank


def _calibrated(bank: ForecastBank, hosts: list, work: float, steady: list,
                factors: np.ndarray) -> Any:
    bank.forecast(np.arange(2 * len(hosts)), 8 * 24 * HOUR_SECONDS, 8 * HOUR_SECONDS)
    return calibrated_prediction(predict(hosts, work, backlog=steady), factors, SERVED_LEVELS)


def bench_query(sizes: list[int], rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        hosts = lab(size, rng)
        work = 8 * HOUR_SECONDS * size / 2
        bank = _filled_bank(size, rng)
        steady = [Backlog.steady_state()] * size
        factors = np.sort(rng.uniform(0.9, 1.4, (size, len(SERVED_LEVELS))), axis=1)
        ours, cpu, result = _wall_and_cpu(15, _calibrated, bank, hosts, work, steady, factors)
        base, _ = _timed(1 if size > 256 else 3, baseline_predict, hosts, work)
        rows.append({"hosts": size, "seconds": ours, "cpu_seconds": cpu,
                     "baseline_seconds": base, "vs_baseline": base / ours,
                     "mean": result.mean})
    return rows


def _wall_and_cpu(repeat: int, function: Any, *args: Any) -> tuple[float, float, Any]:
    """The best wall and the best CPU seconds of ``repeat`` calls (on a shared machine the
    CPU time says more of the code), and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function(*args)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return min(walls), min(cpus), result


def bench_refresh(hosts: int, days: float, hours: int = 6) -> dict[str, Any]:
    """Shadow launches of ``hosts`` simulated hosts: the catch-up over ``days`` of record
    (the last 48 hours launched on), then the hourly refresh as the record grows by
    ``hours`` more hours (what a running manager does every hour)."""
    store = ManagerStore(None)
    feeds = [ManagerFeed(store, f"ws{k}", poisson_jobs(days + hours / 24.0 + 0.5,
                                                       utilisation=0.3, mean_cpu_seconds=300.0,
                                                       cov=2.0, seed=k + 1))
             for k in range(hosts)]
    try:
        for feed in feeds:
            feed.run_until(ZERO_EPOCH_SECONDS + days * 86400.0)
        calibration = Calibration(store)
        started = time.process_time()
        made = calibration.advance_hosts([(f"ws{k}", 1) for k in range(hosts)])
        catch_up = _per_host_hour(time.process_time() - started, made, calibration)
        hourly_cpu, hourly_made = 0.0, 0
        for hour in range(1, hours + 1):
            for feed in feeds:
                feed.run_until(ZERO_EPOCH_SECONDS + days * 86400.0 + hour * HOUR_SECONDS)
            started = time.process_time()
            hourly_made += calibration.advance_hosts([(f"ws{k}", 1) for k in range(hosts)])
            hourly_cpu += time.process_time() - started
        hourly = _per_host_hour(hourly_cpu, hourly_made, calibration)
    finally:
        for feed in feeds:
            feed.close()
        store.close()
    return {"hosts": hosts, "days": days, "catch_up": catch_up, "hourly": hourly,
            "cpu_seconds_per_hour_for_1000_hosts": hourly["cpu_seconds_per_hour_for_1000_hosts"]}


def _per_host_hour(cpu: float, made: int, calibration: Calibration) -> dict[str, Any]:
    host_hours = made / len(calibration.lengths)
    per_host_hour = cpu / max(host_hours, 1.0)
    return {"launches": made, "host_hours": host_hours, "cpu_seconds": cpu,
            "cpu_seconds_per_host_hour": per_host_hour,
            "cpu_seconds_per_hour_for_1000_hosts": 1000.0 * per_host_hour}


def run(quick: bool = False, seed: int = 1) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    if quick:
        return {"query": bench_query([16, 256], rng), "refresh": bench_refresh(1, 1.0, 2)}
    # 16 hosts keep the bench to a minute or two (feeding the simulated hosts costs more than
    # the refresh). They do not overstate a larger pool's cost per host-hour: 48 hosts read
    # 12.6-15.5 ms where 16 read 9.8-13.1 the same day (README, "Speed"), although a refresh
    # integrates its hosts' launches in batches (a manager batches 32)
    return {"query": bench_query([16, 256, 1024], rng), "refresh": bench_refresh(16, 2.0)}


def show(console: Console, results: dict[str, Any]) -> None:
    table = Table(title="Calibrated prediction (forecast + steady-state start + calibration) "
                        "vs the plain model's per-host scipy.stats loop", title_justify="left")
    for column in ("hosts", "calibrated", "its CPU", "baseline (plain model)", "ratio"):
        table.add_column(column, justify="right")
    for row in results["query"]:
        table.add_row(str(row["hosts"]), f"{row['seconds'] * 1e3:.2f} ms",
                      f"{row['cpu_seconds'] * 1e3:.2f} ms",
                      f"{row['baseline_seconds'] * 1e3:.1f} ms", f"{row['vs_baseline']:.1f}x")
    console.print(table)
    r = results["refresh"]
    for name, label in (("catch_up", "catch-up over the last 48 h"), ("hourly", "hourly")):
        part = r[name]
        console.print(f"Calibration refresh, {label}: {part['launches']} shadow launches over "
                      f"{part['host_hours']:.0f} host-hours in {part['cpu_seconds']:.2f} s CPU: "
                      f"{part['cpu_seconds_per_host_hour'] * 1e3:.1f} ms per host-hour, "
                      f"{part['cpu_seconds_per_hour_for_1000_hosts']:.1f} s of CPU per hour "
                      f"for 1,000 hosts")
