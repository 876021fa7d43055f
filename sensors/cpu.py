"""Kernel CPU times: busy time from ``/proc/stat``, and the CPU a group of processes used.

``rho`` is normally the per-core average busy fraction the kernel reports (user, nice,
system, irq and softirq time over all time, every core summed) minus what excluded processes
(the agent, remote tasks) used. With a user allow list the kernel totals cannot be split by
user, so rho is the CPU the allowed users' processes used, summed process by process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sensors.accounting import AcctRecord
from sensors.errors import ProcUnavailableError
from sensors.processes import ProcessInfo, ProcessKey, Snapshot


@dataclass(frozen=True)
class CpuSample:
    """Cumulative kernel counters at one moment.

    ``busy_seconds`` and ``total_seconds`` are CPU-seconds summed over ``cores`` (total
    includes idle, iowait and steal); ``forks`` counts every task the kernel ever created,
    threads included.
    """

    busy_seconds: float
    total_seconds: float
    cores: int
    forks: int


class CpuSource(Protocol):
    """Where kernel CPU counters come from (``/proc/stat`` or a simulated host)."""

    def sample(self) -> CpuSample:
        ...


class ProcStatSource:
    """Reads ``<proc_root>/stat``."""

    def __init__(self, proc_root: str = "/proc", *, ticks_per_second: int | None = None) -> None:
        self.path = os.path.join(proc_root, "stat")
        self.ticks_per_second = ticks_per_second or os.sysconf("SC_CLK_TCK")

    def sample(self) -> CpuSample:
        try:
            with open(self.path, encoding="ascii") as handle:
                text = handle.read()
        except OSError as exc:
            raise ProcUnavailableError(f"cannot read {self.path}: {exc.strerror}",
                                       field="proc_root", value=self.path) from None
        return parse_proc_stat(text, self.ticks_per_second)


def parse_proc_stat(text: str, ticks_per_second: int) -> CpuSample:
    """A CpuSample from the text of ``/proc/stat``."""
    busy = total = None
    cores = 0
    forks = None
    for line in text.splitlines():
        if line.startswith("cpu "):
            # user nice system idle iowait irq softirq steal guest guest_nice; guest time is
            # already inside user and nice, so it is not added again.
            values = [int(value) for value in line.split()[1:9]]
            values += [0] * (8 - len(values))
            user, nice, system, idle, iowait, irq, softirq, steal = values
            busy = user + nice + system + irq + softirq
            total = busy + idle + iowait + steal
        elif line.startswith("cpu"):
            cores += 1
        elif line.startswith("processes "):
            forks = int(line.split()[1])
    if busy is None or forks is None or cores == 0:
        raise ProcUnavailableError("unexpected /proc/stat format (no cpu or processes line)",
                                   field="proc_root")
    return CpuSample(busy / ticks_per_second, total / ticks_per_second, cores, forks)


def _children_growth(before: Snapshot, info: ProcessInfo) -> float:
    then = before.get(info.key)
    return info.children_cpu_seconds - (then.children_cpu_seconds if then is not None else 0.0)


def _covered(records: Iterable[AcctRecord], reaper_pids: set[int]) -> set[int]:
    """Pids of exited processes reaped, directly or down a chain of exited processes, by one of
    ``reaper_pids`` (their CPU is then inside the reaper's reaped-children time)."""
    pending = list(records)
    covered = set(reaper_pids)
    changed = True
    while changed:
        changed = False
        for record in pending:
            if record.pid not in covered and record.ppid in covered:
                covered.add(record.pid)
                changed = True
    return covered - reaper_pids


def group_cpu_seconds(before: Snapshot, after: Snapshot, members_before: Iterable[ProcessKey],
                      members_after: Iterable[ProcessKey],
                      exited: Iterable[tuple[AcctRecord, ProcessKey | None]] | None) -> float:
    """CPU seconds a group of processes used between two snapshots (>= 0).

    ``members_*``: the group's keys in each snapshot. ``exited``: accounting records of the
    group's processes that exited in between and are not in ``after``, each with its key in
    ``before`` if it was alive then (None: no accounting).

    Live processes count their own CPU growth plus the growth of their reaped-children time:
    both are the kernel's precise (scheduler-clock) figures. An exited process reaped by a
    live group member is thereby counted (only its part before the first snapshot is taken
    off again). Accounting records are used only for exited processes nobody in the group
    reaped: their times are tick samples, which under CPU contention can miss most of a short
    job's CPU. Without records such processes' CPU after the first snapshot is missed.
    """
    members_after = set(members_after)
    exited = None if exited is None else list(exited)
    total = 0.0
    for key in members_after:
        now = after[key]
        then = before.get(key)
        total += now.cpu_seconds - (then.cpu_seconds if then is not None else 0.0)
        total += _children_growth(before, now)
    reapers = {after[key].pid for key in members_after}
    with_record = set() if exited is None else {key for _, key in exited if key is not None}
    for key in set(members_before) - set(after) - with_record:
        gone: ProcessInfo = before[key]
        if gone.ppid in reapers:
            # Its whole lifetime landed in the parent's children time; keep only the part
            # after the first snapshot.
            total -= gone.cpu_seconds + gone.children_cpu_seconds
    if exited is not None:
        covered = _covered((record for record, _ in exited), reapers)
        for record, key in exited:
            then = before[key] if key is not None else None
            if record.pid in covered:
                if then is not None:
                    total -= then.cpu_seconds + then.children_cpu_seconds
            else:
                total += record.cpu_seconds - (then.cpu_seconds if then is not None else 0.0)
    return max(total, 0.0)


def calibrated_exit_cpu(before: Snapshot, after: Snapshot,
                        exited: Sequence[tuple[AcctRecord, ProcessKey | None]]
                        ) -> tuple[list[float], float | None]:
    """CPU seconds of exited processes, their accounting figures corrected where possible.

    Accounting times are tick samples (biased low for short jobs on a busy CPU). For a parent
    alive at the second snapshot, the growth of its reaped-children time is the exact total of
    the children it reaped; the records of those children (and of their own exited children)
    are scaled by one factor so they add up to it. Other records stay as they are.
    ``exited``: every record of the interval not in ``after`` (any user), with its key in
    ``before`` if any. Returns the corrected values in order, and raw total / exact total
    over the scaled groups (None if none could be scaled).
    """
    alive = {info.pid: info for info in after.values()}
    by_pid = {record.pid: record for record, _ in exited}
    groups: dict[int, list[int]] = {}
    for index, (record, _) in enumerate(exited):
        parent, seen = record.ppid, {record.pid}
        while parent not in alive and parent in by_pid and parent not in seen:
            seen.add(parent)
            parent = by_pid[parent].ppid
        if parent in alive:
            groups.setdefault(parent, []).append(index)
    recorded = {key for _, key in exited if key is not None}
    values = [record.cpu_seconds for record, _ in exited]
    raw_total = exact_total = 0.0
    for parent_pid, members in groups.items():
        parent = alive[parent_pid]
        exact = _children_growth(before, parent)
        for key, info in before.items():
            # Children that were already zombies at the first snapshot were reaped in the
            # interval too, but their records predate it.
            if info.ppid == parent_pid and key not in after and key not in recorded:
                exact -= info.cpu_seconds + info.children_cpu_seconds
        raw = math.fsum(values[i] for i in members)
        if exact <= 0:
            continue  # nothing reaped with wait(): keep the records' own figures
        for i in members:
            values[i] = values[i] * exact / raw if raw > 0 else exact / len(members)
        raw_total += raw
        exact_total += exact
    return values, (raw_total / exact_total if exact_total > 0 else None)
