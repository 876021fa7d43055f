"""Keeping tau current: the idle-priority benchmark child and the refresher's reports."""

from __future__ import annotations

import os
import threading

import pytest

from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError
from sensors.speed import SpeedResult
from sensors.tau_refresh import TauRefresher, idle_priority_tau

T0 = 1_700_000_000.0


@pytest.mark.exclusive  # an idle-priority child gets no CPU while the other tests fill it
def test_the_benchmark_runs_in_a_child_at_the_lowest_priority():
    result = idle_priority_tau(2)
    assert result.tau > 0 and result.runs == 2 and result.best_seconds > 0
    expected = "benchmark_sched_idle" if hasattr(os, "SCHED_IDLE") else "benchmark_nice19"
    assert result.source == expected
    assert os.sched_getscheduler(0) != getattr(os, "SCHED_IDLE", -1)  # not this process
    assert os.getpriority(os.PRIO_PROCESS, 0) < 19
    assert idle_priority_tau(2, timeout_seconds=1e-4) is None  # a starved child is given up
    with pytest.raises(InvalidArgumentError):
        idle_priority_tau(0)


def measured(values):
    """A measuring function returning the given taus in turn (None: starved)."""
    queue = list(values)

    def measure():
        tau = queue.pop(0)
        return None if tau is None else SpeedResult(tau, "benchmark", 0.07, 5)

    return measure


def test_changes_beyond_the_threshold_are_reported_and_slow_drift_adds_up():
    clock = VirtualClock(T0)
    refresher = TauRefresher(clock, 1.0, interval_seconds=3600, threshold=0.05,
                             measure=measured([1.01, 1.04, None, 1.06, 0.9]))
    assert refresher.step() is None and refresher.step() is None
    assert refresher.step() is None and refresher.skipped == 1
    change = refresher.step()  # 6% away from the last reported 1.0
    assert (change.previous_tau, change.tau) == (1.0, 1.06)
    assert change.relative_change == pytest.approx(0.06)
    assert refresher.tau == 1.06
    assert refresher.step().tau == 0.9


def test_run_measures_once_per_interval_of_the_clock_and_zero_means_never():
    clock = VirtualClock(T0)
    stop = threading.Event()
    changes = []

    def keep(change):
        changes.append(change)
        if len(changes) == 2:
            stop.set()

    refresher = TauRefresher(clock, 1.0, interval_seconds=3600, threshold=0.02,
                             measure=measured([1.0, 1.1, 1.1, 1.3]))
    refresher.run(stop, keep)
    assert [c.epoch_seconds - T0 for c in changes] == pytest.approx([7200.0, 14400.0])
    never = TauRefresher(clock, 1.0, interval_seconds=0, measure=measured([]))
    never.run(threading.Event(), keep)
    with pytest.raises(InvalidArgumentError):
        TauRefresher(clock, 0.0)
    with pytest.raises(InvalidArgumentError):
        TauRefresher(clock, 1.0, interval_seconds=-1)
