"""The hosts an agent measures: this machine, or simulated workstations on a fast clock.

Both go through the same sampler and sensor code, and both ship the same record streams
(capacity, running jobs, demand templates); only the sources (procfs and the kernel's
accounting file, or a simulated host's job stream) differ.
"""

from __future__ import annotations

import math
import os
import platform
import random
import socket
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import sqlite_utils

from ghs import __version__
from ghs.agent.streams import HostStreams, TauHolder
from ghs.config import SensorConfig
from ghs.record import HostIdentity, wire_fields
from sensors.capacity import CapacityRecorder, CapacitySource
from sensors.clock import AcceleratedClock, Clock, SystemClock
from sensors.host import LocalSensor, options_from
from sensors.running import RunningSampler, identity_hasher
from sensors.sampler import AdaptiveSampler
from sensors.simulated import SimulatedHost
from sensors.speed import resolve_tau
from sensors.store import SensorStore
from sensors.tau_refresh import TauRefresher
from sensors.templates import TemplateBook, TemplateFeeder


class RecordSink(Protocol):
    """Where a host's records go: the agent's outbox."""

    def add(self, host_id: str, fields: dict[str, Any]) -> int: ...

    def add_many(self, host_id: str, records: list[tuple[str, dict[str, Any]]]
                 ) -> list[int]: ...


def portable_store(path: str | None, retention_days: float) -> SensorStore:
    """A sensor store that may be opened here and then used only by a sampler thread."""
    if path is None:
        connection = sqlite3.connect(":memory:", check_same_thread=False)
    else:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, check_same_thread=False, timeout=30)
        connection.execute("PRAGMA journal_mode=WAL")
    return SensorStore(sqlite_utils.Database(connection), retention_days=retention_days)


@dataclass
class MeasuringHost:
    """One host's identity, sampler and record streams; ``close`` releases its sensor."""

    identity: HostIdentity
    sampler: AdaptiveSampler
    closers: list[Callable[[], None]]
    streams: HostStreams | None = None
    tau: TauHolder | None = None
    accounting_source: str = "simulated"
    """Where finished jobs are read: own, shared or none for this machine (see sensors)."""

    def tasks(self) -> list[tuple[str, Callable[[threading.Event], None]]]:
        """(name, loop) pairs, each run on its own thread until the event is set."""
        tasks: list[tuple[str, Callable[[threading.Event], None]]] = [
            ("sampler", lambda stop: self.sampler.run(stop=stop))]
        if self.streams is not None:
            self.streams.start()
            tasks.append(("streams", self.streams.run))
        if self.tau is not None and self.tau.refresher is not None:
            tasks.append(("tau", self.tau.run))
        return tasks

    def run(self, stop: threading.Event) -> None:
        self.sampler.run(stop=stop)

    def finish(self) -> None:
        """A last round of the streams now (a replay stopped at its --until moment)."""
        if self.streams is not None:
            self.streams.tick()

    def close(self) -> None:
        if self.streams is not None:
            self.streams.close()
        for close in reversed(self.closers):
            close()


def _sampler(sensor: Any, store: SensorStore, clock: Clock, rng: random.Random,
             settings: SensorConfig, host_id: str, tau: Callable[[], float], sink: RecordSink,
             interval_seconds: float | None = None) -> AdaptiveSampler:
    return AdaptiveSampler(
        sensor, store, clock, rng,
        interval_seconds=interval_seconds or settings.interval_seconds,
        min_per_hour=settings.min_per_hour, max_per_hour=settings.max_per_hour,
        window_hours=settings.window_hours,
        on_measurement=lambda m: sink.add(host_id, wire_fields(m, tau())))


def _streams(host_id: str, settings: SensorConfig, clock: Clock, sink: RecordSink, *,
             capacity: CapacitySource, running: Callable[..., RunningSampler],
             feeder: Callable[..., TemplateFeeder | None]) -> HostStreams:
    """A host's capacity, running-jobs and template streams, from its sensor's factories
    (the same for this machine and for simulated ones)."""
    hasher = identity_hasher(settings.hash_identities, settings.identity_key_path)
    book = TemplateBook(settings.template_half_life_seconds,
                        max_keys=settings.template_max_keys)
    templates = feeder(book, hasher=hasher)
    closers = ()
    if templates is not None and hasattr(templates.source, "close"):
        closers = (templates.source.close,)
    return HostStreams(
        host_id=host_id,
        recorder=CapacityRecorder(capacity, clock, settings.capacity_interval_seconds),
        running=running(max_jobs=settings.running_max_jobs,
                        min_core_share=settings.running_min_core_share, hasher=hasher),
        sink=sink.add_many, feeder=templates, book=None if templates is None else book,
        closers=closers, template_interval_seconds=settings.template_interval_seconds)


def simulated_streams(host_id: str, simulated: SimulatedHost, settings: SensorConfig,
                      clock: Clock, sink: RecordSink) -> HostStreams:
    """Streams of a simulated host: its exact capacity, jobs and finished-job records."""
    return _streams(host_id, settings, clock, sink, capacity=simulated,
                    running=simulated.running_sampler, feeder=simulated.template_feeder)


def local_host(settings: SensorConfig, *, host_id: str | None, store_path: str | None,
               stop: threading.Event, sink: RecordSink, seed: int | None = None,
               interval_seconds: float | None = None) -> MeasuringHost:
    """This machine, measured through procfs and (if available) process accounting."""
    clock = SystemClock(stop)
    tau = resolve_tau(override=settings.tau, command=settings.speed_command,
                      command_reference_seconds=settings.speed_command_reference_seconds,
                      runs=settings.speed_runs).tau
    sensor = LocalSensor(clock=clock, exclude_pids=[os.getpid()], proc_root="/proc",
                         **options_from(settings))
    sensor.open()
    store = portable_store(store_path, settings.retention_days)
    name = host_id or socket.gethostname()
    identity = HostIdentity(host_id=name, hostname=socket.gethostname(),
                            cores=os.cpu_count() or 1, tau=tau,
                            os=f"{platform.system()} {platform.release()}",
                            agent_version=__version__)
    refresher = None
    if settings.tau_refresh_interval_seconds > 0 and not settings.tau and \
            not settings.speed_command:
        refresher = TauRefresher(clock, tau, interval_seconds=settings.tau_refresh_interval_seconds,
                                 threshold=settings.tau_refresh_threshold)
    holder = TauHolder(tau, refresher)
    sampler = _sampler(sensor, store, clock, random.Random(seed), settings, name, holder, sink,
                       interval_seconds)
    capacity = sensor.capacity_source()

    def feeder(book: TemplateBook, *, hasher: Callable[[str], str] | None
               ) -> TemplateFeeder | None:
        return sensor.template_feeder(book, hasher=hasher,
                                      excluded_pids=capacity.excluded_pids)

    streams = _streams(name, settings, clock, sink, capacity=capacity,
                       running=sensor.running_sampler, feeder=feeder)
    return MeasuringHost(identity, sampler, [store.close, sensor.close], streams, holder,
                         accounting_source=sensor.session.source)


@dataclass(frozen=True)
class WorkstationProfile:
    """A simulated workstation's owners' load: Poisson arrivals, lognormal demands."""

    cores: int
    tau: float
    rho: float
    mean_demand_seconds: float
    demand_cov: float

    @property
    def lam(self) -> float:
        """Arrivals per second at the whole host, consistent with rho per core."""
        return self.cores * self.rho / self.mean_demand_seconds


def workstation_profiles(count: int, seed: int) -> list[WorkstationProfile]:
    """A heterogeneous lab: 1-4 cores, tau 0.5-2, rho 0.05-0.6, mean demand 30-600 s."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [WorkstationProfile(
        cores=int(rng.choice([1, 1, 2, 4])), tau=round(float(rng.uniform(0.5, 2.0)), 2),
        rho=round(float(rng.uniform(0.05, 0.6)), 3),
        mean_demand_seconds=round(math.exp(rng.uniform(math.log(30), math.log(600))), 1),
        demand_cov=round(float(rng.uniform(0.5, 2.5)), 2)) for _ in range(count)]


def simulated_hosts(count: int, settings: SensorConfig, *, speedup: float, seed: int,
                    prefix: str, sink: RecordSink,
                    interval_seconds: float | None = None) -> list[MeasuringHost]:
    """``count`` simulated workstations sharing one clock running ``speedup`` times faster."""
    # numpy and the scheduler's generators load only here: a real agent stays lean
    import numpy as np

    from ghs.simulated_hosts import poisson_host
    from scheduler.workload import demand

    clock = AcceleratedClock(speedup)
    hosts = []
    for index, profile in enumerate(workstation_profiles(count, seed)):
        host_id = f"{prefix}-sim{index:02d}"
        law = demand("lognormal", profile.mean_demand_seconds, profile.demand_cov)
        simulated = poisson_host(clock=clock, rate_per_second=profile.lam, demand=law,
                                 rng=np.random.default_rng(seed * 1000 + index),
                                 cores=profile.cores, speed=1.0)
        store = portable_store(None, settings.retention_days)
        identity = HostIdentity(host_id=host_id, hostname=host_id, cores=profile.cores,
                                tau=profile.tau, os="simulated", agent_version=__version__,
                                simulated=True)
        sampler = _sampler(simulated.sensor(), store, clock,
                           random.Random(seed * 1000 + index), settings, host_id,
                           TauHolder(profile.tau), sink, interval_seconds)
        hosts.append(MeasuringHost(identity, sampler, [store.close],
                                   simulated_streams(host_id, simulated, settings, clock, sink)))
    return hosts
