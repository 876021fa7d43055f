"""The hosts an agent measures: this machine, or simulated workstations on a fast clock.

Both go through the same sampler and sensor code; only the sources (procfs and the kernel's
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
from typing import Any

import sqlite_utils

from ghs import __version__
from ghs.config import SensorConfig
from ghs.record import HostIdentity, wire_fields
from sensors.clock import AcceleratedClock, Clock, SystemClock
from sensors.host import LocalSensor, options_from
from sensors.sampler import AdaptiveSampler
from sensors.speed import resolve_tau
from sensors.store import SensorStore

OnMeasurement = Callable[[str, dict[str, Any]], None]


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
    """One host's identity and sampler; ``close`` releases its sensor (accounting, store)."""

    identity: HostIdentity
    sampler: AdaptiveSampler
    closers: list[Callable[[], None]]

    def run(self, stop: threading.Event) -> None:
        self.sampler.run(stop=stop)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def _sampler(sensor: Any, store: SensorStore, clock: Clock, rng: random.Random,
             settings: SensorConfig, host_id: str, tau: float, sink: OnMeasurement,
             interval_seconds: float | None = None) -> AdaptiveSampler:
    return AdaptiveSampler(
        sensor, store, clock, rng,
        interval_seconds=interval_seconds or settings.interval_seconds,
        min_per_hour=settings.min_per_hour, max_per_hour=settings.max_per_hour,
        window_hours=settings.window_hours,
        on_measurement=lambda m: sink(host_id, wire_fields(m, tau)))


def local_host(settings: SensorConfig, *, host_id: str | None, store_path: str | None,
               stop: threading.Event, sink: OnMeasurement, seed: int | None = None,
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
    sampler = _sampler(sensor, store, clock, random.Random(seed), settings, name, tau, sink,
                       interval_seconds)
    return MeasuringHost(identity, sampler, [store.close, sensor.close])


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
                    prefix: str, sink: OnMeasurement,
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
                           random.Random(seed * 1000 + index), settings, host_id, profile.tau,
                           sink, interval_seconds)
        hosts.append(MeasuringHost(identity, sampler, [store.close]))
    return hosts
