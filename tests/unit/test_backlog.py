"""Backlog start: the API, the partition that equalises the new means, and the simulator's
launch state."""

import numpy as np
import pytest

from scheduler import Host, InvalidArgumentError, predict, schedule
from scheduler.backlog import Backlog
from scheduler.simulation import simulate
from scheduler.workload import demand, stationary_backlog


def host(name, rho=0.2, cores=1, tau=1.0, mean_demand=100.0):
    return Host(name, lam=cores * rho / mean_demand, mu=1 / mean_demand, sigma=mean_demand,
                rho=rho, tau=tau, cores=cores)


def test_idle_backlog_is_the_paper_model():
    hosts = [host("a"), host("b", rho=0.4, cores=2)]
    plain = predict(hosts, 7200.0)
    idle = predict(hosts, 7200.0, backlog=[Backlog.idle(), Backlog.idle()])
    assert idle.mean == pytest.approx(plain.mean, rel=1e-6)
    assert idle.quantiles["p90"] == pytest.approx(plain.quantiles["p90"], rel=1e-6)
    assert plain.to_dict()["hosts"][0]["backlog"] == {"mean_seconds": 0.0, "source": "idle"}


def test_a_mapping_names_hosts_and_the_json_reports_the_backlog():
    hosts = [host("a"), host("b"), host("c")]
    prediction = predict(hosts, 3600.0, backlog={"a": Backlog.exact([300.0, 60.0]),
                                                 "b": Backlog.steady_state()})
    rows = {row["name"]: row["backlog"] for row in prediction.to_dict()["hosts"]}
    assert rows["a"] == {"mean_seconds": 360.0, "source": "snapshot"}
    assert rows["b"]["source"] == "steady-state"
    assert rows["c"] == {"mean_seconds": 0.0, "source": "idle"}
    # the stationary workload's mean, against exact draws of it (Benes form)
    draws = stationary_backlog(0.002, demand("lognormal", 100.0, 1.0),
                               np.random.default_rng(3), 1_000_000)
    assert rows["b"]["mean_seconds"] == pytest.approx(draws.mean(), rel=0.02)


def test_equal_mean_equalises_the_means_including_the_backlog():
    hosts = [host("a", rho=0.1), host("b", rho=0.3, tau=2.0), host("c", rho=0.2, cores=4),
             host("d", rho=0.05)]
    backlog = [Backlog.exact([900.0]), Backlog.steady_state(), Backlog.exact([50.0] * 6),
               Backlog.exact([50_000.0])]
    prediction = predict(hosts, 4 * 3600.0, backlog=backlog)
    assert prediction.shares.sum() == pytest.approx(4 * 3600.0)
    assert prediction.shares[3] == 0.0  # its backlog alone outlasts everyone else's finish
    per_core = np.array([row["backlog"]["mean_seconds"]
                         for row in prediction.to_dict()["hosts"]])
    rho = np.array([h.rho for h in hosts])
    means = (per_core + prediction.dedicated_seconds) / (1 - rho)
    assert np.ptp(means[:3]) <= 1e-9 * means[0]
    assert means[3] > means[0]


def test_schedule_uses_the_backlog():
    hosts = [host(f"h{k}", rho=0.1 + 0.05 * k) for k in range(5)]
    busy = {"h0": Backlog.exact([40_000.0])}
    plan = schedule(hosts, 3600.0, "optimal", backlog=busy)
    assert "h0" not in [h.name for h in plan.hosts]
    assert "h0" in [h.name for h in schedule(hosts, 3600.0, "optimal").hosts]
    assert plan.prediction.mean < predict(hosts, 3600.0, backlog=busy).mean * 1.5


@pytest.mark.parametrize("bad, field", [([Backlog.idle()], "backlog"),
                                        ({"nope": Backlog.idle()}, "backlog"),
                                        (["idle", "idle"], "backlog")])
def test_bad_backlogs_are_refused(bad, field):
    with pytest.raises(InvalidArgumentError) as caught:
        predict([host("a"), host("b")], 60.0, backlog=bad)
    assert caught.value.field == field


def test_bad_backlog_values_are_refused():
    with pytest.raises(InvalidArgumentError):
        Backlog.exact([-1.0])
    with pytest.raises(InvalidArgumentError):
        Backlog.discrete([1.0, 2.0], [0.5, 0.4])
    with pytest.raises(InvalidArgumentError):
        Backlog.steady_state(float("inf"))


def test_simulator_spreads_jobs_at_launch_first_come_first_served():
    quiet = Host("q", lam=0.0, mu=0.01, sigma=0.0, rho=0.0, cores=2)
    # cores: 100 | 50 + 30 -> each core runs 10 s of the 20 s share after its jobs
    result = simulate([quiet], [20.0], runs=3, rng=np.random.default_rng(0),
                      running_jobs=[[100.0, 50.0, 30.0]])
    assert result.completion_seconds.tolist() == [110.0] * 3
    result = simulate([quiet], [20.0], runs=2, rng=np.random.default_rng(0),
                      initial_work_seconds=[[5.0, 40.0]])
    assert result.completion_seconds.tolist() == [50.0] * 2


def test_simulator_state_matches_the_model_on_a_quiet_host():
    quiet = Host("q", lam=0.0, mu=0.01, sigma=0.0, rho=0.0, cores=2)
    model = predict([quiet], 20.0, backlog=[Backlog.exact([100.0, 50.0, 30.0])])
    assert model.mean == pytest.approx(110.0)
    assert model.quantiles["p90"] == pytest.approx(110.0)


def test_simulator_refuses_bad_launch_state():
    with pytest.raises(InvalidArgumentError) as caught:
        simulate([host("a")], [10.0], runs=2, rng=np.random.default_rng(0),
                 initial_work_seconds=[[1.0, 2.0, 3.0]])
    assert caught.value.field == "initial_work_seconds"
    with pytest.raises(InvalidArgumentError) as caught:
        simulate([host("a")], [10.0], runs=2, rng=np.random.default_rng(0),
                 running_jobs=[[1.0], [2.0]])
    assert caught.value.field == "running_jobs"


@pytest.mark.parametrize("budget", [1024, 0])
def test_cdf_is_vectorised_and_consistent_with_the_quantiles(budget, monkeypatch):
    monkeypatch.setattr("scheduler.prediction.MIXTURE_MAX_COMPONENTS", budget)
    hosts = [host("a", rho=0.3), host("b", rho=0.5, cores=2)]
    prediction = predict(hosts, 7200.0, backlog=[Backlog.steady_state(),
                                                 Backlog.exact([600.0, 30.0, 90.0])])
    points = np.array([[prediction.quantiles["p50"], prediction.quantiles["p90"]],
                       [prediction.quantiles["p99"], 0.0]])
    values = prediction.cdf(points)
    assert values.shape == (2, 2)
    assert values.ravel().tolist() == pytest.approx([0.5, 0.9, 0.99, 0.0], abs=1e-6)
    # the host with exact jobs cannot finish before its busier core clears and runs its part
    assert prediction.cdf(600.0 + prediction.dedicated_seconds[1] - 1.0) == 0.0


def test_from_laws_needs_moments():
    with pytest.raises(InvalidArgumentError) as caught:
        Backlog.from_laws([object()])
    assert caught.value.field == "laws"


def test_a_backlog_past_any_workstation_is_refused_naming_the_host():
    from scheduler import InvalidHostError

    # lam / (cores mu) of 3e13 beside a rho of 0.46: the stationary workload came to 3.7e22 s
    # and the quadrature raised a bare ValueError
    wild = Host("wild", lam=21588.0, mu=7.3e-10, sigma=7597.0, rho=0.46)
    calm = Host("calm", lam=0.002, mu=0.01, sigma=100.0, rho=0.2)
    with pytest.raises(InvalidHostError, match=r"host 'wild': its steady-state backlog "
                                               r"averages 3\.\d+e\+22 s a core"):
        predict([calm, wild], 3600.0, backlog=[Backlog.steady_state()] * 2)
    # listed jobs too: a remaining demand past 1e12 s
    with pytest.raises(InvalidHostError, match=r"host 'calm': its jobs backlog"):
        predict([calm], 3600.0, backlog=[Backlog.exact([1e13])])
    assert predict([calm], 3600.0, backlog=[Backlog.exact([1e6])]).mean > 1e6


def test_quantiles_never_fall_with_the_level_where_a_backlogs_atom_decides_them():
    # every level lands within the solver's tolerance of one atom (an idle owner's core
    # behind a job of 1,432 s or none): each level solved alone put the p90 2 ms before the
    # p50 (found by a random search over pools, backlogs and options)
    hosts = [Host("h0", lam=0.0, mu=0.12960661457005204, sigma=21.311287946725233, rho=0.0,
                  tau=2.790473301335684, cores=4),
             Host("h2", lam=0.00390702976426982, mu=0.019617937247527768,
                  sigma=43.06375514203766, rho=0.049788998136924154, tau=2.3958637917185497,
                  cores=4),
             Host("h8", lam=0.0, mu=0.0016630073075199901, sigma=1809.6487327426228, rho=0.0,
                  tau=2.1859938358389557, cores=4)]
    backlog = {"h0": Backlog.discrete([0.0, 1432.2927007877142], [0.5, 0.5]),
               "h2": Backlog.idle(), "h8": Backlog.discrete([0.0, 264.8210465249741], [0.5, 0.5])}
    prediction = predict(hosts, 139141.90180171802, "lognormal", "equal-load",
                         backlog=backlog, processes_per_host=1)
    values = [prediction.quantiles[name] for name in ("p50", "p90", "p95", "p99")]
    assert values == sorted(values)


def test_a_mixtures_log_cdf_is_the_log_of_its_atoms_weighted_cdfs():
    # against scipy.stats atom by atom: before each atom's start, across its delay law, and
    # far past it, where the atoms' survivals are summed and those past 1e-30 left out
    from scipy import stats

    from scheduler.fits import LOGNORMAL
    from scheduler.model import MixtureServers, Servers

    t = np.array([[[100.0, 400.0, 1500.0], [50.0, 60.0, 70.0]]])
    q = np.array([[[0.6, 0.3, 0.9], [1.0, 0.0, 0.5]]])
    p1 = np.array([[[0.8, 1.2, 0.5], [2.0, 1.0, 0.3]]])
    p2 = np.log(np.array([[[50.0, 300.0, 20.0], [5.0, 10.0, 40.0]]]))
    weight = np.array([[[0.5, 0.3, 0.2], [0.2, 0.5, 0.3]]])
    mixture = MixtureServers(Servers(t=t, q=q, code=np.full(t.shape, LOGNORMAL), p1=p1, p2=p2,
                                     mult=np.ones((1, 2))), weight, np.ones((1, 2)))
    x = np.geomspace(10.0, 1e8, 400)
    got = mixture.log_cdf(x[None, :, None])[0]  # (points, servers)
    for k in range(2):
        delay = np.clip(x[:, None] - t[0, k], 0.0, None)
        survival = np.where(x[:, None] < t[0, k], 1.0, q[0, k] * stats.lognorm.sf(
            delay, p1[0, k], scale=np.exp(p2[0, k])))
        expected_survival = survival @ weight[0, k]
        cdf = 1.0 - expected_survival
        started = x >= t[0, k].min()
        assert np.all(got[~started, k] == -np.inf)
        assert np.exp(got[started, k]) == pytest.approx(cdf[started], rel=1e-12, abs=1e-300)
        # the upper tail is read through the survival, to its own relative precision
        tail = started & (expected_survival < 0.5) & (expected_survival > 1e-25)
        assert tail.sum() > 100
        assert -np.expm1(got[tail, k]) == pytest.approx(expected_survival[tail], rel=1e-9)
        done = started & (expected_survival < 1e-30)
        assert (got[done, k] <= 0.0).all() and (got[done, k] >= -1e-29).all()


def test_a_task_far_below_a_backlogs_rounding_still_gets_its_host():
    # alpha - level cancelled to 0: the only host had no work, and predict and schedule
    # raised ValueError / IndexError instead of answering
    # (a microsecond of work beside a job of 1e10 s, whose rounding is 2e-6 s)
    quiet = Host("ws1", lam=0.0, mu=0.001, sigma=0.0, rho=0.0, tau=1.0, cores=1)
    for work, job in ((1e-6, 1e10), (2e-6, 3.5e10)):
        prediction = predict([quiet], work, backlog=[Backlog.exact([job])])
        assert prediction.shares.tolist() == [work]
        assert prediction.mean == pytest.approx(job + work, rel=1e-15)
    busy = [host("a"), host("b", tau=2.0), host("c", tau=3.0)]
    states = [Backlog.exact([1e10]), Backlog.exact([1e10]), Backlog.exact([1e10])]
    prediction = predict(busy, 1e-6, backlog=states)
    assert prediction.shares.sum() == pytest.approx(1e-6, rel=1e-12)
    assert (prediction.shares >= 0).all()
    plan = schedule(busy, 1e-6, backlog=states)
    assert plan.prediction.shares.sum() == pytest.approx(1e-6, rel=1e-12)
    assert np.isfinite(plan.prediction.mean)


@pytest.mark.parametrize("log_sd", [0.5, 1.5, 2.5, 4.0])
def test_backlog_atoms_keep_the_laws_mean_and_variance(log_sd):
    # each bin's two atoms keep its conditional mean and variance: a heavy tail's last bin,
    # whose spread exceeds its mean, had its lower atom clipped at 0 and the mean raised
    from scheduler.backlog_atoms import gamma_atoms, lognormal_atoms
    mean = np.array([10.0, 3e4])
    var = mean**2 * np.expm1(log_sd**2)
    for atoms in (lognormal_atoms, gamma_atoms):
        values, probs = atoms(mean, var)
        assert (values >= 0).all() and (probs >= 0).all()
        assert probs.sum(axis=1) == pytest.approx(1.0, rel=1e-12)
        got_mean = (values * probs).sum(axis=1)
        assert got_mean == pytest.approx(mean, rel=1e-9)
        assert (values**2 * probs).sum(axis=1) - got_mean**2 == pytest.approx(var, rel=1e-6)


@pytest.mark.parametrize("sigma", [1000.0, 3000.0])
def test_a_heavy_tailed_steady_state_keeps_the_queues_mean(sigma):
    # From a steady state a single core's task ends when the work at launch W and its own t
    # have been served: E[T] = (E[W] + t) / (1 - rho), E[W] = lam E[X^2] / (2 (1 - rho))
    # (Pollaczek-Khinchine), whatever the demand law. At a demand CoV of 10 the model read
    # 13% above it, at 30 2.2 times it.
    mu, rho, work = 0.01, 0.1, 600.0
    host = Host("heavy", lam=rho * mu, mu=mu, sigma=sigma, rho=rho)
    waiting = rho * mu * (sigma**2 + 1.0 / mu**2) / (2.0 * (1.0 - rho))
    prediction = predict([host], work, backlog=[Backlog.steady_state()])
    assert prediction.mean == pytest.approx((waiting + work) / (1.0 - rho), rel=1e-3)
    # the simulator started in its steady state agrees within its own spread
    runs = simulate([host], [work], runs=20_000, rng=np.random.default_rng(3),
                    service="lognormal", warm=True).completion_seconds
    spread = runs.std() / np.sqrt(runs.size)
    assert abs(runs.mean() - prediction.mean) < 4 * spread


def test_a_steady_state_backlog_of_under_a_nanosecond_is_none_without_warnings():
    # lam 1e-200 beside rho 0.1: a mean backlog of 1e-199 s, whose atoms' CoV overflowed
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lam in (1e-300, 1e-200, 1e-20):
            host = Host("a", lam=lam, mu=1.0, sigma=1.0, rho=0.1)
            prediction = predict([host], 8 * 3600.0, backlog=[Backlog.steady_state()])
            assert prediction.backlog()[0]["mean_seconds"] == 0.0
            assert prediction.mean == pytest.approx(8 * 3600.0)
