"""Remote tasks that exit between capacity samples, credited from their accounting records:
a recorded /proc and a real accounting file written record by record."""

from __future__ import annotations

import pytest
from procfs_cores import BOOT, HZ, CoreProc

from sensors.accounting import AccountingReader, AcctRecord, encode_record
from sensors.capacity import CapacityRecorder, ProcCapacitySource
from sensors.clock import VirtualClock
from sensors.processes import ProcfsProcessSource, build_filter
from sensors.remote_exits import WAIT_SAMPLES

T0 = float(BOOT + 1000)
REMOTE, OWNER = 1001, 1000


class Recorded:
    """A recorded /proc with two idle-counting cores and an accounting file beside it."""

    def __init__(self, tmp_path, accounting=True, **rules):
        self.clock = VirtualClock(T0)
        (tmp_path / "proc").mkdir()
        self.proc = CoreProc(tmp_path / "proc", cores={0: [0] * 8, 1: [0] * 8})
        self.proc.add(1, uid=0, name="init", ppid=0, start=0)
        self.proc.add(90, uid=0, name="batchd", ppid=1, start=0)
        self.proc.write()
        self.acct = tmp_path / "pacct"
        self.acct.write_bytes(b"")
        reader = AccountingReader(str(self.acct)) if accounting else None
        processes = ProcfsProcessSource(str(tmp_path / "proc"), ticks_per_second=HZ,
                                        boot_time=BOOT)
        rules.setdefault("remote_users", [REMOTE])
        self.source = ProcCapacitySource(processes, build_filter(**rules), self.clock,
                                         str(tmp_path / "proc"), ticks_per_second=HZ,
                                         accounting=reader)
        self.recorder = CapacityRecorder(self.source, self.clock, 10.0)
        self.recorder.step()

    def exited(self, pid, ppid, cpu_seconds, *, uid=REMOTE, start_ticks=100):
        """Append the kernel's record of a process that exits in the next step's interval
        (5 s into it)."""
        begin = BOOT + start_ticks / HZ
        record = AcctRecord(pid=pid, ppid=ppid, uid=uid, gid=uid, command="job",
                            begin_time=begin, elapsed_seconds=self.clock.now() + 5.0 - begin,
                            user_cpu_seconds=cpu_seconds, system_cpu_seconds=0.0)
        with open(self.acct, "ab") as handle:
            handle.write(encode_record(record))

    def step(self, idle_ticks=(400, 1000)):
        """10 s on, the cores idle for ``idle_ticks``; the interval's capacity per core."""
        self.clock.advance(10.0)
        for core, ticks in enumerate(idle_ticks):
            self.proc.cores[core][3] += ticks
        self.proc.write()
        return self.recorder.step().per_core_available_cpu_seconds


def test_a_remote_task_that_exits_between_samples_is_credited_its_last_stretch(tmp_path):
    host = Recorded(tmp_path)
    host.proc.add(200, uid=REMOTE, name="grid", utime=100, processor=0)
    host.proc.write()
    assert host.step() == pytest.approx((4.0, 10.0))  # its first second: the baseline
    del host.proc.tasks[200]
    host.exited(200, 90, 1.0 + 3.0)  # 3 s more, then it exited before the sample
    assert host.step() == pytest.approx((4.0 + 3.0, 10.0))
    assert host.source.unaccounted_exits == 0


def test_without_accounting_the_last_stretch_is_lost_and_counted(tmp_path):
    host = Recorded(tmp_path, accounting=False)
    host.proc.add(200, uid=REMOTE, name="grid", utime=100, processor=0)
    host.proc.write()
    host.step()
    del host.proc.tasks[200]
    host.exited(200, 90, 4.0)
    assert host.step() == pytest.approx((4.0, 10.0))
    assert host.source.unaccounted_exits == 1


def test_never_seen_children_count_whole_unless_a_live_remote_parent_reaps_them(tmp_path):
    host = Recorded(tmp_path, remote_users=[], remote_marker="GHS_REMOTE_TASK")
    marked = ("GHS_REMOTE_TASK=1",)
    host.proc.add(200, uid=OWNER, ppid=90, name="task", processor=1, environ=marked)
    host.proc.add(300, uid=OWNER, ppid=90, name="shell", processor=0, environ=marked)
    host.proc.write()
    host.step()
    # 200 ran a step of 2 s that exited before 200 itself did (both never sampled again);
    # 300 lives on and reaped its own 1.5 s child, which its reaped time shows
    host.exited(201, 200, 2.0, uid=OWNER, start_ticks=round((T0 + 12 - BOOT) * HZ))
    host.exited(301, 300, 1.5, uid=OWNER, start_ticks=round((T0 + 13 - BOOT) * HZ))
    host.exited(200, 90, 0.5, uid=OWNER)
    del host.proc.tasks[200]
    host.proc.tasks[300].cutime = 150
    assert host.step() == pytest.approx((4.0 + 1.5, 10.0 + 2.0 + 0.5))
    # an owner's process that lived between samples is theirs: nothing credited
    host.exited(400, 90, 5.0, uid=OWNER, start_ticks=round((T0 + 22 - BOOT) * HZ))
    assert host.step() == pytest.approx((4.0, 10.0))


def test_a_remote_users_process_never_seen_counts_and_a_gone_child_of_a_live_task_once(
        tmp_path):
    host = Recorded(tmp_path)
    host.proc.add(200, uid=REMOTE, ppid=90, name="starter", processor=0)
    host.proc.add(201, uid=REMOTE, ppid=200, name="step", utime=100, processor=1)
    host.proc.write()
    host.step()
    # a remote user's job under the (local) batch daemon, started and ended in the interval
    host.exited(500, 90, 2.5, start_ticks=round((T0 + 11 - BOOT) * HZ))
    # the child ran 1 s more and was reaped by its live parent: its reaped time holds it
    host.exited(201, 200, 2.0)
    del host.proc.tasks[201]
    host.proc.tasks[200].cutime = 200
    per_core = host.step()
    assert sum(per_core) == pytest.approx(14.0 + 2.5 + 1.0)


def test_a_record_written_after_the_read_is_credited_a_sample_later_or_given_up(tmp_path):
    host = Recorded(tmp_path)
    host.proc.add(200, uid=REMOTE, name="grid", utime=100, processor=1)
    host.proc.add(210, uid=REMOTE, name="grid", utime=100, processor=1, start=200)
    host.proc.write()
    host.step()
    del host.proc.tasks[200], host.proc.tasks[210]
    assert host.step() == pytest.approx((4.0, 10.0))  # gone, no record read yet
    host.exited(200, 90, 1.0 + 6.0)
    assert host.step() == pytest.approx((4.0, 10.0 + 6.0))
    for _ in range(WAIT_SAMPLES):
        host.step()
    assert host.source.unaccounted_exits == 1  # 210's record never came
    # when it comes after all, it is not taken for a process that lived between samples
    host.exited(210, 90, 9.0, start_ticks=200)
    assert host.step() == pytest.approx((4.0, 10.0))
