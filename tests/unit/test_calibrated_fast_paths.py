"""The calibrated law's fast paths give what the straightforward computation gives: each host's
CDF without the per-point log1p/exp, the level map as clipped ramps, and only the points where
the task can have finished mapped."""

import math

import numpy as np
import pytest

from ghs.benchmarks.scheduling import lab
from scheduler import Host, completion, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS, _level_map, calibrate
from scheduler.conformal import LEVELS, level_map
from scheduler.host_quantiles import host_quantiles
from scheduler.power_tail import TAIL_FROM
from scheduler.prediction import predict_hosts


def _log_route_host_cdf(prediction, x):
    """Each host's CDF as exp of the summed per-server log-CDFs (the model's own route)."""
    servers = prediction._host_servers
    per_server = completion.servers_log_cdf(servers, np.asarray(x, float)[None, :])[0]
    mult = servers.mult[0]
    log_cdf = np.where(mult > 0, mult * per_server, 0.0).T
    hosts = len(prediction.hosts)
    return np.exp(log_cdf.reshape(hosts, log_cdf.shape[0] // hosts, -1).sum(axis=1))


def _straightforward_law(prediction, factors, grid, levels=LEVELS):
    """The calibrated task CDF on ``grid`` computed point by point with conformal.level_map,
    and past each host's own last level a power law in time through its reported quantiles,
    going on past the last where it is the later finish."""
    levels = np.asarray(levels)
    cdf = np.maximum.accumulate(np.clip(_log_route_host_cdf(prediction, grid), 0, 1), axis=1)
    # each host's law at its own start s (its latest server's dedicated time), where it
    # has an atom: a level inside it has its model quantile at s
    servers = prediction._host_servers
    groups = servers.t.shape[1] // len(factors)
    starts = np.where(servers.mult[0] > 0, servers.t[0], 0.0).reshape(-1, groups).max(axis=1)
    at_start = np.array([_log_route_host_cdf(prediction, [s])[k, 0]
                         for k, s in enumerate(starts)])
    model_q = np.array([[s if a >= q else np.interp(q, row, grid) if row[0] < q else grid[0]
                         for q in levels] for row, s, a in zip(cdf, starts, at_start)])
    # a share cannot finish before its dedicated time, whatever the factor
    reported = np.maximum(np.maximum.accumulate(model_q * factors, axis=1),
                          prediction.dedicated_seconds[:, None])
    # F at each reported quantile from the host's own law; at its start, the level itself
    # while the atom holds it, else the whole atom
    at = np.maximum.accumulate(np.array([
        [min(q, a) if abs(r - s) <= 1e-12 * s else _log_route_host_cdf(prediction, [r])[k, 0]
         for q, r in zip(levels, row)]
        for k, (row, s, a) in enumerate(zip(reported, starts, at_start))]), axis=1)
    mapped = level_map(cdf, at, levels)
    for k, row in enumerate(reported):
        if prediction.dedicated_seconds[k] == 0:
            continue  # no share: finished from the start
        for a in range(levels.size - 1):
            if levels[a] < TAIL_FROM or not row[a + 1] > row[a] > 0:
                continue
            exponent = math.log((1 - levels[a + 1]) / (1 - levels[a])) / math.log(
                row[a + 1] / row[a])
            for i, x in enumerate(grid):
                if row[a] <= x <= row[a + 1]:
                    mapped[k, i] = 1 - (1 - levels[a]) * (x / row[a]) ** exponent
                elif x > row[a + 1] and a + 2 == levels.size:
                    # past the last reported quantile it goes on, where it is the later
                    mapped[k, i] = min(mapped[k, i],
                                       1 - (1 - levels[a]) * (x / row[a]) ** exponent)
    return np.maximum.accumulate(np.prod(mapped, axis=0)), reported


def _inputs(case):
    """(hosts, dist, shares or None, backlog, factors) of a few kinds of prediction."""
    rng = np.random.default_rng(3 + case)
    lab_hosts = lab(40, rng)
    few = [Host("a", lam=0.002, mu=0.01, sigma=150, rho=0.2),
           Host("b", lam=0.001, mu=0.005, sigma=300, rho=0.2, cores=4, processes=3),
           Host("c", lam=0.003, mu=0.01, sigma=90, rho=0.3, cores=2)]
    jobs = Backlog.from_laws([type("Law", (), {"mean_seconds": 900.0,
                                               "variance_seconds2": 1e6})()])
    return [
        (lab_hosts, "lognormal", None, None, rng.uniform(0.5, 1.6, (40, 3))),
        (lab_hosts, "auto", None, [Backlog.steady_state()] * 40,
         rng.uniform(0.9, 1.4, (40, 3))),
        # a host given no share, and a share run by 3 of 4 cores
        (few, "weibull", [3000.0, 6000.0, 0.0], None,
         np.array([[0.7, 1.0, 1.3], [1.0, 1.0, 1.0], [1.2, 1.2, 1.2]])),
        (few, "gamma", [2000.0, 4000.0, 3000.0], [jobs, Backlog.steady_state(), jobs],
         np.full((3, 3), 1.25)),
    ][case]


def _prediction(case):
    hosts, dist, shares, backlog, factors = _inputs(case)
    work = 40 * 3600.0 if shares is None else float(np.sum(shares))
    return predict(hosts, work, dist, shares=shares, backlog=backlog), factors


@pytest.mark.parametrize("case", range(4))
def test_each_hosts_cdf_is_the_log_routes(case):
    prediction, _ = _prediction(case)
    x = np.concatenate([[0.0], np.geomspace(1.0, 20 * prediction.mean, 300),
                        prediction.dedicated_seconds])
    x.sort()
    assert prediction.host_cdf(x) == pytest.approx(_log_route_host_cdf(prediction, x),
                                                   abs=1e-14)


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("tail", [False, True])
def test_the_calibrated_law_is_the_straightforward_ones(case, tail):
    prediction, factors = _prediction(case)
    levels = LEVELS
    if tail:
        # a pooled far-tail factor beside each host's own, 1.5 to 4 times the model's
        spread = np.random.default_rng(case).uniform(1.5, 4.0, (factors.shape[0], 1))
        factors, levels = np.concatenate([factors, spread], axis=1), SERVED_LEVELS
    law = calibrate(prediction, factors, levels)
    expected, reported = _straightforward_law(prediction, factors, law.grid_seconds, levels)
    assert law.host_quantiles == pytest.approx(reported, rel=1e-12)
    # with a far-tail factor a host's last knot can sit where its F rounds to 1 (F 1 - 6e-14
    # past it): the ramp's slope there, 0.004 over 1e-13, makes rounding 1e-6
    assert law.cdf_values == pytest.approx(expected, abs=1e-5 if tail else 1e-9)
    working = prediction.dedicated_seconds > 0
    for j, (name, level) in enumerate((("p50", 0.5), ("p90", 0.9), ("p95", 0.95))):
        # where the grid's law crosses the level, but no sooner than any working host's own
        # calibrated quantile (the task ends with its slowest share); one host's exactly
        on_grid = max(np.interp(level, expected, law.grid_seconds),
                      prediction.dedicated_seconds.max())
        bound = reported[working, j].max()
        assert law.quantiles[name] == pytest.approx(
            bound if working.sum() == 1 else max(on_grid, bound), rel=1e-5 if tail else 1e-9)


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


def test_times_in_any_order_give_each_hosts_cdf_at_them():
    prediction, _ = _prediction(0)
    x = np.random.default_rng(2).permutation(np.geomspace(100.0, 10 * prediction.mean, 50))
    assert prediction.host_cdf(x) == pytest.approx(_log_route_host_cdf(prediction, x),
                                                   abs=1e-14)
    assert prediction.host_cdf(x[:1]) == pytest.approx(
        _log_route_host_cdf(prediction, x[:1]), abs=1e-14)


@pytest.mark.parametrize("case", range(4))
def test_hosts_alone_are_the_full_predictions_hosts(case):
    full, _ = _prediction(case)
    hosts, dist, _, backlog, _ = _inputs(case)
    alone = predict_hosts(hosts, full.shares, dist, backlog=backlog)
    assert np.isnan(alone.mean) and not alone.quantiles
    for got, expected in zip(alone.host_moments(), full.host_moments()):
        assert got == pytest.approx(expected, rel=1e-12)
    assert host_quantiles(alone) == pytest.approx(host_quantiles(full), rel=1e-12)


@pytest.mark.parametrize("share_drawn", [0.05, 0.6])
def test_the_power_tail_draws_the_same_law_gathered_or_over_every_point(share_drawn,
                                                                        monkeypatch):
    # rows of a geometric grid, reported quantiles placed so that about ``share_drawn`` of
    # the points lie past each row's p95; one row flat past it (no power law), one with no
    # work; the gathered and the dense arithmetic must agree to the bit
    from scheduler import power_tail

    rng = np.random.default_rng(5)
    hosts, points = 6, 200
    times = np.geomspace(10.0, 1e5, points)
    position = np.log(10.0) + (1 - share_drawn) * np.log(1e4)
    p95 = np.exp(position + rng.normal(0, 0.05, hosts))
    reported = np.stack([p95 / 3, p95 / 1.2, p95, p95 * rng.uniform(1.5, 4.0, hosts)], axis=1)
    reported[1, 3] = reported[1, 2]  # no rise past the p95
    mapped = np.sort(rng.uniform(0.0, 1.0, (hosts, points)), axis=1)
    working = np.ones(hosts, dtype=bool)
    working[4] = False
    levels = np.array(SERVED_LEVELS)
    laws = {}
    for name, dense_from in (("gathered", 0), ("dense", 10**9)):
        monkeypatch.setattr(power_tail, "_DENSE_FROM", dense_from)
        laws[name] = power_tail._power_tail(mapped.copy(), times, reported, levels, working)
    past = (times[None, :] >= reported[:, 2:3]).mean()
    assert abs(past - share_drawn) < 0.1
    np.testing.assert_array_equal(laws["gathered"], laws["dense"])
    assert not np.array_equal(laws["dense"], mapped)  # the tail was drawn
    np.testing.assert_array_equal(laws["dense"][[1, 4]], mapped[[1, 4]])
