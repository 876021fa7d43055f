"""The floor under a one-host answer's mean from the running jobs' ages (scheduler.age_floor),
what carries the ages there, and the mean it holds."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler import Host, predict
from scheduler.age_floor import AGE_FLOOR_FACTOR, age_floor_seconds
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS, calibrated_prediction
from scheduler.errors import InvalidArgumentError
from scheduler.templates import TwoMomentDemand


def _jobs(means, ages):
    return Backlog.from_laws([TwoMomentDemand(m, m).remaining(0.0) for m in means], ages)


def test_on_one_core_the_task_waits_behind_every_running_job():
    backlog = _jobs([600.0, 60.0], [1200.0, 300.0])
    assert age_floor_seconds(3600.0, backlog) == 3600.0 + AGE_FLOOR_FACTOR * 1500.0
    assert age_floor_seconds(3600.0, backlog, factor=1.0) == 3600.0 + 1500.0


def test_no_floor_on_several_cores_where_a_snapshot_does_not_say_which_core_a_job_is_on():
    backlog = _jobs([500.0, 100.0], [4000.0, 200.0])
    assert age_floor_seconds(900.0, backlog, cores=2) is None
    assert age_floor_seconds(900.0, backlog, cores=1) == 900.0 + 0.5 * 4200.0


def test_no_floor_without_running_jobs_of_known_age():
    for backlog in (Backlog.idle(), Backlog.steady_state(), Backlog.exact([300.0]),
                    Backlog.from_laws([TwoMomentDemand(60.0, 60.0).remaining(5.0)])):
        assert age_floor_seconds(600.0, backlog) is None


@pytest.mark.parametrize("call, field", [
    (lambda b: age_floor_seconds(-1.0, b), "dedicated_seconds"),
    (lambda b: age_floor_seconds(float("nan"), b), "dedicated_seconds"),
    (lambda b: age_floor_seconds(60.0, b, cores=0), "cores"),
    (lambda b: age_floor_seconds(60.0, b, cores=1.5), "cores"),
    (lambda b: age_floor_seconds(60.0, b, factor=-0.5), "factor"),
    (lambda b: age_floor_seconds(60.0, "jobs"), "backlog"),
])
def test_bad_arguments_name_the_field(call, field):
    with pytest.raises(InvalidArgumentError) as raised:
        call(_jobs([60.0], [30.0]))
    assert raised.value.field == field


def test_the_ages_travel_with_the_backlog():
    backlog = _jobs([120.0, 30.0], [40.0, 0.0])
    assert backlog.job_ages == (40.0, 0.0)
    again = Backlog.from_dict(backlog.to_dict())
    assert again.job_ages == (40.0, 0.0) and again.job_means == backlog.job_means
    # a manager before the ages sends none: no floor
    old = {k: v for k, v in backlog.to_dict().items() if k != "job_ages"}
    assert Backlog.from_dict(old).job_ages == ()
    with pytest.raises(InvalidArgumentError) as raised:
        Backlog.from_laws([TwoMomentDemand(60.0, 60.0).remaining(0.0)], [1.0, 2.0])
    assert raised.value.field == "ages_seconds"
    with pytest.raises(InvalidArgumentError):
        _jobs([60.0], [-3.0])


def test_a_calibrated_answer_holds_its_mean_at_the_floor_and_keeps_the_models():
    host = Host("ws", lam=0.2 / 300.0, mu=1 / 300.0, sigma=300.0, rho=0.2)
    model = predict([host], 3600.0)
    ones = np.ones((1, len(SERVED_LEVELS)))
    plain = calibrated_prediction(model, ones, SERVED_LEVELS)
    assert plain.mean == model.mean and "mean_floor_seconds" not in plain.to_dict()
    high = calibrated_prediction(model, ones, SERVED_LEVELS, 3 * model.mean)
    assert high.mean == 3 * model.mean and high.model["mean"] == model.mean
    assert high.std == model.std and high.quantiles == plain.quantiles
    assert high.to_dict()["mean_floor_seconds"] == 3 * model.mean
    low = calibrated_prediction(model, ones, SERVED_LEVELS, 0.5 * model.mean)
    assert low.mean == model.mean
    with pytest.raises(InvalidArgumentError):
        calibrated_prediction(model, ones, SERVED_LEVELS, float("inf"))
