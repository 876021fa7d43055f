"""One measurement of a host over [t1, t2] (SPEC section 5).

At each end the sensor reads, in this order, the clock, the kernel CPU counters, a process
snapshot and the accounting file (after the snapshot, so a process exiting during the scan is
either in the snapshot or in the records, and duplicates are dropped by key). Then:

- ``J_start``: local processes alive at t2 that were not alive at t1;
- ``J_between``: local processes that started and exited inside the interval (accounting
  records not matching a process alive at t1 or t2);
- ``lam = (|J_between| + |J_start|) / (t2 - t1)``;
- service statistics (count, sum, sum of squares of CPU seconds) of the local jobs that exited
  in the interval, wherever they started;
- ``rho``: see :mod:`sensors.cpu`.

Accounting records carry tick-sampled CPU times. On kernels with tick-based CPU accounting a
short job competing for its CPU is often not the one running when the tick fires, so its
record can show a fraction of its real CPU (about a quarter on the project's test machine
with two busy loops beside it). The kernel's precise total of the children a still-running
parent reaped is therefore used to rescale those children's records
(:func:`sensors.cpu.calibrated_exit_cpu`); the quality flag ``accounting_cpu_rescaled:<r>``
gives raw over exact when they differ by more than 10 %. The mean is then right; the spread of
very short jobs' times on a busy CPU stays noisy.

Without accounting, ``J_between`` is estimated from the kernel fork counter as the tasks
created minus those seen alive at t2. The counter covers every user and counts threads, so
this fallback over-counts by the other users' and threads' creations; the quality flags say
so, and there are no service statistics (mu then comes from the utilisation law,
``mu = arrivals / busy CPU seconds``, and sigma is unknown).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from sensors.accounting import AccountingBatch, AccountingSource, AcctRecord
from sensors.clock import Clock
from sensors.cpu import CpuSample, CpuSource, calibrated_exit_cpu, group_cpu_seconds
from sensors.errors import InvalidArgumentError
from sensors.processes import (
    Classified,
    ProcessClassifier,
    ProcessFilter,
    ProcessInfo,
    ProcessKey,
    ProcessSource,
)

_KTHREADD_PID = 2
_START_TOLERANCE_SECONDS = 2.5  # both sides are truncated to whole seconds


@dataclass(frozen=True)
class Measurement:
    """One interval's observation. Times in epoch seconds; rates per second.

    ``service_*``: sufficient statistics of CPU seconds of local jobs that exited in the
    interval. ``busy_cpu_seconds``: CPU-seconds of local load (rho times capacity).
    ``lambda_source``: "accounting" or "fork_counter"; ``rho_source``: "kernel" or
    "processes". ``quality``: flags, empty when nothing was doubtful.
    """

    start_time: float
    end_time: float
    interval_seconds: float
    lam: float
    rho: float
    jobs_started: int
    jobs_between: int
    service_count: int
    service_sum_seconds: float
    service_sum_squares: float
    busy_cpu_seconds: float
    running: int
    cores: int
    lambda_source: str
    rho_source: str
    quality: tuple[str, ...] = field(default=())

    @property
    def arrivals(self) -> int:
        return self.jobs_started + self.jobs_between

    @property
    def mean_service_seconds(self) -> float | None:
        """Mean CPU demand: from accounting, else arrivals over busy CPU (utilisation law)."""
        if self.service_count > 0:
            return self.service_sum_seconds / self.service_count
        if self.lambda_source == "fork_counter" and self.arrivals > 0:
            return self.busy_cpu_seconds / self.arrivals
        return None

    @property
    def mu(self) -> float | None:
        """Service rate, jobs per CPU-second (None if unknown or infinite)."""
        mean = self.mean_service_seconds
        return None if mean is None or mean <= 0 else 1.0 / mean

    @property
    def sigma(self) -> float | None:
        """Sample std dev of CPU demand in seconds (needs at least two exited jobs)."""
        n = self.service_count
        if n < 2:
            return None
        variance = (self.service_sum_squares - self.service_sum_seconds ** 2 / n) / (n - 1)
        return math.sqrt(max(variance, 0.0))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form: the stored fields plus mu, sigma, mean service time."""
        data = asdict(self)
        data["quality"] = list(self.quality)
        data["mu"] = self.mu
        data["sigma"] = self.sigma
        data["mean_service_seconds"] = self.mean_service_seconds
        return data


@dataclass(frozen=True)
class Boundary:
    """What the sensor saw at one end of an interval."""

    wall_time: float
    monotonic_time: float
    cpu: CpuSample
    processes: dict[ProcessKey, ProcessInfo]
    classified: Classified
    accounting: AccountingBatch | None


class HostSensor:
    """Measures one host through injected sources (procfs or a simulated host).

    ``accounting`` None means the fork-counter fallback; ``accounting_flags`` are added to
    every measurement's quality (e.g. "accounting_shared").
    """

    def __init__(self, *, processes: ProcessSource, cpu: CpuSource,
                 accounting: AccountingSource | None, clock: Clock,
                 process_filter: ProcessFilter, accounting_flags: tuple[str, ...] = ()) -> None:
        self.processes = processes
        self.cpu = cpu
        self.accounting = accounting
        self.clock = clock
        self.filter = process_filter
        self.classifier = ProcessClassifier(process_filter, processes)
        self.accounting_flags = tuple(accounting_flags)

    def measure(self, interval_seconds: float) -> Measurement:
        """Observe the host for ``interval_seconds`` (sleeping on the clock) and report."""
        if not (isinstance(interval_seconds, (int, float)) and math.isfinite(interval_seconds)
                and interval_seconds > 0):
            raise InvalidArgumentError(f"interval must be a positive number of seconds, got "
                                       f"{interval_seconds!r}", field="interval_seconds",
                                       value=interval_seconds)
        start = self.begin()
        self.clock.sleep(interval_seconds - (self.clock.monotonic() - start.monotonic_time))
        return self.end(start)

    def begin(self) -> Boundary:
        """Read everything at t1 (accounting is positioned at its end)."""
        return self._boundary(first=True)

    def end(self, start: Boundary) -> Measurement:
        """Read everything at t2 and compute the measurement over [t1, t2]."""
        return self._compute(start, self._boundary(first=False))

    def _boundary(self, *, first: bool) -> Boundary:
        wall, mono = self.clock.now(), self.clock.monotonic()
        cpu = self.cpu.sample()
        snapshot = self.processes.snapshot()
        batch = None
        if self.accounting is not None:
            batch = self.accounting.skip_to_end() if first else self.accounting.read_new()
        return Boundary(wall, mono, cpu, snapshot, self.classifier.classify(snapshot), batch)

    def _compute(self, a: Boundary, b: Boundary) -> Measurement:
        seconds = b.monotonic_time - a.monotonic_time
        if seconds <= 0:
            raise InvalidArgumentError("measurement interval has no length (clock did not move)",
                                       field="interval_seconds", value=seconds)
        quality: list[str] = list(self.accounting_flags)
        if abs((b.wall_time - a.wall_time) - seconds) > 1.0:
            quality.append("clock_jump")
        j1, j2 = a.processes, b.processes
        jobs_started = len(b.classified.local - j1.keys())
        service = [0, 0.0, 0.0]
        if b.accounting is not None:
            records = _Matched(a, b, self.filter)
            quality += _batch_flags(a.accounting, b.accounting)
            jobs_between = records.between
            exact, ratio = calibrated_exit_cpu(j1, j2, records.exited)
            if ratio is not None and abs(ratio - 1.0) > 0.1:
                quality.append(f"accounting_cpu_rescaled:{ratio:.2f}")
            local_exited: list[tuple[AcctRecord, ProcessKey | None]] | None = []
            other_exited: list[tuple[AcctRecord, ProcessKey | None]] | None = []
            times = list(records.service_alive)
            for (record, key), is_local, cpu in zip(records.exited, records.local, exact,
                                                    strict=True):
                record = record.with_cpu_seconds(cpu)
                (local_exited if is_local else other_exited).append((record, key))
                if is_local:
                    times.append(cpu)
            service = [len(times), math.fsum(times), math.fsum(x * x for x in times)]
            lambda_source = "accounting"
        else:
            new_tasks = len(j2.keys() - j1.keys())
            jobs_between = max(0, b.cpu.forks - a.cpu.forks - new_tasks)
            local_exited = other_exited = None
            lambda_source = "fork_counter"
            quality.append("fork_counter")
            if self.filter.users_allow or self.filter.users_deny or self.filter.remote_users:
                quality.append("lambda_unfiltered")
            if jobs_started + jobs_between:
                quality.append("service_from_utilisation")
        capacity = b.cpu.total_seconds - a.cpu.total_seconds
        if capacity <= 0:
            capacity = seconds * b.cpu.cores
        if self.filter.users_allow:
            rho_source = "processes"
            busy = group_cpu_seconds(j1, j2, a.classified.local, b.classified.local,
                                     local_exited)
        else:
            rho_source = "kernel"
            busy = (b.cpu.busy_seconds - a.cpu.busy_seconds) - group_cpu_seconds(
                j1, j2, a.classified.other, b.classified.other, other_exited)
        rho = busy / capacity
        if rho < -0.01 or rho > 1.01:
            quality.append("rho_clamped")
        rho = min(max(rho, 0.0), 1.0)
        return Measurement(
            start_time=a.wall_time, end_time=b.wall_time, interval_seconds=seconds,
            lam=(jobs_started + jobs_between) / seconds, rho=rho, jobs_started=jobs_started,
            jobs_between=jobs_between, service_count=int(service[0]),
            service_sum_seconds=float(service[1]), service_sum_squares=float(service[2]),
            busy_cpu_seconds=rho * capacity,
            running=sum(1 for key in b.classified.local if j2[key].state == "R"),
            cores=b.cpu.cores, lambda_source=lambda_source, rho_source=rho_source,
            quality=tuple(dict.fromkeys(quality)))


def _batch_flags(*batches: AccountingBatch | None) -> list[str]:
    flags: list[str] = []
    corrupt = sum(batch.corrupt_records for batch in batches if batch is not None)
    if corrupt:
        flags.append(f"accounting_corrupt_records:{corrupt}")
    if any(batch.truncated for batch in batches if batch is not None):
        flags.append("accounting_truncated")
    if any(batch.rotated for batch in batches if batch is not None):
        flags.append("accounting_rotated")
    return flags


class _Matched:
    """The interval's accounting records matched to the two snapshots and classified.

    ``exited``: (record, key at t1 or None) of records not alive at t2, ``local`` saying for
    each whether it is local load; ``service_alive``: CPU of local records of processes still
    in the t2 snapshot (exited during the scan); ``between``: local jobs that started and
    exited inside the interval.
    """

    def __init__(self, a: Boundary, b: Boundary, rules: ProcessFilter) -> None:
        assert b.accounting is not None
        by_pid_1 = {info.pid: info for info in a.processes.values()}
        by_pid_2 = {info.pid: info for info in b.processes.values()}
        excluded = set(a.classified.excluded_pids | b.classified.excluded_pids)
        excluded |= rules.exclude_pids
        self.between = 0
        self.service_alive: list[float] = []
        self.exited: list[tuple[AcctRecord, ProcessKey | None]] = []
        self.local: list[bool | None] = []
        for record in b.accounting.records:
            if record.pid == _KTHREADD_PID or record.ppid == _KTHREADD_PID:
                continue
            then = _match(record, by_pid_1)
            now = _match(record, by_pid_2)
            known = then if then is not None else now
            if known is not None and known.kernel_thread:
                continue
            if now is not None:
                if now.key in b.classified.local:
                    self.service_alive.append(record.cpu_seconds)
                continue  # counted through the t2 snapshot
            self.exited.append((record, then.key if then is not None else None))
            self.local.append(None if then is None else then.key in a.classified.local)
        # Children inherit exclusion; a child's record usually precedes its parent's, so
        # resolve the excluded parent chain to a fixed point first.
        changed = True
        while changed:
            changed = False
            for (record, _), verdict in zip(self.exited, self.local, strict=True):
                if verdict is None and record.pid not in excluded and (
                        record.ppid in excluded or record.uid in rules.remote_users):
                    excluded.add(record.pid)
                    changed = True
        for index, ((record, _), verdict) in enumerate(zip(self.exited, self.local,
                                                           strict=True)):
            if verdict is None:
                verdict = record.pid not in excluded and rules.user_counts(record.uid)
                self.between += verdict
                self.local[index] = verdict


def _match(record: AcctRecord, by_pid: dict[int, ProcessInfo]) -> ProcessInfo | None:
    info = by_pid.get(record.pid)
    if info is not None and abs(info.start_time - record.begin_time) <= _START_TOLERANCE_SECONDS:
        return info
    return None
