"""The mean of a one-host answer at a launch that finds local jobs running: two views combined.

The default one-host view starts the task idle under the forecast of the measured utilisation,
which carries the running (and queued) jobs only as load; it ignores a queue, and on stations
held by one it served about the dedicated time where the runs took many times it (RICC: a
median 1.02 times the work served, 15.5 realised). The view that holds the jobs as a backlog,
at the weight the host's own record favours (:mod:`scheduler.backlog_weight`: the backlog
scaled by 0-1, or the carried start), sees the queue but leans on demand templates that a few
dozen jobs set (KTH: a station's templates put the backlog at twice what the log held). Each
is off in its own direction, so the answer's mean is their geometric mean, an equal-weight
combination in log time (the quantities are positive and skewed; weights fitted to one log
did not carry to the next, the README's measurement log says which were tried).

Measured on the back-tests' table cut (launches with jobs running only; the others keep the
carried view's mean): mean error against the paper model's 0.722x to 0.466x on RICC, 0.753x
to 0.668x on CTC, 0.554x to 0.462x on hpc2n, 0.661x to 0.676x on KTH and 0.758x to 0.742x on
Lublin; the record view alone was 0.431x, 0.619x, 0.686x, 0.750x and 0.731x, trading logs as
every single view did.

One core only, as the age floor (:mod:`scheduler.age_floor`): the back-tests are of one-core
stations, and on several cores a snapshot does not say which core a job holds.
"""

from __future__ import annotations

import math

from scheduler.errors import InvalidArgumentError


def busy_mean_seconds(carried_mean_seconds: float, record_mean_seconds: float | None,
                      floor_seconds: float | None = None) -> float:
    """The served mean (seconds): the geometric mean of the carried view's mean, held at
    ``floor_seconds`` (the age floor; None: none), and the record-chosen start's mean
    ``record_mean_seconds`` (None: the carried mean alone, at its floor)."""
    checks = (("carried_mean_seconds", carried_mean_seconds, False),
              ("record_mean_seconds", record_mean_seconds, True),
              ("floor_seconds", floor_seconds, True))
    for name, value, optional in checks:
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value >= 0):
            raise InvalidArgumentError(f"{name} must be a finite number of seconds >= 0, got "
                                       f"{value!r}", field=name, value=value)
    return _busy_mean(float(carried_mean_seconds), record_mean_seconds, floor_seconds)


def _busy_mean(carried: float, record: float | None, floor: float | None) -> float:
    held = carried if floor is None else max(carried, float(floor))
    return held if record is None else math.sqrt(held * float(record))
