"""A simulated workstation feeding a manager's store directly: what a replayed agent sends, by
the real sampler and record streams, written as the manager writes it (no sockets)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ghs.agent.hosts import simulated_streams
from ghs.config import SensorConfig
from ghs.manager.store import HostFacts
from ghs.record import stored_rows, wire_fields
from protocol import Measurement as WireMeasurement
from sensors.clock import VirtualClock
from sensors.sampler import AdaptiveSampler
from sensors.simulated import SimulatedHost
from sensors.store import SensorStore

ZERO_EPOCH_SECONDS = 1_700_000_000.0 - 1_700_000_000.0 % 86400.0


def poisson_jobs(days: float, *, utilisation: float, mean_cpu_seconds: float, cov: float,
                 seed: int) -> list[tuple[float, float, str, str]]:
    """(epoch arrival, cpu seconds, user, command) of a Poisson stream, lognormal demands."""
    rng = np.random.default_rng(seed)
    rate = utilisation / mean_cpu_seconds
    arrivals = np.cumsum(rng.exponential(1.0 / rate, int(days * 86400 * rate * 1.2) + 10))
    arrivals = arrivals[arrivals < days * 86400]
    s2 = np.log1p(cov**2)
    demands = rng.lognormal(np.log(mean_cpu_seconds) - s2 / 2, np.sqrt(s2), arrivals.size)
    return [(ZERO_EPOCH_SECONDS + a, float(d), "owner", "work") for a, d in zip(arrivals,
                                                                                 demands)]


class ManagerFeed:
    """Runs ``jobs`` on a one-core simulated host and stores what its agent would report."""

    def __init__(self, store: Any, host_id: str, jobs: list[tuple[float, float, str, str]],
                 *, seed: int = 1) -> None:
        self.store = store
        self.host_id = host_id
        settings = SensorConfig()
        # the sampler runs whole hours at a time, the streams tick every minute: each drives
        # its own copy of the same host on its own clock (the job walk is deterministic)
        self.clock = VirtualClock(ZERO_EPOCH_SECONDS)
        self.host = SimulatedHost(iter(jobs), clock=self.clock, cores=1, speed=1.0,
                                  boot_time=ZERO_EPOCH_SECONDS)
        self.stream_clock = VirtualClock(ZERO_EPOCH_SECONDS)
        self.stream_host = SimulatedHost(iter(jobs), clock=self.stream_clock, cores=1,
                                         speed=1.0, boot_time=ZERO_EPOCH_SECONDS)
        store.upsert_host(HostFacts(host_id=host_id, hostname=host_id, cores=1, tau=1.0,
                                    os="simulated", agent_version="test",
                                    first_seen=ZERO_EPOCH_SECONDS,
                                    last_seen=ZERO_EPOCH_SECONDS))
        self.sampler = AdaptiveSampler(
            self.host.sensor(), SensorStore(None), self.clock, random.Random(seed),
            interval_seconds=settings.interval_seconds, min_per_hour=settings.min_per_hour,
            max_per_hour=settings.max_per_hour, window_hours=settings.window_hours,
            on_measurement=self._measured)
        self._seq = 0
        self._stream_seq: dict[str, int] = {}
        self.streams = simulated_streams(host_id, self.stream_host, settings,
                                         self.stream_clock, self)
        self.streams.start()

    def _measured(self, measurement: Any) -> None:
        self._seq += 1
        wire = WireMeasurement(seq=self._seq, **wire_fields(measurement, 1.0))
        self.store.add_batches([(self.host_id, measurement.end_time,
                                 stored_rows(self.host_id, [wire], measurement.end_time))])

    def add(self, host_id: str, fields: dict[str, Any]) -> int:
        return 0

    def add_many(self, host_id: str, records: list[tuple[str, dict[str, Any]]]) -> list[int]:
        by_stream: dict[str, list[dict[str, Any]]] = {}
        for stream, fields in records:
            self._stream_seq[stream] = self._stream_seq.get(stream, 0) + 1
            by_stream.setdefault(stream, []).append({**fields, "seq": self._stream_seq[stream]})
        for stream, rows in by_stream.items():
            self.store.streams.add(host_id, stream, rows)
        return [0] * len(records)

    def run_until(self, epoch_seconds: float, step_seconds: float = 60.0) -> None:
        """Sample and report up to ``epoch_seconds``, the streams ticking every step (the
        agent's capacity interval)."""
        self.sampler.run(until=epoch_seconds)
        while self.stream_clock.now() < epoch_seconds:
            self.stream_clock.advance(min(step_seconds, epoch_seconds - self.stream_clock.now()))
            self.streams.tick()

    def close(self) -> None:
        self.streams.close()
