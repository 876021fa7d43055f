"""The manager's Prometheus metrics, read from its own counters at scrape time.

Counters come from the same ``Counters`` object ``ghs status`` reports, so a scrape and a
status taken while nothing arrives agree exactly. Host states cost one estimate pass per
scrape (cached per host, so cheap once computed). Query latency is the only metric recorded
as it happens (a histogram observed by the worker that answered).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ghs.manager.service import Manager

HOST_STATES = ("ok", "provisional", "stale", "excluded")
# from a cached status (ms) to an exact 20-host selection (seconds)
QUERY_BUCKETS_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                         5.0, 10.0, 30.0)


def host_state(state: Any) -> str:
    """One of ``HOST_STATES`` for a manager HostState."""
    if state.stale:
        return "stale"
    if state.host is None:
        return "excluded"
    if state.estimate is not None and state.estimate.provisional:
        return "provisional"
    return "ok"


class ManagerCollector(Collector):
    """Yields the manager's counters, host states and CurveZMQ handshakes on each scrape."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Any]:
        counters = self.manager.counters
        with counters.lock:
            stored, duplicates = counters.stored, counters.duplicates
            by_host = dict(counters.stored_by_host)
            received, rejected = dict(counters.received), dict(counters.rejected)
            internal, dropped, busy = (counters.internal_errors, counters.dropped_replies,
                                       counters.busy)
        yield CounterMetricFamily("ghs_manager_measurements_stored",
                                  "Measurements stored by this run (new ones only)",
                                  value=stored)
        family = CounterMetricFamily("ghs_manager_host_measurements_stored",
                                     "Measurements stored by this run, by host",
                                     labels=["host"])
        for host, count in sorted(by_host.items()):
            family.add_metric([host], count)
        yield family
        yield CounterMetricFamily("ghs_manager_duplicate_measurements",
                                  "Measurements received again and ignored (already stored)",
                                  value=duplicates)
        family = CounterMetricFamily("ghs_manager_messages_received",
                                     "Valid messages received, by type", labels=["type"])
        for kind, count in sorted(received.items()):
            family.add_metric([kind], count)
        yield family
        family = CounterMetricFamily("ghs_manager_messages_rejected",
                                     "Messages refused, by error code", labels=["reason"])
        for reason, count in sorted(rejected.items()):
            family.add_metric([reason], count)
        yield family
        for name, text, value in (
                ("internal_errors", "Messages that hit an internal error", internal),
                ("dropped_replies", "Replies dropped because a peer's queue was full", dropped),
                ("busy_refusals", "Queries refused because too many were waiting", busy)):
            yield CounterMetricFamily(f"ghs_manager_{name}", text, value=value)
        states = dict.fromkeys(HOST_STATES, 0)
        for host in self.manager.queries.states():
            states[host_state(host)] += 1
        gauge = GaugeMetricFamily("ghs_manager_hosts", "Known hosts by state",
                                  labels=["state"])
        for name, count in states.items():
            gauge.add_metric([name], count)
        yield gauge
        totals = self.manager.store.totals()
        yield GaugeMetricFamily("ghs_manager_database_measurements",
                                "Measurements held in the database now",
                                value=totals["measurements_held"])
        handshakes = self.manager.handshakes()
        if handshakes is not None:
            family = CounterMetricFamily("ghs_manager_curve_handshakes",
                                         "CurveZMQ handshakes by the allow-list's verdict",
                                         labels=["result"])
            family.add_metric(["accepted"], handshakes[0])
            family.add_metric(["denied"], handshakes[1])
            yield family


def register_manager_metrics(registry: CollectorRegistry, manager: Manager) -> None:
    """Put ``manager``'s metrics in ``registry``; hooks its query-latency histogram in."""
    registry.register(ManagerCollector(manager))
    latency = Histogram("ghs_manager_query_duration_seconds",
                        "Time to answer a query on a worker thread, by query type",
                        labelnames=["query"], buckets=QUERY_BUCKETS_SECONDS,
                        registry=registry)
    manager.on_query = lambda kind, seconds: latency.labels(kind).observe(seconds)
