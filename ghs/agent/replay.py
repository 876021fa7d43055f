"""Workload logs replayed as simulated workstations through the production path.

Each file is one single-core workstation: a CSV of ``arrival_seconds,cpu_seconds[,user[,
command]]`` (header optional) replayed as it is, or an SWF log cut into ``stations`` disjoint
per-user streams at ``utilisation`` as :func:`ghs.traces.workstation_traces` does (the SWF
user and executable become the jobs' user and command). The log's own clock drives the
replay: log time 0 is mapped to ``zero_epoch_seconds`` (default: the SWF header's
UnixStartTime, else 2026-01-05 00:00 UTC, a Monday, so hour-of-day and day-of-week stay
meaningful) and runs ``speedup`` times faster than real time; with ``until_seconds`` the clock
stops at that log time.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path

from ghs import __version__
from ghs.agent.hosts import (
    MeasuringHost,
    RecordSink,
    TauHolder,
    _sampler,
    portable_store,
    simulated_streams,
)
from ghs.config import SensorConfig
from ghs.errors import GhsError
from ghs.record import HostIdentity
from sensors.clock import AcceleratedClock, CappedClock, Clock
from sensors.errors import SensorError
from sensors.simulated import SimulatedHost, read_trace_csv

DEFAULT_ZERO_EPOCH_SECONDS = 1_767_571_200.0  # 2026-01-05T00:00:00Z, a Monday
REPLAY_TAU = 1.0


class ReplayError(GhsError):
    """A replay file cannot be read or cut."""

    code = "replay_error"


@dataclass(frozen=True)
class Station:
    """One replayed workstation: ``rows`` are (arrival, cpu_seconds, user, command) on the
    log's clock (seconds from its zero), sorted by arrival. ``end_seconds``: how far the log
    it was cut from goes on that clock (the log's last arrival), to which the station is
    known, idle after its own last job; None: its own last job (a CSV is its own log)."""

    name: str
    rows: tuple[tuple[float, float, str, str], ...]
    header_zero_epoch_seconds: float | None = None
    end_seconds: float | None = None


def read_stations(paths: list[str], *, stations: int = 1, utilisation: float = 0.3
                  ) -> list[Station]:
    """The workstations of ``paths`` (CSV as is; SWF cut into ``stations``)."""
    found: list[Station] = []
    for path in paths:
        stem = Path(path).name.split(".")[0]
        if Path(path).name.lower().endswith((".csv", ".csv.gz")):
            try:
                rows = read_trace_csv(path)
            except SensorError as exc:
                raise ReplayError(str(exc), field="replay", value=path) from None
            if not rows:
                raise ReplayError(f"replay file {path!r} holds no jobs", field="replay",
                                  value=path)
            found.append(Station(stem, tuple(
                (float(r[0]), float(r[1]), str(r[2]) if len(r) > 2 and r[2] else "local",
                 str(r[3]) if len(r) > 3 and r[3] else "job") for r in rows)))
        else:
            found.extend(_swf_stations(path, stem, stations, utilisation))
    names = [station.name for station in found]
    if len(set(names)) != len(names):
        raise ReplayError(f"replayed hosts need distinct names, got {names}", field="replay",
                          value=names)
    return found


def _swf_stations(path: str, stem: str, stations: int, utilisation: float) -> list[Station]:
    from ghs.traces import TraceError, read_swf, workstation_traces

    try:
        log = read_swf(path)
        cut = workstation_traces(log, stations, utilisation)
    except TraceError as exc:
        raise ReplayError(str(exc), field="replay", value=path) from None
    zero = log.header.get("UnixStartTime")
    zero_epoch = float(zero) if zero and zero.lstrip("-").isdigit() else None
    result = []
    for k, (trace, indices) in enumerate(zip(cut.traces, cut.job_indices)):
        users = log.user_ids[indices]
        executables = log.executables[indices]
        rows = tuple((float(a), float(c), f"u{int(u)}", f"x{int(x)}")
                     for a, c, u, x in zip(trace.arrival_seconds.tolist(),
                                           trace.cpu_seconds.tolist(), users, executables))
        name = stem if stations == 1 else f"{stem}-{k}"
        result.append(Station(name, rows, zero_epoch, cut.end_seconds))
    return result


@dataclass
class Replay:
    """The replayed hosts, their shared clock and the moment it stops at (None: never)."""

    hosts: list[MeasuringHost]
    clock: Clock
    zero_epoch_seconds: float
    until_epoch_seconds: float | None
    released: threading.Event


def replay_hosts(stations: list[Station], settings: SensorConfig, *, speedup: float,
                 sink: RecordSink, zero_epoch_seconds: float | None = None,
                 until_seconds: float | None = None, seed: int = 1,
                 interval_seconds: float | None = None) -> Replay:
    """Simulated hosts replaying ``stations`` on one clock (see the module doc)."""
    if zero_epoch_seconds is None:
        zero_epoch_seconds = next((s.header_zero_epoch_seconds for s in stations
                                   if s.header_zero_epoch_seconds is not None),
                                  DEFAULT_ZERO_EPOCH_SECONDS)
    released = threading.Event()
    clock: Clock = AcceleratedClock(speedup, start=zero_epoch_seconds)
    until_epoch = None
    if until_seconds is not None:
        until_epoch = zero_epoch_seconds + until_seconds
        clock = CappedClock(clock, until_epoch, released)
    hosts = []
    for index, station in enumerate(stations):
        jobs = ((zero_epoch_seconds + arrival, cpu, user, command)
                for arrival, cpu, user, command in station.rows)
        simulated = SimulatedHost(jobs, clock=clock, cores=1, speed=REPLAY_TAU,
                                  boot_time=zero_epoch_seconds)
        store = portable_store(None, settings.retention_days)
        identity = HostIdentity(host_id=station.name, hostname=station.name, cores=1,
                                tau=REPLAY_TAU, os="replay", agent_version=__version__,
                                simulated=True, replay_zero_epoch_seconds=zero_epoch_seconds)
        sampler = _sampler(simulated.sensor(), store, clock, random.Random(seed * 1000 + index),
                           settings, station.name, TauHolder(REPLAY_TAU), sink,
                           interval_seconds)
        hosts.append(MeasuringHost(identity, sampler, [store.close], simulated_streams(
            station.name, simulated, settings, clock, sink)))
    return Replay(hosts, clock, zero_epoch_seconds, until_epoch, released)
