"""The track record and the ETA through a real manager fed by simulated agents: served
predictions carry an id, completion reports come back, ``ghs accuracy`` agrees with a hand
count, bad reports get clear error codes, and ``ghs eta`` answers from the manager."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from daemons import wait_for

from ghs.client import ManagerError
from ghs.manager.track import host_laws

HOSTS = ("ws-sim00", "ws-sim01")


@pytest.fixture
def manager_with_hosts(daemons):
    _, endpoint = daemons.manager()
    daemons.agent(endpoint, "--simulate", "2", "--speedup", "3600", "--seed", "5",
                  "--host-id", "ws", outbox="ws.sqlite", log="ws.log")
    with daemons.client(endpoint) as client:
        wait_for(lambda: len([h for h in client.status().hosts if h["usable"]]) == 2, 60,
                 "two hosts with estimates")
    return daemons, endpoint


def _ghs(daemons, *args):
    return subprocess.run([sys.executable, "-m", "ghs", *args], capture_output=True, text=True,
                          env=daemons.env, timeout=60)


def test_reports_round_trip_and_accuracy_matches_a_hand_count(manager_with_hosts, tmp_path):
    daemons, endpoint = manager_with_hosts
    with daemons.client(endpoint) as client:
        first = client.predict_answer(7200.0, list(HOSTS))
        second = client.predict_answer(3600.0, list(HOSTS))
        plan = client.schedule_answer(1800.0, hosts=list(HOSTS))
        ids = [first.prediction_id, second.prediction_id, plan.prediction_id]
        assert all(isinstance(i, int) for i in ids) and len(set(ids)) == 3
        assert first.to_dict()["prediction_id"] == ids[0]
        # the manager recorded the law the client rebuilt (same code, same numbers)
        laws = [host_laws(first.prediction), host_laws(second.prediction)]
        a, b = HOSTS
        # realised seconds chosen against the quantiles: (covered by p50, covered by p90)
        realised = [
            (first, a, 0.5 * laws[0][a]["p50"]),                              # yes, yes
            (first, b, 1.2 * laws[0][b]["p90"]),                              # no, no
            (second, a, 0.5 * (laws[1][a]["p50"] + laws[1][a]["p90"])),      # no, yes
        ]
        for answer, host, seconds in realised:
            reply = client.report(answer.prediction_id, answer.served_epoch_seconds + seconds,
                                  host)
            assert reply["realised_seconds"] == pytest.approx(seconds, abs=1e-3)
        task_seconds = 0.9 * second.prediction.quantiles["p50"]
        client.report(second.prediction_id, second.served_epoch_seconds + task_seconds)

        for call, code in (
                (lambda: client.report(999_999, first.served_epoch_seconds + 1, a),
                 "unknown_prediction"),
                (lambda: client.report(first.prediction_id, first.served_epoch_seconds + 1,
                                       "elsewhere"), "host_not_in_prediction"),
                (lambda: client.report(first.prediction_id, first.served_epoch_seconds + 1, a),
                 "duplicate_report"),
                (lambda: client.report(second.prediction_id,
                                       second.served_epoch_seconds - 60, b),
                 "invalid_report")):
            with pytest.raises(ManagerError) as caught:
                call()
            assert caught.value.code == code
        client.ping()  # the manager is still serving

    done = _ghs(daemons, "accuracy", "--manager", endpoint, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    rows = {row["name"]: row for row in result["hosts"]}
    assert rows[a]["reports"] == 2 and rows[b]["reports"] == 1
    assert rows[a]["p50_coverage"] == 0.5 and rows[a]["p90_coverage"] == 1.0
    assert rows[b]["p50_coverage"] == 0.0 and rows[b]["p90_coverage"] == 0.0
    error_a = (abs(laws[0][a]["mean"] - realised[0][2])
               + abs(laws[1][a]["mean"] - realised[2][2])) / 2
    assert rows[a]["mean_abs_error_seconds"] == pytest.approx(error_a, rel=1e-6)
    # tasks: the first by its two hosts (latest one: b), the second by its own report
    first_task = max(realised[0][2], realised[1][2])
    task = result["task"]
    assert task["reports"] == 2
    assert task["p50_coverage"] == (
        (first_task <= first.prediction.quantiles["p50"]) + 1) / 2
    assert result["overall"]["reports"] == 5
    assert result["overall"]["p90_coverage"] == pytest.approx(
        (1 + 0 + 1 + (first_task <= first.prediction.quantiles["p90"]) + 1) / 5)

    table = _ghs(daemons, "accuracy", "--manager", endpoint, "--since", "1h")
    assert table.returncode == 0 and "overall" in table.stdout and a in table.stdout

    cli = _ghs(daemons, "report", str(plan.prediction_id), "--host", plan.prediction.hosts[0],
               "--finished-at", "now", "--manager", endpoint)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith(f"prediction {plan.prediction_id}: host ")
    again = _ghs(daemons, "report", str(plan.prediction_id), "--host",
                 plan.prediction.hosts[0], "--finished-at", "now", "--manager", endpoint)
    assert again.returncode == 2
    assert "already has a report" in again.stderr and len(again.stderr.splitlines()) == 1


def test_eta_from_the_manager(manager_with_hosts, tmp_path):
    daemons, endpoint = manager_with_hosts
    with daemons.client(endpoint) as client:
        plan = client.schedule_answer(4 * 3600.0, hosts=list(HOSTS), method="optimal")
        names = list(plan.prediction.hosts)
        start = client.eta(plan, {})
        half = client.eta(plan, {name: 0.5 for name in names}, elapsed_seconds=600.0)
        done = client.eta(plan, {name: 1.0 for name in names[1:]})
        with pytest.raises(ManagerError) as caught:
            client.eta(plan, {name: 1.0 for name in names})
        assert caught.value.code == "invalid_argument"
    # half the work left: the remaining law is shorter than from the start
    assert half.remaining.quantiles["p90"] < start.remaining.quantiles["p90"]
    assert half.remaining.work == pytest.approx(0.5 * plan.prediction.work)
    assert half.to_dict()["total_seconds"]["mean"] == pytest.approx(600 + half.mean_seconds)
    assert done.remaining.shares[1:].sum() == 0 and done.remaining.shares[0] > 0
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_dict()))
    cli = _ghs(daemons, "eta", "--plan", str(path), "--manager", endpoint,
               "--progress", f"{names[0]}=50%")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith("about ") and ", 90% by " in cli.stdout
    bad = _ghs(daemons, "eta", "--plan", str(path), "--manager", endpoint,
               "--progress", "nowhere=0.5")
    assert bad.returncode == 2 and "not in the plan" in bad.stderr


def test_a_dask_run_reports_each_finished_share_and_its_eta(manager_with_hosts):
    distributed = pytest.importorskip("distributed")
    from ghs.adapters.dask import DivisibleRun
    from ghs.config import load_config

    daemons, endpoint = manager_with_hosts
    snapshots = []
    config = load_config(None, env={}, overrides={"adapters": {"eta_seconds": 0.0}})
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        names = sorted(info["name"] for info in client.scheduler_info()["workers"].values())
        mapping = {str(name): host for name, host in zip(names, HOSTS)}
        run = DivisibleRun(client, abs, range(-30, 0), work_per_item=600.0, manager=endpoint,
                           worker_hosts=mapping, method="optimal", progress=snapshots.append,
                           config=config)
        results = run.run()
    assert results == [abs(item) for item in range(-30, 0)]
    # every snapshot with items left has an ETA from the manager; once all is done, none
    left = [s for s in snapshots if s.items_done < s.items_total]
    assert left and all(s.eta is not None for s in left), [(s.event, s.items_done)
                                                         for s in left if s.eta is None]
    assert snapshots[-1].eta is None
    assert snapshots[0].eta.remaining.work == pytest.approx(30 * 600.0)
    middle = snapshots[len(snapshots) // 2].eta
    assert middle.remaining.work < 30 * 600.0 and middle.line().startswith("about ")
    if len(run.plans) == 1:  # no re-plan: each host with items reported its share
        planned = {name for name, n in run.plans[0].units(30).items() if n > 0}
        assert {r["host"] for r in run.tracker.reports} == planned
    with daemons.client(endpoint) as client:
        result = client.accuracy()
    assert result["overall"]["reports"] >= len(run.tracker.reports)
    assert {row["name"] for row in result["hosts"]} == {r["host"] for r in run.tracker.reports}
