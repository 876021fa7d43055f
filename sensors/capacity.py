"""Harvestable capacity: the CPU seconds a lowest-priority task could have had.

A core's capacity is what its owners left: its idle time (iowait included: a core waiting on
disk would run a runnable task) plus the CPU that remote tasks already took from it. The
owners' user, nice, system, irq, softirq and steal time never count.

On a real host :class:`ProcCapacitySource` reads the per-CPU lines of ``<proc_root>/stat``
and adds the CPU of the processes the :class:`~sensors.processes.ProcessClassifier`
recognises as remote tasks (remote users, cgroup, environment marker; not the agent's own
processes, which a remote task could not have used either). Each remote process's CPU delta
is attributed to the core it last ran on (field 39 of ``/proc/PID/stat``): approximate per
core when a task migrates, exact for the sum. A remote process that exits between two
samples takes its CPU since the previous sample with it, unless a live remote parent reaps it
(its parent's reaped-children time then holds it): given the accounting file, those tasks'
exit records credit it instead (:mod:`sensors.remote_exits`). A core that appears or disappears (CPU
hotplug) is flagged: it contributes nothing to the interval in which its presence changed.

:class:`CapacityRecorder` turns cumulative samples into interval records at a fixed cadence
of its clock, independent of the adaptive sampler.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sensors.accounting import AccountingSource
from sensors.clock import Clock, every
from sensors.errors import InvalidArgumentError, ProcUnavailableError
from sensors.processes import (
    ProcessClassifier,
    ProcessFilter,
    ProcessInfo,
    ProcessKey,
    ProcessSource,
)
from sensors.remote_exits import RemoteExits

# Slack allowed when checking that an interval's capacity fits in cores * elapsed: a few
# ticks of counter granularity plus clock jitter between reading time and the counters.
_RELATIVE_SLACK = 0.02
_ABSOLUTE_SLACK_SECONDS = 0.05
_MAX_SLICE_SECONDS = 1.0


@dataclass(frozen=True)
class CapacitySample:
    """Cumulative available CPU seconds per core since an arbitrary origin, at one moment.

    ``core_ids`` names the cores of ``per_core_available_cpu_seconds`` (default 0..n-1).
    """

    epoch_seconds: float
    per_core_available_cpu_seconds: tuple[float, ...]
    core_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.core_ids:
            object.__setattr__(self, "core_ids",
                               tuple(range(len(self.per_core_available_cpu_seconds))))
        elif len(self.core_ids) != len(self.per_core_available_cpu_seconds):
            raise InvalidArgumentError("core_ids and per-core values differ in length",
                                       field="core_ids", value=self.core_ids)

    @property
    def available_cpu_seconds(self) -> float:
        """Summed over cores, CPU seconds."""
        return math.fsum(self.per_core_available_cpu_seconds)


@dataclass(frozen=True)
class CapacityInterval:
    """Available CPU seconds between two samples, summed and per core (``core_ids``).

    ``flags``: "cores_changed" when a core appeared or vanished in the interval (it then
    contributes nothing to it).
    """

    start_epoch_seconds: float
    end_epoch_seconds: float
    available_cpu_seconds: float
    per_core_available_cpu_seconds: tuple[float, ...]
    core_ids: tuple[int, ...] = ()
    flags: tuple[str, ...] = ()

    @property
    def elapsed_seconds(self) -> float:
        return self.end_epoch_seconds - self.start_epoch_seconds

    def to_dict(self) -> dict:
        return {"start_epoch_seconds": self.start_epoch_seconds,
                "end_epoch_seconds": self.end_epoch_seconds,
                "available_cpu_seconds": self.available_cpu_seconds,
                "per_core_available_cpu_seconds": list(self.per_core_available_cpu_seconds),
                "core_ids": list(self.core_ids), "flags": list(self.flags)}


class CapacitySource(Protocol):
    """Where capacity samples come from (``/proc`` or a simulated host)."""

    @property
    def unaccounted_exits(self) -> int:
        """Remote tasks whose CPU after their last sample could not be credited."""
        ...

    def capacity_sample(self) -> CapacitySample:
        ...


def parse_per_core_idle(text: str, ticks_per_second: int) -> dict[int, float]:
    """Idle + iowait seconds per core id from the text of ``/proc/stat``."""
    idle: dict[int, float] = {}
    for line in text.splitlines():
        if line.startswith("cpu") and not line.startswith("cpu "):
            parts = line.split()
            try:
                core = int(parts[0][3:])
                idle[core] = (int(parts[4]) + (int(parts[5]) if len(parts) > 5 else 0)
                              ) / ticks_per_second
            except (ValueError, IndexError):
                raise ProcUnavailableError(f"unexpected /proc/stat cpu line {line!r}",
                                           field="proc_root") from None
    if not idle:
        raise ProcUnavailableError("/proc/stat has no per-CPU lines", field="proc_root")
    return idle


def _remote_pids(snapshot: dict[ProcessKey, ProcessInfo], excluded: frozenset[int],
                 agent_pids: frozenset[int]) -> set[int]:
    """Excluded pids that are remote tasks: those not descended from the agent itself."""
    by_pid = {info.pid: info for info in snapshot.values()}
    agents: dict[int, bool] = {}

    def from_agent(pid: int) -> bool:
        chain = []
        verdict = False
        while pid in by_pid and pid not in agents and pid not in chain:
            chain.append(pid)
            if pid in agent_pids:
                verdict = True
                break
            pid = by_pid[pid].ppid
        else:
            verdict = agents.get(pid, False)
        for member in chain:
            agents[member] = verdict
        return verdict

    return {pid for pid in excluded if not from_agent(pid)}


class ProcCapacitySource:
    """Capacity of this machine: per-core idle ticks plus remote tasks' CPU (see module).

    ``accounting``: a reader of the process accounting file of its own (not shared with
    another consumer), from which remote tasks that exit between samples are credited;
    without it their CPU since the last sample is lost (``unaccounted_exits`` counts them).
    """

    def __init__(self, processes: ProcessSource, process_filter: ProcessFilter, clock: Clock,
                 proc_root: str = "/proc", *, ticks_per_second: int | None = None,
                 accounting: AccountingSource | None = None) -> None:
        self.path = os.path.join(proc_root, "stat")
        self.ticks_per_second = ticks_per_second or os.sysconf("SC_CLK_TCK")
        self.processes = processes
        self.filter = process_filter
        self.classifier = ProcessClassifier(process_filter, processes)
        self.clock = clock
        self._previous: dict[ProcessKey, ProcessInfo] | None = None
        self._previous_epoch = -math.inf
        self._remote_cpu: dict[int, float] = {}
        self._excluded: frozenset[int] = frozenset()
        self._excluded_before: frozenset[int] = frozenset()
        self._exits = RemoteExits(accounting, process_filter.remote_users)

    @property
    def unaccounted_exits(self) -> int:
        """Remote tasks whose CPU after their last sample could not be credited."""
        return self._exits.unaccounted

    def excluded_pids(self) -> frozenset[int]:
        """The agent's, remote tasks' and their descendants' pids at the last two samples.

        Why two: the template feeder reads the accounting records of the processes that
        ended during the interval just after the sample that closes it, when a remote task
        that ended in it is gone from the sample. Excluding only the last sample's pids let
        every such task teach the owners' demand templates (on a real machine running
        ``ghs experiment live``, each 60 s task a root ``python`` job of 60 s)."""
        return self._excluded | self._excluded_before

    def _read_stat(self) -> str:
        try:
            with open(self.path, encoding="ascii") as handle:
                return handle.read()
        except OSError as exc:
            raise ProcUnavailableError(f"cannot read {self.path}: {exc.strerror}",
                                       field="proc_root", value=self.path) from None

    def _remote_delta(self, now_epoch: float) -> None:
        # before the scan: every record read is of a process that exited before it (the
        # scan shared with the running-jobs snapshot is taken here, the snapshot reuses it)
        self._exits.read()
        snapshot = self.processes.snapshot()
        classified = self.classifier.classify(snapshot)
        self._excluded_before, self._excluded = self._excluded, classified.excluded_pids
        remote = _remote_pids(snapshot, classified.excluded_pids, self.filter.exclude_pids)
        current = {key: info for key, info in snapshot.items() if info.pid in remote}
        before = self._previous
        self._previous = current
        if before is None:
            self._previous_epoch = now_epoch
            return
        # Gone children reaped by a live remote parent: their whole life is now in the
        # parent's reaped-children time, of which the part before the previous sample was
        # already counted (on their own cores).
        counted_before: dict[int, float] = {}
        for key, gone in before.items():
            if key not in current:
                counted_before[gone.ppid] = (counted_before.get(gone.ppid, 0.0)
                                             + gone.cpu_seconds + gone.children_cpu_seconds)
        for key, info in current.items():
            then = before.get(key)
            if then is not None:
                own = info.cpu_seconds - then.cpu_seconds
                reaped = info.children_cpu_seconds - then.children_cpu_seconds
                reaped -= counted_before.get(info.pid, 0.0)
            elif info.start_time >= self._previous_epoch:
                own, reaped = info.cpu_seconds, info.children_cpu_seconds
            else:
                continue  # existed unseen before the previous sample: baseline only
            self._add(info.processor, max(own, 0.0) + max(reaped, 0.0))
        live = {info.pid for info in current.values()}
        gone = {info.pid: info for key, info in before.items()
                if key not in current and info.ppid not in live}
        known = {info.pid: info for info in (*before.values(), *current.values())}
        for core, seconds in self._exits.credits(gone, known, live, self._previous_epoch):
            self._add(core, seconds)
        self._previous_epoch = now_epoch

    def _add(self, core: int, seconds: float) -> None:
        self._remote_cpu[core] = self._remote_cpu.get(core, 0.0) + seconds

    def capacity_sample(self) -> CapacitySample:
        epoch = self.clock.now()
        idle = parse_per_core_idle(self._read_stat(), self.ticks_per_second)
        self._remote_delta(epoch)
        cores = tuple(sorted(idle))
        fallback = cores[0]
        remote = dict.fromkeys(cores, 0.0)
        for core, seconds in self._remote_cpu.items():
            remote[core if core in remote else fallback] += seconds
        return CapacitySample(epoch, tuple(idle[c] + remote[c] for c in cores), cores)


@dataclass
class CapacityRecorder:
    """Interval records of a CapacitySource every ``interval_seconds`` of ``clock``.

    ``step()`` takes a sample now and returns the interval since the previous one (None for
    the first sample, or when the counters went backwards or jumped beyond cores * elapsed,
    e.g. after a reboot or a counter wrap: such an interval is skipped, counted in
    ``skipped_intervals``, and the series restarts from the new sample, so the gap is
    visible as a start that is not the previous end; no time is moved elsewhere).
    """

    source: CapacitySource
    clock: Clock
    interval_seconds: float = 60.0
    skipped_intervals: int = field(default=0, init=False)
    _last: CapacitySample | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        value = self.interval_seconds
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value > 0):
            raise InvalidArgumentError(f"interval_seconds must be a positive number, got "
                                       f"{value!r}", field="interval_seconds", value=value)

    def sample_now(self) -> CapacitySample:
        """A raw cumulative sample now (does not move the recorder's baseline)."""
        return self.source.capacity_sample()

    def step(self) -> CapacityInterval | None:
        """Sample now; the interval since the previous step (see class doc)."""
        with self._lock:
            sample = self.source.capacity_sample()
            previous, self._last = self._last, sample
            if previous is None:
                return None
            interval = interval_between(previous, sample)
            if interval is None:
                self.skipped_intervals += 1
            return interval

    def run(self, stop: threading.Event,
            on_interval: Callable[[CapacityInterval], None]) -> None:
        """Step on a fixed grid of the clock until ``stop`` is set; hand over each interval.

        Sleeps are cut into slices of at most a clock second so a set ``stop`` ends the loop
        promptly on any clock. If the loop falls behind (suspend), it resumes on the grid.
        """
        if self._last is None:
            self.step()

        def record() -> None:
            interval = self.step()
            if interval is not None:
                on_interval(interval)

        every(self.clock, stop, self.interval_seconds, record,
              max_slice_seconds=_MAX_SLICE_SECONDS)


def interval_between(a: CapacitySample, b: CapacitySample) -> CapacityInterval | None:
    """The interval from ``a`` to ``b``, or None when the counters are not consistent."""
    elapsed = b.epoch_seconds - a.epoch_seconds
    if not elapsed > 0:
        return None
    before = dict(zip(a.core_ids, a.per_core_available_cpu_seconds))
    per_core = []
    for core, value in zip(b.core_ids, b.per_core_available_cpu_seconds):
        delta = value - before[core] if core in before else 0.0
        if delta < -_ABSOLUTE_SLACK_SECONDS:
            return None
        per_core.append(max(delta, 0.0))
    total = math.fsum(per_core)
    if total > len(per_core) * (elapsed * (1 + _RELATIVE_SLACK) + _ABSOLUTE_SLACK_SECONDS):
        return None
    flags = ("cores_changed",) if set(a.core_ids) != set(b.core_ids) else ()
    return CapacityInterval(a.epoch_seconds, b.epoch_seconds, total, tuple(per_core),
                            b.core_ids, flags)
