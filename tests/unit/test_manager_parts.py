"""The manager's store, the agent's outbox, host estimates, and Client round trips."""

import contextlib
import math
import threading
import time

import pytest
import zmq

from ghs.agent.outbox import Outbox
from ghs.client import Client, ManagerError
from ghs.config import SchedulerConfig
from ghs.manager.estimates import EstimateCache
from ghs.manager.queries import QueryService
from ghs.manager.service import Manager
from ghs.manager.store import HostFacts, ManagerStore
from protocol import PredictRequest
from scheduler import Backlog, predict
from scheduler.calibrated import SERVED_LEVELS

HOUR = 3600.0


def facts(host_id, cores=1, tau=1.0, seen=0.0):
    return HostFacts(host_id=host_id, hostname=host_id, cores=cores, tau=tau, os="test",
                     agent_version="0", simulated=True, first_seen=seen, last_seen=seen)


def rows(host_id, count, *, start=1.0e9, rho=0.2, lam=0.004, interval=600.0, first_seq=0,
         demand=50.0):
    out = []
    for k in range(count):
        begin = start + k * (24 * HOUR / count)
        arrivals = round(lam * interval)
        out.append({
            "host_id": host_id, "seq": first_seq + k, "start_epoch_seconds": begin,
            "end_epoch_seconds": begin + interval, "lam_per_second": lam, "rho": rho,
            "tau": None, "service_count": 2, "service_cpu_seconds_sum": 2 * demand,
            "service_cpu_seconds_sum_squares": 2 * demand**2 + 2 * 100.0,
            "busy_cpu_seconds": rho * interval, "jobs_started": arrivals, "jobs_between": 0,
            "running_processes": 1, "lambda_source": "accounting", "rho_source": "kernel",
            "quality": "", "received_epoch_seconds": 0.0})
    return out


def test_store_keeps_each_host_seq_once(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    store.upsert_host(facts("a"))
    batch = rows("a", 10)
    assert store.add_measurements(batch) == 10
    assert store.add_measurements(batch[5:] + rows("a", 3, first_seq=10, start=2.0e9)) == 3
    assert store.seqs("a") == list(range(13))
    count, first, last = store.summary()["a"]
    assert last == 2.0e9 + 2 * 28800 + 600
    assert count == 13 and first == batch[0]["start_epoch_seconds"]
    # retention counts back from the host's own latest record, not the manager's clock
    assert store.prune(last - batch[3]["end_epoch_seconds"]) == 3
    assert store.prune(last - batch[3]["end_epoch_seconds"], host_id="b") == 0
    reopened = ManagerStore(tmp_path / "m.sqlite")
    assert reopened.count() == 10 and reopened.host("a").cores == 1


def test_outbox_numbers_keeps_and_forgets(tmp_path):
    outbox = Outbox(tmp_path / "o.sqlite")
    assert [outbox.add("a", {"x": i}) for i in range(3)] == [0, 1, 2]
    assert outbox.add("b", {"x": 9}) == 0
    assert [seq for seq, _ in outbox.pending("a", 10)] == [0, 1, 2]
    assert outbox.ack("a", [(0, 1)]) == 2
    outbox.set_aside("a", 2, "broken")
    outbox.close()
    again = Outbox(tmp_path / "o.sqlite")
    assert again.count("a") == 0 and again.count("b") == 1
    assert again.add("a", {"x": 3}) == 3  # numbering survives a restart


def test_host_states_exclude_stale_and_saturated_and_note_provisional(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    now = 5000.0
    for name, rho in (("ok", 0.2), ("full", 1.0), ("quiet", 0.2)):
        store.upsert_host(facts(name, seen=now - (1000 if name == "quiet" else 1)))
        store.add_measurements(rows(name, 48, rho=rho))
    store.upsert_host(facts("new", seen=now))
    store.add_measurements(rows("new", 4)[:2])
    states = {s.facts.host_id: s for s in EstimateCache(store).states(now, 300.0)}
    assert states["ok"].host is not None and states["ok"].host.rho == pytest.approx(0.2)
    assert states["ok"].host.mu == pytest.approx(1 / 50.0)
    assert "saturated" in states["full"].reason
    assert states["quiet"].stale and "stale" in states["quiet"].reason
    assert states["new"].host is not None and any("provisional" in n
                                                  for n in states["new"].notes)


def test_a_host_whose_estimate_is_past_any_workstation_is_left_out_with_the_reason(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    now = 5000.0
    for name, demand in (("ok", 50.0), ("wild", 1e13)):
        store.upsert_host(facts(name, seen=now - 1))
        store.add_measurements(rows(name, 48, demand=demand))
    states = {s.facts.host_id: s for s in EstimateCache(store).states(now, 300.0)}
    assert states["ok"].host is not None
    # a mean demand of 1e13 s raised InvalidHostError out of the status and every query
    assert states["wild"].host is None
    assert states["wild"].reason.startswith("estimate out of range: host 'wild': mu must be")


def test_a_host_whose_steady_state_backlog_is_past_any_workstation_is_left_out(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    now = 5000.0
    # 100 arrivals a second of 10^6 s jobs beside a rho of 0.2: each parameter within range,
    # but the stationary workload comes to 6e13 s, and every query naming the host failed
    for name, lam, demand in (("ok", 0.004, 50.0), ("contradicting", 100.0, 1e6)):
        store.upsert_host(facts(name, seen=now - 1))
        store.add_measurements(rows(name, 48, lam=lam, demand=demand))
    states = {s.facts.host_id: s for s in EstimateCache(store).states(now, 300.0)}
    assert states["ok"].host is not None
    assert states["contradicting"].host is None
    assert "steady-state backlog" in states["contradicting"].reason


@contextlib.contextmanager
def serving(store, settings=None):
    """A real manager over ``store`` on a free loopback port, run in a thread: yields (its
    endpoint, its ZeroMQ context), and stops it on the way out."""
    context = zmq.Context()
    queries = QueryService(EstimateCache(store), settings or SchedulerConfig(),
                           stale_after_seconds=600.0, clock=time.time)
    manager = Manager(context=context, store=store, queries=queries,
                      agent_endpoint="tcp://127.0.0.1:*")
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield manager.endpoints[0], context
    finally:
        stop.set()
        thread.join(10)
        manager.close()
        context.term()


@pytest.fixture
def running_manager(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    for index in range(4):
        store.upsert_host(facts(f"h{index}", cores=1 + index % 2, tau=0.8 + 0.2 * index,
                                seen=time.time()))
        store.add_measurements(rows(f"h{index}", 48, rho=0.1 + 0.1 * index,
                                    lam=0.002 * (1 + index)))
    with serving(store) as running:
        yield running


def test_client_rebuilds_the_same_prediction_and_plan(running_manager):
    endpoint, context = running_manager
    with Client(endpoint, context=context, timeout_seconds=10) as client:
        status = client.status()
        assert len(status.hosts) == 4 and status.counters["received"]["status"] == 1
        hosts = client.hosts()
        prediction = client.predict(8 * HOUR)
        # the manager's own numbers, as it sent them
        body = client._ask(PredictRequest(request_id=999, work_seconds=8 * HOUR))
        assert prediction.mean == pytest.approx(body["mean"], rel=1e-12)
        assert prediction.quantiles == pytest.approx(body["quantiles"], rel=1e-9)
        # the calibrated default for a task split over several hosts holds each host's state
        # as its backlog (no snapshot here: the steady state) under the forecast load of new
        # arrivals (no hourly bins yet: the 24-hour estimate); no record scored yet:
        # calibration factors 1; the calibrated mean integrates its CDF on a grid
        assert body["predictor"] == "calibrated"
        assert {row["backlog"]["source"] for row in body["hosts"]} == {"steady-state"}
        assert all(row["predictor_view"]["start"] == {"start": "state"}
                   for row in body["host_parameters"])
        assert all(row["calibration_factors"] == [1.0] * len(SERVED_LEVELS)
                   and row["calibration_levels"] == list(SERVED_LEVELS)
                   for row in body["host_parameters"])
        local = predict(hosts, 8 * HOUR, backlog=[Backlog.steady_state() for _ in hosts])
        assert body["model"]["mean"] == pytest.approx(local.mean, rel=1e-12)
        assert body["mean"] == pytest.approx(local.mean, rel=1e-6)
        assert predict(hosts, 8 * HOUR).mean < local.mean
        # one host alone carries its local jobs in the measured load and starts idle
        alone = client._ask(PredictRequest(request_id=998, work_seconds=HOUR, hosts=["h0"]))
        assert alone["host_parameters"][0]["predictor_view"]["start"] == {"start": "carried"}
        assert alone["hosts"][0]["backlog"]["source"] == "idle"
        assert 0 < float(prediction.cdf(prediction.quantiles["p90"])) < 1
        plan = client.schedule(8 * HOUR, method="optimal", units=100)
        assert plan.method == "optimal" and sum(plan.units(100).values()) == 100
        # the client's rho_max reaches the manager's selection (hosts' rho: 0.1 to 0.4)
        strict = client.schedule_answer(8 * HOUR, method="optimal", rho_max=0.25).result
        assert {h.name for h in strict.hosts} <= {"h0", "h1"}
        assert {e.name for e in strict.excluded} >= {"h2", "h3"}
        with pytest.raises(ManagerError) as caught:
            client.predict(HOUR, hosts=["nope"])
        assert caught.value.code == "unknown_host"
        with pytest.raises(ManagerError):
            client.schedule(HOUR, method="optimal", hosts=["h0"], partition="equal-load",
                            dist="gamma", units=0)


def test_an_uncalibrated_managers_answer_says_where_its_fit_held(running_manager, tmp_path):
    # a calibrated answer's quantiles are corrected on each host's record: no fit range
    endpoint, context = running_manager
    with Client(endpoint, context=context, timeout_seconds=10) as client:
        assert "fit_range" not in client.predict_answer(8 * HOUR).assumptions.to_dict()
    store = ManagerStore(tmp_path / "model.sqlite")
    store.upsert_host(facts("h0", cores=1, tau=1.0, seen=time.time()))
    store.add_measurements(rows("h0", 48, rho=0.2, lam=0.002))
    with serving(store, SchedulerConfig(predictor="model")) as (model_endpoint, model_context), \
            Client(model_endpoint, context=model_context, timeout_seconds=10) as client:
        for answer in (client.predict_answer(HOUR), client.schedule_answer(HOUR)):
            length = answer.prediction.dedicated_seconds[0] * client.hosts()[0].mu
            assert answer.assumptions.calibration == "none"
            assert answer.assumptions.fit_range.endswith(f"outside: h0 (share {length:.2g}x)")
    store.close()


def test_a_one_host_answer_holds_its_mean_at_the_running_jobs_age_floor(tmp_path):
    """A host whose fresh snapshot holds a job that has used 10 h of CPU: the one-host answer
    holds the carried view's mean at the work plus half that (scheduler.age_floor) and
    serves its geometric mean with the mean of the start the host's record chose (no record
    yet: the carried start; scheduler.combined_mean), says so in its JSON and assumptions, and
    the client rebuilds the same mean."""
    store = ManagerStore(tmp_path / "m.sqlite")
    store.upsert_host(facts("h0", seen=time.time()))
    store.add_measurements(rows("h0", 48, rho=0.2, lam=0.004))
    latest = 1.0e9 + 24 * HOUR
    store.streams.add("h0", "running", [{
        "seq": 0, "epoch_seconds": latest, "run_queue_length": 1,
        "jobs": [{"cpu_seconds": 10 * HOUR, "wall_seconds": 11 * HOUR, "command": "sim",
                  "user": "ann"}]}])
    with serving(store) as (endpoint, context), Client(endpoint, context=context,
                                                       timeout_seconds=10) as client:
        body = client._ask(PredictRequest(request_id=1, work_seconds=HOUR, hosts=["h0"]))
        floor = HOUR + 0.5 * 10 * HOUR
        assert body["hosts"][0]["backlog"]["source"] == "idle"  # carried, not held
        assert body["model"]["mean"] < floor
        assert body["mean_floor_seconds"] == pytest.approx(floor)
        view = body["host_parameters"][0]["predictor_view"]
        assert view["mean_floor"] == {"seconds": pytest.approx(floor), "factor": 0.5,
                                      "job_ages_seconds": [10 * HOUR], "applied": True}
        record = body["record_mean_seconds"]
        assert view["record_start"]["start"] == {"start": "carried"}
        assert view["record_start"]["mean_seconds"] == record
        # the carried start over the same window: about the model's mean, under the floor
        assert record == pytest.approx(body["model"]["mean"], rel=0.05)
        served = math.sqrt(floor * record)
        assert body["mean"] == pytest.approx(served)
        answer = client.predict_answer(HOUR, hosts=["h0"])
        assert answer.prediction.mean == pytest.approx(served)
        assert "running jobs' CPU so far" in answer.assumptions.start_state
        assert "the start the host's record chose" in answer.assumptions.start_state
        # scheduling the one host serves the same mean; an ETA is not floored
        plan = client.schedule(HOUR, hosts=["h0"])
        assert plan.prediction.mean == pytest.approx(served)
        eta = client.eta({"h0": HOUR}, {"h0": 0.5})
        assert eta.remaining.mean < floor - HOUR
        # a split holds each host's jobs as its backlog instead: no floor
        store.upsert_host(facts("h1", seen=time.time()))
        store.add_measurements(rows("h1", 48, rho=0.1, lam=0.002))
        split = client._ask(PredictRequest(request_id=2, work_seconds=HOUR))
        assert "mean_floor_seconds" not in split


def test_a_one_host_answer_on_an_idle_core_combines_the_two_loads(tmp_path):
    """A one-core host whose fresh snapshot shows no job: the answer's mean is the geometric
    mean of the carried view's (idle under the forecast measured utilisation) and the
    record view's (idle under the new arrivals' load; scheduler.combined_mean), with no
    floor, and its JSON and assumptions say so. A host of two cores, and one without a fresh
    snapshot, are served the carried view's mean alone."""
    store = ManagerStore(tmp_path / "m.sqlite")
    latest = 1.0e9 + 24 * HOUR
    for name, cores in (("idle1", 1), ("idle2", 2), ("nosnap", 1)):
        store.upsert_host(facts(name, cores=cores, seen=time.time()))
        store.add_measurements(rows(name, 48, rho=0.2, lam=0.004, demand=25.0))
        if name != "nosnap":
            store.streams.add(name, "running", [{
                "seq": 0, "epoch_seconds": latest, "run_queue_length": 0, "jobs": []}])
    with serving(store) as (endpoint, context), Client(endpoint, context=context,
                                                       timeout_seconds=10) as client:
        body = client._ask(PredictRequest(request_id=1, work_seconds=HOUR, hosts=["idle1"]))
        assert "mean_floor_seconds" not in body
        view = body["host_parameters"][0]["predictor_view"]
        record = body["record_mean_seconds"]
        assert view["record_start"]["start"] == {"start": "state"}
        assert view["record_start"]["forecast"]["load"] == "arrivals"
        assert view["record_start"]["mean_seconds"] == record
        # (this store's hours were never pushed to the forecasts, so both views read the
        # 24-hour host here: test_manager_calibration has them apart)
        assert record >= HOUR
        served = math.sqrt(body["model"]["mean"] * record)
        assert body["mean"] == pytest.approx(served)
        answer = client.predict_answer(HOUR, hosts=["idle1"])
        assert answer.prediction.mean == pytest.approx(served)
        assert "else idle under the forecast load of new arrivals" in \
            answer.assumptions.start_state
        for name in ("idle2", "nosnap"):
            other = client._ask(PredictRequest(request_id=2, work_seconds=HOUR, hosts=[name]))
            assert "record_mean_seconds" not in other
            assert other["mean"] == other["model"]["mean"]
