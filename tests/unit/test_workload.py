"""Workload generators against textbook facts: moments, Poisson counts, queue backlog."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.workload import (
    DEMAND_KINDS,
    Demand,
    Trace,
    demand,
    demand_for_host,
    poisson_jobs,
    stationary_backlog,
)

CASES = [
    ("exponential", None, 1.0),
    ("deterministic", None, 0.0),
    ("lognormal", 0.5, 0.5),
    ("lognormal", 1.5, 1.5),
    ("gamma", 0.3, 0.3),
    ("gamma", 2.0, 2.0),
    ("hyperexponential", 1.0, 1.0),
    ("hyperexponential", 2.0, 2.0),
    ("loguniform", 0.2, 0.2),
    ("loguniform", 2.0, 2.0),
]


@pytest.mark.parametrize(("kind", "cov", "expected_cov"), CASES)
def test_sample_mean_and_cov_match_request(kind, cov, expected_cov):
    law = demand(kind, 120.0, cov)
    x = law.sample(np.random.default_rng(11), 1_000_000)
    assert x.shape == (1_000_000,)
    assert (x >= 0).all()
    assert x.mean() == pytest.approx(120.0, rel=0.01)
    assert x.std() / x.mean() == pytest.approx(expected_cov, rel=0.04, abs=1e-9)
    assert law.second_moment == pytest.approx(120.0**2 * (1 + expected_cov**2))


@pytest.mark.parametrize(("kind", "cov", "expected_cov"), CASES)
def test_excess_mean_is_second_moment_over_twice_mean(kind, cov, expected_cov):
    # Renewal theory: the stationary-excess law has mean E[X^2] / (2 E[X]).
    law = demand(kind, 50.0, cov)
    r = law.sample_excess(np.random.default_rng(12), 1_000_000)
    assert (r >= 0).all()
    assert r.mean() == pytest.approx(50.0 * (1 + expected_cov**2) / 2, rel=0.015)


def test_excess_of_deterministic_is_uniform_and_of_exponential_is_exponential():
    from scipy import stats

    rng = np.random.default_rng(13)
    flat = demand("deterministic", 10.0).sample_excess(rng, 20_000)
    assert stats.kstest(flat, stats.uniform(0, 10).cdf).pvalue > 1e-3
    memoryless = demand("exponential", 10.0).sample_excess(rng, 20_000)
    assert stats.kstest(memoryless, stats.expon(scale=10).cdf).pvalue > 1e-3


def test_sample_takes_shapes_and_zero_cov_is_a_point_mass():
    rng = np.random.default_rng(1)
    assert demand("gamma", 3.0, 0.7).sample(rng, (4, 5)).shape == (4, 5)
    for kind in ("lognormal", "gamma", "loguniform"):
        assert np.all(demand(kind, 3.0, 0.0).sample(rng, 100) == 3.0)
    assert np.all(demand("deterministic", 2.5).sample(rng, 10) == 2.5)


def test_loguniform_is_uniform_in_log_between_its_bounds():
    x = demand("loguniform", 100.0, 1.0).sample(np.random.default_rng(2), 200_000)
    low, high = x.min(), x.max()
    assert high / low > 10
    # Half the mass below the geometric midpoint, a quarter in each quarter of log range.
    logs = (np.log(x) - math.log(low)) / math.log(high / low)
    assert np.histogram(logs, bins=4, range=(0, 1))[0] / x.size == pytest.approx(
        [0.25] * 4, abs=0.005)


def test_hyperexponential_with_cov_one_is_exponential():
    from scipy import stats

    x = demand("hyperexponential", 5.0, 1.0).sample(np.random.default_rng(3), 20_000)
    assert stats.kstest(x, stats.expon(scale=5.0).cdf).pvalue > 1e-3


@pytest.mark.parametrize(("kind", "mean", "cov", "field"), [
    ("weibull", 1.0, 1.0, "kind"),
    ("exponential", 0.0, None, "mean_seconds"),
    ("exponential", -1.0, None, "mean_seconds"),
    ("gamma", math.nan, 1.0, "mean_seconds"),
    ("gamma", math.inf, 1.0, "mean_seconds"),
    ("gamma", 1.0, -0.1, "cov"),
    ("gamma", 1.0, math.nan, "cov"),
    ("gamma", 1.0, None, "cov"),
    ("exponential", 1.0, 2.0, "cov"),
    ("deterministic", 1.0, 0.5, "cov"),
    ("hyperexponential", 1.0, 0.9, "cov"),
    ("loguniform", 1.0, 100.0, "cov"),
    ("lognormal", "abc", 1.0, "mean_seconds"),
])
def test_demand_rejects_bad_arguments(kind, mean, cov, field):
    with pytest.raises(InvalidArgumentError) as info:
        demand(kind, mean, cov)
    assert info.value.field == field
    assert info.value.code == "invalid_argument"


def test_demand_constructor_validates_too():
    with pytest.raises(InvalidArgumentError, match="mean_seconds"):
        Demand("gamma", -2.0, 1.0)
    assert Demand("deterministic", 3) == Demand("deterministic", 3.0, 0.0)


def test_demand_errors_name_what_is_allowed():
    with pytest.raises(InvalidArgumentError, match="allowed: exponential, deterministic"):
        demand("pareto", 1.0)
    with pytest.raises(InvalidArgumentError, match=r"cov 1.*got 2"):
        demand("exponential", 1.0, 2.0)
    assert demand("exponential", 2.0, 1.0) == demand("exponential", 2.0)
    assert set(DEMAND_KINDS) == {"exponential", "deterministic", "lognormal", "gamma",
                                 "hyperexponential", "loguniform"}


def test_demand_for_host_uses_mean_one_over_mu_and_cov_sigma_mu():
    host = Host("h", lam=0.01, mu=0.05, sigma=40.0, rho=0.2)
    law = demand_for_host(host, "lognormal")
    assert law == Demand("lognormal", 20.0, 2.0)
    assert demand_for_host(host, "exponential") == Demand("exponential", 20.0, 1.0)
    with pytest.raises(InvalidArgumentError):
        demand_for_host("h", "gamma")
    with pytest.raises(InvalidArgumentError):
        demand_for_host(Host("h", lam=0.01, mu=0.05, sigma=10.0, rho=0.2), "hyperexponential")


def test_poisson_jobs_count_window_and_demands():
    rng = np.random.default_rng(4)
    law = demand("gamma", 2.0, 0.5)
    counts = []
    for _ in range(400):
        arrivals, cpu = poisson_jobs(0.5, law, rng, 100.0, 300.0)
        assert arrivals.shape == cpu.shape
        assert np.all(np.diff(arrivals) >= 0)
        assert np.all((arrivals >= 100.0) & (arrivals < 300.0))
        counts.append(arrivals.size)
    # Poisson(100): mean and variance both 100.
    assert np.mean(counts) == pytest.approx(100, abs=2.0)
    assert np.var(counts) == pytest.approx(100, rel=0.25)
    arrivals, cpu = poisson_jobs(0.5, law, rng, 0.0, 200_000.0)
    assert cpu.mean() == pytest.approx(2.0, rel=0.02)
    gaps = np.diff(arrivals)
    assert gaps.mean() == pytest.approx(2.0, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)  # exponential gaps
    empty = poisson_jobs(0.0, law, rng, 0.0, 10.0)
    assert empty[0].size == 0 and empty[1].size == 0


def test_poisson_jobs_validates():
    law = demand("exponential", 1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidArgumentError, match="rate_per_second"):
        poisson_jobs(-1.0, law, rng, 0.0, 1.0)
    with pytest.raises(InvalidArgumentError, match="end_seconds"):
        poisson_jobs(1.0, law, rng, 2.0, 1.0)
    with pytest.raises(InvalidArgumentError, match="Demand"):
        poisson_jobs(1.0, "exponential", rng, 0.0, 1.0)


def test_trace_validates_and_is_read_only():
    with pytest.raises(InvalidArgumentError, match="non-decreasing"):
        Trace([0.0, 2.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(InvalidArgumentError, match="negative"):
        Trace([0.0, 1.0], [1.0, -1.0])
    with pytest.raises(InvalidArgumentError, match="finite"):
        Trace([0.0, math.nan], [1.0, 1.0])
    with pytest.raises(InvalidArgumentError, match="finite"):
        Trace([0.0, 1.0], [1.0, math.inf])
    with pytest.raises(InvalidArgumentError, match="3 arrivals but 2"):
        Trace([0.0, 1.0, 2.0], [1.0, 1.0])
    with pytest.raises(InvalidArgumentError):
        Trace.from_rows([(0.0, "x")])
    trace = Trace.from_rows([(10, 5), (1, 2), (2, 1), (1, 3)])
    assert list(trace.arrival_seconds) == [1, 1, 2, 10]
    assert list(trace.cpu_seconds) == [2, 3, 1, 5]  # ties keep their order
    assert len(trace) == 4 and len(Trace.from_rows([])) == 0
    with pytest.raises(ValueError):
        trace.cpu_seconds[0] = 9.0


def _naive_backlog(arrivals, demands, time):
    backlog, clock = 0.0, None
    for a, x in zip(arrivals, demands, strict=True):
        if a >= time:
            break
        if clock is not None:
            backlog = max(0.0, backlog - (a - clock))
        backlog, clock = backlog + x, a
    return 0.0 if clock is None else max(0.0, backlog - (time - clock))


def test_trace_backlog_by_hand_and_against_a_job_by_job_walk():
    trace = Trace.from_rows([(1, 2), (2, 1), (10, 5)])
    assert list(trace.backlog_seconds([0, 1, 1.5, 2, 2.5, 4, 11, 20])) == [
        0, 0, 1.5, 1, 1.5, 0, 4, 0]
    rng = np.random.default_rng(5)
    arrivals, cpu = poisson_jobs(0.1, demand("lognormal", 8.0, 2.0), rng, 1e9, 1e9 + 5e4)
    trace = Trace(arrivals, cpu)
    times = rng.uniform(1e9 - 10, 1e9 + 5.1e4, 300)
    expected = [_naive_backlog(arrivals, cpu, t) for t in times]
    assert trace.backlog_seconds(times) == pytest.approx(expected, abs=1e-6)
    with pytest.raises(InvalidArgumentError):
        trace.backlog_seconds([math.nan])


def _long_trace_backlogs(rate, law, seed, span=2e8, samples=40_000):
    rng = np.random.default_rng(seed)
    trace = Trace(*poisson_jobs(rate, law, rng, 0.0, span))
    return trace.backlog_seconds(rng.uniform(0.05 * span, span, samples))


def test_time_average_busy_fraction_of_a_poisson_trace_is_rho():
    law = demand("lognormal", 60.0, 1.5)
    backlog = _long_trace_backlogs(0.4 / 60.0, law, seed=6, span=5e7)
    assert np.mean(backlog > 0) == pytest.approx(0.4, abs=0.015)


def test_stationary_backlog_matches_pollaczek_khinchine_and_a_long_path():
    # Textbook M/G/1: P(backlog = 0) = 1 - rho, E[backlog] = rho/(1-rho) E[X^2]/(2 E[X]).
    rng = np.random.default_rng(7)
    for law, rho in ((demand("exponential", 120.0), 0.5), (demand("gamma", 30.0, 2.0), 0.7),
                     (demand("deterministic", 10.0), 0.3)):
        rate = rho / law.mean_seconds
        backlog = stationary_backlog(rate, law, rng, 400_000)
        pk_mean = rho / (1 - rho) * law.second_moment / (2 * law.mean_seconds)
        assert np.mean(backlog == 0) == pytest.approx(1 - rho, abs=0.004)
        assert backlog.mean() == pytest.approx(pk_mean, rel=0.02)
    # Independently of that formula, the exact sampler agrees with a long simulated path.
    law = demand("hyperexponential", 100.0, 2.0)
    path = _long_trace_backlogs(0.6 / 100.0, law, seed=8)
    exact = stationary_backlog(0.6 / 100.0, law, rng, 200_000)
    assert np.mean(exact == 0) == pytest.approx(np.mean(path == 0), abs=0.015)
    assert exact.mean() == pytest.approx(path.mean(), rel=0.08)
    assert np.quantile(exact, 0.9) == pytest.approx(np.quantile(path, 0.9), rel=0.08)


def test_stationary_backlog_validates():
    law = demand("exponential", 10.0)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidArgumentError, match="must be < 1"):
        stationary_backlog(0.1, law, rng, 10)
    with pytest.raises(InvalidArgumentError, match="size"):
        stationary_backlog(0.05, law, rng, -1)
    assert np.all(stationary_backlog(0.0, law, rng, 5) == 0)
