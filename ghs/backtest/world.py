"""One replayed workstation as the manager would know it, advanced launch by launch.

The station's jobs run on a :class:`sensors.simulated.SimulatedHost` driven by a
:class:`sensors.clock.VirtualClock`; the real :class:`sensors.sampler.AdaptiveSampler` measures
it and the agent's record streams (``ghs.agent.hosts.simulated_streams``: capacity series,
running-jobs snapshot, demand-template increments) report on it. Their records go to what a
manager keeps: the measurements, the capacity series, the latest snapshot and a template book
merged from the increments exactly as shipped. Time only moves forward, so whatever
:meth:`StationWorld.advance` returns was known at that moment and never after.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from ghs.agent.hosts import simulated_streams
from ghs.agent.replay import REPLAY_TAU, Station
from ghs.config import SensorConfig
from ghs.errors import GhsError
from sensors.clock import VirtualClock
from sensors.measurement import Measurement
from sensors.sampler import AdaptiveSampler
from sensors.simulated import SimulatedHost
from sensors.store import SensorStore
from sensors.templates import TemplateBook

HOUR_SECONDS = 3600.0
_MEASURED = ("end_time", "interval_seconds", "lam", "rho", "service_count",
             "service_sum_seconds", "service_sum_squares")


class BacktestError(GhsError):
    """A back-test cannot run as asked."""

    code = "backtest_error"


@dataclass(frozen=True, eq=False)
class Known:
    """What the manager holds about one station at ``epoch_seconds``.

    ``measured``: per-measurement arrays (epoch seconds, seconds, 1/s, fraction, counts, CPU
    seconds, CPU seconds squared) named as :class:`sensors.measurement.Measurement`'s fields;
    ``running``: the latest running-jobs snapshot (wire fields); ``templates``: the merged book.
    """

    epoch_seconds: float
    measured: dict[str, np.ndarray]
    running: dict[str, Any] | None
    templates: TemplateBook
    capacity: tuple[tuple[float, float], ...]


class StationWorld:
    """A station replayed from its log's zero (mapped to ``zero_epoch_seconds``)."""

    def __init__(self, station: Station, *, zero_epoch_seconds: float,
                 settings: SensorConfig, seed: int) -> None:
        self.station = station
        self.zero_epoch_seconds = zero_epoch_seconds
        self.clock = VirtualClock(zero_epoch_seconds)
        jobs = ((zero_epoch_seconds + arrival, cpu, user, command)
                for arrival, cpu, user, command in station.rows)
        self.host = SimulatedHost(jobs, clock=self.clock, cores=1, speed=REPLAY_TAU,
                                  boot_time=zero_epoch_seconds)
        self._measurements: list[Measurement] = []
        self.sampler = AdaptiveSampler(
            self.host.sensor(), SensorStore(None), self.clock, random.Random(seed),
            interval_seconds=settings.interval_seconds, min_per_hour=settings.min_per_hour,
            max_per_hour=settings.max_per_hour, window_hours=settings.window_hours,
            on_measurement=self._measurements.append)
        self.book = TemplateBook(settings.template_half_life_seconds,
                                 max_keys=settings.template_max_keys)
        self.running: dict[str, Any] | None = None
        self.capacity: list[tuple[float, float]] = []
        # this world is the streams' outbox: records arrive here as the manager would take them
        self.streams = simulated_streams(station.name, self.host, settings, self.clock, self)
        self.streams.start()

    def add(self, host_id: str, fields: dict[str, Any]) -> int:
        return 0  # measurements reach the world through the sampler's own callback

    def add_many(self, host_id: str, records: list[tuple[str, dict[str, Any]]]) -> list[int]:
        for stream, fields in records:
            self._receive(stream, fields)
        return [0] * len(records)

    def _receive(self, stream: str, fields: dict[str, Any]) -> None:
        # what the manager does with each stream's records (ghs.manager.streams)
        if stream == "running":
            self.running = fields
        elif stream == "capacity":
            self.capacity.append((fields["end_epoch_seconds"], fields["available_cpu_seconds"]))
        elif stream == "templates":
            self.book.merge_update((fields["scope"], fields.get("user", ""),
                                    fields.get("command", ""), fields["bins"], fields["count"],
                                    fields["cpu_seconds_sum"],
                                    fields["cpu_seconds_sum_squares"],
                                    fields["as_of_epoch_seconds"]))

    def advance(self, log_seconds: float) -> Known:
        """Run the sampler and streams up to ``log_seconds`` (a whole hour on the log's
        clock, not before the previous call) and return what is known then."""
        epoch = self.zero_epoch_seconds + log_seconds
        if log_seconds % HOUR_SECONDS or epoch < self.clock.now():
            raise BacktestError(f"launches must be whole hours, in order; got {log_seconds:g} s",
                                field="launch_seconds", value=log_seconds)
        self.sampler.run(until=epoch)
        self.streams.tick()
        done = self._measurements
        measured = {name: np.array([getattr(m, name) for m in done], dtype=float)
                    for name in _MEASURED}
        return Known(epoch, measured, self.running, self.book, tuple(self.capacity))

    def estimate(self) -> Any:
        """The manager's 24-hour Adapt_avg estimate over the measurements so far
        (ghs.manager.estimates.EstimateCache: the window ends at the latest measurement)."""
        from sensors.estimates import adapt_avg

        if not self._measurements:
            return None
        last = self._measurements[-1].end_time
        window = self.sampler.window_seconds
        recent = [m for m in self._measurements if m.end_time > last - window]
        return adapt_avg(recent, now=last, window_seconds=window,
                         history_start=self._measurements[0].start_time)

    def close(self) -> None:
        self.streams.close()
