"""The simulator against facts that do not come from the completion-time model."""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np
import pytest
from scipy import stats

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.simulation import SimulationResult, simulate
from scheduler.trace_simulation import simulate_trace, simulate_trace_many
from scheduler.workload import Trace, demand, poisson_jobs


def _host(name="h", rho=0.5, mean_seconds=120.0, cov=1.0, tau=1.0, cores=1):
    mu = 1.0 / mean_seconds
    return Host(name, lam=rho * cores * mu, mu=mu, sigma=cov * mean_seconds, rho=rho,
                tau=tau, cores=cores)


# --- traces -------------------------------------------------------------------------------


def test_trace_example_by_hand():
    trace = Trace.from_rows([(1, 2), (2, 1), (10, 5)])
    # 0-1 remote, 1-4 local (2 s + 1 s), 4-8 remote: 5 s of remote work done at 8.
    assert simulate_trace(trace, 5.0, 0.0) == 8.0
    # Launched at 1.5 behind 1.5 s of backlog, +1 s at t=2: remote runs 4-9.
    assert simulate_trace(trace, 5.0, 1.5) == 7.5
    # 9-10 remote, 10-15 local, 15-17 remote.
    assert simulate_trace(trace, 3.0, 9.0) == 8.0
    assert simulate_trace(trace, 4.0, 20.0) == 4.0  # after the trace's last job
    assert simulate_trace(trace, 0.0, 1.5) == 0.0  # nothing to do
    assert simulate_trace(Trace([], []), 3.0, 2.0) == 3.0
    many = simulate_trace_many(trace, [5.0, 5.0, 3.0], [0.0, 1.5, 9.0])
    assert list(many) == [8.0, 7.5, 8.0]
    assert simulate_trace_many(trace, 5.0, np.zeros((2, 2))).shape == (2, 2)


def _naive_trace_completion(arrivals, cpu, dedicated, launch):
    """Walk job by job: build the backlog up to launch, then alternate local and remote."""
    backlog, clock, index = 0.0, None, 0
    while index < len(arrivals) and arrivals[index] < launch:
        if clock is not None:
            backlog = max(0.0, backlog - (arrivals[index] - clock))
        backlog, clock = backlog + cpu[index], arrivals[index]
        index += 1
    if clock is not None:
        backlog = max(0.0, backlog - (launch - clock))
    now, left = launch, dedicated
    for a, x in zip(arrivals[index:], cpu[index:], strict=True):
        gap = a - now
        if gap >= backlog + left:
            break
        left -= max(0.0, gap - backlog)
        backlog, now = max(0.0, backlog - gap) + x, a
    return now + backlog + left - launch


def test_trace_completions_match_a_job_by_job_walk_and_conserve_work():
    rng = np.random.default_rng(21)
    arrivals, cpu = poisson_jobs(1 / 200, demand("lognormal", 100.0, 2.0), rng, 5e8, 5e8 + 4e5)
    trace = Trace(arrivals, cpu)
    launch = rng.uniform(5e8 - 1e3, 5e8 + 3e5, 400)
    dedicated = rng.uniform(0.0, 5000.0, 400)
    got = simulate_trace_many(trace, dedicated, launch)
    expected = [_naive_trace_completion(arrivals, cpu, d, t)
                for d, t in zip(dedicated, launch, strict=True)]
    assert got == pytest.approx(expected, abs=1e-6)
    # Work conservation: the core is never idle before the task ends, so the elapsed time is
    # the remote work plus the backlog at launch plus all local work arriving meanwhile.
    backlog = trace.backlog_seconds(launch)
    for g, d, t, b in zip(got, dedicated, launch, backlog, strict=True):
        arrived = cpu[(arrivals >= t) & (arrivals < t + g)].sum()
        assert g == pytest.approx(d + b + arrived, abs=1e-6)


def test_trace_validation():
    trace = Trace.from_rows([(1, 2)])
    with pytest.raises(InvalidArgumentError, match="dedicated_seconds"):
        simulate_trace(trace, -1.0, 0.0)
    with pytest.raises(InvalidArgumentError, match="launch_seconds"):
        simulate_trace(trace, 1.0, math.nan)
    with pytest.raises(InvalidArgumentError, match="Trace"):
        simulate_trace([(1, 2)], 1.0, 0.0)
    with pytest.raises(InvalidArgumentError, match="does not match"):
        simulate_trace_many(trace, [1.0, 2.0], [0.0, 1.0, 2.0])


# --- Poisson hosts: exact and textbook facts ----------------------------------------------


def test_without_local_jobs_completion_is_dedicated_time_exactly():
    hosts = [Host("a", lam=0.0, mu=0.1, sigma=10.0, rho=0.0, tau=2.0),
             Host("b", lam=0.0, mu=0.1, sigma=10.0, rho=0.0, tau=0.5, cores=4),
             _host("c")]
    shares = [100.0, 60.0, 0.0]
    for mode in ("partitioned", "shared"):
        for warm in (False, True):
            result = simulate(hosts, shares, runs=5, rng=np.random.default_rng(1), warm=warm,
                              cores_mode=mode)
            assert np.all(result.host_completion_seconds == [50.0, 30.0, 0.0])
            assert np.all(result.completion_seconds == 50.0)
            assert np.all(result.interruptions == 0)


def test_long_run_local_busy_fraction_is_lam_times_mean_demand():
    # Over [0, T] the core is always busy, with remote work for w/tau of it.
    host = _host(rho=0.4, mean_seconds=60.0, cov=1.5, tau=2.0)
    result = simulate([host], [40_000.0], runs=2000, rng=np.random.default_rng(2),
                      service="lognormal")
    total = result.completion_seconds.sum()
    assert (total - 2000 * 20_000.0) / total == pytest.approx(0.4, abs=0.01)


@pytest.mark.parametrize(("service", "warm"), [("exponential", False), ("deterministic", True),
                                               ("hyperexponential", False)])
def test_interruptions_are_poisson_with_mean_lam_times_dedicated_time(service, warm):
    # The remote task runs for exactly w/tau seconds in all, and Poisson arrivals during it
    # are what interrupt it: Poisson(lam w/tau), mean = variance.
    host = _host(rho=0.6, mean_seconds=50.0, cov=2.0, tau=2.0)
    result = simulate([host], [1200.0], runs=20_000, rng=np.random.default_rng(3),
                      service=service, warm=warm)
    count = result.interruptions[:, 0]
    expected = host.lam * 600.0  # 7.2
    assert count.mean() == pytest.approx(expected, abs=0.12)
    assert count.var() == pytest.approx(expected, abs=0.5)
    # No interruption and no backlog at launch is exactly the undisturbed completion.
    idle_start = 1.0 - (0.6 if warm else 0.0)
    assert np.mean(result.completion_seconds == 600.0) == pytest.approx(
        idle_start * math.exp(-expected), abs=0.002)


def test_interruptions_per_core_in_partitioned_mode():
    host = _host(rho=0.5, mean_seconds=20.0, cores=2)
    result = simulate([host], [2000.0], runs=8000, rng=np.random.default_rng(4))
    # Two cores, each with arrivals at lam/2 while running 1000 s.
    count = result.interruptions[:, 0]
    assert count.mean() == pytest.approx(host.lam / 2 * 2 * 1000.0, rel=0.02)
    assert count.var() == pytest.approx(count.mean(), rel=0.1)


def test_deterministic_with_a_fixed_seed():
    hosts = [_host("a"), _host("b", rho=0.3, cores=2), _host("c", rho=0.1, tau=3.0)]
    for mode in ("partitioned", "shared"):
        first = simulate(hosts, [5000, 7000, 9000], runs=200, rng=np.random.default_rng(9),
                         warm=True, cores_mode=mode, service="gamma")
        again = simulate(hosts, [5000, 7000, 9000], runs=200, rng=np.random.default_rng(9),
                         warm=True, cores_mode=mode, service="gamma")
        other = simulate(hosts, [5000, 7000, 9000], runs=200, rng=np.random.default_rng(10),
                         warm=True, cores_mode=mode, service="gamma")
        assert np.array_equal(first.host_completion_seconds, again.host_completion_seconds)
        assert np.array_equal(first.interruptions, again.interruptions)
        assert not np.array_equal(first.completion_seconds, other.completion_seconds)


def test_task_completion_is_the_latest_host():
    hosts = [_host("a", rho=0.3), _host("b", rho=0.6, mean_seconds=30.0, cov=0.5)]
    laws = [demand("exponential", 120.0), demand("lognormal", 30.0, 0.5)]
    result = simulate(hosts, [3000.0, 2000.0], runs=500, rng=np.random.default_rng(5),
                      service=laws)
    assert result.host_completion_seconds.shape == (500, 2)
    assert np.array_equal(result.completion_seconds, result.host_completion_seconds.max(axis=1))
    assert np.all(result.host_completion_seconds >= [3000.0, 2000.0])
    assert result.host_names == ("a", "b")


def test_warm_start_delays_by_the_stationary_backlog():
    # The backlog at launch and the local work arriving while it clears are all served
    # first, so E[T] = (w + E[backlog]) / (1 - rho) against w / (1 - rho) from idle, with
    # E[backlog] the textbook Pollaczek-Khinchine value rho/(1-rho) E[X^2]/(2 E[X]).
    host = _host(rho=0.5, mean_seconds=100.0, cov=2.0)
    law = demand("gamma", 100.0, 2.0)
    pk_backlog = 0.5 / 0.5 * law.second_moment / (2 * law.mean_seconds)
    cold = simulate([host], [500.0], runs=40_000, rng=np.random.default_rng(6), service="gamma")
    warm = simulate([host], [500.0], runs=40_000, rng=np.random.default_rng(6), service="gamma",
                    warm=True)
    assert (warm.mean - cold.mean) * 0.5 == pytest.approx(pk_backlog, rel=0.1)


def test_shared_mode_warm_up_reaches_the_stationary_backlog():
    # Shared mode warms up by running the local queue; with almost no remote work the
    # completion is the busy period the launch backlog starts, mean (w + E[backlog])/(1-rho).
    host = _host(rho=0.8, mean_seconds=60.0, cov=2.0)
    law = demand("hyperexponential", 60.0, 2.0)
    pk_backlog = 0.8 / 0.2 * law.second_moment / (2 * law.mean_seconds)
    result = simulate([host], [1.0], runs=30_000, rng=np.random.default_rng(16),
                      service="hyperexponential", warm=True, cores_mode="shared")
    assert result.mean == pytest.approx((1.0 + pk_backlog) / 0.2, rel=0.05)


# --- multi-core hosts -------------------------------------------------------------------------


def _naive_shared(host, law, need, rng):
    """Event by event: FCFS local jobs on c cores, remote threads on the free ones."""
    cores, queue = [0.0] * host.cores, deque()
    now, done, hits = 0.0, 0.0, 0
    arrival = rng.exponential(1.0 / host.lam)
    while True:
        busy = [r for r in cores if r > 0]
        free = host.cores - len(busy)
        to_job = min(busy) if busy else math.inf
        to_finish = (need - done) / free if free else math.inf
        to_arrival = arrival - now
        step = min(to_job, to_arrival)
        if to_finish <= step:
            return now + to_finish, hits
        done += free * step
        now = arrival if step == to_arrival else now + step
        cores = [r - step if r > 0 else 0.0 for r in cores]
        if step == to_job:  # a job ended: its core takes the next queued job
            cores = [r if r > 0 or not queue else queue.popleft() for r in cores]
        if step == to_arrival:
            job = float(law.sample(rng, 1)[0])
            if 0.0 in cores:
                cores[cores.index(0.0)] = job
                hits += 1
            else:
                queue.append(job)
            arrival = now + rng.exponential(1.0 / host.lam)


def test_shared_mode_matches_an_event_by_event_simulation():
    host = _host(rho=0.6, mean_seconds=40.0, cov=1.5, cores=3)
    law = demand("lognormal", 40.0, 1.5)
    rng = np.random.default_rng(7)
    reference = np.array([_naive_shared(host, law, 600.0, rng) for _ in range(3000)])
    result = simulate([host], [600.0], runs=6000, rng=np.random.default_rng(8),
                      service="lognormal", cores_mode="shared")
    assert stats.ks_2samp(result.completion_seconds, reference[:, 0]).pvalue > 1e-3
    assert result.interruptions.mean() == pytest.approx(reference[:, 1].mean(), rel=0.05)


def test_shared_mode_with_one_core_agrees_with_partitioned():
    # Partitioned mode starts warm from an exact stationary draw, shared mode after a
    # warm-up run; a busy host makes a short warm-up show.
    host = _host(rho=0.8, mean_seconds=60.0, cov=2.0)
    for warm in (False, True):
        split = simulate([host], [600.0], runs=8000, rng=np.random.default_rng(11),
                         service="hyperexponential", warm=warm)
        shared = simulate([host], [600.0], runs=8000, rng=np.random.default_rng(12),
                          service="hyperexponential", warm=warm, cores_mode="shared")
        assert stats.ks_2samp(split.completion_seconds, shared.completion_seconds).pvalue > 1e-3
        assert shared.mean == pytest.approx(split.mean, rel=0.08)


def test_shared_mode_on_two_cores_against_m_m_2_facts():
    host = _host(rho=0.6, mean_seconds=100.0, cores=2)
    need = 240.0  # two threads of 120 s
    escape = math.exp(-host.lam * need / 2)  # no arrival while both threads run
    cold = simulate([host], [need], runs=20_000, rng=np.random.default_rng(13),
                    cores_mode="shared")
    assert np.all(cold.completion_seconds >= need / 2)
    assert np.mean(cold.completion_seconds == need / 2) == pytest.approx(escape, abs=0.01)
    # Stationary M/M/2: P(no job present) = (1 - rho) / (1 + rho) for per-core load rho.
    warm = simulate([host], [need], runs=20_000, rng=np.random.default_rng(14),
                    cores_mode="shared", warm=True)
    assert np.mean(warm.completion_seconds == need / 2) == pytest.approx(
        0.4 / 1.6 * escape, abs=0.006)


def test_shared_mode_long_task_uses_the_free_core_share():
    # Local jobs keep a fraction rho of the c cores busy in the long run, so a long task of
    # w core-seconds takes about w / (c (1 - rho)).
    host = _host(rho=0.5, mean_seconds=30.0, cov=1.5, cores=4, tau=2.0)
    result = simulate([host], [400_000.0], runs=300, rng=np.random.default_rng(15),
                      service="gamma", cores_mode="shared")
    assert result.mean == pytest.approx(200_000.0 / (4 * 0.5), rel=0.01)


# --- results and validation ----------------------------------------------------------------


def test_result_summary():
    result = SimulationResult(np.array([1.0, 2.0, 3.0, 4.0]), np.array([[1.0], [2.0], [3.0],
                              [4.0]]), np.zeros((4, 1), dtype=np.int64), ("a",))
    summary = result.summary()
    assert set(summary) == {"mean", "std", "cov", "p50", "p90", "p95", "p99", "runs"}
    assert summary["mean"] == 2.5 and summary["runs"] == 4
    assert summary["std"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert summary["cov"] == pytest.approx(summary["std"] / 2.5)
    assert summary["p50"] == 2.5 and result.quantile(1.0) == 4.0
    with pytest.raises(InvalidArgumentError):
        result.quantile(1.5)
    single = simulate([_host()], [10.0], runs=1, rng=np.random.default_rng(0))
    assert single.std == 0.0 and single.summary()["runs"] == 1


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"shares": [1.0]}, "shares"),
    ({"shares": [1.0, -1.0]}, "shares"),
    ({"shares": [1.0, math.nan]}, "shares"),
    ({"shares": [1.0, math.inf]}, "shares"),
    ({"shares": ["x", 1.0]}, "shares"),
    ({"runs": 0}, "runs"),
    ({"runs": True}, "runs"),
    ({"runs": 2.5}, "runs"),
    ({"rng": 42}, "rng"),
    ({"service": "pareto"}, "service"),
    ({"service": [demand("exponential", 1.0)]}, "service"),
    ({"cores_mode": "numa"}, "cores_mode"),
    ({"warm": "yes"}, "warm"),
    ({"hosts": []}, "hosts"),
    ({"hosts": ["a", "b"]}, "hosts"),
    ({"hosts": [_host("a"), Host("hot", lam=0.02, mu=0.01, sigma=100.0, rho=0.9)]}, "hosts"),
])
def test_simulate_rejects_bad_arguments(kwargs, field):
    arguments = {"hosts": [_host("a"), _host("b")], "shares": [10.0, 20.0], "runs": 3,
                 "rng": np.random.default_rng(0)}
    arguments.update(kwargs)
    hosts, shares = arguments.pop("hosts"), arguments.pop("shares")
    with pytest.raises(InvalidArgumentError) as info:
        simulate(hosts, shares, **arguments)
    assert info.value.field == field


def test_overloaded_host_is_allowed_when_it_gets_no_work():
    hot = Host("hot", lam=0.02, mu=0.01, sigma=100.0, rho=0.9)
    result = simulate([_host("a"), hot], [100.0, 0.0], runs=3, rng=np.random.default_rng(0))
    assert np.all(result.host_completion_seconds[:, 1] == 0.0)


def test_a_run_too_long_to_walk_is_refused_at_once_naming_the_host():
    # a warm start's backlog near 1e16 s (sigma 1e9 s on a mean of 10 s): the walk never ended
    hosts = [Host("calm", lam=0.01, mu=0.1, sigma=10.0, rho=0.1),
             Host("wild", lam=0.01, mu=0.1, sigma=1e9, rho=0.1)]
    with pytest.raises(InvalidArgumentError, match=r"host 'wild': a run would meet some"):
        simulate(hosts, [3600.0, 3600.0], runs=200, rng=np.random.default_rng(1),
                 service="lognormal", warm=True)
    # the same host started idle needs only its own hour, and is walked
    result = simulate(hosts, [3600.0, 3600.0], runs=200, rng=np.random.default_rng(1),
                      service="lognormal")
    assert np.isfinite(result.completion_seconds).all()


def test_a_host_near_saturation_is_refused_by_the_arrivals_its_jobs_bring_meanwhile():
    # at utilisation 0.999 a run lasts 1,000 times its work: the check had counted the
    # arrivals of the work alone (360 a run), and the default 4,000 runs went on for hours
    busy = Host("busy", lam=0.0999, mu=0.1, sigma=10.0, rho=0.999)
    with pytest.raises(InvalidArgumentError, match=r"host 'busy'.*utilisation 0.999"):
        simulate([busy], [3600.0], runs=10, rng=np.random.default_rng(1))
    # and many runs of a host that each could be walked: refused together, naming the runs
    loaded = Host("loaded", lam=0.099, mu=0.1, sigma=10.0, rho=0.99)
    with pytest.raises(InvalidArgumentError) as together:
        simulate([loaded], [3600.0], runs=100_000, rng=np.random.default_rng(1))
    assert together.value.field == "runs" and "fewer runs" in str(together.value)
    result = simulate([loaded], [3600.0], runs=100, rng=np.random.default_rng(1))
    assert np.isfinite(result.completion_seconds).all()


def test_a_demand_past_double_precision_is_refused_naming_the_host():
    # mean 1e-308 s and sigma 1 s: a CoV of 1e308 whose square overflows; the lognormal's
    # draws were nan and the walk never ended (a chain's nan backlog never clears)
    tiny = Host("tiny", lam=0.001, mu=1e308, sigma=1.0, rho=0.2)
    for warm in (False, True):
        with pytest.raises(InvalidArgumentError, match=r"host 'tiny':.*second moment"):
            simulate([tiny], [3600.0], runs=10, rng=np.random.default_rng(1), warm=warm,
                     service="lognormal")
    with pytest.raises(InvalidArgumentError, match="second moment past double precision"):
        demand("gamma", 1e200, 1.0)
    assert demand("lognormal", 1e-100, 1e50).second_moment > 0


def test_a_shared_warm_up_too_long_to_walk_is_refused_at_once_naming_the_host():
    # a demand CoV of 12,000 asks a warm-up of 1e10 s (1e8 arrivals a run): one run took 231 s
    wide = Host("wide", lam=0.01, mu=0.1, sigma=120_000.0, rho=0.1, cores=2)
    with pytest.raises(InvalidArgumentError, match=r"host 'wide': warming its shared queue"):
        simulate([wide], [3600.0], runs=1, rng=np.random.default_rng(1), warm=True,
                 cores_mode="shared", service="lognormal")
    # idle, or with its cores partitioned (a drawn steady state), it is simulated
    for kwargs in ({"warm": False, "cores_mode": "shared"},
                   {"warm": True, "cores_mode": "partitioned"}):
        result = simulate([wide], [3600.0], runs=50, rng=np.random.default_rng(1),
                          service="lognormal", **kwargs)
        assert np.isfinite(result.completion_seconds).all()
    # and many runs of a host whose warm-up each could be walked: refused together
    slow = Host("slow", lam=0.02, mu=0.1, sigma=2400.0, rho=0.2, cores=2)  # 1e5 a run
    with pytest.raises(InvalidArgumentError) as together:
        simulate([slow], [3600.0], runs=4000, rng=np.random.default_rng(1), warm=True,
                 cores_mode="shared", service="lognormal")
    assert together.value.field == "runs"
    # a queue of thousands of cores sorts them at every arrival: 200 runs of a 4,096-core
    # host met 3.8e7 arrivals, under the limit, and ran for many minutes
    many = Host("many", lam=20.48, mu=0.01, sigma=100.0, rho=0.5, cores=4096)
    started = time.process_time()
    with pytest.raises(InvalidArgumentError, match="each sorting 4096 shared cores") as cores:
        simulate([many], [8 * 3600.0], runs=200, rng=np.random.default_rng(1), warm=True,
                 cores_mode="shared", service="lognormal")
    assert cores.value.field == "runs" and time.process_time() - started < 5.0


def test_runs_whose_per_core_state_would_not_fit_in_memory_are_refused_at_once():
    # a host of a million cores over 4,000 runs asked for tens of gigabytes: killed
    huge = Host("huge", lam=0.1, mu=0.01, sigma=100.0, rho=0.1, cores=1_000_000)
    started = time.process_time()
    with pytest.raises(InvalidArgumentError, match="gigabytes of memory") as caught:
        simulate([huge], [8 * 3600.0], runs=4000, rng=np.random.default_rng(1))
    assert caught.value.field == "runs" and time.process_time() - started < 2.0
    # fewer runs of it fit
    result = simulate([huge], [8 * 3600.0], runs=2, rng=np.random.default_rng(1))
    assert np.isfinite(result.completion_seconds).all()


def test_a_warm_start_whose_backlogs_would_draw_gigabytes_is_refused_at_once():
    # 4,096 cores at utilisation 0.996 over 1,000 runs: 7 GB of remaining-work draws
    busy = Host("busy", lam=0.32983, mu=8.0864e-05, sigma=6500.9, rho=0.99582, tau=3.3484,
                cores=4096)
    started = time.process_time()
    with pytest.raises(InvalidArgumentError, match="steady-state backlogs would take") as caught:
        simulate([busy], [0.000283], runs=1000, rng=np.random.default_rng(1), warm=True,
                 service="lognormal")
    assert caught.value.field == "runs" and time.process_time() - started < 2.0
