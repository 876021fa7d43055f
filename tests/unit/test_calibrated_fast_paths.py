"""The calibrated law's fast paths give what the straightforward computation gives: each host's
CDF without the per-point log1p/exp, the level map as clipped ramps, and only the points where
the task can have finished mapped."""

import numpy as np
import pytest

from ghs.benchmarks.scheduling import lab
from scheduler import Host, completion, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import _level_map, calibrate
from scheduler.conformal import LEVELS, level_map


def _log_route_host_cdf(prediction, x):
    """Each host's CDF as exp of the summed per-server log-CDFs (the model's own route)."""
    servers = prediction._host_servers
    per_server = completion.servers_log_cdf(servers, np.asarray(x, float)[None, :])[0]
    mult = servers.mult[0]
    log_cdf = np.where(mult > 0, mult * per_server, 0.0).T
    hosts = len(prediction.hosts)
    return np.exp(log_cdf.reshape(hosts, log_cdf.shape[0] // hosts, -1).sum(axis=1))


def _straightforward_law(prediction, factors, grid):
    """The calibrated task CDF on ``grid`` computed point by point with conformal.level_map."""
    levels = np.asarray(LEVELS)
    cdf = np.maximum.accumulate(np.clip(_log_route_host_cdf(prediction, grid), 0, 1), axis=1)
    model_q = np.array([[np.interp(q, row, grid) if row[0] < q else grid[0] for q in levels]
                        for row in cdf])
    reported = np.maximum.accumulate(model_q * factors, axis=1)
    at = np.maximum.accumulate(np.array([np.interp(r, grid, row)
                                         for r, row in zip(reported, cdf)]), axis=1)
    return np.maximum.accumulate(np.prod(level_map(cdf, at, levels), axis=0)), reported


def _cases():
    rng = np.random.default_rng(3)
    hosts = lab(40, rng)
    yield predict(hosts, 40 * 3600.0), rng.uniform(0.5, 1.6, (40, 3))
    yield predict(hosts, 40 * 3600.0, "auto", backlog=[Backlog.steady_state()] * 40), \
        rng.uniform(0.9, 1.4, (40, 3))
    # a host given no share, and a share run by 3 of 4 cores
    few = [Host("a", lam=0.002, mu=0.01, sigma=150, rho=0.2),
           Host("b", lam=0.001, mu=0.005, sigma=300, rho=0.2, cores=4, processes=3),
           Host("c", lam=0.003, mu=0.01, sigma=90, rho=0.3, cores=2)]
    yield predict(few, 9000.0, "weibull", shares=[3000.0, 6000.0, 0.0]), \
        np.array([[0.7, 1.0, 1.3], [1.0, 1.0, 1.0], [1.2, 1.2, 1.2]])
    jobs = Backlog.from_laws([type("Law", (), {"mean_seconds": 900.0,
                                               "variance_seconds2": 1e6})()])
    yield predict(few, 9000.0, "gamma", backlog=[jobs, Backlog.steady_state(), jobs]), \
        np.full((3, 3), 1.25)


@pytest.mark.parametrize("case", range(4))
def test_each_hosts_cdf_is_the_log_routes(case):
    prediction, _ = list(_cases())[case]
    x = np.concatenate([[0.0], np.geomspace(1.0, 20 * prediction.mean, 300),
                        prediction.dedicated_seconds])
    x.sort()
    assert prediction.host_cdf(x) == pytest.approx(_log_route_host_cdf(prediction, x),
                                                   abs=1e-14)


@pytest.mark.parametrize("case", range(4))
def test_the_calibrated_law_is_the_straightforward_ones(case):
    prediction, factors = list(_cases())[case]
    law = calibrate(prediction, factors)
    expected, reported = _straightforward_law(prediction, factors, law.grid_seconds)
    assert law.host_quantiles == pytest.approx(reported, rel=1e-12)
    assert law.cdf_values == pytest.approx(expected, abs=1e-9)
    for name, level in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95)):
        assert law.quantiles[name] == pytest.approx(np.interp(level, expected,
                                                              law.grid_seconds), rel=1e-9)


def test_the_ramp_level_map_is_conformals_with_ties_and_ends():
    rng = np.random.default_rng(5)
    levels = np.asarray(LEVELS)
    knots = np.sort(rng.uniform(0, 1, (400, 3)), axis=1)
    # ties between knots, knots at 0 and at 1, every pair of neighbours equal somewhere
    knots[::7, 1] = knots[::7, 0]
    knots[1::7, 2] = knots[1::7, 1]
    knots[2::7, :] = knots[2::7, :1]
    knots[3::7, 0] = 0.0
    knots[4::7, 1:] = 1.0
    knots[5::7] = 0.0
    values = np.sort(rng.uniform(0, 1, (400, 64)), axis=1)
    values[:, :4] = 0.0
    values[:, -4:] = 1.0
    # the values at the knots themselves, where a tie decides
    values[:, 4:7] = knots
    values = np.sort(values, axis=1)
    assert _level_map(values, knots, levels) == pytest.approx(level_map(values, knots, levels),
                                                              abs=1e-14)
