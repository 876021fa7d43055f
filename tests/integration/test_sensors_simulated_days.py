"""Three virtual days of a simulated host through the real sampler, sensor and store.

Days 1 and 2: a steady Poisson stream (4 jobs/s, gamma demands of mean 0.25 s and CoV 1, on
2 cores, so rho = 0.5); day 3: the rate alternates hourly between 1 and 7 jobs/s (the same
mean). The 24-hour estimates at the end of days 1 and 2 must be within 5 % of the true
parameters (with 48+ measurements a day the estimation error is about 1 %, so 5 % is some
five standard errors), the hourly count must fall from the first hour's maximum once the
load shows itself steady (paper Fig. 8), and rise again while the load varies.
"""

from __future__ import annotations

import itertools
import random
import statistics

import numpy as np
import pytest

from ghs.simulated_hosts import piecewise_rows, poisson_rows, simulated_host
from scheduler.workload import demand
from sensors.clock import VirtualClock
from sensors.sampler import AdaptiveSampler
from sensors.store import SensorStore

pytestmark = pytest.mark.slow

HOUR = 3600.0
START = 1_700_000_000.0 - 1_700_000_000.0 % HOUR
RATE, MEAN, COV, CORES = 4.0, 0.25, 1.0, 2


def test_three_days_estimates_and_adaptive_counts():
    jobs = demand("gamma", MEAN, COV)
    rng = np.random.default_rng(11)
    steady_end = START + 48 * HOUR
    varying = [(steady_end + h * HOUR, steady_end + (h + 1) * HOUR, 1.0 if h % 2 else 7.0, jobs)
               for h in range(24)]
    rows = itertools.chain(poisson_rows(RATE, jobs, rng, START, steady_end),
                           piecewise_rows(varying, rng))  # lazy: about a million jobs
    clock = VirtualClock(START)
    host = simulated_host(rows, clock=clock, cores=CORES, speed=1.0)
    store = SensorStore(None)
    sampler = AdaptiveSampler(host.sensor(), store, clock, random.Random(11),
                              interval_seconds=60.0, min_per_hour=2, max_per_hour=30)
    reports = sampler.run(hours=72)

    truth = {"lam": RATE, "rho": RATE * MEAN / CORES, "mu": 1 / MEAN, "sigma": COV * MEAN}
    for hour in (23, 47):
        estimate = reports[hour].estimate
        print(f"\nhour {hour + 1}: " + ", ".join(
            f"{name} {getattr(estimate, name):.4f} ({getattr(estimate, name) / value - 1:+.2%})"
            for name, value in truth.items()) + f" from {estimate.measurements} measurements")
        for name, value in truth.items():
            assert getattr(estimate, name) == pytest.approx(value, rel=0.05), (hour, name)
        assert estimate.mu_source == "accounting"
    assert reports[22].estimate.provisional and not reports[24].estimate.provisional

    counts = [report.completed for report in reports]
    print("measurements per hour:", counts)
    assert counts[0] == 30  # no history: the upper bound
    steady = statistics.fmean(counts[36:48])
    assert steady <= 8  # n_s / 24 of a steady host
    assert statistics.fmean(counts[66:72]) >= 3 * steady  # variable load needs more samples
    assert sum(counts) == len(store.measurements())
    assert len(store.plans()) == 72 and store.plans()[40]["count"] == counts[40]
