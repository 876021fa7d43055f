"""The calibrated criterion of many sets at once, cheaply, for a search that screens them.

The exact criterion (:func:`scheduler.calibrated_selection.calibrated_moments`) reads the
served law: every member's model CDF on its set's 256-point geometric grid, its quantiles read
on that grid (at its start where the atom there holds the level) and its CDF at the reported
ones from its own law (:mod:`scheduler.level_knots`), and the moments as the model law's (from the
adaptive quadrature) plus the grid's integral of the calibrated minus the model survival. The
grid is coarse (a few % a step), and its interpolation moves the criterion by up to ~10% from
the same law on a fine grid: a screen must read that grid to rank sets as the exact one does
(a screen on its own finer grid was 0.75% off at the median, 14% at worst). This gives the
same figures up to the model moments' accuracy (4e-6 at the median, 3e-4 at the 99th
percentile over 4,200 random sets), for about half the cost:

- the model moments from a short grid in log time since the model law's last start (where
  its CDF jumps from 0) to where its survival is negligible, instead of the quadrature; they
  set the served grid's end, and carry the grid's error as they do in the served law;
- each member's CDF once, on its set's grid columns from just before the set's first start
  (every F is 0 before) to where every F rounds to 1 or the grid ends: its quantiles are read
  there and its knots worked out as the served law's are, and the task's and the
  model's CDFs follow (before the window both are 0: every level map keeps 0 at 0). With the
  pooled far-tail level the window goes on to the grid's end, F taken as 1 there without
  evaluating it: the calibrated law's power law goes on past the last reported quantile.
- the members in blocks of rows small enough to stay in a core's cache, each set's products
  carried from block to block: at 10,000 hosts a round's sets hold 15,000 members, and over
  the whole arrays each of the dozens of passes went to memory (the screen 25% slower).

Without a backlog only: a host is then one server type, F = (1 - q sf(x - t))^mult, in the
served law's arithmetic (a backlog's laws are mixtures, scored by the quadrature as before).
The evaluator uses it for equal-mean shares: with equal shares a set can hold a narrow law
beside wide ones, which the short model grid steps over (model moments up to 2% off).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.calibrated import GRID_POINTS, _level_map, floored, set_floors
from scheduler.calibrated_selection import _quantiles
from scheduler.host_cdf import rows_cdf
from scheduler.level_knots import level_knots
from scheduler.model import Servers, with_vanishing_interruption
from scheduler.power_tail import TAIL_FROM, _power_tail

# points of the model law's own grid, for its moments
_MODEL_POINTS = 48
# the model grid's first point at least this fraction of the last start (below it, a constant)
_MODEL_SPAN = 1e-5
# below this a model survival leaves F = 1 in double precision (the served law's map is 1)
_ROUNDS_TO_ONE = 1e-20
# points of a block of members' windows evaluated at once: 512 KB a temporary, so that
# the block's dozens of passes stay in a core's cache (32,768 and 131,072 were slower)
_BLOCK_POINTS = 65_536


def screen_moments(servers: Any, dedicated_seconds: np.ndarray, factors: np.ndarray,
                   levels: np.ndarray, no_delay: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each set's calibrated law as the served law gives it, up to the
    model moments' accuracy (see the module docstring).

    ``servers``: (B, hosts) plain laws, one server type per host (``build_servers`` without a
    backlog); ``dedicated_seconds`` (B, hosts), 0 where a host has no work; ``factors``
    (B, hosts, levels) of each member's calibrator, 1 where a host has no work;
    ``no_delay`` (B, hosts) each member's chance of ending on its dedicated time, None for
    none (:func:`scheduler.no_delay.set_floors`).
    """
    count = len(dedicated_seconds)
    pair_set, pair_host = np.nonzero(dedicated_seconds > 0)
    # a pure atom mapped as the served law maps it (scheduler.model.VANISHING_INTERRUPTION)
    pairs: Servers = with_vanishing_interruption(
        servers.take((pair_set[:, None], pair_host[:, None])))  # (P, 1)
    t, mult = pairs.t[:, 0], pairs.mult[:, 0]
    starts = np.searchsorted(pair_set, np.arange(count))
    # where each pair's survival falls below 1e-12 and 1e-20 (F then rounds to 1), and
    # where its delay starts (its 1e-9 quantile)
    per_server = np.maximum(mult, 1.0)[:, None]
    bounds = pairs.upper_bound(np.concatenate([
        np.array([[1e-12, _ROUNDS_TO_ONE]]) / per_server,
        np.maximum(pairs.q * (1 - 1e-9), 1e-300)], axis=1))
    model_mean, model_var = _model_moments(pairs, pair_set, starts, bounds[:, [0, 2]])
    # the served law's grid (calibrated_selection.calibrated_moments)
    low = 0.05 * np.minimum.reduceat(t, starts)
    high = ((model_mean + 12.0 * np.sqrt(model_var)) * np.maximum(1.0, factors.max(axis=(1, 2)))
            * 1.5)
    high = np.maximum(high, 4.0 * low)
    grid = np.exp(np.linspace(np.log(low), np.log(high), GRID_POINTS, axis=1))  # (B, K)
    log_low = np.log(grid[:, 0])
    log_step = (np.log(grid[:, -1]) - log_low) / (GRID_POINTS - 1)
    last = GRID_POINTS - 1
    # Each member's CDF on the set's columns from just before its first start (before, every
    # F is 0) to where every F rounds to 1 (or the grid's end): there the served law reads its
    # quantiles, and integrates.
    first = np.clip(np.floor((np.log(np.minimum.reduceat(t, starts)) - log_low) / log_step)
                    - 1, 0, last).astype(np.int64)
    end = np.maximum.reduceat(bounds[:, 1], starts)
    stop = np.clip(np.ceil((np.log(end) - log_low) / log_step), 0, last).astype(np.int64)
    width = int((stop - first).max()) + 1
    # with a level past the host's own ones, the power law goes on past the last reported
    # quantile (calibrated._power_tail), where every F is 1: to the grid's end, as served
    tail = len(levels) > 1 and levels[-2] >= TAIL_FROM
    full = int((last - first).max()) + 1 if tail else width
    columns = np.minimum(first[:, None] + np.arange(full), last)
    window = np.take_along_axis(grid, columns, axis=1)  # (B, W), repeated last point past it
    # member by member in blocks of rows that stay in cache: every step below is row by
    # row, and over the whole (P, W) arrays (18 MB at 3,000 members x 5 sets) each of the
    # dozens of passes went to memory
    task = np.ones((count, full))
    model = np.ones((count, full))
    block = max(1, _BLOCK_POINTS // full)
    for begin in range(0, len(pair_set), block):
        rows = slice(begin, begin + block)
        in_set = pair_set[rows]
        cdf, mapped = _member_laws(pairs.take(rows), window[in_set], width,
                                   factors[in_set, pair_host[rows]], levels)
        # each set's members in the block (consecutive rows) into its products
        runs = np.flatnonzero(np.concatenate([[True], in_set[1:] != in_set[:-1]]))
        task[in_set[runs]] *= np.multiply.reduceat(mapped, runs, axis=0)
        model[in_set[runs]] *= np.multiply.reduceat(cdf, runs, axis=0)
    task = np.maximum.accumulate(task, axis=1)
    model = np.maximum.accumulate(model, axis=1)
    if no_delay is not None:
        floored(task, window, *set_floors(no_delay, dedicated_seconds), model)
    # before the window both CDFs are 0 (every map keeps 0 at 0), so the gap is too
    gap = model - task
    first_gap = np.trapezoid(gap, window, axis=1)
    second_gap = np.trapezoid(2.0 * window * gap, window, axis=1)
    mean = model_mean + first_gap
    second = model_var + model_mean**2 + second_gap
    return mean, np.maximum(second - mean**2, 0.0)


def _member_laws(pairs: Servers, window: np.ndarray, width: int, factors: np.ndarray,
                 levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(model, calibrated) CDF of each pair on its set's ``window`` (P, W) of the grid: the
    model's computed on the first ``width`` columns (1 past them), the calibrated one its
    level map through the knots of its reported quantiles with the power-law tail; the
    served law's arithmetic, row by row. ``factors`` (P, levels) at each pair's dedicated
    time; the knots from each pair's own law (:func:`scheduler.level_knots.level_knots`)."""
    cdf = np.ones_like(window)
    with np.errstate(invalid="ignore"):
        cdf[:, :width] = np.maximum.accumulate(rows_cdf(pairs, window[:, :width]), axis=1)
    knots, reported, _ = level_knots(pairs, _quantiles(window, cdf, levels), factors, levels,
                                     pairs.t[:, 0])
    # past ``width`` every F is 1, which every level map keeps at 1
    mapped = np.ones_like(cdf)
    mapped[:, :width] = _level_map(cdf[:, :width], knots, levels)
    return cdf, _power_tail(mapped, window, reported, levels, np.ones(len(window), dtype=bool))


def _model_moments(pairs: Servers, pair_set: np.ndarray, starts: np.ndarray,
                   bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each set's model law: 0 before its last start, then on a grid of
    _MODEL_POINTS geometric in the time since, to where every member's survival is below
    1e-12; moments about the last start (the variance is then no small difference).
    ``bounds``: (P, 2) where each pair's survival falls below 1e-12 and its delay's 1e-9
    quantile (where it starts to fall)."""
    t = pairs.t[:, 0]
    begin = np.maximum.reduceat(t, starts)
    span = np.maximum(np.maximum.reduceat(bounds[:, 0], starts) - begin, 1e-9 * begin)
    # where the first member's survival starts to fall (or at once, where a member started
    # before the last start)
    onset = np.minimum.reduceat(np.where(pairs.q[:, 0] > 0, bounds[:, 1], np.inf), starts)
    near = np.clip(onset - begin, np.minimum(_MODEL_SPAN * begin, 0.5 * span), 0.5 * span)
    # trapezoids in log time since the last start, spectrally accurate for a smooth law
    # (its survival about constant below ``near``, its tail negligible past ``span``)
    step = np.log(span / near) / (_MODEL_POINTS - 1)
    since = near[:, None] * np.exp(step[:, None] * np.arange(_MODEL_POINTS))
    with np.errstate(invalid="ignore"):
        cdf = rows_cdf(pairs, (begin[:, None] + since)[pair_set])
    survival = 1.0 - np.maximum.accumulate(np.multiply.reduceat(cdf, starts, axis=0), axis=1)
    weight = since * step[:, None]
    weight[:, [0, -1]] /= 2
    # below ``near`` the survival is its first value: that part exactly, and the rule's
    # end correction where the integrand is that constant times the time (h^2/12 f'(a))
    low = survival[:, 0] * near
    first = np.sum(weight * survival, axis=1) + low * (1.0 + step**2 / 12)
    second = np.sum(2.0 * since * weight * survival, axis=1) + low * near * (1.0 + step**2 / 3)
    return begin + first, np.maximum(second - first**2, 0.0)
