"""A one-core host's completion moments from its steady state, against the textbook M/G/1
figures (not the model's own formulas): the remote share finishes with the delay busy period
its work V = t + W starts, W the stationary workload (Pollaczek-Khinchine), so
E[T] = E[V] / (1 - rho) and Var[T] = Var[V] / (1 - rho)^2 + E[V] lam E[X^2] / (1 - rho)^3."""

import numpy as np
import pytest

from scheduler import Backlog, Host, predict
from scheduler.mixture_moments import single_core_moments
from scheduler.prediction import _host_batch, _host_moments_of


def textbook(host, work, backlog_seconds=None):
    """(E[T], std[T]) of the share started behind the stationary workload, or behind
    ``backlog_seconds`` of work exactly."""
    mean_x = 1.0 / host.mu
    ex2 = host.sigma**2 + mean_x**2
    ex3 = mean_x**3 * (ex2 / mean_x**2) ** 3  # lognormal demands of that mean and sigma
    rho, lam = host.rho, host.lam
    if backlog_seconds is None:
        w_mean = lam * ex2 / (2 * (1 - rho))
        w_var = 2 * w_mean**2 + lam * ex3 / (3 * (1 - rho)) - w_mean**2
    else:
        w_mean, w_var = backlog_seconds, 0.0
    v_mean = work + w_mean
    mean = v_mean / (1 - rho)
    var = w_var / (1 - rho) ** 2 + v_mean * lam * ex2 / (1 - rho) ** 3
    return mean, np.sqrt(var)


@pytest.mark.parametrize("rho, cov, mean_x, work, backlog_seconds, rel", [
    (0.2, 1.0, 100.0, 3600.0, None, 1e-9), (0.5, 3.0, 100.0, 600.0, None, 1e-9),
    (0.8, 1.0, 100.0, 100.0, None, 1e-9), (0.1, 30.0, 100.0, 600.0, None, 1e-9),
    # a workload of CoV in the thousands: its atoms' partial moments keep 1e-4
    (0.3, 300.0, 100.0, 36000.0, None, 1e-3),
    # one job of known remaining demand before a heavy-tailed host's share: the quadrature
    # stopped where the survival fell below 1e-10 and missed 6% of the std
    (0.7, 18.0, 3000.0, 4000.0, 1000.0, 1e-9)])
def test_a_one_core_hosts_moments_are_the_textbooks(rho, cov, mean_x, work,
                                                     backlog_seconds, rel):
    host = Host("ws", lam=rho / mean_x, mu=1 / mean_x, sigma=cov * mean_x, rho=rho)
    start = Backlog.steady_state() if backlog_seconds is None else \
        Backlog.exact([backlog_seconds])
    prediction = predict([host], work, backlog=[start])
    means, stds = prediction.host_moments()
    expected_mean, expected_std = textbook(host, work, backlog_seconds)
    assert means[0] == pytest.approx(expected_mean, rel=rel)
    assert stds[0] == pytest.approx(expected_std, rel=rel)


def test_several_cores_or_groups_are_left_to_the_quadrature():
    hosts = [Host("one", lam=0.002, mu=0.01, sigma=100.0, rho=0.2),
             Host("two", lam=0.004, mu=0.01, sigma=100.0, rho=0.2, cores=2),
             Host("busy", lam=0.002, mu=0.01, sigma=100.0, rho=0.2, cores=2)]
    backlog = [Backlog.steady_state(), Backlog.steady_state(), Backlog.exact([500.0])]
    prediction = predict(hosts, 3 * 3600.0, backlog=backlog)
    batch = _host_batch(prediction._host_servers, 3)
    closed, _, _ = single_core_moments(batch)
    assert closed.tolist() == [True, False, False]
    means, stds = _host_moments_of(batch)
    # the two-core hosts finish with the slower of their cores: later than one core's mean
    assert means[1] > prediction.dedicated_seconds[1] / 0.8
    assert np.all(stds > 0)
