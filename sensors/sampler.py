"""Adaptive sampling (paper section 3.1): how many measurements each hour, and when.

At the end of every hour the sampler takes the measurements of the previous 24 hours,
computes n_s for each parameter (:mod:`sensors.estimates`), and plans ``ceil(max n_s / 24)``
measurements (clamped) for the next hour. The hour is cut into that many equal slots and each
measurement starts at a uniformly random time inside its slot, so measurements never overlap
and cannot lock onto periodic load. It also stores the hour's plan, the 24-hour estimates and
prunes old rows. All waiting goes through the clock, so on a virtual clock a day runs in a
moment.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sensors.clock import Clock, sleep_until
from sensors.errors import InvalidArgumentError, SensorError, StoreError
from sensors.estimates import Estimate, adapt_avg, measurements_next_hour, required_samples
from sensors.measurement import Measurement
from sensors.store import SensorStore

HOUR_SECONDS = 3600.0
LOG = logging.getLogger("ghs.sensors")


class Measurer(Protocol):
    def measure(self, interval_seconds: float) -> Measurement:
        ...


def plan_times(start: float, end: float, count: int, interval_seconds: float,
               rng: random.Random) -> list[float]:
    """Up to ``count`` start times in [start, end - interval], one random time per slot."""
    usable = end - start
    if count <= 0 or usable < interval_seconds:
        return []
    count = min(count, int(usable // interval_seconds))
    slot = usable / count
    return [start + i * slot + rng.uniform(0.0, slot - interval_seconds) for i in range(count)]


@dataclass(frozen=True)
class HourReport:
    """One hour of sampling: planned/completed/failed measurements and what comes next."""

    hour_start: float
    planned: int
    completed: int
    failed: int
    next_count: int
    n_s: dict[str, float | None]
    estimate: Estimate


class AdaptiveSampler:
    """Runs measurements hour by hour on ``clock`` and records them in ``store``.

    ``on_measurement`` is called with each new measurement (e.g. to send it on), before it
    is stored here.
    ``failures`` keeps the last ten errors of failed measurements (they are skipped) and of
    writes the store refused; ``store_failures`` counts those writes. The store only steers
    the sampling, so a write it refuses (a full disk) is logged and the hour goes on: the
    measurement has already been handed on.
    """

    def __init__(self, sensor: Measurer, store: SensorStore, clock: Clock, rng: random.Random,
                 *, interval_seconds: float, min_per_hour: int, max_per_hour: int,
                 window_hours: float = 24.0,
                 on_measurement: Callable[[Measurement], None] | None = None) -> None:
        if not (math.isfinite(interval_seconds) and 0 < interval_seconds <= HOUR_SECONDS):
            raise InvalidArgumentError(f"interval must be in (0, 3600] s, got "
                                       f"{interval_seconds!r}", field="interval_seconds",
                                       value=interval_seconds)
        if not (math.isfinite(window_hours) and window_hours > 0):
            raise InvalidArgumentError(f"window must be > 0 hours, got {window_hours!r}",
                                       field="window_hours", value=window_hours)
        measurements_next_hour({}, min_per_hour=min_per_hour, max_per_hour=max_per_hour,
                               interval_seconds=interval_seconds)  # validates the bounds
        self.sensor = sensor
        self.store = store
        self.clock = clock
        self.rng = rng
        self.interval_seconds = float(interval_seconds)
        self.min_per_hour = min_per_hour
        self.max_per_hour = max_per_hour
        self.window_seconds = window_hours * HOUR_SECONDS
        self.on_measurement = on_measurement
        self.failures: list[SensorError] = []
        self.store_failures = 0
        self._store_warned = False  # a refused store write was logged this hour
        # (clock time, count, n_s) planned at the end of the last hour sampled
        self._planned: tuple[float, int, dict[str, float | None]] | None = None

    def _count_now(self, now: float) -> tuple[int, dict[str, float | None]]:
        if self._planned is not None and self._planned[0] == now and self._window_kept():
            return self._planned[1], self._planned[2]  # the last hour's end: no time passed
        return self._count_of(self.store.measurements(since=now - self.window_seconds,
                                                      until=now))

    def _window_kept(self) -> bool:
        """Whether the store's pruning leaves the whole window (so a read before it stands)."""
        most_in_window = self.max_per_hour * (math.ceil(self.window_seconds / HOUR_SECONDS) + 1)
        return (self.store.retention_seconds >= self.window_seconds
                and self.store.max_rows >= most_in_window)

    def _count_of(self, recent: list[Measurement]) -> tuple[int, dict[str, float | None]]:
        n_s = required_samples(recent)
        return measurements_next_hour(n_s, min_per_hour=self.min_per_hour,
                                      max_per_hour=self.max_per_hour,
                                      interval_seconds=self.interval_seconds), n_s

    def run_hour(self, stop: threading.Event | None = None) -> HourReport:
        """Sample the rest of the current clock hour, then plan the next one."""
        now = self.clock.now()
        hour_start = math.floor(now / HOUR_SECONDS) * HOUR_SECONDS
        hour_end = hour_start + HOUR_SECONDS
        self._store_warned = False
        count, n_s = self._count_now(now)
        # A partly elapsed hour gets its share of the hourly count.
        share = math.ceil(count * (hour_end - now) / HOUR_SECONDS - 1e-9)
        times = plan_times(now, hour_end, share, self.interval_seconds, self.rng)
        self._keep(self.store.add_plan, hour_start, count, n_s, times, created=now)
        completed = failed = 0
        for when in times:
            if stop is not None and stop.is_set():
                break
            sleep_until(self.clock, when)
            if self.clock.now() + self.interval_seconds > hour_end + 1.0:
                break  # running late: never let a measurement spill into the next hour
            try:
                measurement = self.sensor.measure(self.interval_seconds)
            except SensorError as exc:
                failed += 1
                self.failures = [*self.failures[-9:], exc]
                continue
            if stop is not None and stop.is_set():
                break  # cut short by the stop: not a full interval
            # the hand-over first (the agent's outbox: what reaches the manager), so that a
            # process killed between the two writes loses the local copy, never the sent one
            if self.on_measurement is not None:
                self.on_measurement(measurement)
            self._keep(self.store.add_measurement, measurement)
            completed += 1
        if stop is None or not stop.is_set():
            sleep_until(self.clock, hour_end)
        end = max(hour_end, self.clock.now())
        # one read of the window serves the next hour's count and the estimate; on a virtual
        # clock it serves the next hour's start too (a replayed day reads it 24 times, not 72)
        recent = self.store.measurements(since=end - self.window_seconds, until=end)
        next_count, next_n_s = self._count_of(recent)
        self._planned = (end, next_count, next_n_s)
        estimate = adapt_avg(recent, now=end, window_seconds=self.window_seconds,
                             history_start=self.store.history_start())
        self._keep(self.store.add_estimate, estimate)
        self._keep(self.store.prune, end)
        return HourReport(hour_start, len(times), completed, failed, next_count, next_n_s,
                          estimate)

    def _keep(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """A store write; one the store refuses is counted, logged (once an hour) and
        skipped, and sampling goes on."""
        try:
            write(*args, **kwargs)
        except StoreError as exc:
            self.failures = [*self.failures[-9:], exc]
            self.store_failures += 1
            if not self._store_warned:
                LOG.warning("the sensor store refused a write (%d so far), sampling goes on: "
                            "%s", self.store_failures, exc)
            self._store_warned = True

    def run(self, *, hours: int | None = None, until: float | None = None,
            stop: threading.Event | None = None) -> list[HourReport]:
        """Sample for ``hours`` clock hours, or until ``until``, or until ``stop`` is set."""
        if hours is None and until is None and stop is None:
            raise InvalidArgumentError("give hours, until or a stop event", field="hours")
        reports: list[HourReport] = []
        while True:
            if hours is not None and len(reports) >= hours:
                break
            if until is not None and self.clock.now() >= until:
                break
            if stop is not None and stop.is_set():
                break
            reports.append(self.run_hour(stop))
        return reports
