"""Snapshots, the local-load filter, kernel counters and one measurement, on a fake /proc."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sensors.accounting import AccountingBatch, AcctRecord
from sensors.clock import VirtualClock
from sensors.cpu import ProcStatSource, parse_proc_stat
from sensors.errors import InvalidArgumentError, ProcUnavailableError
from sensors.measurement import HostSensor
from sensors.processes import ProcessClassifier, ProcfsProcessSource, build_filter

BOOT = 1_700_000_000
HZ = 100
_PF_KTHREAD = 0x00200000


@dataclass
class Proc:
    pid: int
    ppid: int = 1
    uid: int = 1000
    name: str = "job"
    state: str = "S"
    start: int = 100  # ticks since boot
    utime: int = 0
    stime: int = 0
    cutime: int = 0
    cstime: int = 0
    kernel: bool = False
    cgroup: str = "/user.slice"
    environ: tuple[str, ...] = ("PATH=/bin",)


@dataclass
class FakeProc:
    """A /proc tree the tests rewrite between the two ends of a measurement."""

    root: Path
    procs: dict[int, Proc] = field(default_factory=dict)
    busy_ticks: int = 0
    idle_ticks: int = 0
    forks: int = 1000
    cores: int = 2

    def add(self, pid: int, **fields) -> Proc:
        self.procs[pid] = Proc(pid, **fields)
        return self.procs[pid]

    def write(self) -> None:
        for entry in self.root.iterdir():
            if entry.name.isdigit():
                shutil.rmtree(entry)
        per_core = [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(self.cores)]
        (self.root / "stat").write_text(
            f"cpu  {self.busy_ticks} 0 0 {self.idle_ticks} 0 0 0 0 0 0\n"
            + "\n".join(per_core) + f"\nintr 0\nbtime {BOOT}\nprocesses {self.forks}\n")
        for p in self.procs.values():
            base = self.root / str(p.pid)
            base.mkdir()
            flags = _PF_KTHREAD if p.kernel else 0x400000
            (base / "stat").write_text(
                f"{p.pid} ({p.name}) {p.state} {p.ppid} 1 1 0 -1 {flags} 0 0 0 0 {p.utime} "
                f"{p.stime} {p.cutime} {p.cstime} 20 0 1 0 {p.start} 0 0\n")
            (base / "status").write_text(f"Name:\t{p.name}\nUid:\t{p.uid}\t{p.uid}\t0\t0\n")
            (base / "cgroup").write_text(f"0::{p.cgroup}\n")
            (base / "environ").write_bytes(b"\0".join(e.encode() for e in p.environ) + b"\0")

    def tick(self, busy: int, idle: int) -> None:
        self.busy_ticks += busy
        self.idle_ticks += idle


class ListAccounting:
    """An accounting source the test feeds records to."""

    def __init__(self) -> None:
        self.pending: list[AcctRecord] = []

    def skip_to_end(self) -> AccountingBatch:
        self.pending = []
        return AccountingBatch()

    def read_new(self) -> AccountingBatch:
        records, self.pending = self.pending, []
        return AccountingBatch(records=records, corrupt_records=1)


def exited(pid: int, *, start: int, cpu: float, uid: int = 1000, ppid: int = 1) -> AcctRecord:
    return AcctRecord(pid=pid, ppid=ppid, uid=uid, gid=uid, command="x",
                      begin_time=float(BOOT + start // HZ), elapsed_seconds=1.0,
                      user_cpu_seconds=cpu, system_cpu_seconds=0.0)


@pytest.fixture
def proc(tmp_path) -> FakeProc:
    fake = FakeProc(tmp_path)
    fake.write()
    return fake


def source(proc: FakeProc) -> ProcfsProcessSource:
    return ProcfsProcessSource(str(proc.root), ticks_per_second=HZ)


def test_snapshot_parses_stat_and_status_and_keys_by_pid_and_start(proc):
    proc.add(10, name="my (odd) cmd", uid=1234, ppid=7, state="R", start=250, utime=150,
             stime=50, cutime=30, cstime=20)
    proc.add(11, start=999, kernel=True, name="kworker/0:1")
    proc.write()
    snap = source(proc).snapshot()
    info = snap[(10, 250)]
    assert (info.name, info.uid, info.ppid, info.state) == ("my (odd) cmd", 1234, 7, "R")
    assert info.cpu_seconds == pytest.approx(2.0)
    assert info.children_cpu_seconds == pytest.approx(0.5)
    assert info.start_time == pytest.approx(BOOT + 2.5)
    assert not info.kernel_thread and snap[(11, 999)].kernel_thread


def test_vanished_and_garbled_processes_are_skipped(proc):
    proc.add(10)
    proc.add(11)
    proc.add(12)
    proc.write()
    (proc.root / "11" / "stat").unlink()  # exited between listdir and open
    (proc.root / "12" / "stat").write_text("garbage")
    assert list(source(proc).snapshot()) == [(10, 100)]


def test_missing_proc_root_is_a_clear_error(tmp_path):
    with pytest.raises(ProcUnavailableError, match="not a directory"):
        ProcfsProcessSource(str(tmp_path / "nope"))


def test_parse_proc_stat_sums_busy_time_over_cores():
    text = ("cpu  100 20 30 800 40 5 5 10 7 0\ncpu0 0\ncpu1 0\ncpu2 0\n"
            "processes 4242\nbtime 1\n")
    sample = parse_proc_stat(text, HZ)
    assert sample.busy_seconds == pytest.approx(1.60)  # user nice system irq softirq
    assert sample.total_seconds == pytest.approx(10.10)  # + idle iowait steal
    assert (sample.cores, sample.forks) == (3, 4242)
    with pytest.raises(ProcUnavailableError):
        parse_proc_stat("intr 0\n", HZ)


def test_filter_excludes_agent_descendants_remote_tasks_and_user_lists(proc):
    proc.add(1, ppid=0, uid=0, name="init")
    proc.add(2, ppid=0, uid=0, kernel=True, name="kthreadd")
    proc.add(3, ppid=2, uid=0, kernel=True, name="kworker")
    proc.add(100, uid=1000)  # an ordinary local job
    proc.add(200, uid=0, name="agent")
    proc.add(201, ppid=200, uid=1000)  # started by the agent
    proc.add(202, ppid=201, uid=1000)  # and its grandchild
    proc.add(300, uid=2000)  # remote user
    proc.add(400, cgroup="/ghs/remote/task1")
    proc.add(401, cgroup="/ghs/remote2")  # similar prefix, not the remote cgroup
    proc.add(500, environ=("PATH=/bin", "GHS_REMOTE_TASK=1"))
    proc.add(600, uid=3000)  # denied user
    proc.write()
    src = source(proc)
    rules = build_filter(users_deny=["3000"], remote_users=[2000], remote_cgroup="/ghs/remote",
                         remote_marker="GHS_REMOTE_TASK", exclude_pids=[200])
    classified = ProcessClassifier(rules, src).classify(src.snapshot())
    local = {pid for pid, _ in classified.local}
    other = {pid for pid, _ in classified.other}
    assert local == {1, 100, 401}
    assert other == {200, 201, 202, 300, 400, 500, 600}
    assert classified.excluded_pids == {200, 201, 202, 300, 400, 500}

    allow = build_filter(users_allow=[1000], exclude_pids=[200])
    classified = ProcessClassifier(allow, src).classify(src.snapshot())
    assert {pid for pid, _ in classified.local} == {100, 400, 401, 500}


def test_filter_validation():
    with pytest.raises(InvalidArgumentError, match="unknown user"):
        build_filter(users_allow=["no-such-user-ghs-test"])
    with pytest.raises(InvalidArgumentError, match="absolute"):
        build_filter(remote_cgroup="relative/path")
    with pytest.raises(InvalidArgumentError):
        build_filter(remote_marker="A=B")
    assert build_filter(users_allow=["root", "12"]).users_allow == {0, 12}


def scenario(proc: FakeProc, tick_share: float = 1.0):
    """t1 state of the measurement scenario; returns a function that moves it to t2.

    ``tick_share``: the fraction of their CPU the accounting records show (tick sampling on
    a busy CPU misses some); the kernel's per-process times stay exact.
    """
    proc.add(1, ppid=0, uid=0, name="init")
    proc.add(2, ppid=0, uid=0, kernel=True, name="kthreadd")
    proc.add(100, uid=1000, name="editor", start=50, utime=500)
    proc.add(200, uid=0, name="agent", start=60, utime=50)
    proc.add(201, ppid=200, uid=1000, start=70, utime=30)
    proc.add(300, uid=2000, name="remote", start=80, utime=100)
    proc.add(400, ppid=100, uid=1000, name="make", start=90_000, utime=20)
    proc.write()

    def to_t2(accounting: ListAccounting | None) -> None:
        proc.procs[100].utime += 300  # 3.0 s local
        proc.procs[100].cutime += 120  # reaped 400 (0.8 s) and 600 (0.4 s)
        proc.procs[200].utime += 10  # 0.1 s agent
        proc.procs[201].utime += 40  # 0.4 s agent's child
        proc.procs[201].cutime += 30  # reaped 601 (0.3 s)
        proc.procs[1].cutime += 20  # init reaped the orphan 602 (0.2 s)
        proc.procs[300].utime += 200  # 2.0 s remote
        del proc.procs[400]
        proc.add(500, uid=1000, start=100_000, utime=150)  # J_start, 1.5 s
        proc.add(800, uid=1000, state="Z", start=100_500, utime=10)  # exited during the scan
        proc.forks += 10
        proc.tick(busy=12_000, idle=0)  # 120 CPU-seconds busy of 2 cores x 60 s
        proc.write()
        if accounting is not None:
            accounting.pending = [
                exited(400, start=90_000, cpu=0.8 * tick_share, ppid=100),  # alive at t1
                exited(600, start=100_100, cpu=0.4 * tick_share, ppid=100),  # J_between
                exited(601, start=100_200, cpu=0.3, ppid=201),  # the agent's grandchild
                exited(602, start=100_300, cpu=0.2, uid=2000),  # remote user
                exited(700, start=100_400, cpu=0.1, ppid=2, uid=0),  # kernel thread
                exited(800, start=100_500, cpu=0.1),  # also in the t2 snapshot
            ]

    return to_t2


def run(proc: FakeProc, to_t2, *, accounting: bool, **rules):
    clock = VirtualClock(BOOT + 1000.0)
    feed = ListAccounting() if accounting else None
    sensor = HostSensor(processes=source(proc), cpu=ProcStatSource(str(proc.root),
                                                                   ticks_per_second=HZ),
                        accounting=feed, clock=clock,
                        process_filter=build_filter(exclude_pids=[200], remote_users=[2000],
                                                    **rules),
                        accounting_flags=("accounting_shared",))
    start = sensor.begin()
    clock.advance(60.0)
    to_t2(feed)
    return sensor.end(start)


def test_measurement_with_accounting_counts_jobs_and_service_exactly(proc):
    m = run(proc, scenario(proc), accounting=True)
    assert (m.jobs_started, m.jobs_between) == (2, 1)  # {500, 800} and {600}
    assert m.lam == pytest.approx(3 / 60)
    assert m.lambda_source == "accounting" and m.rho_source == "kernel"
    assert m.service_count == 3  # 400, 600 and 800 exited; the rest are excluded
    assert m.service_sum_seconds == pytest.approx(0.8 + 0.4 + 0.1)
    assert m.service_sum_squares == pytest.approx(0.64 + 0.16 + 0.01)
    # kernel busy 120 s minus agent 0.1 + its child 0.4 + grandchild 0.3 + remote 2.0 + 0.2
    assert m.rho == pytest.approx((120 - 3.0) / 120)
    assert m.interval_seconds == 60 and m.cores == 2
    assert m.quality == ("accounting_shared", "accounting_corrupt_records:1")
    assert m.mu == pytest.approx(3 / 1.3)
    assert m.sigma == pytest.approx(0.35118845842842)


def test_tick_sampled_record_times_are_scaled_to_the_parents_exact_children_time(proc):
    m = run(proc, scenario(proc, tick_share=0.25), accounting=True, users_allow=[1000])
    assert m.service_sum_seconds == pytest.approx(0.8 + 0.4 + 0.1)  # 800 is not rescaled
    assert m.service_sum_squares == pytest.approx(0.64 + 0.16 + 0.01)
    # over every reaping parent: records 0.2 + 0.1 + 0.3 + 0.2 of exact 1.2 + 0.3 + 0.2
    assert "accounting_cpu_rescaled:0.47" in m.quality
    assert m.rho == pytest.approx((3.0 + 1.5 + 0.1 + 0.6 + 0.4) / 120)


def test_allow_list_sums_the_allowed_processes_cpu_with_and_without_accounting(proc):
    to_t2 = scenario(proc)
    with_records = run(proc, to_t2, accounting=True, users_allow=[1000])
    # editor 3.0 + new 1.5 + zombie 0.1 + make (0.8 - 0.2 before t1) + between 0.4
    expected = (3.0 + 1.5 + 0.1 + 0.6 + 0.4) / 120
    assert with_records.rho_source == "processes"
    assert with_records.rho == pytest.approx(expected)


def test_allow_list_without_accounting_uses_reaped_children_time(proc):
    to_t2 = scenario(proc)
    m = run(proc, to_t2, accounting=False, users_allow=[1000])
    assert m.rho == pytest.approx((3.0 + 1.5 + 0.1 + 1.2 - 0.2) / 120)


def test_fork_counter_fallback_estimates_jobs_between_and_says_so(proc):
    m = run(proc, scenario(proc), accounting=False)
    assert m.jobs_started == 2
    assert m.jobs_between == 10 - 2  # forks minus the new tasks alive at t2
    assert m.lambda_source == "fork_counter"
    assert "fork_counter" in m.quality and "lambda_unfiltered" in m.quality
    assert m.service_count == 0 and m.sigma is None
    # without records the orphan 602 (reaped by init) is invisible; 601 is in 201's time
    assert m.rho == pytest.approx((120 - 0.1 - 0.4 - 0.3 - 2.0) / 120)
    assert m.mean_service_seconds == pytest.approx(m.busy_cpu_seconds / 10)
    assert m.to_dict()["mu"] == pytest.approx(10 / m.busy_cpu_seconds)


def test_measure_sleeps_the_interval_on_the_clock_and_validates_it(proc):
    scenario(proc)
    clock = VirtualClock(BOOT + 10.0)
    sensor = HostSensor(processes=source(proc), cpu=ProcStatSource(str(proc.root)),
                        accounting=None, clock=clock, process_filter=build_filter())
    m = sensor.measure(30.0)
    assert m.interval_seconds == 30.0 and m.end_time == BOOT + 40.0
    for bad in (0, -1, float("nan")):
        with pytest.raises(InvalidArgumentError):
            sensor.measure(bad)


def test_recent_snapshot_serves_readers_together_with_one_scan():
    from sensors.processes import RecentSnapshot

    class Counting:
        scans = 0

        def snapshot(self):
            Counting.scans += 1
            return {("k", Counting.scans): Counting.scans}

        def cgroup_paths(self, pid):
            return ("/user.slice",)

        def environment_names(self, pid):
            return frozenset({"X"})

    now = [100.0]
    shared = RecentSnapshot(Counting(), 1.0, lambda: now[0])
    first = shared.snapshot()
    now[0] += 0.5
    assert shared.snapshot() is first and Counting.scans == 1
    now[0] += 0.6
    assert shared.snapshot() is not first and Counting.scans == 2
    assert shared.cgroup_paths(1) == ("/user.slice",)
    assert shared.environment_names(1) == frozenset({"X"})
