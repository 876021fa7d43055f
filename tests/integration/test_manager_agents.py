"""The manager and agents as real processes over ZeroMQ on loopback."""

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


def produced(outbox):
    with sqlite3.connect(outbox) as connection:
        pending = connection.execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
        counts = dict(connection.execute("SELECT host_id, next_seq FROM sequence"))
    return counts, pending


def assert_each_stored_once(database, outboxes):
    seqs = stored(database)
    for outbox in outboxes:
        counts, pending = produced(outbox)
        assert pending == 0, f"{outbox} still holds {pending} unacknowledged measurements"
        for host, count in counts.items():
            assert seqs.get(host) == list(range(count)), host


def test_twenty_agents_report_and_a_silent_one_goes_stale(daemons):
    _, endpoint = daemons.manager(GHS_PCM_STALE_AFTER_SECONDS="3")
    daemons.agent(endpoint, "--simulate", "16", "--speedup", "3600", "--seed", "3",
                  "--host-id", "lab", outbox="lab.sqlite", log="lab.log")
    singles = [daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--seed",
                             str(10 + i), "--host-id", f"solo{i}", outbox=f"solo{i}.sqlite",
                             log=f"solo{i}.log") for i in range(4)]
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
        prediction = client.predict(3600.0 * 8)
        assert "solo0-sim00" not in prediction.hosts and len(prediction.hosts) >= 10
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
    assert_each_stored_once(database, [daemons.root / "agent.sqlite"])


def test_manager_refuses_a_public_bind_without_keys(daemons):
    process = daemons.start("manager", "--endpoint", "tcp://0.0.0.0:*", "--database",
                            str(daemons.root / "m.sqlite"), log="public.log")
    assert process.wait(30) == 2
    output = daemons.log("public.log").strip()
    assert output.count("\n") == 0
    assert "insecure" in output
    assert "Traceback" not in output
