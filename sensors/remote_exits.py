"""Remote tasks' CPU after their last sample, from the kernel's process accounting records.

A capacity sample counts a remote task's CPU by differencing its ``/proc`` counters between
samples. A task that exits between two samples takes the CPU it used since the previous one
with it, and a task that starts and exits between them is never seen at all; unless a live
remote parent reaps it, that CPU then reads as the owners' load. On a real 2-core kernel
with 5 s samples, marked tasks of 2.3 s each lost most of their CPU that way.

The kernel writes one record at every process exit with its pid, parent, uid, start time and
its own CPU (children not included). :class:`RemoteExits` reads the records written since
the last sample, before that sample's process scan (so every record it reads is of a process
that exited before the scan), and credits:

- a remote task seen at an earlier sample and gone since: its record's CPU minus what the
  samples already counted, on the core it last ran on;
- a process never seen whose parent was a remote task that is gone too, or whose user is a
  remote user: its whole CPU, on its parent's last core when that is known.

A process whose parent is a live remote task is left to the parent's reaped-children time,
as before. A gone task whose record has not come yet (it exited between the read and the
scan) waits up to ``WAIT_SAMPLES`` more samples for it. The record keeps CPU time in a
13-bit mantissa (ticks of 1/100 s below 82 s of CPU, then to within 1/8192 to 1/1024 of the
total): a task of 10 CPU hours is credited to within a few seconds.

What this cannot see: a task never seen in a scan that only its cgroup or environment marked
as remote, under a parent that is not one (the record holds neither); and, without
accounting, every exited task's last stretch. The second, and a gone task whose record never
came, are counted in :attr:`RemoteExits.unaccounted`; the first cannot be.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sensors.accounting import AccountingSource, AcctRecord
from sensors.processes import ProcessInfo

# samples a gone remote task waits for its accounting record before it is given up on
WAIT_SAMPLES = 2
# the record keeps its start in whole seconds; /proc's start has its own rounding
START_TOLERANCE_SECONDS = 2.0


@dataclass
class _Waiting:
    info: ProcessInfo
    samples: int = 0


class RemoteExits:
    """Credits remote tasks' CPU at exit from ``accounting`` (None: accounting is off, and
    every gone task's last stretch is given up, as counted in ``unaccounted``)."""

    def __init__(self, accounting: AccountingSource | None,
                 remote_users: Collection[int] = frozenset()) -> None:
        self.accounting = accounting
        self.remote_users = frozenset(remote_users)
        self.unaccounted = 0
        self._waiting: dict[int, _Waiting] = {}
        self._records: list[AcctRecord] = []

    def read(self) -> None:
        """Take the records written since the last read: call just before the scan."""
        if self.accounting is not None:
            self._records = self.accounting.read_new().records

    def credits(self, gone: Mapping[int, ProcessInfo], known: Mapping[int, ProcessInfo],
                live_remote: Collection[int], since_epoch: float) -> list[tuple[int, float]]:
        """(core, CPU seconds) to add for this sample. ``gone``: remote tasks of the previous
        scan missing from this one whose parent is not a live remote task, by pid;
        ``known``: every remote task of the previous and this scan, by pid;
        ``live_remote``: the pids of this scan's remote tasks; ``since_epoch``: the previous
        scan's time (a process never seen is counted whole only if it began after it)."""
        records, self._records = self._records, []
        if self.accounting is None:
            self.unaccounted += len(gone)
            return []
        for pid, info in gone.items():
            self._waiting[pid] = _Waiting(info)
        out: list[tuple[int, float]] = []
        # a parent exits after its children: read newest first, each child meets its
        # parent's verdict (True: counted here; False: a live remote parent reaps it)
        verdicts: dict[int, bool] = {}
        cores: dict[int, int] = {}
        for record in reversed(records):
            waiting = self._waiting.get(record.pid)
            if waiting is not None and abs(
                    waiting.info.start_time - record.begin_time) <= START_TOLERANCE_SECONDS:
                del self._waiting[record.pid]
                verdicts[record.pid], cores[record.pid] = True, waiting.info.processor
                out.append((waiting.info.processor,
                            max(record.cpu_seconds - waiting.info.cpu_seconds, 0.0)))
                continue
            verdict = self._verdict(record, verdicts, known, live_remote)
            if verdict is None:
                continue
            verdicts[record.pid] = verdict
            parent = known.get(record.ppid)
            cores[record.pid] = cores.get(record.ppid, parent.processor if parent else -1)
            # one that began before the previous scan was seen by it, and has been counted
            # up to there: a record that comes after its wait was given up
            if verdict and record.begin_time >= since_epoch - START_TOLERANCE_SECONDS / 2:
                out.append((cores[record.pid], record.cpu_seconds))
        for pid in list(self._waiting):
            entry = self._waiting[pid]
            entry.samples += 1
            if entry.samples > WAIT_SAMPLES:
                del self._waiting[pid]
                self.unaccounted += 1
        return out

    def _verdict(self, record: AcctRecord, verdicts: Mapping[int, bool],
                 known: Mapping[int, ProcessInfo], live_remote: Collection[int]) -> bool | None:
        """True: a never-seen remote process to count whole; False: a live remote parent's
        reaped time holds it; None: not a remote task."""
        if record.ppid in live_remote:
            return False
        if record.ppid in verdicts:
            return verdicts[record.ppid]
        if record.ppid in self._waiting:
            return True
        if record.ppid in known:
            # gone without waiting for its record: a live remote parent reaped it, and
            # with it (if it waited for them) its children
            return False
        return True if record.uid in self.remote_users else None
