"""A catch-up extends the records its host's last catch-up read: the same inputs as reading
everything again, and everything is read again when a measurement was stored late."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ghs.manager.shadow_start import ShadowInputs, _totals, host_at
from ghs.manager.simulated_feed import ZERO_EPOCH_SECONDS, ManagerFeed, poisson_jobs
from ghs.manager.store import ManagerStore
from ghs.record import sensor_measurement
from sensors.estimates import adapt_avg, estimate_from_totals

DAY = 86400.0


@pytest.fixture(scope="module")
def feed():
    store = ManagerStore(None)
    fed = ManagerFeed(store, "ws1", poisson_jobs(1.6, utilisation=0.4, mean_cpu_seconds=200.0,
                                                cov=2.0, seed=9))
    fed.run_until(ZERO_EPOCH_SECONDS + 1.2 * DAY)
    yield store, fed
    fed.close()
    store.close()


def _same(extended, fresh):
    assert extended.end.tolist() == fresh.end.tolist()
    assert extended.spans == fresh.spans
    assert extended.tau == fresh.tau
    for name in ("start", "end", "free"):
        assert getattr(extended.capacity, name).tolist() == getattr(fresh.capacity,
                                                                      name).tolist()
    assert extended.totals.tolist() == fresh.totals.tolist()
    at = float(extended.end[-1])
    assert host_at("ws1", extended, at) == host_at("ws1", fresh, at)


def test_an_extended_catch_up_reads_what_a_full_one_does(feed):
    store, fed = feed
    start = ZERO_EPOCH_SECONDS + 0.2 * DAY
    before = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=start - DAY,
                               rows_since_epoch_seconds=start)
    host_at("ws1", before, ZERO_EPOCH_SECONDS + 1.1 * DAY)  # converts most rows
    kept = before.trimmed(start + 3600.0, start - DAY + 3600.0)
    assert len(kept.end) < len(before.end)
    fed.run_until(ZERO_EPOCH_SECONDS + 1.3 * DAY)
    since, rows_since = start - DAY + 7200.0, start + 7200.0
    extended = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=since,
                                 rows_since_epoch_seconds=rows_since, previous=kept)
    fresh = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=since,
                              rows_since_epoch_seconds=rows_since)
    assert extended.end[-1] > before.end[-1]
    _same(extended, fresh)


def test_the_24_hour_estimate_is_the_sensors_own_to_the_bit(feed):
    # the launches pool stored columns; the manager's answers pool the sensors'
    # Measurements: one host, one hour, one estimate (fork-counter rows without accounting
    # among them, where mu comes from the utilisation law)
    store, _ = feed
    since = ZERO_EPOCH_SECONDS - DAY
    rows = [dict(row) for row in store.measurements("ws1", since_end=since)]
    # full mantissas everywhere: sums taken another way (in another order, or rounded at
    # each step where the sensors round once) come out different in the last bits
    rng = np.random.default_rng(4)
    for row in rows:
        total = rng.lognormal(5.0, 2.0) * row["service_count"]
        row.update(rho=rng.uniform(0.0, 1.0), busy_cpu_seconds=rng.uniform(0.0, 300.0),
                   service_cpu_seconds_sum=total,
                   service_cpu_seconds_sum_squares=total**2 * rng.uniform(1.0, 3.0))
    for row in rows[::3]:
        row.update(lambda_source="fork_counter", service_count=0, service_cpu_seconds_sum=0.0,
                   service_cpu_seconds_sum_squares=0.0)
    inputs = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=since)
    inputs = dataclasses.replace(inputs, totals=_totals(rows))
    measured = [sensor_measurement(row, 1) for row in rows]
    no_accounting = [{**row, "lambda_source": "fork_counter", "service_count": 0,
                      "service_cpu_seconds_sum": 0.0, "service_cpu_seconds_sum_squares": 0.0}
                     for row in rows]
    for at in inputs.end[[len(rows) // 3, len(rows) // 2, -1]] + [0.0, 0.5, 0.0]:
        first, stop = np.searchsorted(inputs.end, [at - DAY, at], side="right")
        pooled = estimate_from_totals(inputs.window_totals(int(first), int(stop)), now=at)
        assert pooled == adapt_avg(measured, now=at)
        assert 0 < pooled.fork_counter_share < 1 and pooled.mu_source == "accounting"
    middle = slice(len(rows) // 2 - 20, len(rows) // 2 + 20)
    sparse = [sensor_measurement(row, 1) for row in no_accounting[middle]]
    stripped = dataclasses.replace(inputs, totals=_totals(no_accounting))
    now = inputs.end[middle.stop - 1]
    pooled = estimate_from_totals(stripped.window_totals(middle.start, middle.stop), now=now)
    assert pooled == adapt_avg(sparse, now=now)
    assert pooled.mu_source == "utilisation"


def test_a_measurement_stored_late_makes_it_read_everything(feed):
    store, _ = feed
    since = ZERO_EPOCH_SECONDS + 0.3 * DAY
    before = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=since - DAY,
                               rows_since_epoch_seconds=since)
    late = dict(store.measurements("ws1", since_end=since)[5])
    gap = late["end_epoch_seconds"] - late["start_epoch_seconds"]
    late.update(seq=10**6, start_epoch_seconds=late["end_epoch_seconds"] - gap / 2,
                end_epoch_seconds=late["end_epoch_seconds"] + 1.0, rho=0.9)
    assert store.add_measurements([late]) == 1
    extended = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=since - DAY,
                                 rows_since_epoch_seconds=since, previous=before)
    fresh = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=since - DAY,
                              rows_since_epoch_seconds=since)
    assert len(extended.end) == len(before.end) + 1
    assert 0.9 in [span[3] for span in extended.spans]
    _same(extended, fresh)
    assert np.isfinite(extended.bin_means(int(late["end_epoch_seconds"] // 3600), 3600.0)).all()


def test_outcomes_are_the_series_own_whether_worked_out_or_not(feed):
    from ghs.manager.realised import Outcomes, realised_seconds

    store, _ = feed
    inputs = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=ZERO_EPOCH_SECONDS)
    outcomes = Outcomes(inputs.capacity)
    assert outcomes._bounded  # the shortcut is taken on a real series
    end = inputs.capacity.covered_until
    for launch in (ZERO_EPOCH_SECONDS + 600.0, end - 7200.0, end - 900.0):
        for dedicated in (300.0, 3600.0, 4 * 3600.0):
            expected = realised_seconds(inputs.capacity, launch, dedicated)
            assert outcomes.realised_seconds(launch, dedicated) == expected
            assert outcomes.realised_seconds(launch, dedicated) == expected  # remembered
            for bound in (dedicated, 2 * dedicated):
                got = outcomes.overran(launch, dedicated, bound)
                if end < launch + bound:
                    assert not got  # not known yet
                elif expected is not None:
                    assert got == (expected > bound)
