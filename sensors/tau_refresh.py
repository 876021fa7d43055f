"""Keeping tau current: re-run the speed benchmark periodically at the lowest priority.

A core's speed drifts (frequency scaling, thermal limits, a neighbour VM), so tau measured
once at start-up goes stale. :func:`idle_priority_tau` runs :func:`sensors.speed.benchmark_tau`
in a child process at ``SCHED_IDLE`` (or nice 19 where that policy is unavailable), so it only
uses CPU the owners leave, and times it in the child's own CPU seconds, so waiting for the
CPU does not make the host look slower. A child starved past ``timeout_seconds`` is killed
and the refresh skipped (None). :class:`TauRefresher` calls it every ``interval_seconds`` of
its clock and reports a :class:`TauChange` when tau moved by more than ``threshold`` (a
relative change) from the last value reported, so slow drifts add up to a report.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sensors.clock import Clock, every
from sensors.errors import BenchmarkError, InvalidArgumentError
from sensors.speed import SpeedResult, benchmark_tau

_MAX_SLICE_SECONDS = 1.0


def _lowest_priority() -> str:
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return "sched_idle"
    except (AttributeError, OSError):
        os.nice(19)
        return "nice19"


def idle_priority_tau(runs: int = 5, *, timeout_seconds: float = 120.0,
                      python: str = sys.executable) -> SpeedResult | None:
    """tau benchmarked in a child at the lowest priority; None if it did not finish in time.

    The child is a fresh interpreter (``python -m sensors.tau_refresh``), not a fork, so it
    is safe from a multi-threaded agent.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 100:
        raise InvalidArgumentError(f"runs must be an integer in [1, 100], got {runs!r}",
                                   field="runs", value=runs)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        done = subprocess.run([python, "-m", "sensors.tau_refresh", str(runs)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_seconds, env=env, check=False)
    except subprocess.TimeoutExpired:
        return None
    except OSError as exc:
        raise BenchmarkError(f"cannot start the speed benchmark: {exc}") from None
    if done.returncode != 0:
        raise BenchmarkError(f"the idle-priority speed benchmark failed: "
                             f"{done.stderr.strip()[-500:]}")
    report = json.loads(done.stdout)
    return SpeedResult(report["tau"], "benchmark_" + report["policy"], report["best"],
                       report["runs"])


@dataclass(frozen=True)
class TauChange:
    """tau moved from ``previous_tau`` to ``tau`` (measured at ``epoch_seconds``)."""

    epoch_seconds: float
    previous_tau: float
    tau: float
    source: str

    @property
    def relative_change(self) -> float:
        return self.tau / self.previous_tau - 1.0


class TauRefresher:
    """Re-measures tau every ``interval_seconds`` of ``clock`` (0: never; see module)."""

    def __init__(self, clock: Clock, tau: float, *, interval_seconds: float = 3600.0,
                 threshold: float = 0.02,
                 measure: Callable[[], SpeedResult | None] = idle_priority_tau) -> None:
        for name, value, low in (("tau", tau, 0.0), ("interval_seconds", interval_seconds, -1),
                                 ("threshold", threshold, -1)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value > low and value >= 0):
                raise InvalidArgumentError(f"{name} must be a finite number >= 0 (tau > 0), "
                                           f"got {value!r}", field=name, value=value)
        self.clock = clock
        self.tau = float(tau)
        self.interval_seconds = float(interval_seconds)
        self.threshold = float(threshold)
        self.measure = measure
        self.last_measured: SpeedResult | None = None
        self.skipped = 0

    def step(self) -> TauChange | None:
        """Measure now; a TauChange if tau moved beyond the threshold (then it is adopted)."""
        result = self.measure()
        if result is None:
            self.skipped += 1
            return None
        self.last_measured = result
        if abs(result.tau / self.tau - 1.0) <= self.threshold:
            return None
        change = TauChange(self.clock.now(), self.tau, result.tau, result.source)
        self.tau = result.tau
        return change

    def run(self, stop: threading.Event, on_change: Callable[[TauChange], None]) -> None:
        """Step every interval until ``stop`` is set (returns at once if the interval is 0)."""
        if self.interval_seconds <= 0:
            return

        def refresh() -> None:
            change = self.step()
            if change is not None:
                on_change(change)

        every(self.clock, stop, self.interval_seconds, refresh,
              max_slice_seconds=_MAX_SLICE_SECONDS)


if __name__ == "__main__":
    _policy = _lowest_priority()
    _result = benchmark_tau(int(sys.argv[1]))
    print(json.dumps({"tau": _result.tau, "best": _result.best_seconds, "runs": _result.runs,
                      "policy": _policy}))
