"""The refresh's batched routes give what each launch alone gives: window forecasts with a
length per row, the quantiles of many launches read together, and pending outcomes not
worked out again before the capacity series can hold them."""

import numpy as np
import pytest
from test_shadow_launch_paths import HOSTS, WORKS, _jobs

from ghs.manager.realised import CapacitySeries, Outcomes
from ghs.manager.shadow_laws import HostLaws, copies_of
from scheduler.backlog import Backlog
from scheduler.errors import InvalidArgumentError
from scheduler.forecast import ForecastBank
from scheduler.host_quantiles import grouped_host_quantiles, joint_host_quantiles
from scheduler.prediction import predict_hosts

HOUR = 3600.0


def test_rows_with_their_own_window_lengths_forecast_as_each_alone():
    rng = np.random.default_rng(11)
    bank = ForecastBank(8)
    for b in range(490_000, 490_000 + 3 * 24):
        values = rng.uniform(0.0, 0.8, 8) * (1 + np.sin(b / 3.0))
        values[7] = np.nan if b % 5 else values[7]  # a sparse row
        bank.push(np.arange(8), b, values)
    launch = (490_000 + 3 * 24) * HOUR + np.array([0.0, 0.0, 10.0, 1800.0, 3599.0, 7200.0,
                                                   0.0, 60.0])
    lengths = np.array([900.0, 5.5 * HOUR, 3600.0, 16 * HOUR, 30 * HOUR, 2 * HOUR,
                        4 * HOUR, 4 * HOUR])
    together = bank.forecast_windows(np.arange(8), launch, [lengths, 3600.0])
    for row in range(8):
        alone = bank.forecast([row], launch[row], float(lengths[row]))
        assert together[0].values[row] == pytest.approx(alone.values[0], rel=1e-14,
                                                         nan_ok=True)
        assert together[0].forecaster[row] == alone.forecaster[0]
        assert together[0].value[row] == pytest.approx(alone.value[0], rel=1e-14)
        assert (together[1].values[row] == bank.forecast([row], launch[row],
                                                          3600.0).values[0]).all()
    assert together[0].window_bins == bank.forecast([0], launch[0], 900.0).window_bins
    for bad in (lengths[:3], -lengths, np.full(8, np.inf)):
        with pytest.raises(InvalidArgumentError):
            bank.forecast_windows(np.arange(8), launch, [bad])


def _launch(hosts, backlog):
    laws = HostLaws.predict(copies_of(hosts), WORKS[:len(hosts)], backlog)
    paper = predict_hosts(copies_of(hosts), WORKS[:len(hosts)], "lognormal")
    return list(laws.predictions), [paper]


def test_the_quantiles_of_many_launches_read_together_are_each_launchs_own():
    groups = [*_launch(HOSTS, [_jobs(600.0, 4e5), Backlog.idle(), Backlog.steady_state(),
                               Backlog.idle()]),
              *_launch(HOSTS[:2], [Backlog.exact([300.0, 900.0, 50.0]), _jobs(90.0, 1e3)]),
              *_launch(HOSTS[1:], [Backlog.idle()] * 3)]
    together = grouped_host_quantiles(groups)
    for group, found in zip(groups, together):
        for got, alone in zip(found, joint_host_quantiles(group)):
            assert (got == alone).all()


def test_a_pending_launch_is_not_worked_out_again_before_it_can_have_finished():
    rng = np.random.default_rng(3)
    free = rng.choice([0.0, 20.0, 60.0], size=(400, 1), p=[0.3, 0.3, 0.4])
    end = 60.0 * np.arange(1, 401)
    launches = [(0.0, 900.0), (600.0, 3000.0), (1200.0, 9000.0), (60.0, 40.0)]
    kept: dict = {}
    waited = 0
    for minutes in range(5, 400, 7):
        series = CapacitySeries(end[:minutes] - 60.0, end[:minutes], free[:minutes])
        remembering, fresh = Outcomes(series, kept), Outcomes(series)
        for launch, dedicated in launches:
            assert remembering.realised_seconds(launch, dedicated) == \
                fresh.realised_seconds(launch, dedicated)
            assert remembering.overran(launch, dedicated, 1.5 * dedicated) == \
                fresh.overran(launch, dedicated, 1.5 * dedicated)
        waited = max(waited, len(kept))
    assert waited > 0  # some launches were waited on
    assert all(key in {(launch, dedicated) for launch, dedicated in launches} for key in kept)


def test_empty_bins_before_a_rows_first_data_leave_what_one_push_of_the_last_leaves():
    rng = np.random.default_rng(5)
    one_by_one, skipped, from_data = ForecastBank(2), ForecastBank(2), ForecastBank(2)
    for b in range(1000, 1030):
        one_by_one.push([0, 1], b, [np.nan, np.nan])
    skipped.push([0, 1], 1029, [np.nan, np.nan])
    for b in range(1030, 1075):
        values = rng.uniform(0.0, 0.5, 2) if b % 7 else [np.nan, np.nan]
        for bank in (one_by_one, skipped, from_data):
            bank.push([0, 1], b, values)
    for name in ForecastBank.FIELDS:
        for other in (skipped, from_data):
            assert np.array_equal(getattr(one_by_one, name), getattr(other, name),
                                  equal_nan=True), name
