"""`ghs agent --replay --until` through a real manager, checked against a walk of the log."""

from __future__ import annotations

import random

import msgpack
import pytest
import zmq
from daemons import wait_for

from protocol import PredictRequest
from scheduler import Backlog, Host, predict

pytestmark = pytest.mark.slow

UNTIL_SECONDS = 7 * 3600.0


def write_log(path, seed=11, hours=12.0):
    rng = random.Random(seed)
    rows, t = [], 0.0
    while t < hours * 3600.0:
        t += rng.expovariate(1 / 300.0)
        rows.append((round(t, 3), round(rng.lognormvariate(4.2, 1.1), 3),
                     rng.choice(["ann", "bob"]), rng.choice(["make", "sim", "latex"])))
    path.write_text("arrival_seconds,cpu_seconds,user,command\n" +
                    "".join(f"{a},{c},{u},{m}\n" for a, c, u, m in rows))
    return rows


def walk(rows, until):
    """One core, first come first served: (start, finish) of each job, in arrival order."""
    free, spans = 0.0, []
    for arrival, cpu, _, _ in rows:
        start = max(arrival, free)
        free = start + cpu
        spans.append((arrival, start, free, cpu))
    return spans


def harvestable(spans, begin, end):
    busy = sum(max(0.0, min(finish, end) - max(start, begin)) for _, start, finish, _ in spans)
    return (end - begin) - busy


def test_replay_until_matches_a_walk_of_the_log(daemons, tmp_path):
    rows = write_log(tmp_path / "ws7.csv")
    _, endpoint = daemons.manager()
    agent = daemons.agent(endpoint, "--replay", str(tmp_path / "ws7.csv"), "--speedup", "7200",
                          "--until", "7h", outbox="replay.sqlite", log="replay.log")
    assert agent.wait(120) == 0, daemons.log("replay.log")
    with daemons.client(endpoint) as client:
        history = client.history("ws7", since_seconds=8 * 3600.0)
    zero = history["replay_zero_epoch"]
    until = zero + UNTIL_SECONDS
    assert history["latest_epoch_seconds"] == pytest.approx(until, abs=1e-3)
    series = history["capacity"]
    begin, end = series[0][0], series[-1][0]
    assert end == pytest.approx(until, abs=1e-3)
    assert end - begin > 6.5 * 3600.0
    spans = walk(rows, UNTIL_SECONDS)
    exact = harvestable(spans, begin - zero, end - zero)
    assert abs(series[-1][1] - exact) <= 0.005 * (end - begin), (series[-1][1], exact)
    # and hour by hour, so an error cannot hide in the total
    for (t0, c0), (t1, c1) in zip(series[::60], series[60::60]):
        assert abs((c1 - c0) - harvestable(spans, t0 - zero, t1 - zero)) <= 0.005 * (t1 - t0)
    running = history["running"]
    assert running["epoch_seconds"] == pytest.approx(until, abs=1e-3)
    expected = sorted((round(min(max(UNTIL_SECONDS - start, 0.0), cpu), 3),
                       round(UNTIL_SECONDS - arrival, 3))
                      for arrival, start, finish, cpu in spans
                      if arrival <= UNTIL_SECONDS < finish)
    got = sorted((round(job["cpu_seconds"], 3), round(job["wall_seconds"], 3))
                 for job in running["jobs"])
    assert got == expected and running["jobs_omitted"] == 0
    assert running["run_queue_length"] == len(expected)
    assert {t["scope"] for t in history["templates"]} == {"pooled", "user", "command"}
    assert {t["user"] for t in history["templates"] if t["scope"] == "user"} == {"ann", "bob"}
    # a prediction now reads the jobs of that snapshot, with the templates' laws: held as
    # the backlog under the model's answer, carried in the measured load under the
    # calibrated default for one host (the back-tests' choice)
    with daemons.client(endpoint) as client:
        body = client._ask(PredictRequest(request_id=7, work_seconds=3600.0, hosts=["ws7"]))
    state = body["host_parameters"][0]["start"]
    assert state["source"] == "snapshot" and state["jobs"] == len(expected)
    assert body["host_parameters"][0]["predictor_view"]["start"] == {"start": "carried"}
    model = predict([Host("ws7", lam=p["lam"], mu=p["mu"], sigma=p["sigma"], rho=p["rho"])
                     for p in body["host_parameters"]], 3600.0,
                    backlog=[Backlog.from_dict(body["host_parameters"][0]["backlog"])])
    assert model.mean == pytest.approx(body["model"]["mean"], rel=1e-9)


def test_an_older_agent_still_reports_and_a_newer_protocol_is_refused(daemons):
    _, endpoint = daemons.manager()
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.connect(endpoint)
    try:
        def ask(message):
            socket.send(msgpack.packb(message))
            assert socket.poll(10_000), "no answer"
            return msgpack.unpackb(socket.recv())
        hello = {"v": 1, "type": "hello", "request_id": 1, "host_id": "old", "hostname": "old",
                 "cores": 1, "tau": 1.0, "os": "Linux", "agent_version": "0.1.0"}
        assert ask(hello) == {"v": 1, "type": "ack", "request_id": 1, "host_id": "old",
                              "acked": []}
        measurement = {"seq": 0, "start_epoch_seconds": 1e9, "end_epoch_seconds": 1e9 + 60,
                       "lam_per_second": 0.1, "rho": 0.2, "service_count": 1,
                       "service_cpu_seconds_sum": 2.0, "service_cpu_seconds_sum_squares": 4.0,
                       "busy_cpu_seconds": 12.0, "jobs_started": 1, "jobs_between": 5,
                       "running_processes": 3}
        reply = ask({"v": 1, "type": "measurements", "request_id": 2, "host_id": "old",
                     "measurements": [measurement]})
        assert reply == {"v": 1, "type": "ack", "request_id": 2, "host_id": "old",
                         "acked": [[0, 0]]}
        newer = ask({**hello, "v": 3, "request_id": 3})
        assert newer["type"] == "error" and newer["code"] == "unknown_version"
        assert "version 3" in newer["reason"]
        early = ask({"v": 1, "type": "history", "request_id": 4, "host_id": "old"})
        assert early["code"] == "unknown_type" and "version 2" in early["reason"]
    finally:
        socket.close(linger=0)
        context.term()
    with daemons.client(endpoint) as client:
        wait_for(lambda: client.status().counters["measurements_stored"] == 1, 10,
                 "the old agent's measurement")
