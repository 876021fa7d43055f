"""``auto`` against the exact optimum on larger pools and on workstations cut from real logs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ghs.benchmarks.scheduling import lab
from ghs.experiments.selection import trace_pool
from ghs.traces import read_log
from scheduler.selection import schedule

pytestmark = pytest.mark.slow

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"
WITHIN = 0.01


def gap(hosts, work) -> float:
    auto = schedule(hosts, work, "auto")
    optimal = schedule(hosts, work, "optimal")
    return auto.prediction.criterion / optimal.prediction.criterion - 1


@pytest.mark.parametrize("seed", range(4))
def test_auto_is_within_one_percent_on_pools_of_16_to_18(seed):
    # the benchmark's labs (a quarter 2-core, a quarter 4-core); the unit tests cover the
    # wider ranges on pools the exact search finishes faster
    rng = np.random.default_rng(700 + seed)
    count = 16 + seed % 3
    assert gap(lab(count, rng), 3600.0 * count * rng.uniform(0.1, 2.0)) <= WITHIN


def test_auto_finds_the_benchmark_pools_optimum_where_the_heuristic_does_not():
    # ``ghs bench --quick``'s 20-host lab (issue 9: the heuristic's set 12,215 s, prefix's
    # 6,861 s, with the model of that time)
    rng = np.random.default_rng(1)
    lab(16, rng), lab(256, rng)  # the quick bench draws these first
    hosts = lab(20, rng)
    work = 3600.0 * 20
    heuristic = schedule(hosts, work, "heuristic").prediction.criterion
    prefix = schedule(hosts, work, "prefix").prediction.criterion
    assert gap(hosts, work) <= WITHIN
    assert schedule(hosts, work, "auto").prediction.criterion <= prefix < heuristic


@pytest.fixture(scope="module", params=["LCG.swf.gz", "RICC-2010-2.swf.gz"])
def job_log(request):
    path = TRACES / request.param
    if not path.exists():
        pytest.skip(f"trace {request.param} not present")
    return read_log(path)


@pytest.mark.parametrize(("count", "seed"), [(12, 1), (15, 2)])
def test_auto_is_within_one_percent_on_workstations_from_real_logs(job_log, count, seed):
    # the selection experiment's trace pools: long local jobs, demand CoV well above 1
    hosts, _ = trace_pool(job_log, count, np.random.default_rng(seed))
    for work in (2 * 3600.0, 12 * 3600.0):
        assert gap(hosts, work) <= WITHIN
