"""--processes-per-host and --pinned: validation, the per-host counts through predict and
schedule, the protocol's version-2 fields, the manager's per-core loads and the CLI."""

import itertools
import json
import time
from dataclasses import replace

import msgpack
import numpy as np
import pytest
from click.testing import CliRunner
from test_manager_parts import facts, rows, serving

from ghs.cli import main
from ghs.client import Client
from ghs.config import SchedulerConfig
from ghs.manager.store import ManagerStore
from ghs.placement import core_utilisation, load_scales, scaled
from protocol import PredictRequest, ScheduleRequest, UnknownFieldError, decode, encode
from scheduler import (
    Host,
    InvalidArgumentError,
    InvalidHostError,
    migrating,
    pinned,
    predict,
    schedule,
    with_processes,
)

HOUR = 3600.0


def ws(name="ws", cores=2, rho=0.3, processes=None, tau=1.0):
    return Host(name, lam=rho / 60.0, mu=1 / 60.0, sigma=60.0, rho=rho, tau=tau, cores=cores,
                processes=processes)


@pytest.mark.parametrize("count", [3, 0, True, 1.5])
def test_bad_counts_name_the_option(count):
    with pytest.raises(InvalidArgumentError) as caught:
        with_processes([ws(cores=2)], count)
    assert caught.value.field == "processes_per_host"
    assert "--processes-per-host" in caught.value.message


def test_counts_per_host_by_order_or_name():
    hosts = [ws("a", cores=4), ws("b", cores=2)]
    assert [h.processes for h in with_processes(hosts, [3, 1])] == [3, 1]
    assert [h.processes for h in with_processes(hosts, {"b": 1})] == [4, 1]
    assert [h.processes for h in with_processes(hosts, None)] == [4, 2]
    with pytest.raises(InvalidArgumentError):
        with_processes(hosts, {"c": 1})
    with pytest.raises(InvalidArgumentError):
        with_processes(hosts, [1])
    with pytest.raises(InvalidHostError) as caught:
        ws(cores=2, processes=3)
    assert caught.value.field == "processes"


def test_pinned_scales_the_host_to_its_least_loaded_cores():
    host = ws(cores=4, rho=0.3, processes=2)
    moved = pinned(host, [0.6, 0.1, 0.2, 0.3])
    # mean of the two least loaded (0.15) over the mean of all (0.3)
    assert moved.rho == pytest.approx(0.15) and moved.lam == pytest.approx(host.lam / 2)
    assert (moved.mu, moved.sigma, moved.cores, moved.processes) == (host.mu, host.sigma, 4, 2)
    assert pinned(host, [0.0] * 4) == host
    with pytest.raises(InvalidArgumentError):
        pinned(host, [0.1, 0.2])


def test_migrating_counts_the_free_cores_of_each_interval():
    host = Host("q", lam=0.02, mu=0.1, sigma=10.0, rho=0.2, tau=1.0, cores=3, processes=1)
    free = np.array([[0.5, 0.8, 0.9], [1.0, 0.2, 0.6]])
    lengths = np.array([60.0, 30.0])
    # one process is stopped only when every core is busy; two need two free cores
    all_busy = (0.5 * 0.2 * 0.1 * 60 + 0.0 * 30) / 90
    mean_busy = 1 - (free.mean(axis=1) @ lengths) / 90
    moved = migrating(host, free, lengths)
    assert moved.rho == pytest.approx(0.2 * all_busy / mean_busy)
    assert moved.lam == pytest.approx(0.02 * all_busy / mean_busy)
    two = replace(host, processes=2)
    # each core free or not, every case enumerated
    running = [sum(np.prod([f if up else 1 - f for f, up in zip(row, case)])
                   * min(2, sum(case)) / 2 for case in itertools.product([0, 1], repeat=3))
               for row in free]
    busy_two = 1 - np.dot(running, lengths) / 90
    assert migrating(two, free, lengths).rho == pytest.approx(0.2 * busy_two / mean_busy)
    # one process per core: the average core, unchanged; an idle host stays idle
    every = replace(host, processes=3)
    assert migrating(every, free, lengths) == every
    assert migrating(host, np.ones((2, 3))) == host
    with pytest.raises(InvalidArgumentError, match="free_fractions"):
        migrating(host, [[0.5, 0.5]])
    with pytest.raises(InvalidArgumentError, match="free_fractions"):
        migrating(host, [[0.5, 1.5, 0.1]])
    with pytest.raises(InvalidArgumentError, match="weights"):
        migrating(host, free, [1.0])


def test_a_single_process_runs_the_whole_share_and_partitions_follow_processes():
    hosts = [ws("a", cores=2), ws("b", cores=2)]
    one = predict(hosts, 2 * HOUR, processes_per_host=1, backlog=None)
    both = predict(hosts, 2 * HOUR)
    assert one.dedicated_seconds.tolist() == pytest.approx([HOUR, HOUR])
    assert both.dedicated_seconds.tolist() == pytest.approx([HOUR / 2, HOUR / 2])
    assert one.mean > 1.5 * both.mean
    assert [row["processes"] for row in one.to_dict()["hosts"]] == [1, 1]
    mixed = predict(hosts, 3 * HOUR, processes_per_host={"a": 1})
    # equal-mean: shares in proportion to processes * (1 - rho) * tau
    assert mixed.shares.tolist() == pytest.approx([HOUR, 2 * HOUR])
    plan = schedule(hosts, 2 * HOUR, processes_per_host=1)
    assert set(plan.prediction.processes.tolist()) == {1}


def test_the_fields_are_version_2_only():
    request = PredictRequest(request_id=1, work_seconds=60.0, processes_per_host=1,
                             pinned=True)
    assert decode(encode(request)) == request
    wire = request.to_dict()
    wire["v"] = 1
    with pytest.raises(UnknownFieldError) as caught:
        decode(msgpack.packb(wire))
    assert caught.value.field == "processes_per_host"
    plain = ScheduleRequest(request_id=2, work_seconds=60.0).to_dict()
    plain["v"] = 1
    assert decode(msgpack.packb(plain)).processes_per_host is None


def capacity(host_id, per_core_busy, count=6, interval=60.0, start=1.0e9 + 23 * HOUR):
    return [{"seq": k, "start_epoch_seconds": start + k * interval,
             "end_epoch_seconds": start + (k + 1) * interval,
             "available_cpu_seconds": sum((1 - b) * interval for b in per_core_busy),
             "per_core_available_cpu_seconds": [(1 - b) * interval for b in per_core_busy]}
            for k in range(count)]


@pytest.fixture
def manager(tmp_path):
    """A real manager over loopback with one 2-core host whose load sits on core 0."""
    store = ManagerStore(tmp_path / "m.sqlite")
    now = time.time()
    store.upsert_host(facts("duo", cores=2, seen=now))
    store.add_measurements(rows("duo", 48, rho=0.25))
    store.streams.add("duo", "capacity", capacity("duo", [0.5, 0.0]))
    with serving(store, SchedulerConfig(start_state="idle")) as (endpoint, _):
        yield endpoint, store


def test_the_manager_places_processes_and_says_so(manager):
    endpoint, store = manager
    assert core_utilisation(store.streams, "duo") == pytest.approx([0.5, 0.0], abs=1e-3)
    with Client(endpoint, timeout_seconds=10) as client:
        split = client.predict_answer(HOUR)
        one = client.predict_answer(HOUR, processes_per_host=1)
        held = client.predict_answer(HOUR, processes_per_host=1, pinned=True)
        plan = client.schedule_answer(HOUR, processes_per_host=1)
        with pytest.raises(Exception, match="--processes-per-host"):
            client.predict(HOUR, processes_per_host=3)
    assert split.assumptions.processes.startswith("one process per core")
    assert "unpinned: run on whichever of its 2 cores" in one.assumptions.processes
    assert "pinned to the least-loaded of 2 cores" in held.assumptions.processes
    assert one.prediction.dedicated_seconds[0] == pytest.approx(HOUR)
    assert split.prediction.mean < one.prediction.mean
    # pinned to the idle core, or free to move to it: no local job ever interrupts it
    assert held.prediction.mean == pytest.approx(HOUR)
    assert one.prediction.mean == pytest.approx(HOUR)
    assert plan.prediction.processes.tolist() == [1]
    cli = CliRunner().invoke(main, ["predict", "--manager", endpoint, "--work", "1h",
                                    "--processes-per-host", "1", "--pinned", "--json"])
    payload = json.loads(cli.stdout)
    assert payload["mean"] == pytest.approx(HOUR)
    assert payload["hosts"][0]["processes"] == 1
    assert "pinned" in payload["assumptions"]["processes"]


def test_the_cli_refuses_more_processes_than_cores_in_one_line(tmp_path):
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps({"hosts": [{"name": "a", "lam": 0.002, "mu": 0.01,
                                           "sigma": 100.0, "rho": 0.2, "cores": 2}]}))
    for command in ("predict", "schedule"):
        result = CliRunner().invoke(main, [command, "--hosts-file", str(path), "--work", "1h",
                                           "--processes-per-host", "3"])
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "--processes-per-host" in lines[0], result.output


def test_a_fresh_load_estimate_takes_the_placement_scaling():
    """The calibrated predictor replaces lam and rho by its window forecast; the placement's
    scaling must follow onto the forecast figures."""
    before = [ws("a", rho=0.4), ws("b", rho=0.0)]
    after = [pinned(replace(before[0], processes=1), [0.8, 0.0]), before[1]]
    scales = load_scales(before, after)
    assert scales == [pytest.approx(0.0), 1.0]
    forecast = [replace(before[0], lam=0.02, rho=0.5), replace(before[1], lam=0.01, rho=0.1)]
    moved = scaled(forecast, scales)
    assert (moved[0].lam, moved[0].rho) == (0.0, 0.0)
    assert moved[1] == forecast[1]
    assert scaled(forecast, None) == forecast


def test_a_job_held_at_launch_on_evenly_loaded_cores_follows_the_held_phase(tmp_path,
                                                                          monkeypatch):
    """The model's manager, a 2-core host whose capacity series shows both cores at 0.3 and
    whose fresh snapshot holds a job with some 590 s to go: one unpinned process starts on
    the free core, not behind the job, and meets that core's own load while the other works
    the job off (scheduler.held_phase); the answer says so. Its mean lies above the idle
    start's (which meets only the all-busy fraction) and below the geometric mix's (the
    same host taken as unevenly loaded), which puts half the process behind the job."""
    store = ManagerStore(tmp_path / "m.sqlite")
    store.upsert_host(facts("even", cores=2, seen=time.time()))
    store.add_measurements(rows("even", 48, rho=0.3, lam=0.001, demand=600.0))
    store.streams.add("even", "capacity", capacity("even", [0.3, 0.3]))
    store.streams.add("even", "running", [{
        "seq": 0, "epoch_seconds": 1.0e9 + 24 * HOUR, "run_queue_length": 1,
        "jobs": [{"cpu_seconds": 10.0, "wall_seconds": 12.0, "command": "sim",
                  "user": "ann"}]}])

    def ask(start):
        with serving(store, SchedulerConfig(predictor="model", start_state=start)) as (
                endpoint, context), Client(endpoint, context=context,
                                           timeout_seconds=10) as client:
            return (client._ask(PredictRequest(request_id=1, work_seconds=HOUR,
                                               processes_per_host=1)),
                    client.predict_answer(HOUR, processes_per_host=1))

    body, answer = ask("auto")
    # the client rebuilds the law it was served (host_parameters carry the cores' load)
    assert body["host_parameters"][0]["core_rho"] == pytest.approx(0.3)
    assert body["host_parameters"][0]["pooled"] is True
    assert answer.prediction.mean == pytest.approx(body["mean"], rel=1e-9)
    idle, _ = ask("idle")
    monkeypatch.setattr("scheduler.placement.EVEN_LOAD_TOLERANCE", -1.0)
    mix, mixed = ask("auto")
    assert body["hosts"][0]["backlog"]["source"] == "snapshot"
    assert body["hosts"][0]["backlog"]["mean_seconds"] > 250.0  # the job's 590 s over 2 cores
    assert "least-held cores" in answer.assumptions.processes
    assert "least-held cores" not in mixed.assumptions.processes
    assert HOUR < idle["mean"] < body["mean"] < 0.95 * mix["mean"]


def test_pooled_processes_are_served_and_rebuilt_alike(tmp_path):
    """Two unpinned processes on a 4-core host: the manager serves the pooled law (one
    server of their dedicated time) and the client rebuilds the same from host_parameters,
    for the model's answer and the calibrated one."""
    store = ManagerStore(tmp_path / "m.sqlite")
    store.upsert_host(facts("quad", cores=4, seen=time.time()))
    store.add_measurements(rows("quad", 48, rho=0.4, lam=0.02))
    store.streams.add("quad", "capacity", capacity("quad", [0.4, 0.4, 0.4, 0.4]))
    for predictor in ("model", "calibrated"):
        with serving(store, SchedulerConfig(predictor=predictor, start_state="idle")) as (
                endpoint, context), Client(endpoint, context=context,
                                           timeout_seconds=10) as client:
            body = client._ask(PredictRequest(request_id=1, work_seconds=HOUR,
                                              processes_per_host=2))
            answer = client.predict_answer(HOUR, processes_per_host=2)
        assert body["host_parameters"][0]["pooled"] is True
        assert "share the free cores" in answer.assumptions.processes
        assert answer.prediction.mean == pytest.approx(body["mean"], rel=1e-9)
        assert answer.prediction.quantiles["p90"] == pytest.approx(body["quantiles"]["p90"],
                                                                   rel=1e-9)
