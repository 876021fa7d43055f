"""A floor under a one-host answer's mean from the ages of the local jobs running at launch.

A lowest-priority task waits on its core for all the local work already there, whatever
arrives after it, so it ends no earlier than its dedicated time plus the running jobs'
remaining demand. The default one-host answer carries those jobs only in the forecast
utilisation, and on launches that found jobs running its mean was short (on the back-tests'
fourth cut a median slowdown of 1.00-1.42 served where the runs took 1.53-2.02).

Estimating the remaining demand from the demand templates (their conditional mean, or
lower figures of the same laws) traded logs: a template's mean is set by the longest of the
few dozen jobs it has seen (README measurement log, "The mean error: what was tried"). A
job's age, the CPU it has used, is measured, and under the heavy-tailed demands of real logs
the remaining demand grows with it (a Pareto law of index near 1 has a median remaining
demand about its age). So the floor is the dedicated time plus ``factor`` times the ages of
the jobs ahead of the task. ``AGE_FLOOR_FACTOR`` 0.5 was chosen on one cut of the logs and
checked on another it was not chosen on: no log worse on either (README, "Back-tests").

On a host of several cores the jobs sit on the cores as the backlog spreads them (FCFS by
their mean remaining demand, :func:`scheduler.backlog.fcfs_cores`), and a share of
``processes`` processes takes the cores with the least of that work: the floor is the
dedicated time plus ``factor`` times the ages on the ``processes``-th least loaded core (a
core with no job: none).
"""

from __future__ import annotations

import math

from scheduler.backlog import Backlog, fcfs_cores
from scheduler.errors import InvalidArgumentError

AGE_FLOOR_FACTOR = 0.5


def age_floor_seconds(dedicated_seconds: float, backlog: Backlog, cores: int = 1,
                      processes: int | None = None, factor: float = AGE_FLOOR_FACTOR
                      ) -> float | None:
    """The floor under the mean (seconds) of a share of ``dedicated_seconds`` (per process)
    run as ``processes`` processes (default one per core) on a host of ``cores`` cores that
    holds ``backlog`` at launch; None where the backlog lists no running jobs with known
    ages (no floor)."""
    dedicated = _finite("dedicated_seconds", dedicated_seconds)
    factor = _finite("factor", factor)
    if not isinstance(backlog, Backlog):
        raise InvalidArgumentError(f"expected a Backlog, got {backlog!r}", field="backlog",
                                   value=backlog)
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise InvalidArgumentError(f"cores must be a whole number >= 1, got {cores!r}",
                                   field="cores", value=cores)
    count = cores if processes is None else processes
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= cores:
        raise InvalidArgumentError(f"processes must be a whole number in [1, {cores}], got "
                                   f"{processes!r}", field="processes", value=processes)
    if backlog.kind != "jobs" or not backlog.job_ages:
        return None
    return _age_floor(dedicated, backlog, cores, count, factor)


def _age_floor(dedicated: float, backlog: Backlog, cores: int, processes: int,
               factor: float) -> float:
    ages = [0.0] * cores
    for core, age in zip(fcfs_cores(cores, backlog.job_means), backlog.job_ages):
        ages[core] += age
    # the processes take the least loaded cores; the share ends with the last of them
    waiting = sorted(ages)[processes - 1]
    return dedicated + factor * waiting


def _finite(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}", field=name,
                                   value=value) from None
    if not math.isfinite(number) or number < 0:
        raise InvalidArgumentError(f"{name} must be finite and >= 0, got {value!r}",
                                   field=name, value=value)
    return number
