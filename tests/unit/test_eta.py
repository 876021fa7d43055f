"""The remaining-time law of a running task, its oracle (tasks stopped in the simulator), and
the plan/progress forms users give."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from ghs.cli import main
from ghs.cli.tracking import finished_at
from ghs.errors import GhsError
from ghs.eta import check_progress, human, load_plan, local_eta, parse_progress, plan_shares
from scheduler import Backlog, Host, predict, schedule
from scheduler.errors import InvalidArgumentError
from scheduler.eta import remaining, remaining_shares
from scheduler.simulation import simulate
from scheduler.stops import poisson_streams, stop_runs, trace_streams
from scheduler.workload import Trace, demand

HOSTS = (Host("a", lam=1 / 600, mu=1 / 200, sigma=300.0, rho=1 / 3, tau=1.0),
         Host("b", lam=1 / 900, mu=1 / 300, sigma=300.0, rho=1 / 3, tau=2.0))


# --- the law ------------------------------------------------------------------------------


def test_progress_leaves_each_host_its_unfinished_share():
    left = remaining_shares(HOSTS, {"a": 1000.0, "b": 2000.0}, fraction_done={"a": 0.25})
    assert left.tolist() == [750.0, 2000.0]
    left = remaining_shares(HOSTS, [1000.0, 2000.0], work_done={"b": 2000.0})
    assert left.tolist() == [1000.0, 0.0]


def test_remaining_is_predict_of_what_is_left_from_now():
    state = [Backlog.exact([120.0]), Backlog.steady_state()]
    law = remaining(HOSTS, [1000.0, 2000.0], fraction_done={"a": 0.5, "b": 0.25},
                    backlog=state)
    same = predict(HOSTS, 2000.0, shares=[500.0, 1500.0], backlog=state)
    assert law.quantiles == same.quantiles and law.mean == same.mean


def test_a_finished_share_contributes_nothing():
    law = remaining(HOSTS, [1000.0, 2000.0], fraction_done={"a": 1.0, "b": 0.5})
    alone = predict(HOSTS[1:], 1000.0, backlog=[Backlog.steady_state()])
    assert law.shares[0] == 0.0
    assert law.quantiles["p90"] == pytest.approx(alone.quantiles["p90"], rel=1e-9)


@pytest.mark.parametrize("kwargs, message", [
    ({"fraction_done": {"a": 1.5}}, "must be in [0, 1]"),
    ({"fraction_done": {"a": -0.1}}, "must be in [0, 1]"),
    ({"fraction_done": {"zz": 0.5}}, "not in the plan"),
    ({"fraction_done": {"a": "half"}}, "must be a number"),
    ({"work_done": {"b": 2500.0}}, "must be in [0, its share"),
    ({"fraction_done": {"a": 0.1}, "work_done": {"a": 1.0}}, "not both"),
    ({"fraction_done": {"a": 1.0, "b": 1.0}}, "every share is done"),
])
def test_bad_progress_is_one_clear_error(kwargs, message):
    with pytest.raises(InvalidArgumentError) as caught:
        remaining(HOSTS, [1000.0, 2000.0], **kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# --- the oracle ---------------------------------------------------------------------------


def test_stopped_runs_finish_as_the_simulator_launches_them():
    """Stop time plus remaining time is the completion from launch: its law is the
    simulator's for hosts in their stationary state (an independent implementation)."""
    rng = np.random.default_rng(3)
    runs, shares = 3000, [2400.0, 4800.0]
    laws = [demand("lognormal", 1 / h.mu, h.sigma * h.mu) for h in HOSTS]
    streams = [poisson_streams(h, law, runs, before_seconds=40000.0, after_seconds=80000.0,
                               rng=rng) for h, law in zip(HOSTS, laws)]
    stops = stop_runs(HOSTS, shares, streams, 0.5)
    total = stops.done_work.sum(axis=1)
    assert np.allclose(total, 0.5 * sum(shares), rtol=1e-6)
    finish = stops.stop_seconds + stops.remaining_seconds
    reference = simulate(HOSTS, shares, runs=runs, rng=rng, service=laws, warm=True)
    for level in (0.5, 0.9):
        assert np.quantile(finish, level) == pytest.approx(reference.quantile(level), rel=0.05)
    # the true remaining demand of the jobs present is what their ages leave of them
    ages, rest = stops.jobs[0][0]
    assert (ages >= 0).all() and (rest > 0).all() and ages.shape == rest.shape


def test_a_trace_stream_by_hand():
    trace = Trace.from_rows([(1, 2), (2, 1), (10, 5)])
    arrivals, demands = trace_streams(trace, np.array([0.0]), before_seconds=5.0,
                                      after_seconds=100.0)
    host = Host("t", lam=0.1, mu=0.4, sigma=1.0, rho=0.3, tau=1.0)
    # remote needs 8 s: 0-1 free, 1-4 local, 4-10 free (7 s) -> 4 s done at 5 s of 10 -> at
    # 50% (t = 7) nothing local is present; 10-15 local, 15-16 the last second
    stops = stop_runs([host], [8.0], [(arrivals, demands)], 0.5)
    assert stops.stop_seconds[0] == pytest.approx(7.0)
    assert stops.remaining_seconds[0] == pytest.approx(9.0)
    stops = stop_runs([host], [8.0], [(arrivals, demands)], 0.1)  # 0.8 s done at 0.8 s
    assert stops.remaining_seconds[0] == pytest.approx(16.0 - 0.8)


# --- plans and progress as given ----------------------------------------------------------


def test_plans_in_every_form_give_names_and_shares(tmp_path):
    plan = schedule(HOSTS, 3600.0, "optimal")
    names, shares = plan_shares(plan)
    assert names == list(plan.prediction.hosts) and sum(shares) == pytest.approx(3600.0)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_dict()))
    assert plan_shares(load_plan(path)) == (names, shares)
    assert plan_shares({"a": 10.0, "b": 0}) == (["a", "b"], [10.0, 0.0])
    for bad, message in (({"hosts": "x"}, "list of"), ({"a": -1}, ">= 0"), ({"a": 0}, "no work"),
                         ([1, 2], "got list")):
        with pytest.raises(GhsError, match=message):
            plan_shares(bad)
    path.write_text("{nope")
    with pytest.raises(GhsError, match="not JSON"):
        load_plan(path)


def test_progress_items_and_words():
    assert parse_progress(["a=0.25", "b=40%"]) == {"a": 0.25, "b": 0.4}
    for bad in ("a", "a=", "a=x", "a=120%", "=0.5"):
        with pytest.raises(GhsError):
            parse_progress([bad])
    with pytest.raises(GhsError, match="twice"):
        parse_progress(["a=0.1", "a=0.2"])
    assert check_progress(["a", "b"], {"b": 1}) == {"a": 0.0, "b": 1.0}
    assert [human(s) for s in (40, 600, 7560, 302400)] == ["40 s", "10 min", "2.1 h", "3.5 d"]
    assert finished_at("now", 5.0) == 5.0
    assert finished_at("1700000000.5", 0) == 1700000000.5
    assert finished_at("2023-11-14T22:13:20Z", 0) == 1700000000.0
    assert finished_at("2023-11-14T22:13:20", 0) == 1700000000.0  # UTC when no zone
    with pytest.raises(GhsError, match="cannot read"):
        finished_at("yesterday", 0)


def test_local_eta_and_the_command(tmp_path):
    eta = local_eta(HOSTS, {"a": 1800.0, "b": 3600.0}, {"a": 0.5}, elapsed_seconds=100.0)
    assert eta.remaining.shares.tolist() == [900.0, 3600.0]
    assert eta.to_dict()["total_seconds"]["p90"] == pytest.approx(100 + eta.quantile_seconds())
    hosts_file = tmp_path / "hosts.json"
    hosts_file.write_text(json.dumps({"hosts": [
        {"name": h.name, "lam": h.lam, "mu": h.mu, "sigma": h.sigma, "rho": h.rho,
         "tau": h.tau} for h in HOSTS]}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(predict(HOSTS, 5400.0).to_dict()))
    runner = CliRunner()
    done = runner.invoke(main, ["eta", "--plan", str(plan), "--hosts-file", str(hosts_file),
                                "--progress", "a=0.5", "--json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.output)
    assert payload["fraction_done"] == {"a": 0.5, "b": 0.0}
    assert payload["eta"].startswith("about ") and payload["source"] == "host file"
    text = runner.invoke(main, ["eta", "--plan", str(plan), "--hosts-file", str(hosts_file)])
    assert text.exit_code == 0 and ", 90% by " in text.output
    bad = runner.invoke(main, ["eta", "--plan", str(plan), "--hosts-file", str(hosts_file),
                               "--progress", "a=2"])
    assert bad.exit_code == 2 and "must be in [0, 1]" in bad.output


def test_the_coverage_experiment_runs_from_the_command_line():
    # the calibrated default replays a month of each host's record: the unit tier skips it
    # (tests/unit/test_eta_record.py and the integration tier run it)
    done = CliRunner().invoke(main, ["experiment", "eta-coverage", "--size", "10",
                                     "--uncalibrated", "--json"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.output)["rows"]
    assert [(row["family"], row["fraction"]) for row in rows] == [
        ("poisson", 0.1), ("poisson", 0.5), ("poisson", 0.9)]
    assert all(row["runs"] == 10 and 0 <= row["p50"] <= row["p90"] <= row["p95"] <= 1
               for row in rows)
