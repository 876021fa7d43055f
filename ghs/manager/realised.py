"""When a lowest-priority task launched at a past moment would have finished, from the
capacity series (Part 5): each interval says how many CPU seconds each core had free for it
(idle, iowait and remote tasks' CPU). A task of ``dedicated_seconds`` per core finishes on a
core once the core's free CPU since launch adds up to that; the task ends with its last core.
Within an interval the free CPU is taken as spread evenly. A gap in the series (the agent was
down) before completion leaves the outcome unknown rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

# a gap between intervals above this (seconds) means the series is broken there
GAP_TOLERANCE_SECONDS = 5.0
# the intervals a task's outcome is first worked out on: up to launch + this many times its
# dedicated seconds + PREFIX_SECONDS (the whole series when that does not settle it)
PREFIX_LENGTHS = 3.0
PREFIX_SECONDS = 3600.0


@dataclass(frozen=True)
class CapacitySeries:
    """One host's capacity intervals as arrays: start and end (epoch seconds) and free CPU
    seconds per core, shape (intervals, cores)."""

    start: np.ndarray
    end: np.ndarray
    free: np.ndarray

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], cores: int) -> CapacitySeries:
        """From :meth:`StreamTables.capacity` rows (oldest first)."""
        end = np.array([r["end_epoch_seconds"] for r in rows], dtype=float)
        span = np.array([r["interval_seconds"] for r in rows], dtype=float)
        free = np.zeros((len(rows), max(cores, 1)))
        for i, row in enumerate(rows):
            split = row.get("per_core_available_cpu_seconds")
            if split and len(split) == free.shape[1]:
                free[i] = split
            else:
                free[i] = row["available_cpu_seconds"] / free.shape[1]
        return cls(end - span, end, free)

    def since(self, epoch_seconds: float) -> CapacitySeries:
        """The intervals ending after ``epoch_seconds``."""
        keep = self.end > epoch_seconds
        return CapacitySeries(self.start[keep], self.end[keep], self.free[keep])

    def extended(self, newer: CapacitySeries) -> CapacitySeries:
        """This series followed by ``newer`` (intervals ending after this one's end, as a
        host's intervals are stored in time order)."""
        return CapacitySeries(np.concatenate([self.start, newer.start]),
                              np.concatenate([self.end, newer.end]),
                              np.concatenate([self.free, newer.free]))

    @cached_property
    def span(self) -> np.ndarray:
        """Each interval's length (seconds)."""
        return self.end - self.start

    @cached_property
    def breaks(self) -> np.ndarray:
        """Where the series breaks: the intervals followed by a gap above the tolerance."""
        return np.flatnonzero(self.start[1:] - self.end[:-1] > GAP_TOLERANCE_SECONDS)

    @property
    def covered_until(self) -> float:
        """The end of the series (epoch seconds; -inf when empty)."""
        return float(self.end[-1]) if self.end.size else -np.inf


def realised_seconds(series: CapacitySeries, launch_epoch: float,
                     dedicated_seconds: float) -> float | None:
    """Seconds from ``launch_epoch`` until a task of ``dedicated_seconds`` per core finishes
    on every core; None while the series does not reach that far or is broken on the way."""
    return _realised(series, launch_epoch, dedicated_seconds)[0]


def _realised(series: CapacitySeries, launch_epoch: float, dedicated_seconds: float
              ) -> tuple[float | None, float]:
    """:func:`realised_seconds` and, when the task was still running unbroken at the end of
    the series, the CPU seconds it still lacked on its furthest-behind core (else 0)."""
    # the intervals ending after the launch: a suffix of the series (stored in time order)
    start, end = series.start, series.end
    first = int(np.searchsorted(end, launch_epoch, side="right"))
    if first == end.size or start[first] > launch_epoch + GAP_TOLERANCE_SECONDS:
        return None, 0.0
    # up to the first break after the launch (the series' breaks found once)
    breaks = series.breaks
    after = int(np.searchsorted(breaks, first))
    stop = int(breaks[after]) + 1 if after < breaks.size else end.size
    # most tasks end within a few times their length: tried on the intervals up to then
    # first, the same figures when it ends there (the sums over a prefix are the prefix of
    # the sums); otherwise worked out up to the break or the end
    prefix = int(np.searchsorted(end, launch_epoch + PREFIX_LENGTHS * dedicated_seconds
                                 + PREFIX_SECONDS, side="right"))
    if first < prefix < stop:
        found, _ = _finish_in(series, first, prefix, launch_epoch, dedicated_seconds)
        if found is not None:
            return found, 0.0
    found, lacking = _finish_in(series, first, stop, launch_epoch, dedicated_seconds)
    if found is not None or stop < end.size:  # ended, or the series breaks before it does
        return found, 0.0
    return None, lacking


def _got(series: CapacitySeries, first: int, stop: int, launch_epoch: float) -> np.ndarray:
    """The free CPU seconds per core of intervals ``first`` to ``stop`` left for a task
    launched at ``launch_epoch``."""
    start, end, span = series.start[first:stop], series.end[first:stop], series.span[first:stop]
    # the part of the first interval before the launch is not available to the task
    share = np.clip((end - np.maximum(start, launch_epoch)) / np.where(span > 0, span, 1.0),
                    0.0, 1.0)
    return series.free[first:stop] * share[:, None]


def _finish_in(series: CapacitySeries, first: int, stop: int, launch_epoch: float,
               dedicated_seconds: float) -> tuple[float | None, float]:
    """Seconds from the launch until the task ends on every core if it does within
    intervals ``first`` to ``stop`` (unbroken), else None and the CPU seconds it still
    lacks on its furthest-behind core."""
    got = _got(series, first, stop, launch_epoch)
    total = np.cumsum(got, axis=0)
    done = total >= dedicated_seconds
    if not done.any(axis=0).all():
        return None, float(np.max(dedicated_seconds - total[-1]))
    start, end = series.start[first:stop], series.end[first:stop]
    index = np.argmax(done, axis=0)
    cores = np.arange(got.shape[1])
    before = np.where(index > 0, total[index - 1, cores], 0.0)
    rate = got[index, cores] / np.maximum(end[index] - np.maximum(start[index], launch_epoch),
                                          1e-9)
    finish = np.maximum(start[index], launch_epoch) + (dedicated_seconds - before) / np.maximum(
        rate, 1e-12)
    return float(finish.max() - launch_epoch), 0.0


def overran(series: CapacitySeries, launch_epoch: float, dedicated_seconds: float,
            bound_seconds: float) -> bool:
    """Whether the task is known to run longer than ``bound_seconds``: the series covers
    launch + bound without a break and the task had not finished by then."""
    return Outcomes(series).overran(launch_epoch, dedicated_seconds, bound_seconds)


def _broken(series: CapacitySeries, launch_epoch: float, horizon: float) -> bool:
    """A gap in the series between the launch and ``horizon``."""
    inside = (series.end > launch_epoch) & (series.start < horizon)
    start, end = series.start[inside], series.end[inside]
    return bool(start.size == 0 or start[0] > launch_epoch + GAP_TOLERANCE_SECONDS or (
        start[1:] - end[:-1] > GAP_TOLERANCE_SECONDS).any())


class Outcomes:
    """:func:`realised_seconds` and :func:`overran` on one fixed ``series``, each launch and
    length worked out once (a pending launch is asked again every hour of a catch-up).

    ``unknown_until`` (kept by the caller from one series to its extension): per launch and
    length, a series end before which the task cannot have finished, learnt when it was
    still running at the end of an earlier series. A pending launch is then not worked out
    again each hour while the series has not reached that far."""

    def __init__(self, series: CapacitySeries,
                 unknown_until: dict[tuple[float, float], float] | None = None) -> None:
        self.series = series
        self._known: dict[tuple[float, float], float | None] = {}
        # no interval frees more CPU than its length: a task cannot have finished before
        # launch + dedicated, and one the series does not reach that far is not worked out
        self._bounded = bool((series.free <= (series.end - series.start)[:, None]).all())
        self.unknown_until = {} if unknown_until is None else unknown_until

    def realised_seconds(self, launch_epoch: float, dedicated_seconds: float) -> float | None:
        key = (launch_epoch, dedicated_seconds)
        if key not in self._known:
            covered = self.series.covered_until
            if self._bounded and (covered < launch_epoch + dedicated_seconds
                                  or covered < self.unknown_until.get(key, -np.inf)):
                self._known[key] = None
            else:
                self._known[key], lacking = _realised(self.series, launch_epoch,
                                                      dedicated_seconds)
                if lacking > 0:
                    # each core gains at most a second of CPU a second: a second short
                    # of that, so rounding in the sums never skips the finish
                    self.unknown_until[key] = covered + lacking - 1.0
                else:
                    self.unknown_until.pop(key, None)
        return self._known[key]

    def overran(self, launch_epoch: float, dedicated_seconds: float,
                bound_seconds: float) -> bool:
        horizon = launch_epoch + bound_seconds
        if self.series.covered_until < horizon:
            return False
        realised = self.realised_seconds(launch_epoch, dedicated_seconds)
        if realised is not None:
            return realised > bound_seconds
        return not _broken(self.series, launch_epoch, horizon)

