"""The pooled far tail's battery of steps (scheduler.tail_battery)."""

import numpy as np
import pytest

from scheduler.conformal import pooled_calibrator
from scheduler.errors import InvalidArgumentError
from scheduler.tail_battery import TAIL_STEPS, TailBattery


def _run(battery, ratios, base=1000.0):
    """Score each outcome as a refresh does: the quantiles as they stand, the misses, the
    loss. Returns per outcome whether the served quantile covered it, the served quantile
    and every step's quantiles (seconds)."""
    covered, served, every = [], [], []
    for ratio in ratios:
        quantiles = battery.expert_quantiles([base])
        served.append(quantiles[battery.served, 0])
        every.append(quantiles[:, 0])
        covered.append(ratio * base <= served[-1])
        battery.record(ratio * base > quantiles, np.ones(quantiles.shape, bool))
        battery.score(ratio * base, [base], quantiles)
    return np.array(covered), np.array(served), np.array(every)


def test_each_step_is_the_pooled_calibrator_of_that_step_to_the_bit():
    rng = np.random.default_rng(3)
    levels = (0.99, 0.996)
    battery = TailBattery(levels)
    alone = [pooled_calibrator(levels, step) for step in TAIL_STEPS]
    base = np.array([1000.0, 1100.0])
    for ratio in np.exp(rng.normal(0.0, 0.8, 400)):
        quantiles = battery.expert_quantiles(base)
        known = rng.random(quantiles.shape) < 0.9
        battery.record(ratio * 1000.0 > quantiles, known)
        for row, calibrator in enumerate(alone):
            reported = calibrator.adjust([0], base[None])[0]
            assert (reported == quantiles[row]).all()
            missed = (ratio * 1000.0 > reported)[None]
            calibrator.record([0], missed, missed, known[row][None], known[row][None])
    for row, calibrator in enumerate(alone):
        assert (battery.theta[row] == calibrator.theta[0]).all()
        assert (battery.scored[row] == calibrator.scored[0]).all()
        assert (battery.expert_factors()[row] == calibrator.factors([0])[0]).all()


def test_a_stationary_pool_after_an_early_burst_is_served_a_quiet_step():
    """Outcomes of a steady pool (ratios lognormal, sigma 0.1: the p99.6 is 1.30 times the
    base) after a burst of 40 runs 5 times their base. Every step covers at about the level
    in the long run (adaptive conformal inference), but a large step's factor swings with
    every miss (x e^0.3 at the default step) and its quantile is wider on average; the
    battery serves a smaller step over the steady stretch, as narrow as the true quantile
    and covering near the level."""
    rng = np.random.default_rng(7)
    burst = np.full(40, 5.0)
    steady = np.exp(rng.normal(0.0, 0.1, 6000))
    battery = TailBattery()
    covered, served, every = _run(battery, np.concatenate([burst, steady]))
    late = slice(-3000, None)
    assert TAIL_STEPS[battery.served] < TAIL_STEPS[0]
    truth = np.exp(0.1 * 2.652)  # the lognormal's 0.996 quantile
    assert np.median(served[late]) / 1000.0 == pytest.approx(truth, rel=0.08)
    assert 0.99 <= covered[late].mean() <= 0.999
    # the default step's quantile is wider over the same stretch
    assert np.mean(every[late, 0]) > 1.02 * np.mean(served[late])


def test_a_pool_whose_tail_climbs_is_served_the_step_that_climbs():
    """Runs of a bursty pool: most at their base, one in twenty 10-30 times it (a young
    record's far tail far above the model's). While the factor climbs, the battery serves
    the step that climbed (the largest): over the first 400 outcomes it covers as that step
    does, more than the default step alone; later it covers at about the level."""
    rng = np.random.default_rng(11)
    ratios = np.where(rng.random(3000) < 0.05, rng.uniform(10.0, 30.0, 3000), 1.0)
    battery = TailBattery()
    covered, _, every = _run(battery, ratios)
    each = (ratios[:, None] * 1000.0 <= every)[:400].mean(axis=0)
    largest = int(np.argmax(TAIL_STEPS))
    assert covered[:400].mean() == pytest.approx(each[largest], abs=0.005)
    assert covered[:400].mean() >= each[0] + 0.015
    assert covered[500:].mean() >= 0.99


def test_the_first_step_is_served_until_outcomes_tell_them_apart():
    battery = TailBattery()
    assert battery.served == 0 and (battery.loss == 0).all()
    assert battery.factors([0, 0]).shape == (2, 1)
    assert (battery.coverage([0]) != battery.coverage([0])).all()  # NaN: none scored


@pytest.mark.parametrize("kwargs", [{"steps": ()}, {"steps": (0.3, -1.0)}, {"steps": (3.0,)},
                                    {"decay": 0.0}, {"decay": 1.5}, {"levels": (0.9, 0.5)}])
def test_bad_settings_are_named(kwargs):
    with pytest.raises(InvalidArgumentError):
        TailBattery(**kwargs)


def test_bad_outcomes_are_named():
    battery = TailBattery()
    with pytest.raises(InvalidArgumentError, match="base"):
        battery.expert_quantiles([1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="shape"):
        battery.record(np.ones((2, 1), bool), np.ones((2, 1), bool))
    with pytest.raises(InvalidArgumentError, match="realised"):
        battery.score(float("nan"), [1000.0])
    with pytest.raises(InvalidArgumentError, match="host indices"):
        battery.factors([[0]])
    with pytest.raises(InvalidArgumentError, match="quantiles"):
        battery.adjust([0], np.array([[0.0]]))
