"""The shadow launches' cheaper routes give exactly what the straightforward ones give: a
mixture's host CDF evaluated only where it can move, the hosts that start idle predicted apart
from those with a backlog, and several window lengths forecast from one set of paths."""

import numpy as np
import pytest
from test_calibrated_fast_paths import _log_route_host_cdf

from ghs.manager.shadow_laws import LAW_LEVELS, HostLaws, copies_of
from scheduler import Host
from scheduler.backlog import Backlog
from scheduler.forecast import ForecastBank
from scheduler.host_quantiles import host_quantiles, joint_host_quantiles
from scheduler.prediction import predict_hosts

HOUR = 3600.0


def _jobs(mean, variance):
    return Backlog.from_laws([type("Law", (), {"mean_seconds": mean,
                                               "variance_seconds2": variance})()])


HOSTS = [Host("a", lam=0.003, mu=1 / 300, sigma=600, rho=0.3),
         Host("b", lam=0.001, mu=1 / 200, sigma=100, rho=0.2),
         Host("c", lam=0.004, mu=1 / 150, sigma=300, rho=0.45),
         Host("d", lam=0.002, mu=1 / 300, sigma=400, rho=0.2, cores=2)]
WORKS = np.array([900.0, 3600.0, 4 * HOUR, 16 * HOUR])


@pytest.mark.parametrize("dist", ["lognormal", "gamma", "weibull"])
def test_a_mixtures_host_cdf_is_its_full_log_route_to_the_bit(dist):
    # single-core hosts with jobs whose atoms pile up to exactly 0.5, 0.9 and 0.95, a
    # steady-state start and an idle one
    starts = [_jobs(600.0, 4e5), _jobs(2000.0, 1e7), Backlog.steady_state(), Backlog.idle()]
    p = predict_hosts(copies_of([*HOSTS[:3], HOSTS[1]]), [900.0, 3600.0, 4 * HOUR, 1800.0],
                      dist, backlog=starts)
    assert p.backlog_law == "mixture"
    x = np.geomspace(100.0, 5e6, 1500)
    assert (p.host_cdf(x) == _log_route_host_cdf(p, x)).all()
    # any order of the times
    shuffled = np.random.default_rng(2).permutation(x)
    assert (p.host_cdf(shuffled) == _log_route_host_cdf(p, shuffled)).all()


def test_a_multi_core_mixtures_host_cdf_is_its_log_route_host_cdf():
    starts = [Backlog.exact([300.0, 900.0, 50.0]), _jobs(500.0, 1e5)]
    p = predict_hosts([HOSTS[3], HOSTS[0]], [7200.0, 3600.0], "lognormal", backlog=starts)
    assert p.backlog_law == "mixture"
    x = np.geomspace(10.0, 1e6, 900)
    # a core group past its tail adds under 1e-20 to the log of the host's CDF
    assert p.host_cdf(x) == pytest.approx(_log_route_host_cdf(p, x), rel=1e-15, abs=1e-18)


@pytest.mark.parametrize("backlog", ["jobs", "steady", "many"])
def test_idle_starts_predicted_apart_give_one_predictions_figures(backlog):
    rng = np.random.default_rng(5)
    hosts, starts = [], []
    many = Host("e", lam=0.01, mu=1 / 300, sigma=400, rho=0.2, cores=16)
    for k, host in enumerate(HOSTS * 2):
        hosts.append(many if backlog == "many" and k % 2 == 0 else host)
        if k % 2:
            starts.append(Backlog.idle())
        elif backlog == "jobs":
            starts.append(_jobs(float(rng.uniform(100, 3000)), float(rng.uniform(1e4, 1e7))))
        elif backlog == "steady":
            starts.append(Backlog.steady_state())
        else:  # jobs on 16 cores, more atoms than the exact mixture keeps: moment-fitted
            starts.append(Backlog.from_laws([type("Law", (), {
                "mean_seconds": 400.0 + j, "variance_seconds2": 1e5})() for j in range(40)]))
    shares = np.tile(WORKS, 2)
    means, quantiles = HostLaws.predict(hosts, shares, starts).means_and_quantiles()
    one = predict_hosts(copies_of(hosts), shares, "lognormal", backlog=starts)
    assert one.backlog_law == ("moment-fit" if backlog == "many" else "mixture")
    # the same integrals, batched otherwise (a matrix product's rounding may differ)
    assert means == pytest.approx(one.host_moments()[0], rel=1e-13)
    assert quantiles == pytest.approx(host_quantiles(one, LAW_LEVELS), rel=1e-13)


def test_joint_host_quantiles_are_one_predictions():
    shares = WORKS
    first = predict_hosts(copies_of(HOSTS[:2]), shares[:2], "lognormal")
    second = predict_hosts(copies_of(HOSTS[2:]), shares[2:], "lognormal")
    both = predict_hosts(copies_of(HOSTS), shares, "lognormal")
    joint = np.concatenate(joint_host_quantiles([first, second]))
    assert (joint == host_quantiles(both)).all()


def test_several_window_lengths_forecast_as_each_alone():
    rng = np.random.default_rng(7)
    bank = ForecastBank(6)
    for b in range(490_000, 490_000 + 9 * 24):
        bank.push(np.arange(6), b, rng.uniform(0.0, 0.8, 6) * (1 + np.sin(b / 3.0)))
    launch = (490_000 + 9 * 24) * HOUR + np.array([0.0, 10.0, 1800.0, 3599.0, 7200.0, 0.0])
    durations = [900.0, 3600.0, 5.5 * HOUR, 16 * HOUR, 30 * HOUR]
    together = bank.forecast_windows(np.arange(6), launch, durations)
    for duration, found in zip(durations, together):
        alone = bank.forecast(np.arange(6), launch, duration)
        assert (found.values == alone.values).all() and found.forecaster == alone.forecaster
        assert (found.value == alone.value).all()
        assert found.window_bins == alone.window_bins


def test_host_moments_integrated_together_are_each_predictions_own():
    from scheduler.host_moments import prime_host_moments

    def predictions():
        four = Host("f", lam=0.004, mu=1 / 300, sigma=400, rho=0.3, cores=4)
        return [
            predict_hosts(copies_of(HOSTS[:3]), WORKS[:3], "lognormal",
                          backlog=[_jobs(600.0, 4e5), Backlog.steady_state(), _jobs(90.0, 1e3)]),
            predict_hosts(copies_of(HOSTS[:2]), WORKS[:2], "lognormal",
                          backlog=[Backlog.idle()] * 2),
            predict_hosts(copies_of([four, HOSTS[0]]), WORKS[1:3], "gamma",
                          backlog=[Backlog.exact([300.0, 900.0, 50.0]), _jobs(500.0, 1e5)]),
            predict_hosts(copies_of(HOSTS[1:]), WORKS[1:], "lognormal",
                          backlog=[_jobs(700.0, 2e5), Backlog.idle(), Backlog.idle()]),
            predict_hosts(copies_of(HOSTS[:2]), WORKS[:2], "lognormal"),  # no backlog
        ]

    primed, alone = predictions(), predictions()
    prime_host_moments(primed)
    assert "_host_moments" in primed[0].__dict__ and "_host_moments" in primed[3].__dict__
    for together, own in zip(primed, alone):
        for got, expected in zip(together.host_moments(), own.host_moments()):
            assert got == pytest.approx(expected, rel=1e-13)


def _every_point_quantiles(prediction, levels):
    """Each host's quantiles read from its CDF worked out on every point of the joint grid
    (the straightforward reading the bracketed one must give)."""
    from scheduler.calibrated import _monotone_rows, _row_quantiles
    from scheduler.host_quantiles import _joint_grid

    grid = _joint_grid([prediction])
    cdf = _monotone_rows(np.clip(prediction.host_cdf(grid), 0.0, 1.0))
    return _row_quantiles(grid, cdf, np.asarray(levels, dtype=float))


@pytest.mark.parametrize("dist", ["lognormal", "gamma", "weibull"])
@pytest.mark.parametrize("start", ["jobs", "steady", "idle", "none"])
def test_quantiles_read_around_each_level_are_those_read_on_every_point(dist, start):
    rng = np.random.default_rng(11)
    hosts = [*HOSTS, Host("e", lam=0.01, mu=1 / 300, sigma=900, rho=0.5, cores=3)]
    shares = np.array([900.0, 3600.0, 4 * HOUR, 16 * HOUR, 2 * HOUR])
    backlog = {"jobs": [_jobs(float(rng.uniform(100, 3000)), float(rng.uniform(1e4, 1e7)))
                        for _ in hosts],
               "steady": [Backlog.steady_state()] * len(hosts),
               "idle": [Backlog.idle()] * len(hosts), "none": None}[start]
    prediction = predict_hosts(copies_of(hosts), shares, dist, backlog=backlog)
    # the levels a manager reads, one met at the grid's first points and one never
    # reached inside it, and levels a host's atoms pile up to
    levels = [1e-12, *LAW_LEVELS, 0.999, 1 - 1e-15]
    assert (host_quantiles(prediction, levels)
            == _every_point_quantiles(prediction, levels)).all()
