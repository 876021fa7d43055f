"""The capacity series on the real kernel (root, slow).

The Poisson load generator of the sensor tests (CPU-bound jobs pinned to one core, as an
unused uid) plays the owner; a spinner at SCHED_IDLE carrying a remote-task marker in its
environment plays the remote task and soaks up whatever the owners leave. The marker is
GHS_REMOTE_TASK suffixed with this run's pid: on a shared machine another run's marked tasks
would otherwise count too (they are remote tasks as far as the sensor can tell). For 30 s a
CapacityRecorder records the series on its production loop. Right before and right after
each of its samples the test reads the truth independently: the kernel's idle + iowait time
of every core (its own parse of /proc/stat) plus the spinner's CPU from the scheduler's
nanosecond counter (/proc/PID/schedstat). A sample takes a while on a loaded machine, so
the truth of the whole series lies between the inner and the outer pair of readings; the
series must lie in that bracket widened by 2% of the elapsed time.

The second test runs remote tasks of 7 s one after another instead, so each exits between two
samples; with the process accounting file switched on, their exit records must credit the CPU
they used after the last sample that saw them.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_sensors_load_generator import start_generator, unused_uid

from sensors.accounting_control import AccountingSession
from sensors.capacity import CapacityRecorder, ProcCapacitySource
from sensors.clock import SystemClock
from sensors.processes import ProcfsProcessSource, build_filter

pytestmark = [pytest.mark.root, pytest.mark.slow]

# six intervals, as the agent's production loop records them (half a minute: the bracket is
# on the series' total, so a longer run costs the suite's budget and checks nothing new)
DURATION_SECONDS = 30.0
INTERVAL_SECONDS = 5.0
MARKER = f"GHS_REMOTE_TASK_{os.getpid()}"
# prctl(2): the signal a child gets when the thread that forked it exits
_PR_SET_PDEATHSIG = 1


def kernel_idle_seconds() -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat", encoding="ascii") as handle:
        lines = [line.split() for line in handle if line.startswith("cpu")]
    return sum(int(f[4]) + int(f[5]) for f in lines if f[0] != "cpu") / ticks


def spinner_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as handle:
        return int(handle.read().split()[0]) / 1e9


def _idle_child_of(parent: int) -> None:
    """In the spinner's child before exec: SCHED_IDLE, and killed by the kernel when this
    test's process dies. A run killed outright (SIGKILL, a crashed worker) left it burning a
    core for good; a getppid() loop in the spinner would move its CPU time from user to
    system, which the test counts as the remote task's."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the test died before prctl took hold
        os._exit(1)


def truth(pid: int) -> float:
    return kernel_idle_seconds() + spinner_cpu_seconds(pid)


class Bracketed:
    """The real capacity source, with the truth read just before and after each sample."""

    def __init__(self, source: ProcCapacitySource, pid: int) -> None:
        self.source, self.pid = source, pid
        self.readings: list[tuple[float, float]] = []

    def capacity_sample(self):
        before = truth(self.pid)
        sample = self.source.capacity_sample()
        self.readings.append((before, truth(self.pid)))
        return sample


def record_series(recorder: CapacityRecorder, stop: threading.Event) -> list:
    """The recorder's intervals on its production loop until DURATION_SECONDS are covered
    (or a watchdog gives up a minute later)."""
    intervals = []

    def keep(interval):
        intervals.append(interval)
        if interval.end_epoch_seconds - intervals[0].start_epoch_seconds >= DURATION_SECONDS:
            stop.set()

    watchdog = threading.Timer(DURATION_SECONDS + 60, stop.set)
    watchdog.start()
    try:
        recorder.run(stop, keep)
    finally:
        watchdog.cancel()
        stop.set()
    return intervals


def bracketed(intervals: list, readings: list) -> tuple[float, float, float, float, float]:
    """(elapsed, the series' total, the truth's bounds from the inner and the outer pair of
    readings, and how far outside them the series lies), seconds."""
    elapsed = intervals[-1].end_epoch_seconds - intervals[0].start_epoch_seconds
    measured = sum(interval.available_cpu_seconds for interval in intervals)
    low, high = readings[-1][0] - readings[0][1], readings[-1][1] - readings[0][0]
    return elapsed, measured, low, high, max(low - measured, measured - high, 0.0)


def test_capacity_equals_kernel_idle_plus_the_remote_spinner():
    if os.geteuid() != 0:
        pytest.skip("needs root: runs the owners' jobs as another user")
    uid = unused_uid()
    core = max(os.sched_getaffinity(0))
    owner, read_fd = start_generator(uid, core, DURATION_SECONDS + 10.0)
    parent = os.getpid()
    spinner = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        env={**os.environ, MARKER: "1"},
        preexec_fn=lambda: _idle_child_of(parent))
    try:
        time.sleep(1.0)
        clock = SystemClock()
        source = Bracketed(ProcCapacitySource(
            ProcfsProcessSource(), build_filter(remote_marker=MARKER), clock),
            spinner.pid)
        recorder = CapacityRecorder(source, clock, INTERVAL_SECONDS)
        intervals = record_series(recorder, threading.Event())
        spinner_seconds = spinner_cpu_seconds(spinner.pid)
    finally:
        spinner.kill()
        spinner.wait()
        os.kill(owner, signal.SIGKILL)
        os.waitpid(owner, 0)
        os.close(read_fd)

    readings = source.readings
    elapsed, measured, low, high, miss = bracketed(intervals, readings)
    print(f"\ncapacity over {elapsed:.1f} s on {len(intervals[0].core_ids)} cores: series "
          f"{measured:.3f} s, kernel idle + spinner between {low:.3f} and {high:.3f} s; "
          f"outside by {miss / elapsed:.3%} of the elapsed time; spinner used "
          f"{spinner_seconds:.1f} s")
    assert elapsed >= DURATION_SECONDS - 1 and len(readings) == len(intervals) + 1
    assert spinner_seconds > 1.0  # the remote task really ran
    assert all(not i.flags for i in intervals) and recorder.skipped_intervals == 0
    assert miss <= 0.02 * elapsed


TASK_SECONDS = 7.0
BURN = ("import time, sys\nt = time.process_time()\n"
        "while time.process_time() - t < float(sys.argv[1]): pass\n")


class TaskRunner(threading.Thread):
    """Marked SCHED_IDLE tasks of TASK_SECONDS of CPU, one after another, until stopped; the
    truth (kernel idle + every task's CPU so far) read under the lock that reaping takes."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stop, self.lock, self.tasks = stop, threading.Lock(), 0
        self.current: subprocess.Popen | None = None
        parent = os.getpid()
        self._start = lambda: subprocess.Popen(
            [sys.executable, "-c", BURN, str(TASK_SECONDS)], env={**os.environ, MARKER: "1"},
            preexec_fn=lambda: _idle_child_of(parent))

    def run(self) -> None:
        with self.lock:
            self.current = self._start()
        while not self.stop.wait(0.05):
            with self.lock:
                if self.current.poll() is not None:
                    self.tasks += 1
                    self.current = self._start()

    def truth(self) -> float:
        with self.lock:
            running = self.current
            # a task reaped by this poll has its CPU in the usage read after it
            live = (spinner_cpu_seconds(running.pid)
                    if running is not None and running.poll() is None else 0.0)
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return kernel_idle_seconds() + usage.ru_utime + usage.ru_stime + live

    def finish(self) -> None:
        with self.lock:
            if self.current is not None and self.current.poll() is None:
                self.current.kill()
                self.current.wait()


class TwoSources:
    """The same moment sampled with and without the accounting file, the truth around it."""

    def __init__(self, with_accounting: ProcCapacitySource, without: ProcCapacitySource,
                 runner: TaskRunner) -> None:
        self.sources, self.runner = (with_accounting, without), runner
        self.readings: list[tuple[float, float]] = []
        self.plain: list = []

    def capacity_sample(self):
        before = self.runner.truth()
        sample = self.sources[0].capacity_sample()
        self.plain.append(self.sources[1].capacity_sample())
        self.readings.append((before, self.runner.truth()))
        return sample


def test_remote_tasks_exiting_between_samples_are_credited_from_accounting(free_accounting):
    uid = unused_uid()
    core = max(os.sched_getaffinity(0))
    owner, read_fd = start_generator(uid, core, DURATION_SECONDS + 10.0)
    stop = threading.Event()
    runner = TaskRunner(stop)
    try:
        with AccountingSession("on", own_path=str(free_accounting / "pacct")) as session:
            clock = SystemClock()
            rules = build_filter(remote_marker=MARKER)
            source = TwoSources(
                ProcCapacitySource(ProcfsProcessSource(), rules, clock,
                                   accounting=session.reader.independent_reader()),
                ProcCapacitySource(ProcfsProcessSource(), rules, clock), runner)
            recorder = CapacityRecorder(source, clock, INTERVAL_SECONDS)
            runner.start()
            try:
                intervals = record_series(recorder, stop)
            finally:
                stop.set()
                runner.join(10.0)
    finally:
        runner.finish()
        os.kill(owner, signal.SIGKILL)
        os.waitpid(owner, 0)
        os.close(read_fd)

    plain = source.plain[-1].available_cpu_seconds - source.plain[0].available_cpu_seconds
    elapsed, measured, low, high, miss = bracketed(intervals, source.readings)
    print(f"\n{runner.tasks} tasks of {TASK_SECONDS:g} s over {elapsed:.1f} s: series "
          f"{measured:.3f} s with accounting, {plain:.3f} s without; kernel idle + tasks "
          f"between {low:.3f} and {high:.3f} s; outside by {miss / elapsed:.3%} of the "
          f"elapsed time; exits left uncredited {source.sources[0].unaccounted_exits} "
          f"(without accounting {source.sources[1].unaccounted_exits})")
    assert runner.tasks >= 3  # several tasks ended between samples
    assert source.sources[0].unaccounted_exits == 0
    assert miss <= 0.02 * elapsed
