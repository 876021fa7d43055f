"""The served calibrated law at its hosts' atoms, and its CDF against its own quantiles.

A share that meets no local job ends exactly on its dedicated time: the model's law has an
atom there. Read off the served law's grid, that atom had been a ramp: on a host with
P(no delay) = 0.79 the served chance of finishing by the dedicated time was 0.16 and the p50
1,208 s for a 1,200 s task. The simulator walks the arrivals; the law must say what it sees.
"""

import numpy as np
import pytest

from ghs.benchmarks.scheduling import lab
from scheduler import Host, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import REPORTED, SERVED_LEVELS, calibrated_prediction
from scheduler.simulation import simulate

RUNS = 40_000


def _unit(prediction):
    return calibrated_prediction(prediction, np.ones((len(prediction.hosts),
                                                      len(SERVED_LEVELS))), SERVED_LEVELS)


@pytest.mark.parametrize("hosts, work", [
    ([Host("a", lam=0.0002, mu=1 / 100, sigma=150, rho=0.02)], 1200.0),
    ([Host("a", lam=0.0005, mu=1 / 100, sigma=150, rho=0.05)], 120.0),
    ([Host("a", lam=0.001, mu=1 / 100, sigma=150, rho=0.1)], 60.0),
    ([Host("a", lam=0.0002, mu=1 / 100, sigma=150, rho=0.02),
      Host("b", lam=0.0001, mu=1 / 200, sigma=300, rho=0.02)], 2400.0),
])
def test_the_chance_by_the_dedicated_time_is_the_simulated_chance_of_no_delay(hosts, work):
    prediction = predict(hosts, work)
    served = _unit(prediction)
    start = float(np.max(prediction.dedicated_seconds))
    sim = simulate(hosts, list(prediction.dedicated_seconds), runs=RUNS,
                   rng=np.random.default_rng(len(hosts) * 1000 + int(work)))
    on_time = float(np.mean(sim.completion_seconds <= start * (1 + 1e-9)))
    error = 4.0 * np.sqrt(on_time * (1 - on_time) / RUNS) + 2e-3
    assert float(served.cdf(start)) == pytest.approx(on_time, abs=error)
    assert float(served.cdf(start * (1 - 1e-9))) == 0.0
    # every level the atom holds is served at the dedicated time itself, as simulated
    for name, level in REPORTED.items():
        if on_time > level + error:
            assert sim.quantile(level) == start
            assert served.quantiles[name] == start
        elif on_time < level - error:
            assert served.quantiles[name] > start


def _random_served(rng):
    count = int(rng.choice([1, 1, 2, 4, 16]))
    hosts = lab(count, rng)
    work = rng.uniform(60.0, 8 * 3600.0) * count
    backlog = [Backlog.steady_state()] * count if rng.random() < 0.5 else None
    factors = np.sort(rng.uniform(0.9, 1.4, (count, len(SERVED_LEVELS))), axis=1)
    if rng.random() < 0.3:
        factors[:] = 1.0
    return calibrated_prediction(predict(hosts, work, backlog=backlog), factors,
                                 SERVED_LEVELS)


@pytest.mark.parametrize("seed", range(4))
def test_the_served_cdf_reaches_each_level_at_its_served_quantile(seed):
    # P(T <= q_l) >= l and P(T < q_l) <= l: what `ghs predict --by` says at a served
    # quantile is its level (on the grid alone a p50 read 0.06 and 0.44-0.56)
    rng = np.random.default_rng(seed)
    for _ in range(60):
        served = _random_served(rng)
        for name, level in REPORTED.items():
            at = served.quantiles.get(name, served.law.quantiles[name])
            assert float(served.cdf(at)) >= level - 1e-12
            assert float(served.cdf(np.nextafter(at, 0.0))) <= level + 1e-12


def test_a_factor_past_the_atom_moves_its_level_past_it_and_one_below_keeps_it_there():
    host = [Host("a", lam=0.0002, mu=1 / 100, sigma=150, rho=0.02)]
    prediction = predict(host, 1200.0)
    later = np.ones((1, len(SERVED_LEVELS)))
    later[0, 0] = 1.05
    moved = calibrated_prediction(prediction, later, SERVED_LEVELS)
    assert moved.quantiles["p50"] == pytest.approx(1260.0)
    assert float(moved.cdf(1259.9)) <= 0.5
    assert float(moved.cdf(1200.0)) <= 0.5
    # a factor below 1 cannot bring a share before its dedicated time: the level stays on it
    held = calibrated_prediction(prediction, np.full((1, len(SERVED_LEVELS)), 0.9),
                                 SERVED_LEVELS)
    assert held.quantiles["p50"] == 1200.0
    assert float(held.cdf(1200.0)) >= 0.5
