"""Machine-set selection on the calibrated law: each host's quantile factors, per task length.

The manager serves the calibrated law (:mod:`scheduler.calibrated`): each host's model CDF F_k
is mapped through phi_k, the piecewise-linear map of [0, 1] through (F_k(reported q-quantile),
q) with the reported quantile = model quantile x factor, and the task's CDF is the product.
Selection ranks sets by that law's mean + std, the same figures as ``calibrated_prediction``,
so the set chosen is the best for the answer served.

For a batch of sets (vectorised over sets, hosts and grid points): every member with work, one row
per (set, member) pair, has its F_k on its set's geometric grid, its model quantiles and the factors
at its dedicated time, interpolated in log length between the calibrators' task lengths around it
(:func:`length_factors`, the manager's rule), phi_k(F_k); the sets' products follow. F_k is
evaluated only on the grid columns where some row is neither 0 (not started) nor 1 (to double
precision), which gives the same figures for a fraction of the points. The moments are the model's
(from the quadrature) plus the difference between the calibrated and the model law's integrals on
the same grid, so the grid's error cancels (exact when every factor is 1), as in
``scheduler.calibrated``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler import completion, fits
from scheduler.calibrated import GRID_POINTS, _level_map
from scheduler.compact_servers import compacted
from scheduler.conformal import LEVELS
from scheduler.errors import InvalidArgumentError
from scheduler.host_cdf import rows_cdf
from scheduler.length_factors import length_factors, length_weights
from scheduler.level_knots import level_knots
from scheduler.model import Servers, with_vanishing_interruption
from scheduler.no_delay import floored, set_floors
from scheduler.power_tail import _power_tail

__all__ = ["SelectionCalibration", "calibrated_host_log_cdf", "calibrated_moments",
           "length_factors", "length_weights", "shared_table"]

# a survival below this leaves F = 1 - survival equal to 1 in double precision, whatever
# the mult (up to thousands) and groups
_ROUNDS_TO_ONE = 1e-20
# points of each host's own grid when its level map only ranks hosts
_HOST_POINTS = 128


@dataclass(frozen=True)
class SelectionCalibration:
    """Quantile factors the selection ranks sets with.

    ``lengths_seconds``: the calibrators' task lengths (dedicated seconds), increasing;
    ``factors``: host name -> (lengths, levels) factors > 0 of each length's calibrator (a
    host not named is taken as uncalibrated, factors 1); ``levels``: the quantile levels.
    The members of a set of several hosts share the geometric mean of their tables
    (:func:`shared_table`), as a manager serves a split; each member's factors are
    interpolated at its dedicated time in the set (:func:`length_factors`).
    """

    lengths_seconds: tuple[float, ...]
    factors: Mapping[str, Any]
    levels: tuple[float, ...] = field(default=LEVELS)
    # host name -> (lengths,) its chance of ending on its dedicated time at each length, from
    # its record (scheduler.no_delay); a split's law is at least their product from its
    # longest share's dedicated time on (scheduler.calibrated.calibrate). Empty: none.
    no_delay: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths_seconds, dtype=float)
        if lengths.ndim != 1 or lengths.size == 0 or not (
                np.isfinite(lengths).all() and (lengths > 0).all()
                and (np.diff(lengths) > 0).all()):
            raise InvalidArgumentError("lengths_seconds must be increasing positive seconds, "
                                       "at least one", field="lengths_seconds",
                                       value=self.lengths_seconds)
        levels = np.asarray(self.levels, dtype=float)
        if levels.ndim != 1 or not ((levels > 0) & (levels < 1)).all() \
                or (np.diff(levels) <= 0).any():
            raise InvalidArgumentError("levels must be increasing numbers in (0, 1)",
                                       field="levels", value=self.levels)
        for name, table in self.factors.items():
            f = np.asarray(table, dtype=float)
            if f.shape != (lengths.size, levels.size) or not (np.isfinite(f).all()
                                                              and (f > 0).all()):
                raise InvalidArgumentError(
                    f"factors of host {name!r} must be positive, shape ({lengths.size}, "
                    f"{levels.size})", field="factors", value=name)
        for name, chances in self.no_delay.items():
            c = np.asarray(chances, dtype=float)
            if c.shape != (lengths.size,) or not (np.isfinite(c).all() and (c > 0).all()
                                                  and (c <= 1).all()):
                raise InvalidArgumentError(
                    f"no-delay chances of host {name!r} must lie in (0, 1], one per length "
                    f"({lengths.size})", field="no_delay", value=name)

    def table(self, names: Sequence[str]) -> np.ndarray:
        """(hosts, lengths, levels) factors of ``names`` in order (1 where not given)."""
        out = np.ones((len(names), len(self.lengths_seconds), len(self.levels)))
        for k, name in enumerate(names):
            if name in self.factors:
                out[k] = np.asarray(self.factors[name], dtype=float)
        return out


    def no_delay_table(self, names: Sequence[str]) -> np.ndarray | None:
        """(hosts, lengths) chances of ``names`` in order (None: no host has any; a host
        not named has none, 0)."""
        if not self.no_delay:
            return None
        out = np.zeros((len(names), len(self.lengths_seconds)))
        for k, name in enumerate(names):
            if name in self.no_delay:
                out[k] = np.asarray(self.no_delay[name], dtype=float)
        return out


def shared_table(table: Any, sharing: Any = None) -> np.ndarray:
    """The factor tables the hosts of one task are served with: ``table`` (..., hosts,
    lengths, levels) each host's own; where several hosts share a task (``sharing``
    (..., hosts) marks them, default every host), each takes the geometric mean of theirs,
    level by level and length by length; a host alone keeps its own, to the bit.

    Why not each host's own: a factor is an adaptive-conformal correction that moves with
    every outcome, so at any launch some hosts' factors sit high by chance, and a split
    ends with its latest share, which the hosts whose factors sit highest decide. Their
    noise then lifts the task's quantiles (a winner's curse): on 8 Poisson workstations
    (eight draws of each of two families, tasks of 4-128 h; README "Calibration") the
    split's p50 covered .62-.63 with each host's own factors and .50-.53 with the set's
    mean, p90 .94-.97 and .91-.95, narrower; on the real logs' splits (16 and 32 stations)
    p90 moved by at most .01, and .03 down on 8 LCG stations."""
    table = np.asarray(table, dtype=float)
    if table.ndim < 3 or not (np.isfinite(table).all() and (table > 0).all()):
        raise InvalidArgumentError("factor tables must be positive, shaped (..., hosts, "
                                   "lengths, levels)", field="factors", value=table.shape)
    shape = table.shape[:-2]
    try:
        sharing = np.ones(shape, dtype=bool) if sharing is None else np.broadcast_to(
            np.asarray(sharing, dtype=bool), shape)
    except ValueError:
        raise InvalidArgumentError(f"sharing must mark the hosts, shape {shape}",
                                   field="sharing", value=np.shape(sharing)) from None
    count = sharing.sum(axis=-1, keepdims=True)  # (..., 1)
    logs = np.where(sharing[..., None, None], np.log(table), 0.0)
    mean = np.exp(logs.sum(axis=-3, keepdims=True)
                  / np.maximum(count, 1)[..., None, None])
    return np.where(((count > 1) & sharing)[..., None, None], mean, table)


def calibrated_moments(servers: Any, dedicated_seconds: np.ndarray, factors: np.ndarray,
                       levels: np.ndarray, model_mean: np.ndarray, model_var: np.ndarray,
                       no_delay: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each set's calibrated law, seconds and s^2.

    ``servers``: (B, hosts x groups) laws laid out host by host, as ``build_servers`` gives
    them; ``dedicated_seconds``: (B, hosts), 0 where a host has no work; ``factors``:
    (B, hosts, levels), 1 where a host has no work; ``model_mean``/``model_var``: the model
    law's moments of each set; ``no_delay``: (B, hosts) each member's chance of ending on its
    dedicated time (:func:`scheduler.no_delay.set_floors`), None for none.
    """
    count, hosts = dedicated_seconds.shape
    groups = servers.mult.shape[-1] // hosts
    servers = with_vanishing_interruption(servers)  # as the served law maps a pure atom
    # the served law's grid (scheduler.calibrated): its quantiles and level map are read on
    # it, and a CDF with atoms is mapped differently on another
    positive = np.where(dedicated_seconds > 0, dedicated_seconds, np.inf).min(axis=1)
    low = 0.05 * np.where(np.isfinite(positive), positive, np.maximum(model_mean, 1e-3))
    high = ((model_mean + 12.0 * np.sqrt(model_var)) * np.maximum(1.0, factors.max(axis=(1, 2)))
            * 1.5)
    high = np.maximum(high, 4.0 * low)
    grid = np.exp(np.linspace(np.log(low), np.log(high), GRID_POINTS, axis=1))  # (B, K)
    # Only the hosts with work, each on its set's grid: one row per (set, host) pair. A host
    # without work is finished from the start (F = 1, mapped to 1) and leaves the product.
    pair_set, pair_host = np.nonzero(dedicated_seconds > 0)
    # each pair's groups (its padding to the widest host's groups and atoms left out)
    pair_servers = compacted(servers.take((pair_set[:, None],
                                           pair_host[:, None] * groups + np.arange(groups))),
                             split=True)
    pair_grid = grid[pair_set]
    host_cdf, first, stop = _host_cdf(pair_servers, pair_grid)  # (P, K)
    pair_factors = factors[pair_set, pair_host]  # (P, L)
    knots, reported, _ = level_knots(pair_servers, _quantiles(pair_grid, host_cdf, levels),
                                     pair_factors, levels,
                                     dedicated_seconds[pair_set, pair_host])
    # the served law's level map (calibrated._level_map: conformal.level_map as clipped ramps)
    # phi maps 1 to 1 and 0 to 0 (below ``first`` every F is 0)
    mapped = np.ones_like(host_cdf)
    mapped[:, :first] = 0.0
    mapped[:, first:stop] = _level_map(host_cdf[:, first:stop], knots, levels)
    # past its own levels a member's law is a power law in time, wherever its model's F is
    _power_tail(mapped[:, first:], pair_grid[:, first:], reported, levels,
                np.ones(len(pair_set), dtype=bool))
    # pairs come set by set (np.nonzero's row-major order) and every set has work somewhere
    starts = np.searchsorted(pair_set, np.arange(count))
    task_cdf = np.maximum.accumulate(np.multiply.reduceat(mapped, starts, axis=0), axis=1)
    model_cdf = np.maximum.accumulate(np.multiply.reduceat(host_cdf, starts, axis=0), axis=1)
    if no_delay is not None:
        floored(task_cdf, grid, *set_floors(no_delay, dedicated_seconds), model_cdf)
    # the survival integrals' differences, integrated as one (survival 1 - task minus 1 - model)
    gap = model_cdf - task_cdf
    first_gap, second_gap = _integral(grid, gap, 1), _integral(grid, gap, 2)
    mean = model_mean + first_gap
    second = model_var + model_mean**2 + second_gap
    return mean, np.maximum(second - mean**2, 0.0)


def calibrated_host_log_cdf(servers: Any, log_cdf: np.ndarray, factors: np.ndarray,
                            levels: np.ndarray, dedicated_seconds: np.ndarray,
                            grid_seconds: np.ndarray) -> np.ndarray:
    """(K, n) log of each host's calibrated CDF phi_k(F_k) at the times ``grid_seconds``
    (K,) where its model ``log_cdf`` (K, n) was read; ``servers``: the hosts' laws, (1, n x
    groups) (each host's core groups side by side), ``factors`` (n, levels) at each one's
    ``dedicated_seconds`` (n,).
    Each host's level map is read on its own geometric grid of ``_HOST_POINTS`` from its
    start to where its survival is 1e-9 (the served law reads it on the set's grid: close,
    not the same figures; this ranks hosts, it does not score sets)."""
    hosts = len(factors)
    groups = servers.t.shape[1] // hosts
    rows = servers.take((np.zeros((hosts, 1), dtype=int),
                         np.arange(hosts * groups).reshape(hosts, groups)))
    if isinstance(rows, Servers) and groups == 1:
        # one plain server type per host: its quantiles in closed form, and F at the
        # reported ones exactly (not read on a grid; 3-4 times cheaper)
        knots, reported = _exact_knots(rows, factors, levels, dedicated_seconds)
        return _mapped_log_cdf(log_cdf, knots, reported, levels, dedicated_seconds,
                               grid_seconds)
    start = np.maximum(completion.start_point(rows), 1e-9)
    end = np.maximum(np.max(np.where(rows.mult > 0, rows.upper_bound(1e-9), 0.0), axis=1),
                     2.0 * start)
    grid = np.exp(np.linspace(np.log(start), np.log(end), _HOST_POINTS, axis=1))
    cdf, _, _ = _host_cdf(rows, grid)
    knots, reported, _ = level_knots(rows, _quantiles(grid, cdf, levels), factors, levels,
                                     dedicated_seconds)
    return _mapped_log_cdf(log_cdf, knots, reported, levels, dedicated_seconds, grid_seconds)


def _mapped_log_cdf(log_cdf: np.ndarray, knots: np.ndarray, reported: np.ndarray,
                    levels: np.ndarray, dedicated_seconds: np.ndarray,
                    grid_seconds: np.ndarray) -> np.ndarray:
    """(K, n) log of the level map of the model's ``log_cdf`` (K, n) through ``knots``, with
    its power-law tail through the ``reported`` quantiles (n, levels) at ``grid_seconds``."""
    mapped = _power_tail(_level_map(np.exp(log_cdf).T, knots, levels),
                         np.asarray(grid_seconds, dtype=float)[None, :], reported, levels,
                         np.asarray(dedicated_seconds) > 0)
    with np.errstate(divide="ignore"):
        return np.log(mapped).T


def _exact_knots(rows: Servers, factors: np.ndarray, levels: np.ndarray,
                 dedicated_seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, levels) F of each row's single server type (n, 1) at its reported quantiles (its
    model quantiles times ``factors``, not before ``dedicated_seconds``), non-decreasing,
    and those quantiles (seconds). Where F = L, 1 - q sf(x - t) = L^(1 / mult), at t itself
    within the atom P(no interruption)."""
    t, q = rows.t[:, :1], rows.q[:, :1]
    need = -np.expm1(np.log(levels)[None, :] / np.maximum(rows.mult[:, :1], 1.0))
    atom = need >= q
    with np.errstate(invalid="ignore", divide="ignore"):
        delay = fits.isf(rows.code, rows.p1, rows.p2, np.where(atom, 1.0, need / np.where(
            atom, 1.0, q)))
    knots, reported, _ = level_knots(rows, t + np.where(atom, 0.0, delay), factors, levels,
                                     dedicated_seconds)
    return knots, reported


def _host_cdf(servers: Any, grid: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(P, K) non-decreasing CDF of each row's host (its (P, groups) servers, each to the
    power of its mult) on the row's grid, and the columns [first, stop) where some row is
    neither 0 nor 1. Only those are evaluated: before the first the rows' hosts have not
    started (their latest group's earliest finish), from stop on every survival is below
    1e-18, where F rounds to 1."""
    start = completion.start_point(servers)
    first = int(np.argmax(grid >= start[:, None], axis=1).min())
    end = np.max(np.where(servers.mult > 0, servers.upper_bound(_ROUNDS_TO_ONE), 0.0), axis=1)
    stop = int(np.minimum(np.sum(grid < end[:, None], axis=1) + 1, grid.shape[1]).max())
    stop = max(stop, first + 1)
    cdf = np.ones(grid.shape)
    cdf[:, :first] = 0.0
    cdf[:, first:stop] = np.maximum.accumulate(rows_cdf(servers, grid[:, first:stop]),
                                               axis=1)
    return cdf, first, stop


def _integral(grid: np.ndarray, survival: np.ndarray, power: int) -> np.ndarray:
    """E[T^power] of each row from its survival on its own grid (unfinished below it);
    linear in ``survival``, so a difference of survivals gives the difference."""
    weight = power * grid ** (power - 1) * survival
    return grid[:, 0] ** power * survival[:, 0] + np.trapezoid(weight, grid, axis=1)


def _quantiles(grid: np.ndarray, cdf: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(P, L) times where each row's non-decreasing CDF on its own grid (P, K) reaches a
    level, linear between grid points (the grid's ends where it never does)."""
    rows, points = cdf.shape
    last = points - 1
    # every row lies in [0, 1]: shifted 2 apart, the rows are one sorted array, searched once
    offset = 2.0 * np.arange(rows)[:, None]
    above = (np.searchsorted((cdf + offset).ravel(), (levels + offset).ravel())
             .reshape(rows, -1) - points * np.arange(rows)[:, None])  # first index >= level
    hi = np.clip(above, 1, last)
    lo = hi - 1
    f_lo = np.take_along_axis(cdf, lo, axis=1)
    f_hi = np.take_along_axis(cdf, hi, axis=1)
    x_lo = np.take_along_axis(grid, lo, axis=1)
    x_hi = np.take_along_axis(grid, hi, axis=1)
    rise = f_hi - f_lo
    step = np.divide(levels - f_lo, rise, out=np.ones_like(rise), where=rise > 0)
    x = x_lo + np.clip(step, 0.0, 1.0) * (x_hi - x_lo)
    return np.where(above == 0, grid[:, :1], np.where(above > last, grid[:, -1:], x))
