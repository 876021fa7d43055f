"""Splitting W reference-CPU-seconds of divisible work over a set of hosts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler.choices import PARTITIONS
from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host, HostArrays

# A task's work, reference-CPU-seconds: from a microsecond (the shortest local demand a host
# is given) to 31.7 million years. Past it the model's delay moments overflow (1e300 s read
# NaN, and `ghs predict --json` could not print it).
MIN_WORK_SECONDS = 1e-6
MAX_WORK_SECONDS = 1e15


def check_work(work: float) -> float:
    """``work`` as a float in [MIN_WORK_SECONDS, MAX_WORK_SECONDS] (reference-CPU-seconds),
    or InvalidArgumentError."""
    try:
        value = float(work)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"work must be a number of seconds, got {work!r}",
                                   field="work", value=work) from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"work must be positive and finite, got {work!r}",
                                   field="work", value=work)
    if not MIN_WORK_SECONDS <= value <= MAX_WORK_SECONDS:
        raise InvalidArgumentError(
            f"work must be in [{MIN_WORK_SECONDS:g}, {MAX_WORK_SECONDS:g}] "
            f"reference-CPU-seconds, got {work!r}", field="work", value=work)
    return value


def check_partition(method: str) -> str:
    if method not in PARTITIONS:
        raise InvalidArgumentError(
            f"unknown partition {method!r}; choose one of {', '.join(PARTITIONS)}",
            field="partition", value=method)
    return method


def partition(hosts: Sequence[Host], work: float, method: str = "equal-mean") -> np.ndarray:
    """Work per host (reference-CPU-seconds, same order as ``hosts``, summing to ``work``).

    equal-mean (paper eq. 7): w_k proportional to n_k (1 - rho_k) tau_k, so every sub-task
    has the same mean completion time. equal-load: W / m each. speed: proportional to
    n_k tau_k (each core running one of the host's n_k processes counts as one machine of
    speed tau; n_k is all cores unless the host says fewer processes).
    """
    work = check_work(work)
    check_partition(method)
    if len(hosts) == 0:
        raise InvalidArgumentError("partition needs at least one host", field="hosts",
                                   value=[])
    return _partition(HostArrays.from_hosts(hosts), work, method)


def _partition(arrays: HostArrays, work: float | np.ndarray, method: str,
               mask: np.ndarray | None = None) -> np.ndarray:
    """Shares for one set (mask None) or a batch of sets (mask of shape (B, hosts))."""
    if method == "equal-mean" and arrays.backlog is not None:
        return _equal_mean_with_backlog(arrays, work, mask)
    if method == "equal-mean":
        weight = arrays.capacity
    elif method == "speed":
        weight = arrays.processes * arrays.tau
    else:
        # shaped like the columns: gathered batches of sets carry no names to count
        weight = np.ones_like(arrays.tau)
    if mask is None:
        return work * weight / weight.sum()
    weighted = np.where(mask, weight, 0.0)
    totals = weighted.sum(axis=-1, keepdims=True)
    return np.asarray(work)[..., None] * weighted / totals if np.ndim(work) else (
        work * weighted / totals)


# equal-mean shares with a backlog sum to the work within this (relative); further off they
# are rescaled (alpha - level cancelled)
_SUM_TOLERANCE = 1e-9


def _equal_mean_with_backlog(arrays: HostArrays, work: float | np.ndarray,
                             mask: np.ndarray | None) -> np.ndarray:
    """Shares giving every host the same mean completion alpha including its backlog.

    Host k's mean is (Bbar_k + w_k / (n_k tau_k)) / (1 - rho_k), Bbar_k its cores' mean
    backlog, so w_k = capacity_k max(0, alpha - Bbar_k / (1 - rho_k)): water-filling. Hosts
    whose backlog alone outlasts alpha get nothing. (For a host whose cores hold different
    backlogs, the average stands for the cores; the host's share is still split equally.)
    """
    capacity = arrays.capacity
    level = arrays.backlog.core_mean / (1.0 - arrays.rho)
    if mask is not None:
        capacity = np.where(mask, capacity, 0.0)
        level = np.where(mask, level, np.inf)
    order = np.argsort(level, axis=-1, kind="stable")
    sorted_level = np.take_along_axis(level, order, axis=-1)
    sorted_capacity = np.take_along_axis(capacity, order, axis=-1)
    total_capacity = np.cumsum(sorted_capacity, axis=-1)
    total_level = np.cumsum(sorted_capacity * np.where(np.isfinite(sorted_level),
                                                       sorted_level, 0.0), axis=-1)
    # work that filling up to each host's own level would take; the last host with less
    # than W sets the water line
    at_level = total_capacity * sorted_level - total_level
    work = np.asarray(work, dtype=float)
    last = np.sum(at_level < work[..., None], axis=-1, keepdims=True) - 1
    alpha = ((work[..., None] + np.take_along_axis(total_level, last, axis=-1))
             / np.take_along_axis(total_capacity, last, axis=-1))
    shares = capacity * np.maximum(alpha - level, 0.0)
    total = shares.sum(axis=-1, keepdims=True)
    wanted = work[..., None]
    lost = ~(np.abs(total - wanted) <= _SUM_TOLERANCE * wanted)
    if lost.any():
        # W far below a backlog's rounding (a share of 1e-15 s beside a job of 35 s): alpha
        # - level cancels, and the shares had lost their sum, or all of it (no host left to
        # run the task). The water line then sits at the lowest backlog: the work goes to
        # the hosts there, by capacity.
        lowest = (level <= np.min(level, axis=-1, keepdims=True)) & (capacity > 0)
        fallback = np.where(lowest, capacity, 0.0)
        fallback = wanted * fallback / fallback.sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rescaled = shares * (wanted / total)
        shares = np.where(lost, np.where(total > 0, rescaled, fallback), shares)
    return shares


# Up to 2^53 every whole number is a float exactly, so that the largest-remainder split is
# exact (1e20 units overflowed the counts with a cast warning)
MAX_UNITS = 1 << 53


def whole_units(shares: np.ndarray, units: int) -> np.ndarray:
    """Split ``units`` indivisible work items in proportion to ``shares`` (largest remainder).

    The result is whole numbers that sum to ``units``; ties in the remainders go to the
    earlier host so the split is deterministic.
    """
    if isinstance(units, bool) or not isinstance(units, (int, np.integer)) \
            or not 0 <= units <= MAX_UNITS:
        raise InvalidArgumentError(f"units must be a whole number in [0, {MAX_UNITS}], got "
                                   f"{units!r}", field="units", value=units)
    shares = np.asarray(shares, dtype=float)
    total = shares.sum()
    if total <= 0:
        raise InvalidArgumentError("cannot split units over hosts with no work",
                                   field="units", value=units)
    exact = units * shares / total
    floor = np.floor(exact).astype(int)
    left = units - int(floor.sum())
    order = np.lexsort((np.arange(len(exact)), -(exact - floor)))
    floor[order[:left]] += 1
    return floor
