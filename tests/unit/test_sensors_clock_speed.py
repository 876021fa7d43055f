"""Clocks and tau."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from sensors.clock import AcceleratedClock, SystemClock, VirtualClock, sleep_until
from sensors.errors import BenchmarkError, InvalidArgumentError
from sensors.speed import REFERENCE_SECONDS, benchmark_tau, command_tau, resolve_tau


def test_virtual_clock_moves_only_when_told():
    clock = VirtualClock(100.0)
    assert clock.now() == clock.monotonic() == 100.0
    clock.sleep(5)
    clock.sleep(-3)  # no-op, as for time.sleep(0)
    clock.advance(1.5)
    assert clock.now() == 106.5
    sleep_until(clock, 200.0)
    sleep_until(clock, 150.0)
    assert clock.now() == 200.0
    with pytest.raises(InvalidArgumentError):
        clock.advance(-1)
    with pytest.raises(InvalidArgumentError):
        clock.sleep(float("nan"))


def test_system_clock_sleep_is_cut_short_by_its_stop_event():
    stop = threading.Event()
    clock = SystemClock(stop)
    threading.Timer(0.05, stop.set).start()
    started = time.monotonic()
    clock.sleep(30)
    assert time.monotonic() - started < 5
    assert abs(clock.now() - time.time()) < 1


def test_accelerated_clock_runs_faster_than_real_time():
    clock = AcceleratedClock(1000.0, start=0.0)
    started = time.monotonic()
    clock.sleep(50.0)  # 50 virtual seconds = 0.05 real seconds
    assert time.monotonic() - started < 2.0
    assert clock.now() >= 50.0
    with pytest.raises(InvalidArgumentError):
        AcceleratedClock(0.0)


class FakeTimer:
    """Each run 'takes' the next of the given CPU times."""

    def __init__(self, durations):
        self.readings = iter([x for d in durations for x in (0.0, d)])

    def __call__(self):
        return next(self.readings)


def test_benchmark_tau_is_reference_over_best_run():
    result = benchmark_tau(3, timer=FakeTimer([0.2, 0.035, 0.05]), iterations=1000)
    expected = REFERENCE_SECONDS * 1000 / 500_000
    assert result.best_seconds == 0.035
    assert result.tau == pytest.approx(expected / 0.035)
    assert result.source == "benchmark" and result.runs == 3
    with pytest.raises(BenchmarkError):
        benchmark_tau(1, timer=FakeTimer([0.0]), iterations=1000)
    with pytest.raises(InvalidArgumentError):
        benchmark_tau(0)


def test_real_benchmark_gives_a_plausible_tau():
    result = benchmark_tau(3)
    assert 0.05 < result.tau < 20  # any machine from the last two decades
    assert result.best_seconds > 0


def test_command_tau_times_the_users_command_in_cpu_seconds():
    burn = [sys.executable, "-c",
            "import time\nt=time.process_time()\nwhile time.process_time()-t<0.2: pass"]
    result = command_tau(burn, reference_seconds=0.4, runs=2)
    assert result.source == "command"
    assert 0.2 <= result.best_seconds < 0.6  # the loop plus interpreter start-up
    assert result.tau == pytest.approx(0.4 / result.best_seconds)
    with pytest.raises(BenchmarkError, match="exited with status 3"):
        command_tau([sys.executable, "-c", "raise SystemExit(3)"], 1.0, runs=1)
    with pytest.raises(BenchmarkError):
        command_tau(["/nonexistent/ghs-command"], 1.0, runs=1)


def test_resolve_tau_precedence():
    assert resolve_tau(override=2.5).tau == 2.5
    assert resolve_tau(override=2.5).source == "override"
    with pytest.raises(InvalidArgumentError):
        resolve_tau(override=-1.0)
    with pytest.raises(InvalidArgumentError):
        resolve_tau(command="true", command_reference_seconds=0.0)
