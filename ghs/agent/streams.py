"""A host's record streams besides measurements: capacity, running jobs, demand templates.

Every ``capacity_interval`` of the host's clock (independent of the adaptive sampler) the
agent records the harvestable capacity of the interval, a snapshot of the owners' jobs running
now and the demand-template increments of the jobs that finished since; each goes into the
outbox as a numbered record of its stream and travels exactly once, like measurements.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sensors.capacity import CapacityInterval, CapacityRecorder
from sensors.running import RunningSampler, RunningSnapshot
from sensors.tau_refresh import TauChange, TauRefresher
from sensors.templates import TemplateBook, TemplateFeeder, TemplateUpdate

LOG = logging.getLogger("ghs.agent")

StreamSink = Callable[[str, list[tuple[str, dict[str, Any]]]], object]
"""(host_id, [(stream name, record fields without seq), ...]): the outbox's ``add_many``,
one transaction a round."""


def capacity_fields(interval: CapacityInterval) -> dict[str, Any]:
    return {"start_epoch_seconds": interval.start_epoch_seconds,
            "end_epoch_seconds": interval.end_epoch_seconds,
            "available_cpu_seconds": interval.available_cpu_seconds,
            "per_core_available_cpu_seconds": list(interval.per_core_available_cpu_seconds)}


def running_fields(snapshot: RunningSnapshot) -> dict[str, Any]:
    return {"epoch_seconds": snapshot.epoch_seconds,
            "run_queue_length": snapshot.run_queue_length,
            "jobs": [job.to_dict() for job in snapshot.jobs],
            "jobs_omitted": snapshot.omitted_jobs}


def template_fields(update: TemplateUpdate) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "as_of_epoch_seconds": update.as_of_epoch, "scope": update.scope,
        "bins": [[index, count] for index, count in update.counts],
        "count": update.n, "cpu_seconds_sum": update.sum_seconds,
        # decayed weights can leave a sum of squares a rounding below sum^2 / count
        "cpu_seconds_sum_squares": max(update.sumsq_seconds,
                                       update.sum_seconds ** 2 / update.n if update.n else 0.0)}
    if update.scope != "pooled":
        fields["user"] = update.user
    if update.scope == "command":
        fields["command"] = update.command
    return fields


@dataclass
class HostStreams:
    """The streams of one host; ``run`` ticks them until stopped, ``tick`` once now."""

    host_id: str
    recorder: CapacityRecorder
    running: RunningSampler
    sink: StreamSink
    feeder: TemplateFeeder | None = None
    book: TemplateBook | None = None
    closers: tuple[Callable[[], None], ...] = ()
    template_interval_seconds: float = 600.0
    _templates_due: float = -math.inf

    def start(self) -> None:
        """Take the capacity baseline (the first interval starts here)."""
        self.recorder.step()
        if self.feeder is not None:
            self.feeder.poll()

    def run(self, stop: threading.Event) -> None:
        self.recorder.run(stop, self._after_capacity)

    def tick(self) -> None:
        """One round now: the interval since the last one, a snapshot, the templates (all of
        them, whatever their cadence: a replay's last report)."""
        interval = self.recorder.step()
        self._templates_due = -math.inf
        if interval is not None:
            self._after_capacity(interval)

    def _after_capacity(self, interval: CapacityInterval) -> None:
        records = [("capacity", capacity_fields(interval)),
                   ("running", running_fields(self.running.snapshot()))]
        if self.feeder is not None and self.book is not None:
            # every finished job is read each round; the increments travel less often
            self.feeder.poll()
            if interval.end_epoch_seconds >= self._templates_due:
                self._templates_due = interval.end_epoch_seconds + self.template_interval_seconds
                records += [("templates", template_fields(update))
                            for update in self.book.take_updates() if update.n > 0]
        self.sink(self.host_id, records)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


class TauHolder:
    """The host's current tau, re-measured now and then at idle priority by a refresher."""

    def __init__(self, tau: float, refresher: TauRefresher | None = None) -> None:
        self.tau = tau
        self.refresher = refresher

    def __call__(self) -> float:
        return self.tau

    def run(self, stop: threading.Event) -> None:
        if self.refresher is not None:
            self.refresher.run(stop, self._changed)

    def _changed(self, change: TauChange) -> None:
        LOG.info("tau changed from %.3f to %.3f (%s)", change.previous_tau, change.tau,
                 change.source)
        self.tau = change.tau
