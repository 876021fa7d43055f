"""The calibrated criterion of many sets at once, cheaply, for a search that screens them.

The exact criterion (:func:`scheduler.calibrated_selection.calibrated_moments`) reads the
served law: every member's model CDF on its set's 256-point geometric grid, its quantiles and
the level map interpolated on that grid, and the moments as the model law's (from the
adaptive quadrature) plus the grid's integral of the calibrated minus the model survival. The
grid is coarse (a few % a step), so its interpolation moves the criterion by up to ~10% from
the law on a finer grid: a screen must read the same grid to rank sets as the exact one does.
This gives the same figures, up to the model moments' accuracy, for a fraction of the cost:

- the model moments from a short grid over the model law's support (from its last start,
  where its CDF jumps from 0, to where its survival is negligible), instead of the quadrature;
  they set the served grid's end, and carry the grid's error as they do in the served law;
- each member's model quantiles in closed form (a host without a backlog is one server type,
  F = (1 - q sf(x - t))^mult), then F at the two grid points on either side, interpolated as
  on the served grid; F at the reported quantiles likewise (12 points per member, not 256);
- the calibrated and model CDFs only on the grid columns where the task's can differ from
  the model's: from the latest start of a member whose level map keeps 0 at 0 (before it,
  both are constant) to where every member's calibrated and model survival are negligible.

Without a backlog only (a backlog's laws are mixtures of server types, without a closed-form
quantile).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler import fits
from scheduler.calibrated import GRID_POINTS, _level_map
from scheduler.calibrated_selection import _window_cdf
from scheduler.model import Servers

# points of the model law's own grid, for its moments
_MODEL_POINTS = 48
# the model grid's first point at least this fraction of the last start (below it, a constant)
_MODEL_SPAN = 1e-5
# a member's calibrated (and model) survival past a set's window, relative to its scale
_TAIL = 1e-10
# below this a model survival leaves F = 1 in double precision (the served law's map is 1)
_ROUNDS_TO_ONE = 1e-20


def screen_moments(servers: Any, dedicated_seconds: np.ndarray, factors: np.ndarray,
                   levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each set's calibrated law as the served law gives it, up to the
    model moments' accuracy (see the module docstring).

    ``servers``: (B, hosts) plain laws, one server type per host (``build_servers`` without a
    backlog); ``dedicated_seconds`` (B, hosts), 0 where a host has no work; ``factors``
    (B, hosts, levels) of each member's calibrator, 1 where a host has no work.
    """
    count = len(dedicated_seconds)
    pair_set, pair_host = np.nonzero(dedicated_seconds > 0)
    pairs: Servers = servers.take((pair_set[:, None], pair_host[:, None]))  # (P, 1)
    t, q, mult = pairs.t[:, 0], pairs.q[:, 0], pairs.mult[:, 0]
    starts = np.searchsorted(pair_set, np.arange(count))
    model_mean, model_var = _model_moments(pairs, pair_set, starts)
    # the served law's grid (calibrated_selection.calibrated_moments)
    low = 0.05 * np.minimum.reduceat(t, starts)
    high = ((model_mean + 12.0 * np.sqrt(model_var)) * np.maximum(1.0, factors.max(axis=(1, 2)))
            * 1.5)
    high = np.maximum(high, 4.0 * low)
    grid = np.exp(np.linspace(np.log(low), np.log(high), GRID_POINTS, axis=1))  # (B, K)
    log_low = np.log(grid[:, 0])
    log_step = (np.log(grid[:, -1]) - log_low) / (GRID_POINTS - 1)
    pair_grid = grid[pair_set]
    # the model quantiles where F = L: (1 - q sf(y)) = L^(1 / mult), t itself within the atom
    need = -np.expm1(np.log(levels)[None, :] / mult[:, None])  # (P, L)
    atom = need >= q[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        delay = fits.isf(pairs.code, pairs.p1, pairs.p2,
                         np.where(atom, 1.0, need / np.where(atom, 1.0, q[:, None])))
    exact_q = t[:, None] + np.where(atom, 0.0, delay)
    # as the served law finds them: the first grid point where F reaches the level, and
    # linear between it and the one before
    above = _first_at_or_above(pair_grid, log_low[pair_set], log_step[pair_set], exact_q)
    last = GRID_POINTS - 1
    hi = np.clip(above, 1, last)
    x_lo = np.take_along_axis(pair_grid, hi - 1, axis=1)
    x_hi = np.take_along_axis(pair_grid, hi, axis=1)
    f_lo, f_hi = np.split(_cdf(pairs, np.concatenate([x_lo, x_hi], axis=1)), 2, axis=1)
    rise = f_hi - f_lo
    step = np.divide(levels - f_lo, rise, out=np.ones_like(rise), where=rise > 0)
    model_q = np.where(above == 0, pair_grid[:, :1], np.where(
        above > last, pair_grid[:, -1:], x_lo + np.clip(step, 0.0, 1.0) * (x_hi - x_lo)))
    reported = np.maximum.accumulate(model_q * factors[pair_set, pair_host], axis=1)
    # F at the reported quantiles, linear between grid points (calibrated_selection._interp)
    hi = np.clip(np.ceil((np.log(np.maximum(reported, 1e-300)) - log_low[pair_set, None])
                         / log_step[pair_set, None]), 1, last).astype(np.int64)
    x_lo = np.take_along_axis(pair_grid, hi - 1, axis=1)
    x_hi = np.take_along_axis(pair_grid, hi, axis=1)
    f_lo, f_hi = np.split(_cdf(pairs, np.concatenate([x_lo, x_hi], axis=1)), 2, axis=1)
    frac = np.clip((reported - x_lo) / (x_hi - x_lo), 0.0, 1.0)
    knots = np.clip(np.maximum.accumulate(f_lo + frac * (f_hi - f_lo), axis=1), 0.0, 1.0)
    # Before the latest start of a member whose map keeps 0 at 0 (else the first start) both
    # CDFs are constant: the model's 0, the task's the product of the maps at 0.
    at_zero = _level_map(np.zeros((len(knots), 1)), knots, levels)[:, 0]
    holds = at_zero <= 0
    begin = np.maximum.reduceat(np.where(holds, t, 0.0), starts)
    begin = np.where(begin > 0, begin, np.minimum.reduceat(t, starts))
    constant = np.multiply.reduceat(at_zero, starts) * (begin > 0)
    constant = np.where(np.maximum.reduceat(holds.astype(float), starts) > 0, 0.0, constant)
    # the window's end: every member's calibrated survival (past its last knot
    # (1 - last level) S_F(x) / S_F(reported)) and model survival below _TAIL
    scale = np.minimum(np.maximum(1.0 - knots[:, -1], 0.0) / (1.0 - levels[-1]), 1.0)
    target = np.maximum(_TAIL * scale, _ROUNDS_TO_ONE) / np.maximum(mult, 1.0)
    end = np.maximum.reduceat(np.maximum(pairs.upper_bound(target[:, None])[:, 0],
                                         reported[:, -1]), starts)
    first = np.maximum(_first_at_or_above(grid, log_low, log_step, begin[:, None])[:, 0] - 1,
                       0)
    stop = np.minimum(_first_at_or_above(grid, log_low, log_step, end[:, None])[:, 0], last)
    width = int((stop - first).max()) + 1
    columns = np.minimum(first[:, None] + np.arange(width), last)
    window = np.take_along_axis(grid, columns, axis=1)  # (B, W), repeated last point past it
    with np.errstate(invalid="ignore"):
        cdf = np.maximum.accumulate(_cdf(pairs, window[pair_set]), axis=1)
    task = np.maximum.accumulate(
        np.maximum(np.multiply.reduceat(_level_map(cdf, knots, levels), starts, axis=0),
                   constant[:, None]), axis=1)
    model = np.maximum.accumulate(np.multiply.reduceat(cdf, starts, axis=0), axis=1)
    gap = model - task
    # the served law's grid integral of the gap: constant (-constant) up to the window
    start = window[:, 0]
    first_gap = -constant * start + np.trapezoid(gap, window, axis=1)
    second_gap = -constant * start**2 + np.trapezoid(2.0 * window * gap, window, axis=1)
    mean = model_mean + first_gap
    second = model_var + model_mean**2 + second_gap
    return mean, np.maximum(second - mean**2, 0.0)


def _model_moments(pairs: Servers, pair_set: np.ndarray, starts: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each set's model law: 0 before its last start, then on a grid of
    _MODEL_POINTS geometric in the time since, to where every member's survival is below
    1e-12; moments about the last start (the variance is then no small difference)."""
    t, mult = pairs.t[:, 0], pairs.mult[:, 0]
    begin = np.maximum.reduceat(t, starts)
    end = np.maximum.reduceat(pairs.upper_bound((1e-12 / np.maximum(mult, 1.0))[:, None])[:, 0],
                              starts)
    span = np.maximum(end - begin, 1e-9 * begin)
    # where the first member's survival starts to fall (its delay's 1e-9 quantile, or at
    # once where it started before the last start)
    onset = np.minimum.reduceat(t + np.where(pairs.q[:, 0] > 0, pairs.upper_bound(
        np.maximum(pairs.q[:, 0] * (1 - 1e-9), 1e-300)[:, None])[:, 0] - t, np.inf), starts)
    near = np.clip(onset - begin, np.minimum(_MODEL_SPAN * begin, 0.5 * span), 0.5 * span)
    # trapezoids in log time since the last start, spectrally accurate for a smooth law
    # (its survival about constant below ``near``, its tail negligible past ``span``)
    since = np.geomspace(near, span, _MODEL_POINTS, axis=1)
    with np.errstate(invalid="ignore"):
        cdf = _cdf(pairs, (begin[:, None] + since)[pair_set])
    survival = 1.0 - np.maximum.accumulate(np.multiply.reduceat(cdf, starts, axis=0), axis=1)
    step = np.log(span / near) / (_MODEL_POINTS - 1)
    weight = since * step[:, None]
    weight[:, [0, -1]] /= 2
    # below ``near`` the survival is its first value: that part exactly, and the rule's
    # end correction where the integrand is that constant times the time (h^2/12 f'(a))
    low = survival[:, 0] * near
    first = np.sum(weight * survival, axis=1) + low * (1.0 + step**2 / 12)
    second = np.sum(2.0 * since * weight * survival, axis=1) + low * near * (1.0 + step**2 / 3)
    return begin + first, np.maximum(second - first**2, 0.0)


def _cdf(pairs: Servers, x: np.ndarray) -> np.ndarray:
    """(P, W) model CDF of each pair's host at its times ``x``, the served law's arithmetic."""
    return _window_cdf(pairs, x)


def _first_at_or_above(grid: np.ndarray, log_low: np.ndarray, log_step: np.ndarray,
                       x: np.ndarray) -> np.ndarray:
    """(R, L) index of the first point of each row's geometric ``grid`` (R, K) at or above
    each of its times ``x`` (R, L); K where none is."""
    last = grid.shape[1] - 1
    with np.errstate(divide="ignore"):
        guess = np.ceil((np.log(x) - log_low[:, None]) / log_step[:, None])
    index = np.clip(np.nan_to_num(guess, nan=0.0, neginf=0.0, posinf=last + 1.0), 0,
                    last + 1).astype(np.int64)
    # the guess can be one off either way where x is within rounding of a point
    below = np.take_along_axis(grid, np.clip(index - 1, 0, last), axis=1)
    index = np.where((index > 0) & (below >= x), index - 1, index)
    at = np.take_along_axis(grid, np.clip(index, 0, last), axis=1)
    return np.where((index <= last) & (at < x), index + 1, index)

