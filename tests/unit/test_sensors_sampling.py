"""Eq. 8-10: sample sizes, hourly counts, random plans, pooled estimates, the store."""

from __future__ import annotations

import itertools
import logging
import math
import random
import sqlite3
import statistics

import pytest

from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError, SensorError, StoreError
from sensors.estimates import (
    Z_FACTOR,
    adapt_avg,
    measurements_next_hour,
    pooled_service,
    required_samples,
    sample_size,
)
from sensors.measurement import Measurement
from sensors.sampler import AdaptiveSampler, plan_times
from sensors.store import SensorStore

HOUR = 3600.0
T0 = 1_700_000_000.0 - 1_700_000_000.0 % HOUR


def measurement(end: float, *, lam: float = 1.0, rho: float = 0.5, demands=(1.0, 2.0),
                interval: float = 60.0, source: str = "accounting") -> Measurement:
    arrivals = round(lam * interval)
    return Measurement(
        start_time=end - interval, end_time=end, interval_seconds=interval, lam=lam, rho=rho,
        jobs_started=arrivals // 2, jobs_between=arrivals - arrivals // 2,
        service_count=len(demands), service_sum_seconds=math.fsum(demands),
        service_sum_squares=math.fsum(d * d for d in demands),
        busy_cpu_seconds=rho * interval, running=1, cores=1, lambda_source=source,
        rho_source="kernel", quality=("fork_counter",) if source == "fork_counter" else ())


def test_sample_size_is_eq_8_with_the_sample_standard_deviation():
    assert pytest.approx((100 * 1.96 / 5) ** 2) == Z_FACTOR
    assert sample_size([1.0, 2.0, 3.0]) == pytest.approx(1536.64 * 1.0 / 4.0)
    assert sample_size([5.0, 5.0, 5.0]) == 0.0
    assert sample_size([0.0, 0.0]) == 0.0
    assert sample_size([1.0]) is None


def test_next_hour_count_is_ceil_of_the_largest_n_s_over_24_clamped():
    args = dict(min_per_hour=2, max_per_hour=30, interval_seconds=60.0)
    assert measurements_next_hour({"lam": 100.0, "rho": 300.0}, **args) == 13  # ceil(12.5)
    assert measurements_next_hour({"lam": 1.0}, **args) == 2
    assert measurements_next_hour({"lam": 5000.0}, **args) == 30
    assert measurements_next_hour({"lam": None}, **args) == 30  # no history yet
    assert measurements_next_hour({"lam": 5000.0}, min_per_hour=1, max_per_hour=30,
                                  interval_seconds=600.0) == 6  # what fits in an hour
    with pytest.raises(InvalidArgumentError):
        measurements_next_hour({}, min_per_hour=5, max_per_hour=2, interval_seconds=60.0)


def test_required_samples_covers_every_parameter():
    ms = [measurement(T0 + i, lam=lam, demands=(d, 2 * d)) for i, (lam, d) in
          enumerate([(1.0, 1.0), (3.0, 2.0), (2.0, 3.0)])]
    n_s = required_samples(ms)
    assert n_s["lam"] == pytest.approx(1536.64 / 4)
    assert n_s["rho"] == 0.0
    assert n_s["mean_service_seconds"] == pytest.approx(1536.64 * 2.25 / 9)  # 1.5, 3, 4.5
    assert set(n_s) == {"lam", "rho", "mean_service_seconds", "sigma"}


def test_mu_and_sigma_are_pooled_exactly_from_sufficient_statistics():
    rng = random.Random(3)
    samples = [[rng.expovariate(0.5) for _ in range(rng.randint(0, 9))] for _ in range(40)]
    ms = [measurement(T0 + 60 * i, demands=tuple(s)) for i, s in enumerate(samples)]
    everything = [x for s in samples for x in s]
    count, mean, sigma = pooled_service(ms)
    assert count == len(everything)
    assert mean == pytest.approx(statistics.fmean(everything), rel=1e-12)
    assert sigma == pytest.approx(statistics.stdev(everything), rel=1e-9)
    estimate = adapt_avg(ms, now=T0 + 60 * 40, history_start=T0 - 60)
    assert estimate.mu == pytest.approx(1 / statistics.fmean(everything), rel=1e-12)
    # the naive average of per-measurement means would differ
    naive = statistics.fmean(statistics.fmean(s) for s in samples if s)
    assert abs(naive - mean) > 1e-3


def test_adapt_avg_uses_only_the_window_and_is_provisional_for_the_first_day():
    old = [measurement(T0 + 60, lam=100.0, rho=0.9)]
    recent = [measurement(T0 + 30 * HOUR, lam=1.0, rho=0.2),
              measurement(T0 + 40 * HOUR, lam=3.0, rho=0.4)]
    estimate = adapt_avg(old + recent, now=T0 + 48 * HOUR, history_start=T0)
    assert estimate.measurements == 2
    assert estimate.lam == pytest.approx(2.0)
    assert estimate.rho == pytest.approx(0.3)
    assert not estimate.provisional and estimate.history_seconds == 48 * HOUR
    early = adapt_avg(old, now=T0 + 5 * HOUR, history_start=T0)
    assert early.provisional and early.lam == pytest.approx(100.0)
    empty = adapt_avg([], now=T0, history_start=None)
    assert empty.lam is None and empty.provisional and empty.measurements == 0


def test_without_accounting_mu_comes_from_the_utilisation_law():
    ms = [measurement(T0 + 60 * i, lam=2.0, rho=0.5, demands=(), source="fork_counter")
          for i in range(1, 4)]
    estimate = adapt_avg(ms, now=T0 + 240, history_start=T0)
    assert estimate.mu_source == "utilisation"
    assert estimate.mu == pytest.approx(120 / 30)  # arrivals per busy CPU-second
    assert estimate.sigma is None and estimate.fork_counter_share == 1.0


def test_plan_times_are_random_non_overlapping_and_inside_the_window():
    rng = random.Random(1)
    times = plan_times(T0, T0 + HOUR, 12, 60.0, rng)
    assert len(times) == 12 and times == sorted(times)
    assert all(T0 <= t <= T0 + HOUR - 60 for t in times)
    assert all(b - a >= 60 for a, b in itertools.pairwise(times))
    assert times != plan_times(T0, T0 + HOUR, 12, 60.0, random.Random(2))
    assert len(plan_times(T0, T0 + 200, 12, 60.0, rng)) == 3
    assert plan_times(T0, T0 + 30, 5, 60.0, rng) == []


class StubSensor:
    """Measures instantly on the virtual clock; every ``fail_every``-th call fails."""

    def __init__(self, clock: VirtualClock, lam_of_hour, fail_every: int = 0) -> None:
        self.clock = clock
        self.lam_of_hour = lam_of_hour
        self.fail_every = fail_every
        self.calls = 0

    def measure(self, interval_seconds: float) -> Measurement:
        self.calls += 1
        if self.fail_every and self.calls % self.fail_every == 0:
            raise SensorError("boom")
        self.clock.sleep(interval_seconds)
        hour = int((self.clock.now() - T0) // HOUR)
        return measurement(self.clock.now(), lam=self.lam_of_hour(hour, self.calls),
                           interval=interval_seconds)


def test_sampler_runs_the_plan_stores_everything_and_adapts():
    clock = VirtualClock(T0)
    store = SensorStore(None)
    noisy = StubSensor(clock, lambda hour, call: 1.0 + (call % 2) * (0.2 if hour < 3 else 3.0),
                       fail_every=7)
    sampler = AdaptiveSampler(noisy, store, clock, random.Random(5), interval_seconds=60.0,
                              min_per_hour=2, max_per_hour=20)
    reports = sampler.run(hours=6)
    assert [r.hour_start for r in reports] == [T0 + h * HOUR for h in range(6)]
    assert reports[0].planned == 20  # no history: the upper bound
    assert all(r.completed + r.failed == r.planned for r in reports)
    assert sum(r.failed for r in reports) > 0 and isinstance(sampler.failures[0], SensorError)
    # low variance (CoV ~0.1 -> n_s ~ 13) lowers the count; high variance raises it again
    assert reports[1].planned < reports[0].planned
    assert reports[5].planned > reports[2].planned
    assert len(store.plans()) == 6 and len(store.estimates()) == 6
    assert len(store.measurements()) == sum(r.completed for r in reports)
    assert store.latest_estimate().provisional
    assert clock.now() == T0 + 6 * HOUR


def test_one_read_of_the_window_an_hour_plans_what_a_read_each_time_would():
    def run(reuse):
        clock = VirtualClock(T0)
        store = SensorStore(None)
        sensor = StubSensor(clock, lambda hour, call: 1.0 + (call % 2) * (0.2 if hour < 30
                                                                          else 3.0))
        sampler = AdaptiveSampler(sensor, store, clock, random.Random(5),
                                  interval_seconds=60.0, min_per_hour=2, max_per_hour=20)
        if not reuse:
            sampler._window_kept = lambda: False
        return [(r.planned, r.next_count, r.n_s, r.estimate) for r in sampler.run(hours=36)]

    assert run(True) == run(False)


def test_a_measurement_is_handed_on_before_it_is_stored_here():
    class FullStore(SensorStore):
        def add_measurement(self, measurement):
            raise StoreError("disk full")

    clock = VirtualClock(T0)
    handed = []
    sampler = AdaptiveSampler(StubSensor(clock, lambda h, c: 1.0), FullStore(None), clock,
                              random.Random(1), interval_seconds=60.0, min_per_hour=2,
                              max_per_hour=20, on_measurement=handed.append)
    report = sampler.run_hour()
    # on its way to the manager, whatever became of the local copy, and the hour goes on
    assert report.completed == report.planned == len(handed) == sampler.store_failures
    assert isinstance(sampler.failures[-1], StoreError)


def test_a_full_disk_under_the_store_does_not_stop_the_sampling(tmp_path, caplog):
    """The store only steers the sampling: while its file cannot grow (SQLite's
    max_page_count, as a full disk) every planned measurement is still taken and handed on,
    the refusals are logged at most once an hour, and the store takes rows again once there
    is room."""
    store = SensorStore(tmp_path / "sensor.db")
    clock = VirtualClock(T0)
    handed = []
    sampler = AdaptiveSampler(StubSensor(clock, lambda h, c: 1.0 + 3.0 * (c % 2)), store,
                              clock, random.Random(1), interval_seconds=60.0, min_per_hour=2,
                              max_per_hour=20, on_measurement=handed.append)
    sampler.run(hours=2)
    stored = len(store.measurements())
    store.db.execute("CREATE TABLE filler (b BLOB)")
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError, match="full"):
        for _ in range(10_000):  # the free space left in the file's pages
            store.db.execute("INSERT INTO filler VALUES (zeroblob(100))")
    with caplog.at_level(logging.WARNING, logger="ghs.sensors"):
        reports = sampler.run(hours=6)
    assert sum(r.completed for r in reports) == sum(r.planned for r in reports) > 0
    assert len(handed) == stored + sum(r.completed for r in reports)
    assert sampler.store_failures > 0
    assert 1 <= caplog.text.count("the sensor store refused a write") <= 6  # once an hour
    store.db.execute("PRAGMA max_page_count = 1073741823")
    failed = sampler.store_failures
    report = sampler.run_hour()
    assert len(store.measurements()) > stored and report.completed == report.planned
    assert sampler.store_failures == failed


def test_sampler_starting_mid_hour_plans_only_the_rest_of_it():
    clock = VirtualClock(T0 + 0.75 * HOUR)
    store = SensorStore(None)
    sampler = AdaptiveSampler(StubSensor(clock, lambda h, c: 1.0), store, clock,
                              random.Random(1), interval_seconds=60.0, min_per_hour=2,
                              max_per_hour=20)
    report = sampler.run_hour()
    assert report.planned == 5 and report.completed == 5
    assert all(m.start_time >= T0 + 0.75 * HOUR for m in store.measurements())


def test_store_round_trips_and_prunes_by_age_and_by_size(tmp_path):
    store = SensorStore(tmp_path / "sensor.db", retention_days=8, max_rows=50)
    m = measurement(T0, lam=1.5)
    store.add_measurement(m)
    assert store.measurements() == [m]
    assert store.history_start() == T0 - 60
    store.add_measurement(measurement(T0 + 9 * 86400))
    for i in range(60):
        store.add_measurement(measurement(T0 + 9 * 86400 + 60 * (i + 1)))
    dropped = store.prune(T0 + 9 * 86400 + 3601)
    assert dropped == 12  # the 9-day-old one, then the 11 oldest beyond 50 rows
    assert len(store.measurements()) == 50
    store.add_plan(T0, 4, {"lam": 3.0, "sigma": None}, [T0 + 1.0], created=T0)
    assert store.plans()[0]["n_s"] == {"lam": 3.0, "sigma": None}
    estimate = adapt_avg(store.measurements(), now=T0 + 10 * 86400, history_start=T0)
    store.add_estimate(estimate)
    assert store.latest_estimate() == estimate
    store.close()


def test_store_refuses_short_retention(tmp_path):
    with pytest.raises(InvalidArgumentError, match="at least 8 days"):
        SensorStore(None, retention_days=7)
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError):
        SensorStore(tmp_path / "dir.db")
