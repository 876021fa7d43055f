"""A one-host answer's and a split's served means (scheduler.combined_mean), and the long-run
level a view that holds the running jobs as a backlog holds its new arrivals to
(scheduler.forecast's ``long_run``, ghs.manager.shadow_start.arrivals_load)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ghs.manager.shadow_start import arrivals_load, starts_of
from scheduler import ForecastBank, Host, predict
from scheduler.calibrated import SERVED_LEVELS, calibrated_prediction
from scheduler.combined_mean import one_host_mean_seconds, split_mean_seconds
from scheduler.errors import InvalidArgumentError
from scheduler.forecasters import ForecastSettings

HOUR = 3600.0


def test_the_mean_is_the_geometric_mean_of_the_floored_view_and_the_records():
    assert one_host_mean_seconds(100.0, 400.0) == pytest.approx(200.0)
    # the floor holds the carried mean first
    assert one_host_mean_seconds(100.0, 400.0, 250.0) == pytest.approx(math.sqrt(250.0 * 400.0))
    assert one_host_mean_seconds(300.0, 400.0, 250.0) == pytest.approx(math.sqrt(300.0 * 400.0))
    # no record: the view's mean at its floor
    assert one_host_mean_seconds(100.0, None, 250.0) == 250.0
    assert one_host_mean_seconds(100.0, None) == 100.0


def test_a_splits_mean_is_the_geometric_mean_of_its_view_and_the_held_one():
    assert split_mean_seconds(100.0, 400.0) == pytest.approx(200.0)
    assert split_mean_seconds(100.0, None) == 100.0  # no host held: the view's alone
    with pytest.raises(InvalidArgumentError) as raised:
        split_mean_seconds(100.0, float("nan"))
    assert raised.value.field == "held_mean_seconds"


@pytest.mark.parametrize("args, field", [
    ((float("nan"), 1.0), "view_mean_seconds"),
    ((None, 1.0), "view_mean_seconds"),
    ((1.0, -2.0), "record_mean_seconds"),
    ((1.0, float("inf")), "record_mean_seconds"),
    ((1.0, 2.0, True), "floor_seconds"),
    ((1.0, 2.0, "600"), "floor_seconds"),
])
def test_bad_means_name_the_field(args, field):
    with pytest.raises(InvalidArgumentError) as raised:
        one_host_mean_seconds(*args)
    assert raised.value.field == field


def test_a_calibrated_answer_combines_its_mean_and_keeps_the_models():
    host = Host("ws", lam=0.2 / 300.0, mu=1 / 300.0, sigma=300.0, rho=0.2)
    model = predict([host], HOUR)
    ones = np.ones((1, len(SERVED_LEVELS)))
    plain = calibrated_prediction(model, ones, SERVED_LEVELS)
    both = calibrated_prediction(model, ones, SERVED_LEVELS, 2 * model.mean, 8 * model.mean)
    assert both.mean == pytest.approx(4 * model.mean)
    assert both.model["mean"] == model.mean and both.quantiles == plain.quantiles
    payload = both.to_dict()
    assert payload["record_mean_seconds"] == 8 * model.mean
    assert payload["mean_floor_seconds"] == 2 * model.mean
    assert "record_mean_seconds" not in plain.to_dict()


def _bank_after(values: list[float], settings: ForecastSettings | None = None) -> ForecastBank:
    bank = ForecastBank(1, settings)
    for b, value in enumerate(values):
        bank.push([0], 1000 + b, [value])
    return bank


def test_the_long_run_level_is_the_mean_over_the_profile_span():
    """Two days' bins, the first ones older than the span: the level is the mean of the
    span's bins (empty ones left out), restored with the bank, the same for every window."""
    settings = ForecastSettings(profile_days=1)
    rng = np.random.default_rng(3)
    values = list(rng.uniform(0.0, 0.4, 30)) + [math.nan] * 3 + list(rng.uniform(0.5, 1, 20))
    bank = _bank_after(values, settings)
    span = np.array(values[-24:])
    expected = np.nanmean(span)
    launch = (1000 + len(values)) * HOUR
    for duration in (HOUR, 30 * HOUR):
        assert bank.forecast([0], launch, duration).long_run[0] == pytest.approx(expected)
    again = ForecastBank.from_state(bank.to_state())
    assert again.forecast([0], launch, HOUR).long_run[0] == pytest.approx(expected)
    assert bank.forecast([0], launch, HOUR).to_dict(0)["long_run"] == pytest.approx(expected)
    assert math.isnan(ForecastBank(1).forecast([0], launch, HOUR).long_run[0])


def test_after_a_burst_a_held_view_expects_arrivals_at_the_long_run_level():
    """A week at utilisation 0.1, then a day's burst at 0.9: over a long window the
    forecasters carry the burst on, and the view that holds the queue it built as its backlog
    expects new work at the week's level instead; the carried view keeps the forecast."""
    quiet, burst = [0.1] * (6 * 24), [0.9] * 24
    lam_bank = _bank_after([x / 300.0 for x in quiet + burst])
    rho_bank = _bank_after(quiet + burst)
    launch = (1000 + len(quiet) + len(burst)) * HOUR
    lam = lam_bank.forecast([0], launch, 40 * HOUR)
    rho = rho_bank.forecast([0], launch, 40 * HOUR)
    assert rho.value[0] > 0.5  # the battery's answer after a day of burst
    long_run = float(rho.long_run[0])
    assert long_run == pytest.approx((6 * 0.1 + 0.9) / 7)
    day = Host("ws", lam=0.3 / 300.0, mu=1 / 300.0, sigma=300.0, rho=0.3)
    held = starts_of(day, [lam.value[0], rho.value[0]], arrivals_only=True,
                     long_run_rho=long_run)
    assert held.rho == pytest.approx(long_run) and held.lam == pytest.approx(long_run / 300.0)
    carried = starts_of(day, [lam.value[0], rho.value[0]], arrivals_only=False,
                        long_run_rho=long_run)
    assert carried.rho == pytest.approx(min(rho.value[0], 0.95))


def test_arrivals_below_the_long_run_level_are_left_as_forecast():
    assert arrivals_load(0.001, 0.01, 0.5) == pytest.approx((0.001, 0.1))
    assert arrivals_load(0.008, 0.01, 0.5) == pytest.approx((0.005, 0.5))
    # no level known (no bin in the span): not held
    assert arrivals_load(0.008, 0.01, math.nan) == pytest.approx((0.008, 0.8))


def test_single_process_means_are_each_hosts_own_mean_in_one_call():
    """What the manager scores the start candidates with: each one-core host's mean of its
    own share, the same as predicting it alone (idle, behind running jobs, steady state)."""
    from scheduler import predict_mean
    from scheduler.backlog import Backlog
    from scheduler.prediction import single_process_means
    from scheduler.templates import TwoMomentDemand

    hosts = [Host(f"h{k}", lam=0.001 * (k + 1), mu=1 / 300.0, sigma=600.0, rho=0.1 * (k + 1))
             for k in range(3)]
    starts = [Backlog.idle(), Backlog.from_laws([TwoMomentDemand(600.0, 1200.0).remaining(
        100.0)], [100.0]), Backlog.steady_state()]
    shares = [HOUR, 2 * HOUR, HOUR / 2]
    together = single_process_means(hosts, shares, backlog=starts)
    alone = [predict_mean([h], s, backlog=[b]) for h, s, b in zip(hosts, shares, starts)]
    assert together == pytest.approx(alone, rel=1e-12)
    assert together[1] > together[0] > HOUR  # behind the running job, and under load
    with pytest.raises(InvalidArgumentError) as raised:
        single_process_means([Host("two", lam=0.001, mu=0.01, sigma=100.0, rho=0.1, cores=2)],
                             [HOUR])
    assert raised.value.field == "hosts"
