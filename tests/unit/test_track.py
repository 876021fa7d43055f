"""The manager's track record on its own store: served predictions, completion reports, the
accuracy summary against a hand count, and the outcomes calibration reads."""

from __future__ import annotations

import pytest

from ghs.manager.store import ManagerStore
from ghs.manager.track import host_laws
from scheduler import Backlog, Host, predict

HOSTS = (Host("a", lam=1 / 600, mu=1 / 200, sigma=300.0, rho=1 / 3, tau=1.0),
         Host("b", lam=1 / 900, mu=1 / 300, sigma=300.0, rho=1 / 3, tau=2.0, cores=2))


@pytest.fixture
def store():
    opened = ManagerStore(None)
    yield opened
    opened.close()


def test_reports_and_accuracy_by_hand(store):
    first = predict(HOSTS, 3600.0, backlog=[Backlog.exact([50.0]), Backlog.steady_state()])
    second = predict(HOSTS, 7200.0)
    one = store.track.record(first, 1000.0, "predict")
    two = store.track.record(second, 5000.0, "schedule")
    laws = host_laws(first)
    assert set(laws) == {"a", "b"}
    for law in laws.values():  # each host's own quantiles are ordered, below the task's p99
        assert 0 < law["p50"] < law["p90"] < law["p95"] <= first.quantiles["p99"] * 1.5
    # first: a inside p50, b between p50 and p90 -> the task from both (latest: b)
    a_time = 0.5 * laws["a"]["p50"]
    b_time = 0.5 * (laws["b"]["p50"] + laws["b"]["p90"])
    store.track.report(one, "a", 1000.0 + a_time, 1.0)
    store.track.report(one, "b", 1000.0 + b_time, 1.0)
    # second: only the whole task, beyond its p90
    store.track.report(two, None, 5000.0 + 1.1 * second.quantiles["p90"], 1.0)
    result = store.track.accuracy()
    rows = {row["name"]: row for row in result["hosts"]}
    assert rows["a"]["reports"] == 1 and rows["a"]["p50_coverage"] == 1.0
    assert rows["b"]["p50_coverage"] == 0.0 and rows["b"]["p90_coverage"] == 1.0
    assert rows["b"]["mean_abs_error_seconds"] == pytest.approx(abs(laws["b"]["mean"] - b_time))
    task_first = max(a_time, b_time)
    assert result["task"]["reports"] == 2
    assert result["task"]["p90_coverage"] == ((task_first <= first.quantiles["p90"]) + 0) / 2
    assert result["overall"]["reports"] == 4
    # only the predictions served since 2000 s: the second's task report
    later = store.track.accuracy(2000.0)
    assert later["hosts"] == [] and later["task"]["reports"] == 1
    outcomes = store.reported_outcomes(0.0)
    assert [(o.host, o.launch_epoch_seconds) for o in outcomes] == [("a", 1000.0), ("b", 1000.0)]
    assert outcomes[1].realised_seconds == pytest.approx(b_time)
    assert outcomes[1].p90_seconds == laws["b"]["p90"]
    assert store.reported_outcomes(2000.0) == []


def test_bad_reports_have_their_own_codes(store):
    pid = store.track.record(predict(HOSTS, 3600.0), 100.0, "predict")
    store.track.report(pid, "a", 200.0, 1.0)
    for args, code in (((pid + 1, "a", 200.0), "unknown_prediction"),
                       ((pid, "c", 200.0), "host_not_in_prediction"),
                       ((pid, "a", 300.0), "duplicate_report"),
                       ((pid, "b", 50.0), "invalid_report")):
        with pytest.raises(Exception) as caught:
            store.track.report(*args, 1.0)
        assert caught.value.code == code and "\n" not in str(caught.value)
    assert store.track.accuracy()["overall"]["reports"] == 1


def test_each_hosts_recorded_quantiles_match_the_simulator():
    """The per-host laws stored with a prediction (several core groups per host when jobs
    are running on some cores) against each host's simulated completion."""
    import numpy as np

    from scheduler import simulate

    hosts = (Host("a", lam=1 / 200, mu=1 / 200, sigma=200.0, rho=0.5, tau=1.0, cores=2),
             Host("b", lam=1 / 900, mu=1 / 300, sigma=300.0, rho=1 / 3, tau=1.0))
    prediction = predict(hosts, 4000.0, backlog=[Backlog.exact([600.0]), Backlog.idle()])
    laws = host_laws(prediction)
    result = simulate(hosts, prediction.shares, runs=6000, rng=np.random.default_rng(5),
                      service="lognormal", running_jobs=[[600.0], None])
    for k, host in enumerate(hosts):
        simulated = np.quantile(result.host_completion_seconds[:, k], [0.5, 0.9])
        assert laws[host.name]["p50"] == pytest.approx(simulated[0], rel=0.05)
        assert laws[host.name]["p90"] == pytest.approx(simulated[1], rel=0.05)


def test_a_calibrated_answer_is_stored_with_its_models_own_quantiles_beside():
    """What a report is later set against (scheduler.report_floor): the model's quantiles
    before the factors, not the served ones."""
    import numpy as np

    from scheduler.calibrated import SERVED_LEVELS, calibrated_prediction

    hosts = (Host("a", lam=1 / 200, mu=1 / 200, sigma=200.0, rho=0.5),
             Host("b", lam=1 / 900, mu=1 / 300, sigma=300.0, rho=1 / 3))
    plain = predict(hosts, 4000.0)
    factors = np.array([[1.1, 1.2, 1.3, 1.4], [1.0, 1.5, 1.5, 1.5]])
    served = host_laws(calibrated_prediction(plain, factors, SERVED_LEVELS))
    model = host_laws(plain)
    for k, name in enumerate(("a", "b")):
        for j, level in enumerate(("p50", "p90", "p95")):
            assert served[name]["model"][level] == pytest.approx(model[name][level], rel=1e-3)
            assert served[name][level] == pytest.approx(factors[k, j] * model[name][level],
                                                        rel=1e-3)
        assert model[name]["model"] == {key: model[name][key] for key in ("p50", "p90", "p95")}
