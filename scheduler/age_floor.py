"""A floor under a one-host answer's mean from the ages of the local jobs running at launch.

A lowest-priority task on one core waits for all the local work already there, whatever
arrives after it, so it ends no earlier than its dedicated time plus the running jobs'
remaining demand. The default one-host answer carries those jobs only in the forecast
utilisation, and on launches that found jobs running its mean was short (on the back-tests'
fourth cut a median slowdown of 1.00-1.42 served where the runs took 1.53-2.02).

Estimating the remaining demand from the demand templates (their conditional mean, or lower
figures of the same laws) traded logs: a template's mean is set by the longest of the few
dozen jobs it has seen (README measurement log, "The mean error: what was tried"). A job's
age, the CPU it has used, is measured, and under the heavy-tailed demands of real logs the
remaining demand grows with it (a Pareto law of index near 1 has a median remaining demand
about its age). So the floor is the dedicated time plus ``factor`` times the running jobs'
ages. ``AGE_FLOOR_FACTOR`` 0.5 was chosen on one cut of the logs and checked on another it
was not chosen on: no log worse on either (README, "Back-tests on real logs").

Only on a host of one core. On several, a snapshot does not say which core each job runs
on: the owners' jobs of ``ghs experiment live`` are pinned to one core and leave the other
free, where an FCFS spread of two of them (the backlog's) would hold a one-process task
behind the younger; the back-tests that chose the floor are all of one-core stations.
"""

from __future__ import annotations

import math

from scheduler.backlog import Backlog, _numbers
from scheduler.errors import InvalidArgumentError

AGE_FLOOR_FACTOR = 0.5


def age_floor_seconds(dedicated_seconds: float, backlog: Backlog, cores: int = 1,
                      factor: float = AGE_FLOOR_FACTOR) -> float | None:
    """The floor under the mean (seconds) of a task of ``dedicated_seconds`` on a host of
    ``cores`` cores that holds ``backlog`` at launch: ``dedicated_seconds`` plus ``factor``
    times the running jobs' ages (CPU seconds used). None where there is no floor: a host of
    several cores, or a backlog that lists no running jobs with known ages."""
    dedicated, factor = (float(_numbers(name, [value])[0]) for name, value in (
        ("dedicated_seconds", dedicated_seconds), ("factor", factor)))
    if not isinstance(backlog, Backlog):
        raise InvalidArgumentError(f"expected a Backlog, got {backlog!r}", field="backlog",
                                   value=backlog)
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise InvalidArgumentError(f"cores must be a whole number >= 1, got {cores!r}",
                                   field="cores", value=cores)
    if cores > 1 or backlog.kind != "jobs" or not backlog.job_ages:
        return None
    return dedicated + factor * math.fsum(backlog.job_ages)
