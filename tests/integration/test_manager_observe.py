"""Observable daemons: Prometheus metrics, readiness, one manager per database, lifetime totals."""

import subprocess
import sys
import urllib.request

import pytest
from daemons import wait_for
from prometheus_client.parser import text_string_to_metric_families

from ghs.launch import free_loopback_endpoint, free_loopback_port

pytestmark = pytest.mark.slow


def scrape(port):
    """{(sample name, frozen labels): value} from http://127.0.0.1:PORT/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def by_label(samples, name, label):
    return {dict(labels)[label]: value for (sample, labels), value in samples.items()
            if sample == name}


def test_metrics_of_a_real_manager_and_agent_match_status(daemons):
    manager_port, agent_port = free_loopback_port(), free_loopback_port()
    _, endpoint = daemons.manager("manager.sqlite", None, "manager.log",
                                  "--metrics-port", str(manager_port))
    agent = daemons.agent(endpoint, "--simulate", "3", "--speedup", "3600",
                          "--metrics-port", str(agent_port), outbox="a.sqlite", log="a.log")
    with daemons.client(endpoint) as client:
        wait_for(lambda: client.status().counters["measurements_stored"] > 60, 60,
                 "measurements stored")
        agent_samples = wait_for(lambda: scrape(agent_port), 30, "the agent's metrics")
        assert agent_samples[("ghs_agent_measurements_acked_total", frozenset())] > 0
        assert agent_samples[("ghs_agent_batches_sent_total", frozenset())] > 0
        assert ("ghs_agent_outbox_oldest_age_seconds", frozenset()) in agent_samples
        assert agent_samples[("ghs_agent_manager_reachable", frozenset())] == 1.0
        assert agent_samples[("ghs_agent_host_loop_failures_total", frozenset())] == 0
        assert agent_samples[("ghs_agent_outbox_held_records", frozenset())] == 0
        assert agent_samples[("ghs_agent_outbox_write_failures_total", frozenset())] == 0
        assert agent_samples[("ghs_agent_sensor_store_failures_total", frozenset())] == 0
        assert agent_samples[("ghs_agent_remote_exits_uncredited_total", frozenset())] == 0
        assert daemons.terminate(agent) == 0  # drains its outbox, then nothing else arrives
        status = client.status()
        samples = scrape(manager_port)
    counters = status.counters
    assert samples[("ghs_manager_measurements_stored_total", frozenset())] == \
        counters["measurements_stored"] > 60
    assert samples[("ghs_manager_duplicate_measurements_total", frozenset())] == \
        counters["duplicates"]
    per_host = by_label(samples, "ghs_manager_host_measurements_stored_total", "host")
    assert per_host == {row["name"]: row["measurements"] for row in status.hosts}
    assert by_label(samples, "ghs_manager_messages_received_total", "type") == \
        counters["received"]
    assert by_label(samples, "ghs_manager_messages_rejected_total", "reason") == \
        counters["rejected"]
    states = by_label(samples, "ghs_manager_hosts", "state")
    assert sum(states.values()) == len(status.hosts) == 3
    assert states["provisional"] == sum(1 for row in status.hosts if row["provisional"]
                                        and row["usable"])
    assert samples[("ghs_manager_database_measurements", frozenset())] == \
        counters["lifetime"]["measurements_held"]
    status_latency = samples[("ghs_manager_query_duration_seconds_count",
                              frozenset({("query", "status")}))]
    assert status_latency == counters["received"]["status"]


def test_one_manager_per_database_and_lifetime_totals_survive_a_restart(daemons):
    _, endpoint = daemons.manager()
    daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", outbox="a.sqlite",
                  log="a.log")
    with daemons.client(endpoint) as client:
        wait_for(lambda: client.status().counters["measurements_stored"] > 20, 60,
                 "measurements stored")
    second = daemons.start("manager", "--endpoint", free_loopback_endpoint(), "--database",
                           str(daemons.root / "manager.sqlite"), log="second.log")
    assert second.wait(30) == 2
    output = daemons.log("second.log").strip()
    assert "\n" not in output and "in use by another manager" in output
    daemons.stop_all()
    _, endpoint = daemons.manager(endpoint=endpoint, log="again.log")
    with daemons.client(endpoint) as client:
        counters = client.status().counters
    lifetime = counters["lifetime"]
    assert counters["measurements_stored"] == 0
    assert lifetime["measurements_stored"] == lifetime["measurements_held"] > 20
    assert lifetime["hosts"] == 1


def test_status_wait_returns_once_a_manager_starting_later_is_ready(daemons):
    endpoint = free_loopback_endpoint()
    waiting = subprocess.Popen(
        [sys.executable, "-m", "ghs", "status", "--manager", endpoint, "--wait", "--timeout",
         "60s", "--json"], env=daemons.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:  # the status command starts first, so it must wait through the manager's start
        daemons.manager(endpoint=endpoint)
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err
    assert b'"hosts": []' in out
    quick = subprocess.run([sys.executable, "-m", "ghs", "status", "--manager",
                            free_loopback_endpoint(), "--wait", "--timeout", "1s"],
                           env=daemons.env, capture_output=True, text=True, timeout=60)
    assert quick.returncode == 2
    assert quick.stderr.strip().count("\n") == 0 and "not ready within 1 s" in quick.stderr
