"""The analytical model against the discrete-event simulator (never against its own formulas).

The simulator starts hosts idle, as the model assumes; its utilisation is lam * mean demand /
cores, so every host here has rho = lam / (cores mu).
"""

import zlib

import numpy as np
import pytest

from scheduler import Host, partition, predict
from scheduler.simulation import simulate
from scheduler.workload import demand

MEAN_DEMAND = 120.0
RUNS = 40_000
DEMANDS = {"exponential": None, "lognormal": 2.0, "loguniform": 1.5}


def one_host(rho, cov):
    sigma = MEAN_DEMAND * (1.0 if cov is None else cov)
    return Host("ws", lam=rho / MEAN_DEMAND, mu=1 / MEAN_DEMAND, sigma=sigma, rho=rho)


def simulated(hosts, shares, laws, seed):
    result = simulate(hosts, shares, runs=RUNS, rng=np.random.default_rng(seed), service=laws,
                      warm=False)
    times = result.completion_seconds
    return times.mean(), times.std(ddof=1), np.quantile(times, 0.9)


@pytest.mark.parametrize("hours", [1, 8])
@pytest.mark.parametrize("kind", list(DEMANDS))
@pytest.mark.parametrize("rho", [0.1, 0.3, 0.5])
def test_one_host_mean_std_and_p90(rho, kind, hours):
    cov = DEMANDS[kind]
    host = one_host(rho, cov)
    work = hours * 3600.0
    mean, std, p90 = simulated([host], [work], [demand(kind, MEAN_DEMAND, cov)],
                               seed=zlib.crc32(f"{rho}-{kind}-{hours}".encode()))
    model = predict([host], work)
    assert model.mean == pytest.approx(mean, rel=0.01)
    assert model.std == pytest.approx(std, rel=0.05)
    if hours >= 8:
        assert model.quantiles["p90"] == pytest.approx(p90, rel=0.03)


HETEROGENEOUS = [
    # name, rho, tau, cores, mean demand (s), demand kind, CoV
    ("a", 0.05, 1.0, 1, 60.0, "exponential", None),
    ("b", 0.15, 0.5, 1, 90.0, "lognormal", 1.5),
    ("c", 0.25, 2.0, 4, 150.0, "exponential", None),
    ("d", 0.35, 1.2, 1, 200.0, "loguniform", 1.5),
    ("e", 0.45, 0.8, 4, 120.0, "gamma", 0.7),
    ("f", 0.55, 1.5, 1, 300.0, "lognormal", 1.0),
    ("g", 0.60, 1.0, 2, 100.0, "exponential", None),
    ("h", 0.20, 1.8, 1, 240.0, "hyperexponential", 2.0),
]


def test_eight_heterogeneous_hosts_mean_and_p90():
    hosts, laws = [], []
    for name, rho, tau, cores, mean_demand, kind, cov in HETEROGENEOUS:
        law = demand(kind, mean_demand, cov)
        hosts.append(Host(name, lam=cores * rho / mean_demand, mu=1 / mean_demand,
                          sigma=mean_demand * law.cov, rho=rho, tau=tau, cores=cores))
        laws.append(law)
    work = 8 * 8 * 3600.0
    shares = partition(hosts, work, "equal-mean")
    mean, _, p90 = simulated(hosts, shares, laws, seed=2024)
    model = predict(hosts, work)
    assert model.mean == pytest.approx(mean, rel=0.02)
    assert model.quantiles["p90"] == pytest.approx(p90, rel=0.03)
