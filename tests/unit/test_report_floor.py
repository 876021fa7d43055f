"""A floor from a host's real tasks' reports: split conformal on realised / model quantile."""

from __future__ import annotations

import numpy as np
import pytest

from ghs.manager.calibration import Calibration
from ghs.manager.simulated_feed import ZERO_EPOCH_SECONDS
from ghs.manager.store import ManagerStore
from scheduler import Host, predict
from scheduler.errors import InvalidArgumentError
from scheduler.host_quantiles import host_quantiles
from scheduler.report_floor import ReportRatios, conformal_floors

LEVELS = (0.5, 0.9, 0.95)


@pytest.mark.parametrize("n", [9, 19, 40])
def test_the_floor_covers_the_next_report_at_its_level_by_simulation(n):
    """Exchangeable ratios (a model short by a lognormal factor): the next one falls at or
    under the floor in at least q of the trials and at most q + 1 / (n + 1)."""
    rng = np.random.default_rng(n)
    trials = 10_000
    draws = np.exp(rng.normal(0.02, 0.01, size=(trials, n + 1)))
    covered = np.zeros(len(LEVELS))
    for row in draws:
        floors = conformal_floors(np.repeat(row[:n, None], len(LEVELS), axis=1), LEVELS)
        covered += np.where(np.isnan(floors), False, row[n] <= floors)
    rate = covered / trials
    slack = 3.5 * np.sqrt(0.25 / trials)
    for level, found in zip(LEVELS, rate):
        if np.ceil(round(level * (n + 1), 9)) > n:  # too few reports: no floor
            assert found == 0.0
            continue
        assert level - slack <= found <= level + 1.0 / (n + 1) + slack


def test_too_few_reports_give_no_floor_and_bad_input_is_refused():
    eight = np.full((8, 3), 1.1)
    floors = conformal_floors(eight, LEVELS)
    assert floors[0] == 1.1 and np.isnan(floors[1:]).all()
    assert conformal_floors(np.full((9, 3), 1.1), LEVELS)[1] == 1.1  # p90 from 9 reports
    assert np.isnan(conformal_floors(np.full((18, 3), 1.1), LEVELS)[2])  # p95 needs 19
    with pytest.raises(InvalidArgumentError, match="ratios"):
        conformal_floors([[1.0, -1.0, 1.0]], LEVELS)
    with pytest.raises(InvalidArgumentError, match="levels"):
        conformal_floors([[1.0]], [1.5])


def test_only_recent_reports_of_comparable_length_count():
    record = ReportRatios(LEVELS, window=10)
    for k in range(12):  # the first two fall out of the window
        assert record.add(60.0, 60.0 * (1.0 + k / 100.0), [60.0, 60.0, 60.0])
    assert not record.add(60.0, float("nan"), [60.0, 60.0, 60.0])
    assert len(record) == 10
    floors, comparable = record.floors(100.0)  # within a factor 2 of 60 s
    assert comparable == 10 and floors[1] == pytest.approx(1.11)  # rank 10 of 10: the largest
    assert floors[0] == pytest.approx(1.07)  # rank 6 of 10, from 1.02 up
    floors, comparable = record.floors(600.0)
    assert comparable == 0 and np.isnan(floors).all()


@pytest.fixture
def reported():
    """A calibration with one host and a served prediction to report on."""
    store = ManagerStore(None)
    calibration = Calibration(store, lengths_seconds=(900.0, 3600.0))
    track = calibration.track("ws1", 1)
    host = Host("ws1", lam=1 / 600.0, mu=1 / 120.0, sigma=240.0, rho=0.2)
    prediction = predict([host], 1800.0)
    yield store, calibration, track, prediction
    store.close()


def test_a_report_joins_its_hosts_floor_against_the_models_quantiles(reported):
    store, calibration, track, prediction = reported
    model = host_quantiles(prediction)[0]
    realised = [1.01 * model[1], 1.03 * model[1], 1.05 * model[1]]
    for k, seconds in enumerate(realised):
        served = ZERO_EPOCH_SECONDS + 1000.0 * k
        pid = store.track.record(prediction, served, "predict")
        store.track.report(pid, "ws1", served + seconds, served + 900.0)
    assert calibration.absorb_reports(0.0) == 3
    assert len(track.reports) == 3
    floors, comparable = track.reports.floors(1800.0)
    # the p50's floor from 3 reports is the 2nd smallest realised / model p50
    assert comparable == 3 and floors[0] == pytest.approx(realised[1] / model[0], rel=1e-6)
    assert np.isnan(floors[1:]).all()


def test_a_hosts_factors_are_held_at_its_reports_floor(reported):
    _, calibration, track, _ = reported
    factors, applied = calibration.factors([track], [1800.0])
    plain = factors[0].copy()
    assert "report_floor" not in applied[0]
    # a kernel that gives every task 2-4% less than the model's quantiles say
    ratios = 1.02 + 0.02 * np.random.default_rng(3).random(9)
    for ratio in ratios[:8]:
        track.reports.add(1800.0, 60.0 * ratio, [60.0, 60.0, 60.0])
    factors, applied = calibration.factors([track], [1800.0])
    assert applied[0]["report_floor"]["reports"] == 8
    assert applied[0]["report_floor"]["factors"]["p90"] is None  # 9 are needed at p90
    assert factors[0][1] == plain[1]
    track.reports.add(1800.0, 60.0 * ratios[8], [60.0, 60.0, 60.0])
    factors, applied = calibration.factors([track], [1800.0])
    assert factors[0][1] == pytest.approx(ratios.max()) and plain[1] < ratios.max()
    assert "p90" in applied[0]["report_floor"]["applied"]
    assert factors[0][-1] == plain[-1]  # the pooled far tail is not held
    # a share 8 times as long has no comparable report
    _, applied = calibration.factors([track], [8 * 1800.0])
    assert applied[0]["report_floor"]["reports"] == 0
    assert applied[0]["report_floor"]["applied"] == []
