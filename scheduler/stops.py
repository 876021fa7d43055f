"""Simulated tasks stopped partway: what an agent sees at the stop, and the true continuation.

The oracle for the remaining-time law (scheduler.eta). Each host is one core whose local jobs
are served FCFS with priority over the remote share, so the local queue evolves as if the
remote share were absent (Lindley: a job starts at max(arrival, previous departure)) and the
share advances, at tau reference-seconds per second, exactly while no local job is present.
The task is launched at time 0 into local streams that began earlier (the queues are in
their running state at launch) and stopped when the work done over all hosts first reaches a
fraction of the task. At the stop each host's progress, its local jobs present (FCFS order)
with the CPU they have used (their ages) and their true remaining demands are recorded, and
the true time from the stop until the slowest share finishes. This never uses the model's
formulas.

Local streams are given per host as (runs, jobs) arrays of arrival times (seconds from the
launch, negative before it; +inf pads unused slots) and CPU demands (seconds):
``poisson_streams`` draws them, ``trace_streams`` cuts them from a Trace at given launches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.workload import Demand, Trace

_BISECTIONS = 64


@dataclass(frozen=True, eq=False)
class Stops:
    """Tasks stopped at a fraction of their work, ``runs`` of them, over ``hosts``.

    ``stop_seconds`` (runs,): time of the stop after the launch. ``done_work`` (runs, hosts):
    reference-CPU-seconds of each share done at the stop. ``remaining_seconds`` (runs,): true
    time from the stop until the last share finishes. ``jobs[r][k]``: (ages, remaining) of
    host k's local jobs present at run r's stop, FCFS order, seconds.
    """

    shares: np.ndarray
    stop_seconds: np.ndarray
    done_work: np.ndarray
    remaining_seconds: np.ndarray
    jobs: tuple[tuple[tuple[np.ndarray, np.ndarray], ...], ...]

    @property
    def fraction_done(self) -> np.ndarray:
        """(runs, hosts) fraction of each share done at the stop (1 for a host given none)."""
        safe = np.where(self.shares > 0, self.shares, 1.0)
        return np.where(self.shares > 0, self.done_work / safe, 1.0)


def poisson_streams(host: Host, demand: Demand, runs: int, *, before_seconds: float,
                    after_seconds: float, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Poisson arrivals at ``host.lam`` with ``demand`` over [-before, after] seconds."""
    span = before_seconds + after_seconds
    count = int(host.lam * span + 8 * math.sqrt(host.lam * span + 1) + 8)
    gaps = rng.standard_exponential((runs, count)) / host.lam
    arrivals = np.cumsum(gaps, axis=1) - before_seconds
    arrivals[arrivals > after_seconds] = np.inf
    return arrivals, demand.sample(rng, (runs, count))


def trace_streams(trace: Trace, launch_seconds: np.ndarray, *, before_seconds: float,
                  after_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """The jobs of ``trace`` within [launch - before, launch + after] of each launch time."""
    launch = np.asarray(launch_seconds, dtype=float).reshape(-1)
    first = np.searchsorted(trace.arrival_seconds, launch - before_seconds, side="left")
    last = np.searchsorted(trace.arrival_seconds, launch + after_seconds, side="right")
    width = int(max((last - first).max(), 1))
    index = first[:, None] + np.arange(width)[None, :]
    inside = index < last[:, None]
    safe = np.minimum(index, len(trace) - 1)
    arrivals = np.where(inside, trace.arrival_seconds[safe] - launch[:, None], np.inf)
    demands = np.where(inside, trace.cpu_seconds[safe], 0.0)
    return arrivals, demands


def stop_runs(hosts: Sequence[Host], shares: Sequence[float],
              streams: Sequence[tuple[np.ndarray, np.ndarray]], fraction: float) -> Stops:
    """Stop each run when the task has done ``fraction`` of its work (0 < fraction < 1).

    ``streams``: one (arrivals, demands) pair per host, each (runs, jobs). A run whose share
    outlasts its stream is finished as if no further job came (make the streams long enough).
    """
    share = np.asarray(shares, dtype=float).reshape(-1)
    if len(hosts) != share.size or len(streams) != share.size:
        raise InvalidArgumentError("one share and one stream per host are needed",
                                   field="streams", value=len(streams))
    if not 0.0 < fraction < 1.0:
        raise InvalidArgumentError(f"fraction must be in (0, 1), got {fraction!r}",
                                   field="fraction", value=fraction)
    if (share < 0).any() or share.sum() <= 0:
        raise InvalidArgumentError("shares must be >= 0 and not all zero", field="shares",
                                   value=share.tolist())
    taus = np.array([h.tau for h in hosts])
    queues = [_Queue(*stream) for stream in streams]
    runs = queues[0].starts.shape[0]
    finish = np.zeros((runs, len(hosts)))
    for k, q in enumerate(queues):
        if share[k] > 0:
            finish[:, k] = q.time_of_idle(np.full(runs, share[k] / taus[k]))
    target = fraction * share.sum()
    low, high = np.zeros(runs), finish.max(axis=1)
    for _ in range(_BISECTIONS):
        middle = 0.5 * (low + high)
        reached = _done(queues, share, taus, middle).sum(axis=1) >= target
        high = np.where(reached, middle, high)
        low = np.where(reached, low, middle)
    stop = high
    done = _done(queues, share, taus, stop)
    remaining = np.where(done < share * (1 - 1e-12), finish - stop[:, None], 0.0)
    jobs = tuple(tuple(q.present(r, stop[r]) for q in queues) for r in range(runs))
    return Stops(share, stop, done, np.maximum(remaining.max(axis=1), 0.0), jobs)


def queue_of(arrivals: np.ndarray, demands: np.ndarray) -> _Queue:
    """One core's FCFS local queue over every run, from (runs, jobs) arrival times (seconds
    from each run's time 0, +inf pads) and CPU demands: ``time_of_idle(level)`` (when the core
    has been free ``level`` seconds after time 0, where a share started then ends),
    ``idle_by(at)`` and ``present(run, at)`` (ages and true remaining demands of the jobs
    there)."""
    return _Queue(arrivals, demands)


def _done(queues: list[_Queue], share: np.ndarray, taus: np.ndarray,
          at: np.ndarray) -> np.ndarray:
    return np.column_stack([np.clip(taus[k] * q.idle_by(at), 0.0, share[k]) if share[k] > 0
                            else np.zeros(at.size) for k, q in enumerate(queues)])


class _Queue:
    """One core's FCFS local queue over every run: job start and departure times."""

    def __init__(self, arrivals: np.ndarray, demands: np.ndarray) -> None:
        arrivals = np.asarray(arrivals, dtype=float)
        demands = np.where(np.isfinite(arrivals), np.asarray(demands, dtype=float), 0.0)
        if arrivals.ndim != 2 or arrivals.shape != demands.shape:
            raise InvalidArgumentError("a stream is two (runs, jobs) arrays of one shape",
                                       field="streams", value=arrivals.shape)
        order = np.argsort(arrivals, axis=1, kind="stable")
        arrivals = np.take_along_axis(arrivals, order, axis=1)
        demands = np.take_along_axis(demands, order, axis=1)
        starts = np.empty_like(arrivals)
        departure = np.full(arrivals.shape[0], -np.inf)
        # Lindley, job by job over all runs at once
        for i in range(arrivals.shape[1]):
            starts[:, i] = np.maximum(arrivals[:, i], departure)
            departure = np.where(np.isfinite(starts[:, i]), starts[:, i] + demands[:, i],
                                 departure)
        self.arrivals, self.demands, self.starts = arrivals, demands, starts
        self.departures = starts + demands
        # busy time after the launch of each job, and the idle time before each job starts
        finite = np.isfinite(starts)
        busy = np.where(finite, self.departures - np.maximum(np.where(finite, starts, 0.0), 0.0),
                        0.0)
        busy = np.maximum(busy, 0.0)
        before = np.cumsum(busy, axis=1) - busy
        # unused slots never count as reached
        self.idle_at_start = np.where(finite, np.maximum(np.where(finite, starts, 0.0), 0.0)
                                      - before, -np.inf)
        self.total_busy = busy.sum(axis=1)

    def time_of_idle(self, level: np.ndarray) -> np.ndarray:
        """First time after the launch at which the core has been free ``level`` seconds."""
        reached = self.idle_at_start >= level[:, None]
        any_reached = reached.any(axis=1)
        first = np.argmax(reached, axis=1)
        rows = np.arange(level.size)
        start = np.maximum(self.starts[rows, first], 0.0)
        with np.errstate(invalid="ignore"):  # rows that never reach the level: unused slots
            inside = start - (self.idle_at_start[rows, first] - level)
        # past the last job the core stays free: every busy second came before
        return np.where(any_reached, inside, level + self.total_busy)

    def idle_by(self, at: np.ndarray) -> np.ndarray:
        """Seconds the core was free of local work in [0, at]."""
        t = at[:, None]
        finite = np.isfinite(self.starts)
        begin = np.maximum(np.where(finite, self.starts, 0.0), 0.0)
        busy = np.where(finite, np.minimum(self.departures, t) - begin, 0.0)
        busy = np.maximum(busy, 0.0)
        return at - busy.sum(axis=1)

    def present(self, run: int, at: float) -> tuple[np.ndarray, np.ndarray]:
        """(ages, true remaining demands) of the jobs present at ``at`` in ``run``, FCFS."""
        here = (self.arrivals[run] <= at) & (self.departures[run] > at)
        ages = np.maximum(at - self.starts[run][here], 0.0)
        return ages, self.demands[run][here] - ages
