"""The agent's Prometheus metrics, read from its outbox and sender at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ghs.agent.runner import Agent


class AgentCollector(Collector):
    """Outbox depth and age, batches sent, measurements acknowledged, errors, reconnects."""

    def __init__(self, agent: Agent, clock: Callable[[], float]) -> None:
        self.agent = agent
        self.clock = clock

    def collect(self) -> Iterator[Any]:
        outbox, stats = self.agent.outbox, self.agent.sender.stats
        try:
            depth, oldest = outbox.count(), outbox.oldest_queued()
            held = outbox.held_count()
        except Exception:  # the outbox closes as the agent stops: scrape what is left
            return
        yield GaugeMetricFamily("ghs_agent_outbox_measurements",
                                "Measurements waiting in the outbox for the manager's ack",
                                value=depth)
        yield GaugeMetricFamily("ghs_agent_outbox_oldest_age_seconds",
                                "Age of the oldest unacknowledged measurement (0: none)",
                                value=0.0 if oldest is None else max(0.0, self.clock() - oldest))
        yield GaugeMetricFamily("ghs_agent_outbox_held_records",
                                "Records held in memory because the outbox could not be "
                                "written (a full disk)", value=held)
        counters = (
            ("ghs_agent_outbox_write_failures",
             "Outbox writes that failed (their records were held)", outbox.write_failures),
            ("ghs_agent_outbox_dropped_records",
             "Held records dropped past agent.outbox_hold_records", outbox.dropped_records),
            ("ghs_agent_sensor_store_failures",
             "Writes the hosts' local sensor stores refused (skipped: the measurements still "
             "went to the outbox)", sum(host.sampler.store_failures for host in self.agent.hosts)),
            ("ghs_agent_batches_sent", "Measurement batches sent (first sends)",
             stats.sent_batches),
            ("ghs_agent_batches_resent", "Batches sent again after no ack within the timeout",
             stats.resent_batches),
            ("ghs_agent_measurements_acked",
             "Measurements the manager acknowledged (then dropped here)", stats.acked),
            ("ghs_agent_reconnects", "Connections to the manager after the first one",
             stats.reconnects),
            ("ghs_agent_remote_exits_uncredited",
             "Remote tasks that exited between capacity samples whose CPU since the last "
             "sample could not be credited (no accounting record: it counts as the owners')",
             sum(host.streams.recorder.source.unaccounted_exits
                 for host in self.agent.hosts if host.streams is not None)),
            ("ghs_agent_host_loop_failures",
             "Host samplers and streams that failed and were started again",
             self.agent.loop_failures),
            ("ghs_agent_manager_outages", "Times the manager stopped answering", stats.outages))
        for name, text, value in counters:
            yield CounterMetricFamily(name, text, value=value)
        family = CounterMetricFamily("ghs_agent_errors", "Error replies and bad messages, "
                                     "by code", labels=["code"])
        for code, count in sorted(dict(stats.errors).items()):
            family.add_metric([code], count)
        yield family
        yield GaugeMetricFamily("ghs_agent_manager_reachable",
                                "1 if the manager answered the last request, else 0",
                                value=1.0 if self.agent.sender.reachable else 0.0)


def register_agent_metrics(registry: CollectorRegistry, agent: Agent,
                           clock: Callable[[], float] | None = None) -> None:
    """Put ``agent``'s metrics in ``registry``; ``clock`` is epoch seconds (the outbox's)."""
    registry.register(AgentCollector(agent, clock or agent.outbox.clock))
