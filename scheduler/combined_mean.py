"""Served means that combine two views' means (geometric mean): a one-host answer's on a host
of one core whose state is known, and a split's.

**One host.**

The default one-host view starts the task idle under the forecast of the measured utilisation,
which carries any running (and queued) jobs only as load; it ignores a queue, and on stations
held by one it served about the dedicated time where the runs took many times it (RICC: a
median 1.02 times the work served, 15.5 realised). The record's view holds the jobs as a
backlog, at the weight the host's own record favours (:mod:`scheduler.backlog_weight`: the
backlog scaled by 0-1, or the carried start), under the forecast load of new arrivals alone
(their rate times their mean demand, at most the long-run utilisation); with no job running
it starts idle under that load. It sees the queue and the owners' arrivals, but leans on
demand templates that a few dozen jobs set (KTH: a station's templates put the backlog at
twice what the log held). Each is off in its own direction, so the answer's mean is their
geometric mean, an equal-weight combination in log time (the quantities are positive and
skewed; weights fitted to one log did not carry to the next, the README's measurement log
says which were tried).

Measured on the back-tests' table cut, mean error against the paper model's. Launches with
jobs running (2026-11-29): 0.722x to 0.466x on RICC, 0.753x to 0.668x on CTC, 0.554x to
0.462x on hpc2n, 0.661x to 0.676x on KTH and 0.758x to 0.742x on Lublin; the record view
alone was 0.431x, 0.619x, 0.686x, 0.750x and 0.731x, trading logs as every single view did.
Launches that found none (2026-11-29, later): the two estimates of the window's load, the
measured utilisation's forecast and the arrivals', combined as well. On 28 back-test runs (7
logs, 7 cuts) it lowered the mean error on 25 and raised it by at most .003 on three (CTC's
table cut 0.668x to 0.610x, NASA's 0.524x to 0.443x); it lowered it on every log of a cut
never run before; on Poisson workstations, 8 h tasks, 6.4% to 5.9% (log-uniform) and 4.4%
to 4.1% (lognormal). The median error rose on about half the runs, by a point or so: it
hedges the large misses.

One core only, as the age floor (:mod:`scheduler.age_floor`): the back-tests are of one-core
stations, and on several cores a snapshot does not say which core a job holds.

**A split.** Its view holds each host's jobs as backlog under the forecast load of new
arrivals, as forecast; the same shares seen with that load held to at most each host's
long-run utilisation give the other mean. The forecast alone kept LCG's busy stations, whose
load stayed above the 8-day level, from being handed too much (8 stations served p90 .66
held, .83 not), but after a burst that struck every CTC station at once it carried the
burst on (32 stations: mean error 0.71x the paper model's, 0.59x held). The split's law is
the forecast's, its mean the geometric mean of the two.
"""

from __future__ import annotations

import math

from scheduler.errors import InvalidArgumentError


def one_host_mean_seconds(view_mean_seconds: float, record_mean_seconds: float | None,
                          floor_seconds: float | None = None) -> float:
    """The served mean (seconds): the geometric mean of the default view's mean
    ``view_mean_seconds``, held at ``floor_seconds`` (the age floor, with jobs running;
    None: none), and the record view's mean ``record_mean_seconds`` (None: the view's mean
    alone, at its floor)."""
    _check_seconds(view_mean_seconds=view_mean_seconds, record_mean_seconds=record_mean_seconds,
                   floor_seconds=floor_seconds)
    return _one_host_mean(float(view_mean_seconds), record_mean_seconds, floor_seconds)


def split_mean_seconds(view_mean_seconds: float, held_mean_seconds: float | None) -> float:
    """A split's served mean (seconds): the geometric mean of its view's mean and
    ``held_mean_seconds``, the mean of the same shares with each host's new arrivals held to
    its long-run utilisation (None: the view's mean alone)."""
    _check_seconds(view_mean_seconds=view_mean_seconds, held_mean_seconds=held_mean_seconds)
    return _one_host_mean(float(view_mean_seconds), held_mean_seconds, None)


def _check_seconds(**means: float | None) -> None:
    """Each given mean (the first required) a finite number of seconds >= 0."""
    for k, (name, value) in enumerate(means.items()):
        if value is None and k > 0:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value >= 0):
            raise InvalidArgumentError(f"{name} must be a finite number of seconds >= 0, got "
                                       f"{value!r}", field=name, value=value)


def _one_host_mean(view: float, record: float | None, floor: float | None) -> float:
    held = view if floor is None else max(view, float(floor))
    return held if record is None else math.sqrt(held * float(record))
