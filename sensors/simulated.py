"""A simulated host: the same snapshot, CPU-counter and accounting interfaces as a real one.

It is driven by a stream of local jobs, rows of ``(arrival_seconds, cpu_seconds[, user,
command])`` sorted by arrival, on the time axis of its clock (usually a
:class:`~sensors.clock.VirtualClock`). ``cpu_seconds`` are reference-machine CPU seconds; a
job needs ``cpu_seconds / speed`` seconds of one of the host's ``cores``. Jobs are served
first come, first served by the cores (an M/G/c queue for Poisson input); the measurement
code does not depend on the discipline. The host advances lazily to ``clock.now()`` whenever
it is read, so the stream can be an endless generator and the sampler, the store and the
agent run on it unchanged, days of virtual time in seconds.

It is also an exact capacity source (each job keeps the core it ran on, so per-core idle
time is integrated exactly; there are no remote tasks), reports the jobs in its system as
the run queue, and lends further independent readers of its accounting records
(:meth:`SimulatedHost.open_accounting_cursor`) for the demand templates.
"""

from __future__ import annotations

import csv
import functools
import heapq
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from sensors.accounting import AccountingBatch, AcctRecord
from sensors.capacity import CapacitySample
from sensors.clock import Clock
from sensors.cpu import CpuSample
from sensors.errors import InvalidArgumentError
from sensors.measurement import HostSensor
from sensors.processes import ProcessFilter, ProcessInfo, ProcessKey
from sensors.running import MIN_CORE_SHARE, RunningSampler
from sensors.templates import TemplateBook, TemplateFeeder

TICKS_PER_SECOND = 100
_FIRST_PID = 300
_FIRST_UID = 1000


class _Job:
    __slots__ = ("arrival", "command", "core", "finish", "pid", "service", "start", "uid")

    def __init__(self, pid: int, uid: int, command: str, arrival: float, start: float,
                 service: float, core: int) -> None:
        self.core = core
        self.pid = pid
        self.uid = uid
        self.command = command
        self.arrival = arrival
        self.start = start
        self.service = service
        self.finish = start + service

    def cpu_at(self, time: float) -> float:
        return min(max(time - self.start, 0.0), self.service)


def _locked(method):
    """Serialise a public reader: the agent's sampler and stream threads share one host."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper


class SimulatedHost:
    """Implements ProcessSource, CpuSource and AccountingSource over a job stream.

    ``users`` maps user names to uids (unknown names get uids from 1000 up; use
    :meth:`uid_of` as a filter's ``resolve_uid``). Process start times are kept exactly, at
    ``TICKS_PER_SECOND`` resolution for the process key.
    """

    def __init__(self, jobs: Iterable[Sequence], *, clock: Clock, cores: int = 1,
                 speed: float = 1.0, boot_time: float | None = None,
                 users: Mapping[str, int] | None = None, default_user: str = "local",
                 pid_max: int = 32768) -> None:
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise InvalidArgumentError(f"cores must be a positive integer, got {cores!r}",
                                       field="cores", value=cores)
        if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
            raise InvalidArgumentError(f"speed must be a positive number, got {speed!r}",
                                       field="speed", value=speed)
        if not isinstance(pid_max, int) or pid_max <= _FIRST_PID + 10:
            raise InvalidArgumentError(f"pid_max must exceed {_FIRST_PID + 10}, got "
                                       f"{pid_max!r}", field="pid_max", value=pid_max)
        self.lock = threading.RLock()
        self.clock = clock
        self.cores = cores
        self.speed = float(speed)
        self.boot_time = clock.now() if boot_time is None else float(boot_time)
        self.users = {"root": 0, **dict(users or {})}
        self.default_user = default_user
        self.pid_max = pid_max
        self._jobs: Iterator[Sequence] = iter(jobs)
        self._next: Sequence | None = None
        self._last_arrival = -math.inf
        self._exhausted = False
        # (time the core becomes free, core): FCFS on the earliest free core, ties by index.
        self._free: list[tuple[float, int]] = [(self.boot_time, core) for core in range(cores)]
        self._core_finished_busy = [0.0] * cores
        self._active: dict[int, _Job] = {}
        self._finishing: list[tuple[float, int, int]] = []
        self._records: list[AcctRecord] = []
        self._records_base = 0  # absolute index of _records[0]
        self._main_position = 0
        self._cursors: list[SimulatedAccountingCursor] = []
        self._finished_busy = 0.0
        self._forks = 1
        self._next_pid = _FIRST_PID
        self._time = self.boot_time
        self.jobs_seen = 0
        self._uid_cache: dict[str | int, int] = {}  # what uid_of gave each user of a job row

    @_locked
    def uid_of(self, user: str | int) -> int:
        """The uid of a user name (assigned on first use) or number."""
        if isinstance(user, int) and not isinstance(user, bool):
            return user
        name = str(user)
        if name.isdigit():
            return int(name)
        if name not in self.users:
            self.users[name] = _FIRST_UID + len(self.users) - 1
        return self.users[name]

    def user_name(self, uid: int) -> str:
        """The name a uid was assigned from (the number as text if none)."""
        for name, number in self.users.items():
            if number == uid:
                return name
        return str(uid)

    # -- advancing ------------------------------------------------------------------------

    def _peek(self) -> Sequence | None:
        if self._next is None and not self._exhausted:
            try:
                self._next = next(self._jobs)
            except StopIteration:
                self._exhausted = True
        return self._next

    def _row(self, row: Sequence) -> tuple[float, float, str | int, str]:
        try:
            arrival, cpu = float(row[0]), float(row[1])
        except (TypeError, ValueError, IndexError):
            raise InvalidArgumentError(f"job rows are (arrival_seconds, cpu_seconds[, user, "
                                       f"command]), got {row!r}", field="jobs",
                                       value=row) from None
        if not (math.isfinite(arrival) and math.isfinite(cpu) and cpu >= 0):
            raise InvalidArgumentError(f"job {row!r}: arrival must be finite and cpu_seconds "
                                       "finite and >= 0", field="jobs", value=row)
        if arrival < self._last_arrival:
            raise InvalidArgumentError(f"jobs must be sorted by arrival: {arrival!r} follows "
                                       f"{self._last_arrival!r}", field="jobs", value=row)
        user = row[2] if len(row) > 2 and row[2] not in (None, "") else self.default_user
        command = str(row[3]) if len(row) > 3 and row[3] not in (None, "") else "job"
        return arrival, cpu, user, command

    def _allocate_pid(self) -> int:
        if len(self._active) >= self.pid_max - _FIRST_PID:
            raise InvalidArgumentError(f"more than {self.pid_max - _FIRST_PID} jobs at once: "
                                       "raise pid_max", field="pid_max", value=self.pid_max)
        while True:
            pid = self._next_pid
            self._next_pid = pid + 1 if pid + 1 < self.pid_max else _FIRST_PID
            if pid not in self._active:
                return pid

    def _advance(self, time: float) -> None:
        if time < self._time:
            raise InvalidArgumentError(f"simulated host cannot go back in time ({time!r} < "
                                       f"{self._time!r})", field="time", value=time)
        self._time = time
        uids = self._uid_cache
        while (row := self._peek()) is not None:
            arrival, cpu, user, command = self._row(row)
            if arrival > time:
                break
            self._next = None
            self._last_arrival = arrival
            free_at, core = heapq.heappop(self._free)
            start = max(arrival, free_at)
            # a known name's uid without the public reader's lock: a busy host has thousands
            # of jobs an hour, and this loop is most of a simulated day's CPU
            uid = uids.get(user)
            if uid is None:
                uid = uids[user] = self.uid_of(user)
            job = _Job(self._allocate_pid(), uid, command[:15], arrival, start,
                       cpu / self.speed, core)
            heapq.heappush(self._free, (job.finish, core))
            self._active[job.pid] = job
            heapq.heappush(self._finishing, (job.finish, self.jobs_seen, job.pid))
            self._forks += 1
            self.jobs_seen += 1
        while self._finishing and self._finishing[0][0] <= time:
            _, _, pid = heapq.heappop(self._finishing)
            job = self._active.pop(pid)
            self._finished_busy += job.service
            self._core_finished_busy[job.core] += job.service
            self._records.append(AcctRecord(
                pid=job.pid, ppid=1, uid=job.uid, gid=job.uid, command=job.command,
                begin_time=job.arrival, elapsed_seconds=job.finish - job.arrival,
                user_cpu_seconds=job.service, system_cpu_seconds=0.0))

    def sensor(self, process_filter: ProcessFilter | None = None, *,
               accounting: bool = True) -> HostSensor:
        """A HostSensor reading this host (``accounting=False``: fork-counter fallback)."""
        return HostSensor(processes=self, cpu=self, accounting=self if accounting else None,
                          clock=self.clock, process_filter=process_filter or ProcessFilter())

    def running_sampler(self, process_filter: ProcessFilter | None = None, *,
                        max_jobs: int = 64, min_core_share: float = MIN_CORE_SHARE,
                        hasher: Callable[[str], str] | None = None) -> RunningSampler:
        """Snapshots of the jobs in this host's system (its exact state)."""
        return RunningSampler(self, process_filter or ProcessFilter(), self.clock,
                              self.run_queue_length, max_jobs=max_jobs,
                              min_core_share=min_core_share, hasher=hasher,
                              name_of_uid=self.user_name)

    def template_feeder(self, book: TemplateBook, process_filter: ProcessFilter | None = None,
                        *, hasher: Callable[[str], str] | None = None) -> TemplateFeeder:
        """A feeder with its own cursor over this host's finished jobs (from now on)."""
        return TemplateFeeder(self.open_accounting_cursor(), book,
                              process_filter or ProcessFilter(), name_of_uid=self.user_name,
                              hasher=hasher)

    # -- the three interfaces ---------------------------------------------------------------

    @_locked
    def snapshot(self) -> dict[ProcessKey, ProcessInfo]:
        now = self.clock.now()
        self._advance(now)
        init = ProcessInfo(pid=1, start_ticks=0, ppid=0, uid=0, name="init", state="S",
                           start_time=self.boot_time, cpu_seconds=0.0,
                           children_cpu_seconds=self._finished_busy)
        processes = {init.key: init}
        for job in self._active.values():
            info = ProcessInfo(
                pid=job.pid, start_ticks=round((job.arrival - self.boot_time) * TICKS_PER_SECOND),
                ppid=1, uid=job.uid, name=job.command, state="R", start_time=job.arrival,
                cpu_seconds=job.cpu_at(now), children_cpu_seconds=0.0)
            processes[info.key] = info
        return processes

    def cgroup_paths(self, pid: int) -> tuple[str, ...] | None:
        return None

    def environment_names(self, pid: int) -> frozenset[str] | None:
        return None

    @_locked
    def sample(self) -> CpuSample:
        now = self.clock.now()
        self._advance(now)
        busy = self._finished_busy + sum(job.cpu_at(now) for job in self._active.values())
        return CpuSample(busy_seconds=busy, total_seconds=(now - self.boot_time) * self.cores,
                         cores=self.cores, forks=self._forks)

    @_locked
    def skip_to_end(self) -> AccountingBatch:
        self._advance(self.clock.now())
        self._main_position = self._records_base + len(self._records)
        self._trim_records()
        return AccountingBatch()

    @_locked
    def read_new(self) -> AccountingBatch:
        self._advance(self.clock.now())
        records = self._records[self._main_position - self._records_base:]
        self._main_position += len(records)
        self._trim_records()
        return AccountingBatch(records=records)

    # -- more readers and the other views ----------------------------------------------------

    @_locked
    def open_accounting_cursor(self, *, from_start: bool = False) -> SimulatedAccountingCursor:
        """A second, independent AccountingSource over this host's finished jobs.

        It starts at the end (``from_start``: at the oldest record still held). Records are
        kept until every open cursor has read them, so close cursors no longer read.
        """
        self._advance(self.clock.now())
        cursor = SimulatedAccountingCursor(
            self, self._records_base if from_start else self._records_base + len(self._records))
        self._cursors.append(cursor)
        return cursor

    def _trim_records(self) -> None:
        oldest = min([self._main_position, *(c.position for c in self._cursors)])
        if oldest > self._records_base:
            del self._records[:oldest - self._records_base]
            self._records_base = oldest

    # no remote tasks run here, so none exits uncounted
    unaccounted_exits = 0

    @_locked
    def capacity_sample(self) -> CapacitySample:
        """Exact idle CPU seconds per core since boot (no remote tasks run here)."""
        now = self.clock.now()
        self._advance(now)
        busy = list(self._core_finished_busy)
        for job in self._active.values():
            busy[job.core] += job.cpu_at(now)
        elapsed = now - self.boot_time
        return CapacitySample(now, tuple(elapsed - used for used in busy))

    @_locked
    def run_queue_length(self) -> int:
        """Jobs in the system now (running or waiting for a core)."""
        self._advance(self.clock.now())
        return len(self._active)


class SimulatedAccountingCursor:
    """One reader of a SimulatedHost's accounting records (see open_accounting_cursor)."""

    def __init__(self, host: SimulatedHost, position: int) -> None:
        self.host = host
        self.position = position

    def skip_to_end(self) -> AccountingBatch:
        host = self.host
        with host.lock:
            host._advance(host.clock.now())
            self.position = host._records_base + len(host._records)
            host._trim_records()
        return AccountingBatch()

    def read_new(self) -> AccountingBatch:
        host = self.host
        with host.lock:
            host._advance(host.clock.now())
            records = host._records[self.position - host._records_base:]
            self.position += len(records)
            host._trim_records()
        return AccountingBatch(records=records)

    def close(self) -> None:
        with self.host.lock:
            if self in self.host._cursors:
                self.host._cursors.remove(self)
                self.host._trim_records()


def read_trace_csv(path: str | Path) -> list[tuple]:
    """Job rows from a CSV file: arrival_seconds, cpu_seconds[, user, command] per line.

    A first line whose first field is not a number is taken as a header. Rows are returned
    sorted by arrival (stably).
    """
    rows: list[tuple] = []
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            for number, fields in enumerate(csv.reader(handle), start=1):
                if not fields or not "".join(fields).strip():
                    continue
                try:
                    arrival, cpu = float(fields[0]), float(fields[1])
                except (ValueError, IndexError):
                    if number == 1:
                        continue
                    raise InvalidArgumentError(
                        f"{path}:{number}: expected arrival_seconds,cpu_seconds[,user,command]",
                        field="trace", value=fields) from None
                if not (math.isfinite(arrival) and math.isfinite(cpu) and cpu >= 0):
                    raise InvalidArgumentError(f"{path}:{number}: bad numbers {fields[:2]!r}",
                                               field="trace", value=fields)
                extra = tuple(field.strip() for field in fields[2:4])
                rows.append((arrival, cpu, *extra))
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read trace {str(path)!r}: {exc.strerror}",
                                   field="trace", value=str(path)) from None
    rows.sort(key=lambda row: row[0])
    return rows
