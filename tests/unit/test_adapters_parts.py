"""The adapters' parts that need no cluster: plan sources, progress reporters, the worker's
priority and environment."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ghs.adapters.errors import AdapterError
from ghs.adapters.planner import PlanSource, host_p90_seconds
from ghs.adapters.progress import HostProgress, RunProgress, _RichBar, reporter_for
from ghs.adapters.worker import lowest_priority_session, worker_environment
from ghs.config import load_config

ROOT = Path(__file__).resolve().parents[2]
HOSTS = {"hosts": [
    {"name": "ws1", "lam": 0.002, "mu": 0.01, "sigma": 100.0, "rho": 0.2, "tau": 1.0},
    {"name": "ws2", "lam": 0.002, "mu": 0.01, "sigma": 100.0, "rho": 0.2, "tau": 1.0},
]}


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(HOSTS))
    return PlanSource(load_config(None, env={}), hosts_file=str(path), method="optimal")


def test_a_slower_observed_host_gets_fewer_items(source):
    assert source.known_hosts() == {"ws1", "ws2"}
    even = source.plan(8 * 3600.0, ["ws1", "ws2"]).units(100)
    assert abs(even["ws1"] - even["ws2"]) <= 1
    corrected = source.plan(8 * 3600.0, ["ws1", "ws2"], {"ws2": 0.5})
    units = corrected.units(100)
    assert units["ws1"] == pytest.approx(2 * units["ws2"], abs=2)
    assert [h.tau for h in corrected.hosts if h.name == "ws2"] == [0.5]
    p90 = host_p90_seconds(corrected, units, 288.0)
    # a host's own p90 is at least its dedicated time and at most the whole task's
    for host in corrected.hosts:
        assert units[host.name] * 288.0 / host.tau <= p90[host.name]
        assert p90[host.name] <= corrected.prediction.quantiles["p90"] * 1.0001


def test_plan_source_needs_exactly_one_origin_and_known_names(source):
    with pytest.raises(AdapterError, match="exactly one"):
        PlanSource(load_config(None, env={}))
    with pytest.raises(AdapterError, match="no hosts left"):
        source.plan(100.0, [])


def _snapshot(source, event, done):
    plan = source.plan(3600.0, ["ws1", "ws2"])
    hosts = (HostProgress("ws1", done // 2, 10, 1, "running"),
             HostProgress("ws2", done - done // 2, 10, 0, "lost"))
    return RunProgress(event, 1.5, hosts, plan, 0, done, 20)


def test_log_lines_at_start_each_tenth_and_end(source, caplog):
    reporter, close = reporter_for(None)  # stderr is not a terminal under pytest
    with caplog.at_level(logging.INFO, logger="ghs.adapters"):
        reporter(_snapshot(source, "start", 0))
        for done in range(1, 21):
            reporter(_snapshot(source, "item", done))
        reporter(_snapshot(source, "end", 20))
    close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("ghs start: 0/20")
    assert len(lines) == 12 and lines[-1].startswith("ghs end: 20/20")
    assert "ws2 10/10 (lost)" in lines[-1]


def test_reporter_choices(source):
    seen = []
    reporter, _ = reporter_for(seen.append)
    reporter(_snapshot(source, "item", 3))
    assert seen[0].items_done == 3
    assert reporter_for(False)[0] is None
    with pytest.raises(AdapterError, match="progress must be"):
        reporter_for("yes")


def test_rich_bar_draws_one_row_per_host(source, capsys):
    bar = _RichBar()
    bar(_snapshot(source, "start", 0))
    bar(_snapshot(source, "end", 20))
    bar.close()
    err = capsys.readouterr().err
    assert "all hosts" in err and "ws1" in err and "ws2 (lost)" in err


def test_lower_priority_reaches_the_lowest():
    code = ("import os; from ghs.adapters.worker import lower_priority; "
            "print(lower_priority(), os.nice(0), os.sched_getscheduler(0))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    name, nice, policy = done.stdout.split()[-3:]
    assert int(nice) == 19
    if hasattr(os, "SCHED_IDLE"):
        assert name == "SCHED_IDLE" and int(policy) == os.SCHED_IDLE


def test_worker_environment_marks_the_worker():
    assert worker_environment({"A": "1"}, "GHS_REMOTE_TASK") == {"A": "1",
                                                                 "GHS_REMOTE_TASK": "1"}
    with pytest.raises(AdapterError, match="environment variable name"):
        worker_environment({}, "BAD=NAME")


def test_run_tracker_etas_are_paced_and_shown(source, caplog):
    from ghs.adapters.tracking import RunTracker

    now = [0.0]
    tracker = RunTracker(source, work_per_item=360.0, eta_seconds=5.0, report=True,
                         clock=lambda: now[0], wall_clock=lambda: 1.7e9)
    tracker.planned(None, {"ws1": 10, "ws2": 10})  # a host-file plan: nothing to report
    first = tracker.eta({"ws1": (0, 10), "ws2": (5, 10)})
    assert first.remaining.shares.tolist() == [3600.0, 1800.0]
    assert first.fraction_done == {"ws1": 0.0, "ws2": 0.5}
    now[0] = 1.0
    assert tracker.eta({"ws1": (1, 10), "ws2": (6, 10)}) is first  # younger than 5 s
    forced = tracker.eta({"ws1": (1, 10), "ws2": (6, 10)}, force=True)
    assert forced is not first and forced.mean_seconds < first.mean_seconds
    assert tracker.eta({"ws1": (10, 10), "ws2": (10, 10)}) is None
    tracker.host_finished("ws1")
    assert tracker.reports == []
    reporter, close = reporter_for(None)
    with caplog.at_level(logging.INFO, logger="ghs.adapters"):
        snapshot = _snapshot(source, "start", 0)
        reporter(RunProgress(*[getattr(snapshot, f) for f in (
            "event", "elapsed_seconds", "hosts", "plan", "replans", "items_done",
            "items_total")], first))
    close()
    assert "; ETA about " in caplog.records[0].getMessage()
    assert ", 90% by " in caplog.records[0].getMessage()


def test_a_remote_task_gets_a_session_of_its_own_at_autogroup_nice_19():
    code = ("import os; print(os.getsid(0) == os.getpid(), os.nice(0), "
            "open('/proc/self/autogroup').read().split()[-1] "
            "if os.path.exists('/proc/self/autogroup') else 'none')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, preexec_fn=lowest_priority_session,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    leader, nice, autogroup = done.stdout.split()
    assert leader == "True" and int(nice) == 19
    if autogroup != "none":  # kernels with autogroup scheduling
        assert autogroup == "19"
