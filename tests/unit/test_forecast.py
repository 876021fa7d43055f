"""Forecaster battery and the NWS rule, checked on generated series with known structure."""

import numpy as np
import pytest

from scheduler.errors import InvalidArgumentError
from scheduler.forecast import FORECASTERS, ForecastBank, ForecastSettings
from scheduler.window_forecast import (
    bin_series,
    forecast_parameters,
    forecast_window,
    settle_duration,
)

HOUR = 3600.0
FIRST_BIN = 490_000  # an hour index in 2025, so hour-of-day is not trivially aligned


def _cyclic(rng, hours):
    t = np.arange(hours)
    return np.clip(0.45 + 0.3 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 0.05, hours), 0, 1)


def _shifting(rng, hours):
    """Levels held 12-40 hours then jumping; small noise."""
    values, level = [], 0.5
    while len(values) < hours:
        level = float(np.clip(level + rng.choice([-1, 1]) * rng.uniform(0.15, 0.35), 0.05, 0.95))
        values.extend([level] * int(rng.integers(12, 40)))
    return np.clip(np.array(values[:hours]) + rng.normal(0, 0.02, hours), 0, 1)


def _walk(series, window_bins, warmup_bins=72):
    """Replay hourly bins; before each bin from ``warmup`` on, forecast the next window.

    Returns (NWS forecasts, every forecaster's forecasts, realised window means)."""
    bank = ForecastBank(1)
    chosen, each, realised = [], [], []
    for k, value in enumerate(series):
        if warmup_bins <= k <= series.size - window_bins:
            answer = bank.forecast([0], (FIRST_BIN + k) * HOUR, window_bins * HOUR)
            chosen.append(answer.value[0])
            each.append(answer.values[0])
            realised.append(series[k:k + window_bins].mean())
        bank.push([0], FIRST_BIN + k, [value])
    return np.array(chosen), np.array(each), np.array(realised)


def _mae(forecasts, realised):
    return np.abs(forecasts - (realised if forecasts.ndim == 1 else realised[:, None])).mean(
        axis=0)


@pytest.mark.parametrize("window_bins", [1, 4])
def test_hour_of_day_profile_wins_on_a_daily_cycle(window_bins):
    series = _cyclic(np.random.default_rng(1), 14 * 24)
    nws, each, realised = _walk(series, window_bins)
    mae = dict(zip(FORECASTERS, _mae(each, realised)))
    assert min(mae, key=mae.get) in ("hour_of_day", "hour_of_week")
    assert mae["hour_of_day"] < 0.5 * mae["day_average"]
    bank = ForecastBank(1)
    bank_answer = None
    for k, value in enumerate(series):
        bank.push([0], FIRST_BIN + k, [value])
    bank_answer = bank.forecast([0], (FIRST_BIN + series.size) * HOUR, window_bins * HOUR)
    assert bank_answer.forecaster[0] == "hour_of_day"
    assert _mae(nws, realised) <= 1.25 * min(mae.values())


@pytest.mark.parametrize("window_bins", [1, 4])
def test_recent_value_forecasters_win_on_level_shifts(window_bins):
    series = _shifting(np.random.default_rng(2), 14 * 24)
    nws, each, realised = _walk(series, window_bins)
    mae = dict(zip(FORECASTERS, _mae(each, realised)))
    best = min(mae, key=mae.get)
    assert best in ("last_hour", "kalman", "tendency"), mae
    assert mae[best] < 0.6 * mae["day_average"]
    assert mae[best] < 0.6 * mae["hour_of_day"]
    assert _mae(nws, realised) <= 1.25 * mae[best]


def test_selector_follows_a_change_of_regime():
    rng = np.random.default_rng(3)
    series = np.concatenate([_cyclic(rng, 10 * 24), _shifting(rng, 10 * 24)])
    nws, each, realised = _walk(series, 2)
    single = _mae(each, realised)
    assert _mae(nws, realised) <= 1.3 * single.min()
    # Not a forecaster in disguise: it beats the best single one on at least one half.
    half = realised.size // 2
    assert (_mae(nws[:half], realised[:half]) < _mae(each[:half], realised[:half]).min() * 1.1
            or _mae(nws[half:], realised[half:]) < _mae(each[half:], realised[half:]).min()
            * 1.1)


def test_a_forecast_stays_within_the_window_means_the_host_has_shown():
    """One saturated hour after a week of light load: last_hour and tendency would hold it for
    the whole 8-hour window; the answer is capped at the highest 8-hour mean of the history,
    which the walk below computes by itself, while a 1-hour window may still see the hour."""
    rng = np.random.default_rng(4)
    series = np.clip(0.2 + rng.normal(0, 0.03, 8 * 24), 0, 1)
    series[30:33] = 0.9  # one 3-hour burst long ago
    series[-1] = 1.0
    bank = ForecastBank(1)
    for k, value in enumerate(series):
        bank.push([0], FIRST_BIN + k, [value])
    launch = (FIRST_BIN + series.size) * HOUR
    eight = bank.forecast([0], launch, 8 * HOUR)
    history = series[-bank.settings.history_bins:]
    highest = max(history[i:i + 8].mean() for i in range(history.size - 7))
    assert highest < 0.5  # the premise: no 8-hour window was ever near saturation
    assert eight.values[0].max() == pytest.approx(highest)
    assert eight.values[0, FORECASTERS.index("last_hour")] == pytest.approx(highest)
    one = bank.forecast([0], launch, HOUR)
    assert one.values[0, FORECASTERS.index("last_hour")] == pytest.approx(1.0)
    # the range follows the host: after 8 more saturated hours an 8-hour window may be full
    for k in range(8):
        bank.push([0], FIRST_BIN + series.size + k, [1.0])
    later = bank.forecast([0], launch + 8 * HOUR, 8 * HOUR)
    assert later.values[0, FORECASTERS.index("last_hour")] == pytest.approx(1.0)


def test_irregular_samples_with_a_gap_bin_and_forecast():
    rng = np.random.default_rng(4)
    start = FIRST_BIN * HOUR
    t = np.sort(rng.uniform(start, start + 12 * 86400, 6000))
    t = t[(t < start + 5 * 86400) | (t > start + 7 * 86400)]  # two silent days
    hour = (t - start) / HOUR
    truth = 0.45 + 0.3 * np.sin(2 * np.pi * hour / 24)
    values = np.clip(truth + rng.normal(0, 0.05, t.size), 0, 1)
    first, means = bin_series(t, values, until_seconds=t[-1] + 1)
    assert first == FIRST_BIN
    assert np.isnan(means[5 * 24 + 1:7 * 24 - 1]).all()
    launch = t[-1] + 1
    answer = forecast_window(t, values, launch, 3 * HOUR)
    window_hours = (launch - start) / HOUR + np.linspace(0, 3, 301)
    expected = np.mean(0.45 + 0.3 * np.sin(2 * np.pi * window_hours / 24))
    assert answer.forecaster[0] in ("hour_of_day", "hour_of_week")
    assert abs(answer.value[0] - expected) < 0.05
    assert answer.recent_error[0] < 0.06


def test_only_the_past_counts():
    t = np.arange(0, 4 * 86400, 60.0) + FIRST_BIN * HOUR
    values = np.where(t <= t[0] + 3 * 86400, 0.2, 0.9)
    launch = t[0] + 3 * 86400
    before = forecast_window(t, values, launch, HOUR)
    assert np.allclose(before.values[0], 0.2)


def test_state_round_trip_gives_the_same_forecasts():
    rng = np.random.default_rng(5)
    series = _cyclic(rng, 5 * 24)
    bank = ForecastBank(3)
    for k, value in enumerate(series):
        bank.push([0, 2], FIRST_BIN + k, [value, 1 - value])
    copy = ForecastBank.from_state({k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                    for k, v in bank.to_state().items()})
    for b in (bank, copy):
        b.push([0, 1, 2], FIRST_BIN + series.size + 3, [0.5, 0.2, 0.4])  # with a gap
    launch = (FIRST_BIN + series.size + 4) * HOUR + 600
    one, two = (b.forecast([0, 1, 2], launch, 5 * HOUR) for b in (bank, copy))
    np.testing.assert_array_equal(one.values, two.values)
    np.testing.assert_array_equal(one.errors, two.errors)
    assert one.forecaster[1] == "day_average" and np.isnan(one.recent_error[1])
    bank.grow(5)
    assert bank.hosts == 5 and np.isnan(bank.forecast([4], launch, HOUR).value[0])


def test_kept_profiles_are_what_the_ring_gives_for_any_launch_ahead():
    """The day and profile means kept since a row's last bin are the ring's own means for
    targets any distance past it, summed alike (equal to the bit), and a state copy
    rebuilds them."""
    from scheduler.ring_means import day_mean, profile

    rng = np.random.default_rng(8)
    bank = ForecastBank(4)
    last = np.full(4, FIRST_BIN)
    for k in range(10 * 24):
        rows = np.flatnonzero(rng.random(4) < 0.9)
        values = rng.uniform(0, 1, rows.size)
        values[rng.random(rows.size) < 0.1] = np.nan
        bank.push(rows, FIRST_BIN + k, values)
        last[rows] = FIRST_BIN + k
    copy = ForecastBank.from_state(bank.to_state())
    idx, boundary = np.arange(4), bank.next_bin
    per_day, span = 24, bank.settings.profile_days * 24
    for ahead in (0, 5, 23, 24, 31, 170, 400):
        first = boundary + ahead
        targets = first[:, None] + np.arange(9)[None, :]
        kept = copy._paths(idx, first, 9)
        np.testing.assert_array_equal(kept[:, 0, 0], np.where(
            np.isfinite(day := day_mean(bank.ring, idx, boundary, per_day)), day,
            bank.last_value))
        hod = profile(bank.ring, idx, targets, boundary, per_day, span)
        hod = np.where(np.isfinite(hod), hod, kept[:, 0, :])
        np.testing.assert_array_equal(kept[:, FORECASTERS.index("hour_of_day")], hod)
        how = profile(bank.ring, idx, targets, boundary, 7 * per_day, span)
        np.testing.assert_array_equal(kept[:, FORECASTERS.index("hour_of_week")],
                                      np.where(np.isfinite(how), how, hod))


def test_forecast_parameters_recover_generated_demand_and_follow_the_cycle():
    rng = np.random.default_rng(6)
    minute = 60.0
    end = FIRST_BIN * HOUR + minute * np.arange(1, 9 * 24 * 60 + 1)
    hour = (end - FIRST_BIN * HOUR) / HOUR
    lam = 0.01 * (1 + 0.8 * np.sin(2 * np.pi * hour / 24))  # arrivals per second
    count = rng.poisson(lam * minute)
    mean_demand, cv = 30.0, 1.5  # seconds; gamma demands
    shape = 1 / cv**2
    demand_sum = np.array([rng.gamma(shape, mean_demand / shape, c).sum() for c in count])
    demand_sq = np.array([(rng.gamma(shape, mean_demand / shape, c) ** 2).sum() for c in count])
    rho = np.clip(lam * mean_demand + rng.normal(0, 0.02, end.size), 0, 1)
    launch = end[-1]
    params = forecast_parameters(end, lam, rho, count, demand_sum, demand_sq, launch, 2 * HOUR,
                                 interval_seconds=np.full(end.size, minute))
    window = (launch - FIRST_BIN * HOUR) / HOUR + np.linspace(0, 2, 201)
    true_lam = np.mean(0.01 * (1 + 0.8 * np.sin(2 * np.pi * window / 24)))
    assert params.lam_forecast["forecaster"] in ("hour_of_day", "hour_of_week")
    assert params.lam_per_second == pytest.approx(true_lam, rel=0.05)
    assert params.rho == pytest.approx(true_lam * mean_demand, rel=0.05)
    assert 1 / params.mu_per_second == pytest.approx(mean_demand, rel=0.05)
    assert params.sigma_seconds == pytest.approx(cv * mean_demand, rel=0.15)
    assert params.to_dict()["rho_forecast"]["forecasters"]["kalman"]["value"] is not None


def test_settle_duration_reaches_the_fixed_point():
    # A window's load rises with its length here; the fixed point solves d = 1000 / (1 - r(d)).
    def duration_for(d):
        return 1000.0 / (1 - min(0.5, d / 10_000))
    d, rounds = settle_duration(duration_for, 1000.0, rel_tol=1e-6, max_rounds=50)
    assert d == pytest.approx(duration_for(d), rel=1e-5) and rounds < 50


@pytest.mark.parametrize("call, field", [
    (lambda: ForecastSettings(bin_seconds=7000), "bin_seconds"),
    (lambda: ForecastBank(2).push([0], 5, [-1.0]), "values"),
    (lambda: ForecastBank(2).push([0, 0], 5, [1.0, 1.0]), "host_indices"),
    (lambda: ForecastBank(2).forecast([3], 0.0, HOUR), "host_indices"),
    (lambda: ForecastBank(2).forecast([0], 0.0, 0.0), "duration_seconds"),
    (lambda: ForecastBank.from_state({"next_bin": [1]}), "state"),
    (lambda: bin_series([1.0, 2.0], [0.1], until_seconds=3.0), "values"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(InvalidArgumentError) as info:
        call()
    assert info.value.field == field


def test_pushing_out_of_order_is_refused():
    bank = ForecastBank(1)
    bank.push([0], 10, [0.3])
    with pytest.raises(InvalidArgumentError) as info:
        bank.push([0], 9, [0.3])
    assert info.value.field == "bin_indices"


@pytest.mark.parametrize("launch_hours, days", [(9 * 24, 30), (9 * 24 + 0.37, 61.3),
                                                (7 * 24 + 5.5, 25)])
def test_a_window_of_weeks_is_read_folded_onto_one_week(monkeypatch, launch_hours, days):
    # a window of 1e12 s over six hosts had a manager allocate terabytes, bin by bin
    import scheduler.forecast as forecast_module
    rng = np.random.default_rng(7)
    bank = ForecastBank(3)
    series = _cyclic(rng, 9 * 24) * rng.uniform(0.6, 1.4, 9 * 24)
    for k, value in enumerate(series):
        bank.push([0, 1], FIRST_BIN + k, [value, 2.0 * value])
    launch = (FIRST_BIN + launch_hours) * HOUR  # the last case before the newest bin
    durations = [days * 24 * HOUR, np.array([days, days * 1.3, days * 2.1]) * 24 * HOUR]
    folded = bank.forecast_windows([0, 1, 2], launch, durations)
    monkeypatch.setattr(forecast_module, "_FOLD_PAST_PERIODS", 10**9)
    by_bin = bank.forecast_windows([0, 1, 2], launch, durations)
    for one, two in zip(folded, by_bin):
        np.testing.assert_allclose(one.values[:2], two.values[:2], rtol=1e-12)
        assert one.forecaster == two.forecaster and np.isnan(one.value[2])
    monkeypatch.undo()
    far = bank.forecast([0, 1], launch, 1e15)
    assert np.isfinite(far.values).all()
