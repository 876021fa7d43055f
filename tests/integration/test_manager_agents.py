"""The manager and agents as real processes over ZeroMQ on loopback."""

import itertools
import signal
import sqlite3

import pytest
from daemons import wait_for

from ghs.client import ManagerError

pytestmark = pytest.mark.slow


def stored(database):
    with sqlite3.connect(database) as connection:
        return {host: sorted(seq for (seq,) in connection.execute(
            "SELECT seq FROM measurements WHERE host_id = ?", [host]))
            for (host,) in connection.execute("SELECT DISTINCT host_id FROM measurements")}


def produced(outbox, stream="measurements"):
    with sqlite3.connect(outbox) as connection:
        pending = connection.execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
        counts = dict(connection.execute("SELECT host_id, next_seq FROM sequence WHERE "
                                         "stream = ?", [stream]))
    return counts, pending


def capacity_intervals(database):
    with sqlite3.connect(database) as connection:
        return {host: connection.execute(
            "SELECT end_ms - interval_ms, end_ms FROM capacity JOIN host_keys USING (host_key) "
            "WHERE host_id = ? ORDER BY end_ms", [host]).fetchall()
            for (host,) in connection.execute("SELECT host_id FROM host_keys")}


def assert_each_stored_once(database, outboxes, contiguous=True):
    seqs = stored(database)
    series = capacity_intervals(database)
    with sqlite3.connect(database) as connection:
        merged = dict(connection.execute(
            "SELECT host_id, last_seq FROM template_seq JOIN host_keys USING (host_key)"))
    for outbox in outboxes:
        counts, pending = produced(outbox)
        assert pending == 0, f"{outbox} still holds {pending} unacknowledged records"
        with sqlite3.connect(outbox) as connection:
            aside = connection.execute("SELECT host_id, stream, seq, reason FROM set_aside"
                                       ).fetchall()
        assert aside == [], f"records the agent could not send: {aside}"
        for host, count in counts.items():
            assert seqs.get(host) == list(range(count)), host
        # every capacity interval once, and they tile the host's time without a gap
        for host, count in produced(outbox, "capacity")[0].items():
            intervals = series[host]
            assert len(intervals) == count, host
            if contiguous:  # one agent run: no gap, no overlap (times are whole ms)
                gaps = [start - end for (_, end), (start, _) in itertools.pairwise(intervals)]
                assert max(map(abs, gaps)) <= 1, (host, max(gaps), min(gaps))
        # every template increment merged once, in order, none left behind
        for host, count in produced(outbox, "templates")[0].items():
            assert merged[host] == count - 1, host


def test_twenty_agents_report_and_a_silent_one_goes_stale(daemons):
    # 20 hosts at 3600x on two cores, each sampling 30 times a virtual hour (about 8 a real
    # second): on a busy machine an agent can go quiet for a few seconds, so staleness takes
    # 8 s here, and a coarser capacity cadence (not what this test is about) lightens them
    _, endpoint = daemons.manager(GHS_PCM_STALE_AFTER_SECONDS="8")
    coarse = {"GHS_SENSOR_CAPACITY_INTERVAL_SECONDS": "600"}
    daemons.agent(endpoint, "--simulate", "16", "--speedup", "3600", "--seed", "3",
                  "--host-id", "lab", outbox="lab.sqlite", log="lab.log", **coarse)
    singles = [daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--seed",
                             str(10 + i), "--host-id", f"solo{i}", outbox=f"solo{i}.sqlite",
                             log=f"solo{i}.log", **coarse) for i in range(4)]
    with daemons.client(endpoint) as client:
        def all_estimated():
            hosts = client.status().hosts
            return len(hosts) == 20 and all(h["lam"] is not None and h["rho"] is not None
                                            for h in hosts) and hosts
        hosts = wait_for(all_estimated, 60, "20 hosts with estimates")
        assert {h["name"] for h in hosts} >= {f"solo{i}-sim00" for i in range(4)}
        assert not any(h["stale"] for h in hosts)
        daemons.terminate(singles[0])
        def stale():
            rows = {h["name"]: h for h in client.status().hosts}
            return rows["solo0-sim00"]["stale"] and not rows["solo1-sim00"]["stale"]
        wait_for(stale, 30, "the stopped host to go stale")
        answer = client.predict_answer(3600.0 * 8)
        assert "solo0-sim00" not in answer.prediction.hosts
        assert "stale" in {e.name: e.reason for e in answer.excluded}["solo0-sim00"]
        assert len(answer.prediction.hosts) >= 10
        with pytest.raises(ManagerError) as caught:
            client.predict(3600.0, hosts=["solo0-sim00"])
        assert "stale" in str(caught.value)


def test_manager_killed_mid_stream_loses_and_repeats_nothing(daemons):
    database = str(daemons.root / "manager.sqlite")
    manager, endpoint = daemons.manager()
    agent = daemons.agent(endpoint, "--simulate", "4", "--speedup", "3600", "--seed", "5",
                          outbox="agent.sqlite", log="agent.log")
    with daemons.client(endpoint) as client:
        wait_for(lambda: client.status().counters["measurements_stored"] > 300, 60,
                 "a stream of measurements")
    manager.send_signal(signal.SIGKILL)
    manager.wait()
    # the agent keeps measuring into its outbox while the manager is down
    wait_for(lambda: produced(daemons.root / "agent.sqlite")[1] > 50, 30,
             "measurements piling up in the outbox")
    port_endpoint = endpoint
    daemons.manager(endpoint=port_endpoint, log="manager2.log")
    with daemons.client(endpoint) as client:
        wait_for(lambda: client.status().counters["measurements_stored"] > 50, 60,
                 "the restarted manager to take the backlog")
    # the agent's log tells the story: the manager went away, came back, the backlog drained
    wait_for(lambda: "queue drained" in daemons.log("agent.log"), 60, "the backlog to drain")
    assert "unreachable" in daemons.log("agent.log")
    assert daemons.terminate(agent) == 0
    assert_each_stored_once(database, [daemons.root / "agent.sqlite"])


def test_agent_killed_and_restarted_replays_its_outbox(daemons):
    database = str(daemons.root / "manager.sqlite")
    _, endpoint = daemons.manager()
    args = ("--simulate", "3", "--speedup", "3600", "--seed", "8")
    # a slow ack timeout and a dead first manager link would hide nothing: we kill mid-stream
    agent = daemons.agent(endpoint, *args, outbox="agent.sqlite", log="agent.log")
    wait_for(lambda: sum(map(len, stored(database).values())) > 200, 60, "measurements")
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    counts, _ = produced(daemons.root / "agent.sqlite")
    restarted = daemons.agent(endpoint, *args, outbox="agent.sqlite", log="agent2.log")
    wait_for(lambda: produced(daemons.root / "agent.sqlite")[0]["lab-sim00"] >
             counts["lab-sim00"] + 20, 60, "the restarted agent to measure again")
    assert daemons.terminate(restarted) == 0
    # a restarted simulated agent starts a new accelerated clock, so its series restarts
    assert_each_stored_once(database, [daemons.root / "agent.sqlite"], contiguous=False)


def test_manager_refuses_a_public_bind_without_keys(daemons):
    process = daemons.start("manager", "--endpoint", "tcp://0.0.0.0:*", "--database",
                            str(daemons.root / "m.sqlite"), log="public.log")
    assert process.wait(30) == 2
    output = daemons.log("public.log").strip()
    assert output.count("\n") == 0
    assert "insecure" in output
    assert "Traceback" not in output
