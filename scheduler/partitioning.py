"""Splitting W reference-CPU-seconds of divisible work over a set of hosts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host, HostArrays

PARTITIONS = ("equal-mean", "equal-load", "speed")


def check_work(work: float) -> float:
    """``work`` as a positive finite float (reference-CPU-seconds), or InvalidArgumentError."""
    try:
        value = float(work)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"work must be a number of seconds, got {work!r}",
                                   field="work", value=work) from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"work must be positive and finite, got {work!r}",
                                   field="work", value=work)
    return value


def check_partition(method: str) -> str:
    if method not in PARTITIONS:
        raise InvalidArgumentError(
            f"unknown partition {method!r}; choose one of {', '.join(PARTITIONS)}",
            field="partition", value=method)
    return method


def partition(hosts: Sequence[Host], work: float, method: str = "equal-mean") -> np.ndarray:
    """Work per host (reference-CPU-seconds, same order as ``hosts``, summing to ``work``).

    equal-mean (paper eq. 7): w_k proportional to cores_k (1 - rho_k) tau_k, so every sub-task
    has the same mean completion time. equal-load: W / m each. speed: proportional to
    cores_k tau_k (each core counts as one machine of speed tau).
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
    if method == "equal-mean":
        weight = arrays.capacity
    elif method == "speed":
        weight = arrays.cores * arrays.tau
    else:
        # shaped like the columns: gathered batches of sets carry no names to count
        weight = np.ones_like(arrays.tau)
    if mask is None:
        return work * weight / weight.sum()
    weighted = np.where(mask, weight, 0.0)
    totals = weighted.sum(axis=-1, keepdims=True)
    return np.asarray(work)[..., None] * weighted / totals if np.ndim(work) else (
        work * weighted / totals)


def whole_units(shares: np.ndarray, units: int) -> np.ndarray:
    """Split ``units`` indivisible work items in proportion to ``shares`` (largest remainder).

    The result is whole numbers that sum to ``units``; ties in the remainders go to the
    earlier host so the split is deterministic.
    """
    if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 0:
        raise InvalidArgumentError(f"units must be a whole number >= 0, got {units!r}",
                                   field="units", value=units)
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
