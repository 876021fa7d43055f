"""Prediction and selection speed against straightforward baselines (``ghs bench``).

Every figure is measured in this process on this machine. Baselines:
- prediction: a per-host Python loop over frozen scipy.stats distributions, with the
  product CDF on a fixed 4,001-point grid and the trapezoid rule;
- exact selection: the paper's Fig. 2 loop, one ``predict`` call per subset, run only where it
  is projected to finish within a minute (otherwise its projected time is reported).
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import stats

from scheduler import Host, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS
from scheduler.calibrated_selection import SelectionCalibration
from scheduler.hosts import HostArrays
from scheduler.model import DEFAULT_DIST, conditional_moments
from scheduler.partitioning import _partition
from scheduler.selection import schedule

LITERAL_BUDGET_SECONDS = 60.0


def lab(count: int, rng: np.random.Generator) -> list[Host]:
    """A generated lab: rho 0.05-0.6, mean demand 30-600 s (log-uniform), demand CoV
    0.5-2.5, tau 0.5-2, a quarter 2-core and a quarter 4-core; lam consistent with rho."""
    hosts = []
    for index in range(count):
        cores = int(rng.choice([1, 1, 2, 4]))
        rho = rng.uniform(0.05, 0.6)
        mean_demand = math.exp(rng.uniform(math.log(30), math.log(600)))
        hosts.append(Host(f"ws{index:05d}", lam=cores * rho / mean_demand, mu=1 / mean_demand,
                          sigma=mean_demand * rng.uniform(0.5, 2.5), rho=rho,
                          tau=rng.uniform(0.5, 2.0), cores=cores))
    return hosts


def _timed(repeat: int, function: Callable[..., Any], *args: Any,
           clock: Callable[[], float] = time.perf_counter) -> tuple[float, Any]:
    """Best time of ``repeat`` calls of ``function(*args)`` by ``clock`` (wall by default),
    seconds, and the result."""
    best = math.inf
    result = None
    for _ in range(repeat):
        started = clock()
        result = function(*args)
        best = min(best, clock() - started)
    return best, result


def baseline_predict(hosts: list[Host], work: float) -> tuple[float, float]:
    """(mean, std) the straightforward way: one frozen scipy.stats law per host."""
    arrays = HostArrays.from_hosts(hosts)
    shares = _partition(arrays, work, "equal-mean")
    laws = []
    for host, share in zip(hosts, shares):
        t = share / (host.cores * host.tau)
        q, m1, v = (float(a) for a in conditional_moments(
            np.array(host.lam / host.cores), np.array(host.rho),
            np.array(host.sigma**2 + 1 / host.mu**2), np.array(t)))
        s = math.sqrt(math.log1p(v / m1**2)) if q > 0 else 1.0
        law = stats.lognorm(s, scale=math.exp(math.log(m1) - s * s / 2)) if q > 0 else None
        laws.append((t, q, law, host.cores))
    x0 = max(t for t, _, _, _ in laws)
    x_hi = max(t + (law.isf(1e-10 / len(hosts)) if law is not None else 0.0)
               for t, _, law, _ in laws)
    x = np.linspace(x0, max(x_hi, x0 * (1 + 1e-9)), 4001)
    cdf = np.ones_like(x)
    for t, q, law, cores in laws:
        host_cdf = np.ones_like(x) if law is None else (1 - q) + q * law.cdf(np.maximum(x - t,
                                                                                 0.0))
        cdf *= np.where(x >= t, host_cdf, 0.0) ** cores
    survival = 1 - cdf
    mean = x0 + np.trapezoid(survival, x)
    second = 2 * np.trapezoid((x - x0) * survival, x)
    return float(mean), float(math.sqrt(max(second - (mean - x0) ** 2, 0.0)))


def bench_prediction(sizes: list[int], rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        hosts = lab(size, rng)
        work = 8 * 3600.0 * size / 2
        ours, prediction = _timed(7, predict, hosts, work)
        # the same lab started from each host's steady-state backlog (no fresh snapshot)
        steady = [Backlog.steady_state()] * size
        with_state, _ = _timed(7, functools.partial(predict, hosts, work, backlog=steady))
        repeat = 3 if size <= 1024 else 1
        base, (base_mean, _) = _timed(repeat, baseline_predict, hosts, work)
        rows.append({"hosts": size, "ours_seconds": ours, "steady_state_seconds": with_state,
                     "baseline_seconds": base,
                     "speedup": base / ours, "mean": prediction.mean,
                     "baseline_mean_rel_diff": base_mean / prediction.mean - 1,
                     "distribution": DEFAULT_DIST})
    return rows


SELECTION_METHODS = ("heuristic", "prefix", "auto")
# auto on the calibrated criterion is timed up to this many hosts: every size the bench
# runs (its screen's per-member windows grow with the set; 10,000 hosts peak near 200 MB)
CALIBRATED_MAX_HOSTS = 10_000
CALIBRATION_LENGTHS = (900.0, 3600.0, 4 * 3600.0, 8 * 3600.0)


def lab_calibration(hosts: list[Host], rng: np.random.Generator) -> SelectionCalibration:
    """Factors as a manager's calibrators leave them, at the levels it serves: log-normal
    around 1 (sd 0.3), non-decreasing in the level, per host and task length."""
    return SelectionCalibration(CALIBRATION_LENGTHS, {
        host.name: np.maximum.accumulate(
            np.exp(rng.normal(0.0, 0.3, (len(CALIBRATION_LENGTHS), len(SERVED_LEVELS)))),
            axis=1)
        for host in hosts}, SERVED_LEVELS)


def bench_selection(sizes: list[int], rng: np.random.Generator) -> list[dict[str, Any]]:
    """Each method on one generated lab per size; auto's rows carry its time and criterion
    over prefix's, measured here on the same lab, and (up to CALIBRATED_MAX_HOSTS) its time
    ranking sets by a calibrated law (factors from their own generator: the labs stay
    those of earlier runs). Times are CPU seconds of this process (``time.process_time``,
    the best of several runs: on a shared machine wall time measures the neighbours)."""
    rows = []
    for size in sizes:
        hosts = lab(size, rng)
        work = 3600.0 * size
        by_method = {}
        for method in SELECTION_METHODS:
            seconds, plan = _timed(_selection_repeats(size), schedule, hosts, work, method,
                                   clock=time.process_time)
            by_method[method] = {"method": method, "hosts": size, "seconds": seconds,
                                 "chosen": len(plan.hosts), "evaluations": plan.evaluations,
                                 "criterion": plan.prediction.criterion}
        prefix, auto = by_method["prefix"], by_method["auto"]
        if size <= CALIBRATED_MAX_HOSTS:
            calibration = lab_calibration(hosts, np.random.default_rng(size))
            auto["calibrated_seconds"], calibrated_plan = _timed(
                max(2, _selection_repeats(size) // 2),
                functools.partial(schedule, hosts, work, calibration=calibration),
                clock=time.process_time)
            # the sets the calibrated search scored: its time is about their number times
            # each one's cost, which is where the 5 ms target at 20 hosts is missed
            auto["calibrated_evaluations"] = calibrated_plan.evaluations
        auto["time_vs_prefix"] = auto["seconds"] / prefix["seconds"]
        auto["criterion_vs_prefix"] = auto["criterion"] / prefix["criterion"]
        rows.extend(by_method.values())
    return rows


def _selection_repeats(size: int) -> int:
    """Runs of a selection timed at ``size`` hosts: many where one is milliseconds."""
    return 20 if size <= 50 else 6 if size <= 1000 else 1


def literal_optimal(hosts: list[Host], work: float, budget_seconds: float
                    ) -> tuple[float, float | None, bool]:
    """The paper's Fig. 2: every subset, one prediction each. (seconds, criterion, ran?)

    Projected from the first subsets when the whole loop would exceed ``budget_seconds``.
    """
    subsets = [c for p in range(1, len(hosts) + 1)
               for c in itertools.combinations(hosts, p)]
    sample = subsets[:: max(1, len(subsets) // 150)][:150]
    started = time.perf_counter()
    for subset in sample:
        predict(list(subset), work)
    per_subset = (time.perf_counter() - started) / len(sample)
    if per_subset * len(subsets) > budget_seconds:
        return per_subset * len(subsets), None, False
    started = time.perf_counter()
    best = math.inf
    for subset in subsets:
        best = min(best, predict(list(subset), work).criterion)
    return time.perf_counter() - started, best, True


def bench_optimal(sizes: list[int], rng: np.random.Generator,
                  budget_seconds: float = LITERAL_BUDGET_SECONDS) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        hosts = lab(size, rng)
        work = 2 * 3600.0 * size
        seconds, plan = _timed(1, schedule, hosts, work, "optimal")
        auto_seconds, auto = _timed(3, schedule, hosts, work, "auto")
        literal_seconds, literal_best, ran = literal_optimal(hosts, work, budget_seconds)
        rows.append({"hosts": size, "seconds": seconds, "evaluations": plan.evaluations,
                     "subsets": 2**size - 1, "criterion": plan.prediction.criterion,
                     "literal_seconds": literal_seconds, "literal_ran": ran,
                     "literal_criterion": literal_best, "speedup": literal_seconds / seconds,
                     "auto_seconds": auto_seconds, "auto_time_vs_optimal": auto_seconds / seconds,
                     "auto_criterion_vs_optimal": auto.prediction.criterion
                     / plan.prediction.criterion})
    return rows


def run(quick: bool = False, seed: int = 1) -> dict[str, Any]:
    """All scheduler benchmarks; ``quick`` keeps sizes small (for tests and smoke runs)."""
    rng = np.random.default_rng(seed)
    if quick:
        return {"prediction": bench_prediction([16, 256], rng),
                "selection": bench_selection([20, 200], rng),
                "optimal": bench_optimal([8, 12], rng, budget_seconds=5.0),
                "quick": True, "seed": seed}
    return {"prediction": bench_prediction([16, 256, 1024, 4096], rng),
            "selection": bench_selection([20, 1000, 10000], rng),
            "optimal": bench_optimal([10, 12, 14, 16, 18, 20], rng),
            "quick": False, "seed": seed}


def show(console: Console, results: dict[str, Any]) -> None:
    table = Table(title=f"Prediction ({DEFAULT_DIST}) vs per-host scipy.stats loop",
                  title_justify="left")
    for column in ("hosts", "ours", "ours, steady-state start", "baseline", "speed-up",
                   "baseline mean diff"):
        table.add_column(column, justify="right")
    for row in results["prediction"]:
        table.add_row(str(row["hosts"]), f"{row['ours_seconds'] * 1e3:.2f} ms",
                      f"{row['steady_state_seconds'] * 1e3:.2f} ms",
                      f"{row['baseline_seconds'] * 1e3:.1f} ms", f"{row['speedup']:.0f}x",
                      f"{row['baseline_mean_rel_diff']:+.2e}")
    console.print(table)
    table = Table(title="Selection: heuristic (paper Fig. 3), prefix and auto (the default); "
                        "CPU time",
                  title_justify="left")
    for column in ("method", "hosts", "time", "sets", "chosen", "criterion", "time/prefix",
                   "crit/prefix", "calibrated"):
        table.add_column(column, justify="right")
    for row in results["selection"]:
        ratios = ((f"{row['time_vs_prefix']:.2f}x", f"{row['criterion_vs_prefix']:.3f}")
                  if "time_vs_prefix" in row else ("", ""))
        calibrated = (f"{row['calibrated_seconds'] * 1e3:.1f} ms, "
                      f"{row['calibrated_evaluations']:,} sets"
                      if "calibrated_seconds" in row else "")
        table.add_row(row["method"], str(row["hosts"]), f"{row['seconds'] * 1e3:.2f} ms",
                      f"{row['evaluations']:,}", str(row["chosen"]),
                      f"{row['criterion']:,.0f} s", *ratios, calibrated)
    console.print(table)
    table = Table(title="Exact selection vs the paper's literal Fig. 2 loop",
                  title_justify="left")
    for column in ("hosts", "ours", "sets evaluated", "literal loop", "speed-up", "auto",
                   "auto crit/opt"):
        table.add_column(column, justify="right")
    for row in results["optimal"]:
        literal = f"{row['literal_seconds']:.1f} s" + ("" if row["literal_ran"]
                                                       else " (projected)")
        table.add_row(str(row["hosts"]), f"{row['seconds']:.3f} s",
                      f"{row['evaluations']:,} / {row['subsets']:,}", literal,
                      f"{row['speedup']:.0f}x", f"{row['auto_seconds'] * 1e3:.1f} ms",
                      f"{row['auto_criterion_vs_optimal']:.4f}")
    console.print(table)
