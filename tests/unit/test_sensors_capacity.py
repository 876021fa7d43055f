"""Harvestable capacity: recorded /proc files, the simulated host's exact value, the recorder."""

from __future__ import annotations

import random
import threading

import pytest
from procfs_cores import BOOT, HZ, CoreProc

from sensors.capacity import (
    CapacityInterval,
    CapacityRecorder,
    CapacitySample,
    ProcCapacitySource,
    interval_between,
)
from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError, ProcUnavailableError
from sensors.processes import ProcfsProcessSource, build_filter
from sensors.simulated import SimulatedHost

T0 = float(BOOT + 1000)


def proc_source(tmp_path, clock, **rules):
    proc = CoreProc(tmp_path, cores={0: [0] * 8, 1: [0] * 8})
    proc.add(1, uid=0, name="init", ppid=0, start=0)
    proc.write()
    processes = ProcfsProcessSource(str(tmp_path), ticks_per_second=HZ, boot_time=BOOT)
    rules.setdefault("remote_marker", "GHS_REMOTE_TASK")
    source = ProcCapacitySource(processes, build_filter(**rules), clock, str(tmp_path),
                                ticks_per_second=HZ)
    return proc, source


def advance(proc, clock, seconds, per_core):
    """Move time on and add ticks: per_core maps core -> (user, system, idle, iowait, steal)."""
    clock.advance(seconds)
    for core, (user, system, idle, iowait, steal) in per_core.items():
        values = proc.cores[core]
        values[0] += user
        values[2] += system
        values[3] += idle
        values[4] += iowait
        values[7] += steal


def test_idle_and_iowait_count_owners_time_never_remote_tasks_cpu_does(tmp_path):
    clock = VirtualClock(T0)
    proc, source = proc_source(tmp_path, clock, exclude_pids=[50])
    owner = proc.add(100, uid=1000, name="make", state="R", utime=500, processor=0)
    remote = proc.add(200, uid=1001, name="grid", state="R", utime=300, processor=1,
                      environ=("GHS_REMOTE_TASK=1",))
    agent = proc.add(50, uid=0, name="ghs", utime=10, processor=1)
    proc.write()
    recorder = CapacityRecorder(source, clock, 10.0)
    assert recorder.step() is None
    advance(proc, clock, 10.0, {0: (700, 100, 150, 50, 0), 1: (500, 100, 300, 0, 100)})
    owner.utime += 800
    remote.utime += 450  # the SCHED_IDLE task ran 4.5 s on core 1 (inside its user time)
    agent.utime += 100  # the agent's CPU is the owners' as far as a remote task is concerned
    proc.write()
    interval = recorder.step()
    assert interval.start_epoch_seconds == T0 and interval.end_epoch_seconds == T0 + 10
    assert interval.per_core_available_cpu_seconds == pytest.approx((2.0, 3.0 + 4.5))
    assert interval.available_cpu_seconds == pytest.approx(9.5)
    assert interval.core_ids == (0, 1) and interval.flags == ()
    assert interval.to_dict()["available_cpu_seconds"] == interval.available_cpu_seconds


def test_remote_children_are_counted_and_a_new_remote_task_counts_from_its_start(tmp_path):
    clock = VirtualClock(T0)
    proc, source = proc_source(tmp_path, clock, remote_users=[1001])
    parent = proc.add(200, uid=1001, name="grid", utime=100, processor=0)
    child = proc.add(201, ppid=200, uid=1001, name="step", utime=50, processor=1)
    proc.write()
    recorder = CapacityRecorder(source, clock, 10.0)
    recorder.step()
    advance(proc, clock, 10.0, {0: (0, 0, 800, 0, 0), 1: (0, 0, 600, 0, 0)})
    # The child ran 2 s more and was reaped; a new remote task started after the sample.
    del proc.tasks[201]
    parent.cutime += child.utime + 200
    proc.add(202, ppid=200, uid=1001, name="step2", utime=300, processor=1,
             start=round((T0 + 5 - BOOT) * HZ))
    proc.write()
    interval = recorder.step()
    # idle 14 s, the reaped child's last 2 s (parent's core), the new task's 3 s (core 1)
    assert interval.available_cpu_seconds == pytest.approx(14.0 + 2.0 + 3.0)
    assert interval.per_core_available_cpu_seconds == pytest.approx((10.0, 9.0))


def test_an_exited_unreaped_remote_task_loses_only_its_last_interval(tmp_path):
    clock = VirtualClock(T0)
    proc, source = proc_source(tmp_path, clock, remote_users=[1001])
    proc.add(200, uid=1001, name="grid", utime=100, processor=0)
    proc.write()
    recorder = CapacityRecorder(source, clock, 10.0)
    recorder.step()
    advance(proc, clock, 10.0, {0: (0, 0, 400, 0, 0), 1: (0, 0, 1000, 0, 0)})
    del proc.tasks[200]
    proc.write()
    interval = recorder.step()
    assert interval.available_cpu_seconds == pytest.approx(14.0)


def test_a_core_going_offline_or_coming_back_is_flagged_not_lost_elsewhere(tmp_path):
    clock = VirtualClock(T0)
    proc, source = proc_source(tmp_path, clock)
    recorder = CapacityRecorder(source, clock, 10.0)
    recorder.step()
    advance(proc, clock, 10.0, {0: (0, 0, 900, 0, 0), 1: (0, 0, 400, 0, 0)})
    saved = proc.cores.pop(1)
    proc.write()
    gone = recorder.step()
    assert gone.core_ids == (0,) and gone.flags == ("cores_changed",)
    assert gone.available_cpu_seconds == pytest.approx(9.0)
    advance(proc, clock, 10.0, {0: (0, 0, 1000, 0, 0)})
    proc.cores[1] = saved
    saved[3] += 0  # counters resume where they stopped
    proc.write()
    back = recorder.step()
    assert back.core_ids == (0, 1) and back.flags == ("cores_changed",)
    assert back.per_core_available_cpu_seconds == pytest.approx((10.0, 0.0))
    advance(proc, clock, 10.0, {0: (0, 0, 1000, 0, 0), 1: (0, 0, 700, 0, 0)})
    proc.write()
    steady = recorder.step()
    assert steady.flags == () and steady.available_cpu_seconds == pytest.approx(17.0)


def test_counter_resets_and_absurd_jumps_are_skipped_and_counted(tmp_path):
    clock = VirtualClock(T0)
    proc, source = proc_source(tmp_path, clock)
    recorder = CapacityRecorder(source, clock, 10.0)
    advance(proc, clock, 0.0, {0: (0, 0, 50_000, 0, 0), 1: (0, 0, 50_000, 0, 0)})
    proc.write()
    recorder.step()
    clock.advance(10.0)
    proc.cores = {0: [0, 0, 0, 300, 0, 0, 0, 0], 1: [0, 0, 0, 300, 0, 0, 0, 0]}  # rebooted
    proc.write()
    assert recorder.step() is None and recorder.skipped_intervals == 1
    advance(proc, clock, 10.0, {0: (0, 0, 1000, 0, 0), 1: (0, 0, 9000, 0, 0)})  # 90 s in 10 s
    proc.write()
    assert recorder.step() is None and recorder.skipped_intervals == 2
    advance(proc, clock, 10.0, {0: (0, 0, 1000, 0, 0), 1: (0, 0, 500, 0, 0)})
    proc.write()
    resumed = recorder.step()
    assert resumed.start_epoch_seconds == T0 + 20  # a visible gap, not time moved elsewhere
    assert resumed.available_cpu_seconds == pytest.approx(15.0)


def test_bad_stat_and_bad_arguments_raise_the_packages_errors(tmp_path):
    clock = VirtualClock(T0)
    _, source = proc_source(tmp_path, clock)
    (tmp_path / "stat").write_text("intr 0\n")
    with pytest.raises(ProcUnavailableError):
        source.capacity_sample()
    with pytest.raises(InvalidArgumentError):
        CapacityRecorder(source, clock, 0.0)
    with pytest.raises(InvalidArgumentError):
        CapacitySample(T0, (1.0, 2.0), (0,))
    assert interval_between(CapacitySample(T0, (1.0,)), CapacitySample(T0, (2.0,))) is None


def fcfs_walk(rows, cores, boot, times):
    """Busy seconds per core up to each time, by replaying FCFS with a plain list scan."""
    free = [boot] * cores
    runs = []  # (core, start, finish)
    for arrival, cpu in rows:
        core = min(range(cores), key=lambda c: (free[c], c))
        start = max(arrival, free[core])
        free[core] = start + cpu
        runs.append((core, start, start + cpu))
    result = []
    for t in times:
        busy = [0.0] * cores
        for core, start, finish in runs:
            busy[core] += max(0.0, min(finish, t) - start) if start < t else 0.0
        result.append(busy)
    return result


@pytest.mark.parametrize("cores", [1, 3])
def test_simulated_host_capacity_is_exact_against_an_independent_walk(cores):
    rng = random.Random(cores)
    rows, arrival = [], T0
    for _ in range(400):
        arrival += rng.expovariate(1 / 30.0)
        rows.append((arrival, rng.lognormvariate(3.0, 1.2)))
    clock = VirtualClock(T0)
    host = SimulatedHost(rows, clock=clock, cores=cores, boot_time=T0)
    recorder = CapacityRecorder(host, clock, 60.0)
    times = [T0]
    recorder.step()
    intervals = []
    for _ in range(150):
        clock.advance(rng.uniform(1.0, 120.0))
        times.append(clock.now())
        intervals.append(recorder.step())
    walk = fcfs_walk(rows, cores, T0, times)
    for k, interval in enumerate(intervals):
        elapsed = times[k + 1] - times[k]
        expected = [elapsed - (walk[k + 1][c] - walk[k][c]) for c in range(cores)]
        assert interval.per_core_available_cpu_seconds == pytest.approx(expected, abs=1e-6)
        assert interval.available_cpu_seconds == pytest.approx(sum(expected), abs=1e-6)


def test_run_keeps_a_fixed_grid_on_a_virtual_clock_and_stops_on_the_event():
    clock = VirtualClock(T0)
    host = SimulatedHost([(T0 + 5, 30.0), (T0 + 100, 50.0)], clock=clock, boot_time=T0)
    recorder = CapacityRecorder(host, clock, 60.0)
    stop = threading.Event()
    got: list[CapacityInterval] = []

    def keep(interval):
        got.append(interval)
        if len(got) == 4:
            stop.set()

    recorder.run(stop, keep)
    assert [i.start_epoch_seconds - T0 for i in got] == pytest.approx([0, 60, 120, 180])
    assert [i.available_cpu_seconds for i in got] == pytest.approx([30.0, 40.0, 30.0, 60.0])


def test_a_remote_task_that_ended_in_the_interval_stays_excluded_for_one_more_sample(tmp_path):
    # the template feeder reads the accounting records of an interval's ended processes
    # just after the sample that closes it, when such a task is gone from that sample
    clock = VirtualClock(T0)
    proc, source = proc_source(tmp_path, clock, exclude_pids=[50])
    proc.add(200, uid=0, name="python", state="R", utime=100, processor=0,
             environ=("GHS_REMOTE_TASK=1",))
    proc.add(300, uid=1000, name="make", state="R", utime=100, processor=1)
    proc.write()
    source.capacity_sample()
    assert 200 in source.excluded_pids() and 300 not in source.excluded_pids()
    clock.advance(10.0)
    del proc.tasks[200]
    proc.write()
    source.capacity_sample()
    assert 200 in source.excluded_pids() and 300 not in source.excluded_pids()
    clock.advance(10.0)
    source.capacity_sample()
    assert 200 not in source.excluded_pids()
