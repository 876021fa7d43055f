"""Each host's chance that a share ends on its dedicated time, from the host's own record.

A split ends with its slowest share, so its median sits at its longest share's dedicated time
only when every share runs undisturbed with a chance whose product is at least one half: on 32
quiet stations, about 0.98 each. Each station's calibrated law cannot say that: its level map
puts the model's chance of no delay at one of the served levels (a half, 0.9 or 0.95), and the
factors a split's stations share (:func:`scheduler.calibrated_selection.shared_table`) lift a
quiet station's quantiles off its dedicated time. On 32 NASA and KTH stations the served
split's p50 was 2.7-3.7 times the dedicated time where half to two thirds of the 8 h splits
ended on it (docs/measurement-log.md).

A host's record holds the answer: of its shadow launches of a task length (the single-host
launches its calibrators learn from, hourly), how many ended within ``SLACK`` of their
dedicated time, kept apart for launches that found local jobs running (whose chance is far
lower) and those that did not. A host's chance at a length is the share of its own launches
that did, shrunk towards the share over every host (``PRIOR_LAUNCHES`` launches' worth), and
at a share's dedicated time it is read between the lengths around it (:func:`chances_at`).

The task's floor is the product of its shares' chances (the shares taken as independent;
owners' work on a lab's stations tends to come together, which only makes the floor
conservative): its law is at least that from its longest share's dedicated time (times
1 + ``SLACK``) on, once the model's own law says every share can have finished (a host with
local jobs running cannot before they end) (:func:`scheduler.calibrated.calibrate`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.length_factors import length_factors

# a share ended on its dedicated time if it took at most this much longer: a manager reads
# the outcome off the capacity series, where an idle machine's lowest-priority task
# measures a little under a whole core
SLACK = 0.01
# launches' worth of the chance over every host a host's own record is shrunk towards
PRIOR_LAUNCHES = 10.0


def ended_on_dedicated(realised_seconds: Any, dedicated_seconds: Any) -> np.ndarray:
    """Whether each outcome ended within ``SLACK`` of its dedicated time (both seconds)."""
    realised = np.asarray(realised_seconds, dtype=float)
    return realised <= np.asarray(dedicated_seconds, dtype=float) * (1.0 + SLACK)


def chances_at(table: Any, lengths_seconds: Any, dedicated_seconds: Any) -> np.ndarray:
    """(...) chances at each dedicated time (seconds) from ``table`` (..., lengths) of
    chances at the calibrated ``lengths_seconds``: between two lengths geometric in log
    length, as a calibrator's factors are read; below the shortest, the shortest's; past
    the longest L, its chance a to the power t / L (undisturbed through each stretch of L
    in turn, as under Poisson arrivals: a share of twice the longest length is not as
    likely to run undisturbed as one of it). A chance of 0 stays 0."""
    table = np.asarray(table, dtype=float)
    lengths = np.asarray(lengths_seconds, dtype=float)
    dedicated = np.broadcast_to(np.asarray(dedicated_seconds, dtype=float), table.shape[:-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        at = length_factors(table[..., None], lengths, dedicated)[..., 0]
    longest = float(lengths[-1])
    return np.where(dedicated > longest,
                    table[..., -1] ** (np.maximum(dedicated, longest) / longest), at)


def set_floors(chances: np.ndarray, dedicated_seconds: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(B,) each set's chance that every share ends on its dedicated time, and (B,) from when
    (seconds), as :func:`scheduler.calibrated.calibrate` applies them: ``chances`` (B, hosts)
    each member's at its share, ``dedicated_seconds`` (B, hosts), 0 where a host has no work.
    A set of one working host has none (its own factors place its atom)."""
    working = dedicated_seconds > 0
    floors = np.where(working, chances, 1.0).prod(axis=1)
    floors = np.where(working.sum(axis=1) > 1, floors, 0.0)
    return floors, dedicated_seconds.max(axis=1) * (1.0 + SLACK)


def floored(cdf: np.ndarray, times: np.ndarray, floors: np.ndarray, since: np.ndarray,
            model_cdf: np.ndarray) -> np.ndarray:
    """Each row's task ``cdf`` at ``times`` (B, K) held at least at its ``floors`` (B,) from
    ``since`` (B,) seconds on, where the model's own law of the task ``model_cdf`` (B, K)
    says every share can have finished: a member with jobs running cannot before they end,
    whatever its record of such launches says (in place; returns ``cdf``)."""
    if floors.any():
        held = np.where((times >= since[:, None]) & (model_cdf > 0), floors[:, None], 0.0)
        np.maximum(cdf, held, out=cdf)
    return cdf


class NoDelayRecord:
    """Per host, task length and state at launch (no jobs running / jobs running): shadow
    launches scored and those that ended on their dedicated time."""

    def __init__(self, hosts: int, lengths_seconds: Any) -> None:
        lengths = np.asarray(lengths_seconds, dtype=float)
        if lengths.ndim != 1 or lengths.size == 0 or not (
                np.isfinite(lengths).all() and (lengths > 0).all()
                and (np.diff(lengths) > 0).all()):
            raise InvalidArgumentError("lengths_seconds must be increasing positive seconds",
                                       field="lengths_seconds", value=None)
        self.lengths_seconds = lengths
        self.scored = np.zeros((int(hosts), lengths.size, 2))
        self.on_time = np.zeros((int(hosts), lengths.size, 2))

    @property
    def hosts(self) -> int:
        return int(self.scored.shape[0])

    def grow(self, hosts: int) -> None:
        """Make room for ``hosts`` rows (new ones with no record)."""
        extra = int(hosts) - self.hosts
        if extra > 0:
            pad = np.zeros((extra, *self.scored.shape[1:]))
            self.scored = np.concatenate([self.scored, pad])
            self.on_time = np.concatenate([self.on_time, pad])

    def record(self, row: int, length_index: int, busy: bool, on_time: bool) -> None:
        """One scored launch of host ``row`` at length ``length_index``; ``busy``: it found
        local jobs running; ``on_time``: it ended on its dedicated time."""
        self.scored[row, length_index, int(busy)] += 1.0
        self.on_time[row, length_index, int(busy)] += float(on_time)

    def chances(self, rows: Any, busy: Any, dedicated_seconds: Any) -> np.ndarray:
        """(n,) each host's chance of ending on its ``dedicated_seconds`` (n,), in the state
        ``busy`` (n,) flags, from rows ``rows`` of the record (see the module docstring)."""
        return chances_at(self.length_table(rows, busy), self.lengths_seconds,
                          dedicated_seconds)

    def length_table(self, rows: Any, busy: Any) -> np.ndarray:
        """(n, lengths) each host's chance at every length, in the state ``busy`` (n,)."""
        rows = np.asarray(rows, dtype=int)
        state = np.broadcast_to(np.asarray(busy, dtype=int), rows.shape)
        scored, on_time = self.scored[rows, :, state], self.on_time[rows, :, state]
        # every host's launches in the same state, with one of each outcome added (a pool
        # with no record is an even chance: a prior of 10 such launches moves slowly)
        pooled = (self.on_time.sum(axis=0) + 1.0) / (self.scored.sum(axis=0) + 2.0)
        prior = pooled.T[state]
        return (on_time + PRIOR_LAUNCHES * prior) / (scored + PRIOR_LAUNCHES)
