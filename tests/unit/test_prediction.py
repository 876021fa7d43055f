import numpy as np
import pytest
from scipy import integrate

from scheduler import Host, InvalidArgumentError, partition, predict, predict_mean
from scheduler.backlog import Backlog


def host(name="ws", **changes):
    values = dict(lam=0.0025, mu=1 / 120, sigma=180.0, rho=0.3, tau=1.0, cores=1)
    values.update(changes)
    return Host(name, **values)


@pytest.mark.parametrize("changes", [{"lam": 0.0}, {"rho": 0.0}])
def test_no_local_load_means_dedicated_time_exactly(changes):
    result = predict([host(tau=2.0, **changes)], 7200.0)
    assert result.mean == pytest.approx(3600.0, rel=1e-12)
    assert result.std == 0.0
    assert all(value == pytest.approx(3600.0) for value in result.quantiles.values())
    assert result.cdf([3599.9, 3600.0 * (1 + 1e-12), 5000.0]).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("dist", ["gamma", "weibull", "lognormal", "auto"])
def test_cdf_is_vectorised_monotone_and_agrees_with_moments_and_quantiles(dist):
    hosts = [host("a"), host("b", rho=0.5, lam=0.004, tau=1.5, cores=2), host("c", rho=0.1,
                                                                               lam=0.0008)]
    result = predict(hosts, 10 * 3600.0, dist)
    x = np.linspace(0, 10 * result.mean, 2001).reshape(23, 87)
    values = result.cdf(x)
    assert values.shape == x.shape
    flat = values.ravel()
    assert np.all(np.diff(flat) >= -1e-15) and flat[0] == 0.0
    assert result.cdf(100 * result.mean) == pytest.approx(1.0)
    for name, level in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)):
        assert result.cdf(result.quantiles[name]) == pytest.approx(level, abs=1e-6)
    # an independent adaptive integration of the same CDF gives the same moments
    start = max(result.dedicated_seconds / np.array([1, 2, 1]))

    def survival(x):
        return 1.0 - float(result.cdf(x))

    tail = integrate.quad(survival, start, start + 60 * result.std, limit=400)[0]
    second = integrate.quad(lambda x: 2 * (x - start) * survival(x), start,
                            start + 60 * result.std, limit=400)[0]
    assert result.mean == pytest.approx(start + tail, rel=1e-6)
    assert result.std == pytest.approx(np.sqrt(second - tail**2), rel=1e-5)
    assert result.criterion == pytest.approx(result.mean + result.std)
    assert result.cov == pytest.approx(result.std / result.mean)


def test_multicore_host_is_its_cores_as_separate_servers():
    four = predict([host(lam=0.01, rho=0.3, cores=4, tau=1.3)], 40000.0)
    cores = [host(f"core{i}", lam=0.0025, rho=0.3, tau=1.3) for i in range(4)]
    split = predict(cores, 40000.0, shares=[10000.0] * 4)
    assert four.mean == pytest.approx(split.mean, rel=1e-9)
    assert four.std == pytest.approx(split.std, rel=1e-7)
    assert four.quantiles["p90"] == pytest.approx(split.quantiles["p90"], rel=1e-6)


def test_identical_hosts_merge_without_changing_the_answer():
    same = [host(f"ws{i}") for i in range(6)]
    nudged = [host(f"ws{i}", sigma=180.0 * (1 + 1e-13 * i)) for i in range(6)]
    a, b = predict(same, 6 * 3600.0), predict(nudged, 6 * 3600.0)
    assert a.mean == pytest.approx(b.mean, rel=1e-9)
    assert a.std == pytest.approx(b.std, rel=1e-7)


def test_partitions_sum_to_the_work_and_equal_mean_equalises_means():
    hosts = [host("a"), host("b", rho=0.5, lam=0.004, tau=2.0), host("c", cores=4, lam=0.01)]
    for method in ("equal-mean", "equal-load", "speed"):
        assert partition(hosts, 5000.0, method).sum() == pytest.approx(5000.0)
    shares = partition(hosts, 5000.0, "equal-mean")
    per_core_mean = shares / (np.array([1, 1, 4]) * np.array([1, 2, 1])) / (
        1 - np.array([0.3, 0.5, 0.3]))
    assert np.allclose(per_core_mean, per_core_mean[0])
    assert partition(hosts, 300.0, "equal-load").tolist() == [100.0, 100.0, 100.0]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: predict([host()], 0.0), "work"),
        (lambda: predict([host()], -5.0), "work"),
        (lambda: predict([host()], float("nan")), "work"),
        # past any task: the delay moments overflowed and the prediction read NaN
        (lambda: predict([host()], 1e300), "work"),
        (lambda: predict([host()], 1e-300), "work"),
        (lambda: predict([host()], 10.0, "normal"), "dist"),
        (lambda: predict([host()], 10.0, partition="random"), "partition"),
        (lambda: predict([], 10.0), "hosts"),
        (lambda: predict([host("a"), host("a")], 10.0), "hosts"),
        (lambda: predict([host()], 10.0, shares=[5.0]), "shares"),
        (lambda: predict([host("a"), host("b")], 10.0, shares=[5.0, -1.0]), "shares"),
        (lambda: predict_mean([host()], 0.0), "work"),
        (lambda: predict_mean([host()], 10.0, "normal"), "dist"),
        (lambda: predict_mean([], 10.0), "hosts"),
        (lambda: predict_mean([host("a"), host("b")], 10.0, shares=[5.0, 4.0]), "shares"),
    ],
)
def test_bad_arguments_name_the_field(call, field):
    with pytest.raises(InvalidArgumentError) as caught:
        call()
    assert caught.value.field == field


def test_to_dict_has_the_json_contract():
    payload = predict([host("a"), host("b", cores=2, lam=0.005)], 3600.0).to_dict()
    assert set(payload) >= {"work", "hosts", "mean", "std", "cov", "criterion", "quantiles",
                            "distribution"}
    assert set(payload["quantiles"]) == {"p50", "p90", "p95", "p99"}
    assert set(payload["hosts"][0]) == {"name", "share", "dedicated_seconds", "mean", "std",
                                        "backlog", "processes"}
    assert sum(h["share"] for h in payload["hosts"]) == pytest.approx(3600.0)


@pytest.mark.parametrize("start", [None, "jobs", "steady-state", "moment-fit"])
@pytest.mark.parametrize("layout", ["one core", "one of two cores", "split", "two processes"])
def test_the_mean_alone_is_the_whole_predictions_mean(start, layout, monkeypatch):
    """predict_mean, which a run window is iterated on, reads the mean predict integrates:
    the fitted law's own where one process runs the task (to predict's 1e-5), the same
    integral elsewhere (exactly)."""
    if start == "moment-fit":
        monkeypatch.setattr("scheduler.prediction.MIXTURE_MAX_COMPONENTS", 0)
    hosts = {"one core": [host("a", lam=0.004)],
             "one of two cores": [host("a", cores=2, lam=0.008)],
             "split": [host("a", lam=0.004), host("b", cores=2, lam=0.002)],
             "two processes": [host("a", cores=2, lam=0.008)]}[layout]
    processes = 1 if layout == "one of two cores" else None
    backlog = None if start is None else [
        Backlog.steady_state() if start == "steady-state" else Backlog.exact([900.0, 60.0])
        for _ in hosts]
    whole = predict(hosts, 7200.0, backlog=backlog, processes_per_host=processes)
    mean = predict_mean(hosts, 7200.0, backlog=backlog, processes_per_host=processes)
    if len(hosts) == 1 and (hosts[0].cores == 1 or processes == 1):
        assert mean == pytest.approx(whole.mean, rel=1e-5) and mean > 7200.0
    else:
        assert mean == whole.mean


@pytest.mark.parametrize("dist", ["gamma", "weibull", "lognormal"])
@pytest.mark.parametrize("sigma", [10.0, 1e3, 1e5])
def test_one_hosts_task_mean_is_the_queues_exact_mean(dist, sigma):
    # An idle-start single core: E[T] = t / (1 - rho) whatever the demand law (every unit of
    # the task waits for the local work that arrives while it is queued). At a demand CoV of
    # 1e4 the integral of the fitted law read up to 1.4% below it (Weibull).
    rho, work = 0.8, 60.0
    host = Host("a", lam=rho * 0.1, mu=0.1, sigma=sigma, rho=rho)
    prediction = predict([host], work, dist)
    assert prediction.mean == pytest.approx(work / (1.0 - rho), rel=1e-9)
    row = prediction.to_dict()["hosts"][0]
    assert (prediction.mean, prediction.std) == pytest.approx((row["mean"], row["std"]),
                                                              rel=1e-12)
