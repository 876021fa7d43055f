"""tau: the host's speed relative to the reference machine (tau = 1 there).

The benchmark is a short single-threaded, compute-bound interpreter loop (integer and float
arithmetic, no memory traffic to speak of). It is timed in CPU seconds of this process
(``time.process_time``), so other load on the host does not make it look slower, and the
best of several runs is kept. The reference machine is *defined* as one on which
:data:`REFERENCE_ITERATIONS` iterations take :data:`REFERENCE_SECONDS` CPU seconds; that
constant was measured on the project's development machine (x86-64 VM, CPython 3.11), so
tau there is about 1. Interpreter versions differ in speed as hosts do: compare hosts running
the same Python, or override tau.

Overrides: a configured value, or the best CPU time of a user's own command divided into the
CPU time that command takes on the reference machine.
"""

from __future__ import annotations

import math
import resource
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sensors.errors import BenchmarkError, InvalidArgumentError

REFERENCE_ITERATIONS = 500_000
REFERENCE_SECONDS = 0.070  # CPU seconds of the loop on the reference machine (see above)


@dataclass(frozen=True)
class SpeedResult:
    """tau and how it was obtained ("override", "benchmark" or "command")."""

    tau: float
    source: str
    best_seconds: float | None = None
    runs: int = 0


def _loop(iterations: int) -> float:
    state = 1
    total = 0.0
    for _ in range(iterations):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        total += (state >> 16) * 1.0e-5
    return total


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive number, got {value!r}",
                                   field=name, value=value)
    return float(value)


def _runs(runs: int) -> int:
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 100:
        raise InvalidArgumentError(f"runs must be an integer in [1, 100], got {runs!r}",
                                   field="runs", value=runs)
    return runs


def benchmark_tau(runs: int = 5, *, reference_seconds: float = REFERENCE_SECONDS,
                  iterations: int = REFERENCE_ITERATIONS,
                  timer: Callable[[], float] = time.process_time) -> SpeedResult:
    """Time the loop ``runs`` times; tau = reference seconds * (iterations ratio) / best."""
    runs = _runs(runs)
    reference_seconds = _positive("reference_seconds", reference_seconds)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1000:
        raise InvalidArgumentError(f"iterations must be an integer >= 1000, got {iterations!r}",
                                   field="iterations", value=iterations)
    best = math.inf
    for _ in range(runs):
        started = timer()
        _loop(iterations)
        best = min(best, timer() - started)
    if not best > 0:
        raise BenchmarkError("the speed benchmark took no measurable CPU time (timer too coarse)")
    expected = reference_seconds * iterations / REFERENCE_ITERATIONS
    return SpeedResult(expected / best, "benchmark", best, runs)


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_tau(command: str | Sequence[str], reference_seconds: float, runs: int = 3, *,
                timeout_seconds: float = 600.0) -> SpeedResult:
    """tau from the user's own command: its CPU seconds on the reference machine / here.

    The command's CPU time (its own and its waited-for children's) is the best of ``runs``.
    """
    runs = _runs(runs)
    reference_seconds = _positive("reference_seconds", reference_seconds)
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise InvalidArgumentError("speed command is empty", field="speed_command")
    best = math.inf
    for _ in range(runs):
        before = _children_cpu_seconds()
        try:
            finished = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, timeout=timeout_seconds,
                                      check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchmarkError(f"speed command {argv[0]!r} failed: {exc}",
                                 field="speed_command", value=argv[0]) from None
        if finished.returncode != 0:
            raise BenchmarkError(f"speed command {argv[0]!r} exited with status "
                                 f"{finished.returncode}", field="speed_command", value=argv[0])
        best = min(best, _children_cpu_seconds() - before)
    if not best > 0:
        raise BenchmarkError(f"speed command {argv[0]!r} used no measurable CPU time",
                             field="speed_command", value=argv[0])
    return SpeedResult(reference_seconds / best, "command", best, runs)


def resolve_tau(*, override: float = 0.0, command: str = "",
                command_reference_seconds: float = 0.0, runs: int = 5) -> SpeedResult:
    """tau by precedence: a positive ``override``, else ``command``, else the benchmark."""
    if override:
        return SpeedResult(_positive("tau", override), "override")
    if command:
        return command_tau(command, command_reference_seconds, runs)
    return benchmark_tau(runs)
