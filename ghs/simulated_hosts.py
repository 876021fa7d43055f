"""Simulated hosts for the sensors, driven by the scheduler's workload generators.

The sensors' :class:`~sensors.simulated.SimulatedHost` takes any job stream of
``(arrival_seconds, cpu_seconds[, user, command])`` rows sorted by arrival; this module turns
the scheduler's Poisson generator and traces into such streams. Poisson streams are drawn an
hour at a time (arrivals in disjoint windows are independent), so a host can run for weeks of
virtual time without holding every job in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from scheduler.workload import Demand, Trace, poisson_jobs
from sensors.clock import Clock
from sensors.errors import InvalidArgumentError
from sensors.simulated import SimulatedHost

CHUNK_SECONDS = 3600.0


def poisson_rows(rate_per_second: float, demand: Demand, rng: np.random.Generator,
                 start_seconds: float, end_seconds: float = math.inf, *,
                 user: str | None = None, command: str | None = None) -> Iterator[tuple]:
    """Rows of a Poisson stream on [start, end), generated lazily an hour at a time."""
    window = float(start_seconds)
    while window < end_seconds:
        stop = min(window + CHUNK_SECONDS, end_seconds)
        arrivals, demands = poisson_jobs(rate_per_second, demand, rng, window, stop)
        extra = () if user is None and command is None else (user, command)
        for arrival, cpu in zip(arrivals.tolist(), demands.tolist(), strict=True):
            yield (arrival, cpu, *extra)
        window = stop


def piecewise_rows(segments: Sequence[tuple[float, float, float, Demand]],
                   rng: np.random.Generator) -> Iterator[tuple]:
    """Rows of Poisson streams with rates that change: (start, end, rate, demand) segments.

    Segments must be in time order and must not overlap.
    """
    previous_end = -math.inf
    for start, end, rate, demand in segments:
        if start < previous_end or end < start:
            raise InvalidArgumentError(f"segments must be ordered and disjoint; got "
                                       f"[{start!r}, {end!r}) after {previous_end!r}",
                                       field="segments", value=(start, end))
        previous_end = end
        yield from poisson_rows(rate, demand, rng, start, end)


def trace_rows(trace: Trace) -> Iterator[tuple[float, float]]:
    """Rows of a scheduler Trace (already sorted by arrival)."""
    yield from zip(trace.arrival_seconds.tolist(), trace.cpu_seconds.tolist(), strict=True)


def simulated_host(jobs: Iterable[Sequence], *, clock: Clock, cores: int,
                   speed: float) -> SimulatedHost:
    """A simulated host fed by ``jobs`` (rows as above) on ``clock``'s time axis."""
    return SimulatedHost(jobs, clock=clock, cores=cores, speed=speed)


def poisson_host(*, clock: Clock, rate_per_second: float, demand: Demand,
                 rng: np.random.Generator, cores: int, speed: float) -> SimulatedHost:
    """A simulated host with an endless Poisson stream starting at ``clock.now()``."""
    return simulated_host(poisson_rows(rate_per_second, demand, rng, clock.now()),
                          clock=clock, cores=cores, speed=speed)
