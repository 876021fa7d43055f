"""A prediction's law after each host's calibration: the per-host laws corrected, then combined.

Each host's calibrator (:class:`scheduler.Calibrator`) gives time-scale factors for its
quantiles at ``levels``. A host's calibrated CDF is phi_k(F_k(x)) (:func:`level_map`): F_k its
model CDF, phi_k the piecewise-linear map of [0, 1] through (F_k(reported quantile), level), so
its quantiles at ``levels`` are the reported ones; past the host's own last level (between
its p95 and the pooled far tail's p99.6) it is a power law in time through the reported
quantiles instead, going on past the last one where it is the later finish
(:func:`_power_tail`). A divisible task finishes with its slowest
share, so the task's calibrated CDF is the product over hosts. Everything is evaluated on one
geometric grid of times shared by all hosts (``GRID_POINTS``), vectorised over hosts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from scheduler import completion
from scheduler.combined_mean import one_host_mean_seconds, split_mean_seconds
from scheduler.conformal import LEVELS, TAIL_LEVELS, level_name
from scheduler.errors import InvalidArgumentError
from scheduler.host_cdf import hosts_cdf, rows_cdf
from scheduler.law_knots import held_to_hosts, served_knots
from scheduler.level_knots import level_knots
from scheduler.model import with_vanishing_interruption
from scheduler.no_delay import SLACK as NO_DELAY_SLACK
from scheduler.no_delay import floored, set_floors
from scheduler.power_tail import (
    _TAIL_SEARCH_LOG_SPAN,
    _TAIL_SEARCH_STEPS,
    _power_tail,
    _tails,
)
from scheduler.prediction import Prediction

GRID_POINTS = 256
REPORTED = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
# the levels a manager serves each host's law calibrated at: its own record's three and the
# far tail's pooled over hosts (scheduler.conformal.TAIL_LEVELS)
SERVED_LEVELS = (*LEVELS, *TAIL_LEVELS)


@dataclass(frozen=True, eq=False)
class CalibratedLaw:
    """The task's calibrated completion law (seconds): mean, std and quantiles by name; per
    host its calibrated quantiles (hosts, levels) and the factors applied."""

    mean: float
    std: float
    quantiles: dict[str, float]
    host_quantiles: np.ndarray
    factors: np.ndarray
    grid_seconds: np.ndarray
    cdf_values: np.ndarray
    # the task's earliest finish (its slowest share's dedicated time, or later where jobs
    # held at launch keep a host past it): 0 before it, where the grid's interpolation
    # alone would start the rise a step early
    start_seconds: float = 0.0
    # the levels the factors apply at
    levels: tuple[float, ...] = LEVELS
    # past the grid's end, the hosts whose law ends in a power law (_power_tail) go on along
    # it: per host 1 - (1 - tail_level) (x / tail_scale)^tail_exponent (tail_scale 0: none)
    tail_scale: np.ndarray | None = None
    tail_exponent: np.ndarray | None = None
    tail_level: float = 1.0
    # the chance, from the hosts' records, that every share ends on its dedicated time
    # (scheduler.no_delay): the law is at least that from ``floor_seconds`` on
    floor: float = 0.0
    floor_seconds: float = 0.0
    # (hosts, levels) the model's own quantiles the factors multiplied (seconds): what a
    # report's realised time is set against (scheduler.report_floor)
    model_quantiles: np.ndarray | None = None
    # works out the law at ``start_seconds`` itself, when the cdf is first read (most
    # answers never read it; None: read off the grid)
    start_law: Callable[[], float] | None = field(default=None, repr=False)

    @property
    def start_value(self) -> float | None:
        """The law at ``start_seconds`` itself (None where it is read off the grid)."""
        return self._knots[2]

    @functools.cached_property
    def _knots(self) -> tuple[np.ndarray, np.ndarray, float | None]:
        # (times, values) the cdf interpolates: the grid's, with the start and the served
        # quantiles inserted (scheduler.law_knots), and the value at the start
        value = None if self.start_law is None else self.start_law()
        return (*served_knots(self.grid_seconds, self.cdf_values, self.start_seconds, value,
                              self.quantiles, REPORTED), value)

    def cdf(self, x: Any) -> np.ndarray:
        """P(T <= x) of the calibrated law at times x (seconds): interpolated on the grid
        (through the law's value at its start and its served quantiles,
        :mod:`scheduler.law_knots`), past its end the hosts' power-law tails (1 past it
        where there are none)."""
        x = np.asarray(x, dtype=float)
        values = np.interp(x, *self._knots[:2], left=0.0, right=1.0)
        past = x > self.grid_seconds[-1]
        if past.any() and self._has_tail():
            values = np.where(past, self._past_end(np.maximum(x, self.grid_seconds[-1])),
                              values)
        if self.floor > 0.0:
            values = np.where(x >= self.floor_seconds, np.maximum(values, self.floor), values)
        return np.where(x < self.start_seconds, 0.0, values)

    def _has_tail(self) -> bool:
        return self.tail_scale is not None and bool((self.tail_scale > 0).any())

    def _past_end(self, x: np.ndarray) -> np.ndarray:
        """The law at times ``x`` (seconds) at or past the grid's end: its value there times
        each tailed host's power law from there on (the same law at the end, rising to the
        product of the other hosts' values there as x grows)."""
        assert self.tail_scale is not None and self.tail_exponent is not None
        tailed = self.tail_scale > 0
        scale, beta = self.tail_scale[tailed][:, None], self.tail_exponent[tailed][:, None]
        end = self.grid_seconds[-1]
        spare = 1.0 - self.tail_level
        at = np.reshape(x, (1, -1))
        ratio = (1.0 - spare * (at / scale) ** beta) / (1.0 - spare * (end / scale) ** beta)
        return np.reshape(self.cdf_values[-1] * np.prod(ratio, axis=0), np.shape(x))

    def _quantiles_past_end(self, levels: np.ndarray) -> np.ndarray:
        """Times (seconds) where the law past the grid's end reaches ``levels`` (each above
        its value at the end), by bisection in log time; the grid's end where it never
        does (a host without a tail left short of 1 there)."""
        end = float(self.grid_seconds[-1])
        low = np.full(levels.shape, np.log(end))
        high = low + _TAIL_SEARCH_LOG_SPAN
        reachable = self._past_end(np.exp(high)) >= levels
        for _ in range(_TAIL_SEARCH_STEPS):
            middle = 0.5 * (low + high)
            below = self._past_end(np.exp(middle)) < levels
            low, high = np.where(below, middle, low), np.where(below, high, middle)
        return np.where(reachable, np.exp(high), end)


def calibrate(prediction: Any, factors: Any, levels: Any = LEVELS,
              no_delay: Any = None) -> CalibratedLaw:
    """Apply per-host quantile ``factors`` (hosts, levels), > 0, to ``prediction``
    (a :class:`scheduler.Prediction`) and combine the hosts' calibrated laws. ``no_delay``
    (hosts,), in [0, 1]: each host's chance, from its record, that its share ends on its
    dedicated time (:mod:`scheduler.no_delay`); a task split over several hosts then has a
    law at least their product from its longest share's dedicated time (times
    1 + ``NO_DELAY_SLACK``) on."""
    nominal = np.asarray(levels, dtype=float)
    f = np.asarray(factors, dtype=float)
    hosts = len(prediction.hosts)
    if f.shape != (hosts, nominal.size) or not (np.isfinite(f).all() and (f > 0).all()):
        raise InvalidArgumentError(f"factors must be positive, shape ({hosts}, {nominal.size})",
                                   field="factors", value=None)
    floor = 0.0
    if no_delay is not None:
        chances = np.asarray(no_delay, dtype=float)
        if chances.shape != (hosts,) or not (np.isfinite(chances).all()
                                             and (chances >= 0).all() and (chances <= 1).all()):
            raise InvalidArgumentError(f"no_delay must give one chance in [0, 1] per host "
                                       f"({hosts})", field="no_delay", value=None)
        # the shares taken as independent (scheduler.no_delay)
        floor = float(set_floors(chances[None, :], np.asarray(
            prediction.dedicated_seconds, dtype=float)[None, :])[0][0])
    return _calibrate(prediction, f, nominal, floor)


def _calibrate(prediction: Any, factors: np.ndarray, levels: np.ndarray,
               floor: float = 0.0) -> CalibratedLaw:
    grid = _grid(prediction, factors)
    # a host the model sees as never interrupted is mapped as one with a vanishing chance of
    # delay (scheduler.model.VANISHING_INTERRUPTION): a pure atom has no tail to map
    servers = with_vanishing_interruption(prediction._host_servers)
    host_cdf = _monotone_rows(np.clip(hosts_cdf(servers, grid, len(prediction.hosts)),
                                      0.0, 1.0))
    dedicated = np.asarray(prediction.dedicated_seconds, dtype=float)
    hosts = len(prediction.hosts)
    groups = servers.t.shape[-1] // hosts
    # each host's servers as a row (hosts, groups), to evaluate its law at its own times
    rows = servers.take((np.zeros((hosts, 1), dtype=int),
                         np.arange(hosts * groups).reshape(hosts, groups)))
    at_reported, reported, model_q = level_knots(
        rows, _row_quantiles(grid, host_cdf, levels), factors, levels, dedicated)
    task_cdf = np.zeros(grid.size)
    # Every map keeps 0 at 0, so the product is 0 until the last host's start: only the
    # points past it are mapped.
    live = int((host_cdf == 0).sum(axis=1).max())
    task_cdf[live:] = np.prod(_power_tail(
        _level_map(host_cdf[:, live:], at_reported, levels), grid[live:], reported, levels,
        dedicated > 0), axis=0)
    task_cdf = np.maximum.accumulate(task_cdf)
    start = float(dedicated.max(initial=0.0))
    # the task's earliest finish: its slowest share's dedicated time, or later where a
    # host's model cannot finish before the jobs held at launch (every level map keeps 0
    # at 0, so the calibrated law is 0 before it too)
    earliest = max(start, float(np.max(completion.start_point(rows), initial=0.0)))
    model_cdf = np.maximum.accumulate(np.prod(host_cdf, axis=0))
    floor_seconds = start * (1.0 + NO_DELAY_SLACK)
    if live >= grid.size:
        floor = 0.0  # a member the model sees finishing past the grid: no floor to hold
    elif live > 0 and grid[live - 1] >= floor_seconds:
        # a member with jobs running that the model sees finishing after then: from its start
        floor_seconds = float(grid[live])
    floored(task_cdf[None, :], grid[None, :], np.array([floor]), np.array([floor_seconds]),
            model_cdf[None, :])
    names = list(REPORTED)
    wanted = np.array(list(REPORTED.values()))
    values = _row_quantiles(grid, task_cdf[None, :], wanted)[0]
    scale, exponent = _tails(reported, levels, dedicated > 0)
    # the grid puts a host's first finishes up to a step before its start: no quantile of
    # the task comes before its earliest finish
    values = np.maximum(values, earliest)
    values = held_to_hosts(values, wanted, reported, at_reported, levels, dedicated > 0)
    # a level the floor covers is reached where the floor starts, not a grid step after
    values = np.where(wanted <= floor, np.minimum(values, floor_seconds), values)
    # The moments integrate the survival function on the grid; the model's own law, integrated
    # on the same grid, corrects the discretisation (exact when every factor is 1).
    first_gap = _integral(grid, 1.0 - task_cdf, 1) - _integral(grid, 1.0 - model_cdf, 1)
    second_gap = _integral(grid, 1.0 - task_cdf, 2) - _integral(grid, 1.0 - model_cdf, 2)
    mean = prediction.mean + first_gap
    second = prediction.std ** 2 + prediction.mean ** 2 + second_gap
    std = float(np.sqrt(max(second - mean * mean, 0.0)))
    law = CalibratedLaw(float(mean), std, dict(zip(names, map(float, values))), reported,
                        factors, grid, task_cdf, earliest, tuple(map(float, levels)),
                        tail_scale=scale, tail_exponent=exponent,
                        tail_level=float(levels[-2]) if levels.size > 1 else 1.0,
                        floor=floor, floor_seconds=floor_seconds if floor > 0.0 else 0.0,
                        model_quantiles=model_q,
                        start_law=functools.partial(
                            _law_at, rows, earliest, at_reported, reported, levels,
                            dedicated > 0) if earliest > 0.0 else None)
    short = wanted > task_cdf[-1]
    if short.any() and law._has_tail():
        # a heavy tail over many hosts puts a high quantile past the grid's end (a p99 over
        # 32 hosts in a Pareto world): read there, not at the end
        values[short] = np.maximum(law._quantiles_past_end(wanted[short]), earliest)
        values = held_to_hosts(values, wanted, reported, at_reported, levels,
                                dedicated > 0)
        law = dataclasses.replace(law, quantiles=dict(zip(names, map(float, values))))
    return law


def _law_at(rows: Any, seconds: float, at_reported: np.ndarray, reported: np.ndarray,
            levels: np.ndarray, working: np.ndarray) -> float:
    """The task's calibrated CDF at ``seconds``, worked out there: each host's model CDF
    (``rows``: its servers, (hosts, groups)) through its level map and power tail,
    multiplied over hosts."""
    x = np.full((working.size, 1), seconds)
    cdf = np.clip(rows_cdf(rows, x), 0.0, 1.0)
    return float(np.prod(_power_tail(_level_map(cdf, at_reported, levels), x, reported,
                                     levels, working)))


def _monotone_rows(cdf: np.ndarray) -> np.ndarray:
    """Each row made non-decreasing by a running maximum (checked first: the running maximum
    costs several times the check, and most rows come non-decreasing)."""
    if (cdf[:, 1:] < cdf[:, :-1]).any():
        return np.maximum.accumulate(cdf, axis=1)
    return cdf


def _level_map(cdf: np.ndarray, model_levels: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """:func:`scheduler.conformal.level_map` (same arguments, checked there) as a sum of
    clipped ramps, one per segment between knots: a few passes over (hosts, points) instead
    of gathering each value's segment. A zero-width segment is a step at its knot (the upper
    knot wins a tie, as there), and phi(0) = 0 (a step at a knot of 0 is taken just above
    it, as there)."""
    knots = np.concatenate([np.zeros((cdf.shape[0], 1)), model_levels,
                            np.ones((cdf.shape[0], 1))], axis=1)
    rises = np.diff(np.concatenate([[0.0], levels, [1.0]]))
    widths = np.diff(knots, axis=1)
    steps = widths <= 0
    slopes = rises / np.where(steps, np.inf, widths)
    out = np.zeros_like(cdf)
    ramp = np.empty_like(cdf)
    for j, rise in enumerate(rises):
        np.subtract(cdf, knots[:, j:j + 1], out=ramp)
        ramp *= slopes[:, j:j + 1]
        out += np.clip(ramp, 0.0, rise, out=ramp)
        rows = np.flatnonzero(steps[:, j])
        if rows.size:
            # where the model says the host cannot have finished, neither has it calibrated
            out[rows] += rise * ((cdf[rows] >= knots[rows, j:j + 1]) & (cdf[rows] > 0))
    return np.clip(out, 0.0, 1.0, out=out)


def _integral(grid: np.ndarray, survival: np.ndarray, power: int) -> float:
    """E[T^power] from the survival function on ``grid`` (0 below the grid's first point
    counts as not finished)."""
    weight = power * grid ** (power - 1)
    return float(grid[0] ** power * survival[0] + np.trapezoid(weight * survival, grid))


def _grid(prediction: Any, factors: np.ndarray) -> np.ndarray:
    dedicated = np.asarray(prediction.dedicated_seconds, dtype=float)
    positive = dedicated[dedicated > 0]
    low = 0.05 * (positive.min() if positive.size else max(prediction.mean, 1e-3))
    high = (prediction.mean + 12.0 * prediction.std) * max(1.0, float(factors.max())) * 1.5
    return np.geomspace(low, max(high, 4.0 * low), GRID_POINTS)


def _row_quantiles(grid: np.ndarray, cdf: np.ndarray, levels: np.ndarray,
                   row_grid: np.ndarray | None = None) -> np.ndarray:
    """(rows, levels) times where each row's non-decreasing CDF on ``grid`` reaches a level;
    with ``row_grid``, ``grid`` is a stack of grids and row k reads ``grid[row_grid[k]]``."""
    last = grid.shape[-1] - 1
    above = np.stack([(cdf < q).sum(axis=1) for q in levels], axis=1)  # first index >= q
    hi = np.clip(above, 1, last)
    lo = hi - 1
    rows = np.arange(cdf.shape[0])[:, None]
    f_lo, f_hi = cdf[rows, lo], cdf[rows, hi]
    step = np.where(f_hi > f_lo, (levels[None, :] - f_lo) / np.where(f_hi > f_lo, f_hi - f_lo,
                                                                      1.0), 1.0)
    if row_grid is None:
        g_lo, g_hi, start, end = grid[lo], grid[hi], grid[0], grid[last]
    else:
        own = row_grid[:, None]
        g_lo, g_hi, start, end = grid[own, lo], grid[own, hi], grid[own, 0], grid[own, last]
    x = g_lo + np.clip(step, 0.0, 1.0) * (g_hi - g_lo)
    return np.where(above == 0, start, np.where(above > last, end, x))


@dataclass(frozen=True, eq=False)
class CalibratedPrediction(Prediction):
    """A Prediction whose quantiles and cdf are the calibrated law's, while its mean and std
    stay the model's: the point estimate. The calibrated law's own mean is set mostly by its
    5% beyond p95 (the model's far tail mapped there), and on the back-tests it was several
    times further from the realised time than the model's mean (RICC: 3.7x the paper
    model's error against 0.72x). ``criterion`` is the calibrated law's mean + std, which
    selection ranks sets by; ``model`` keeps the uncalibrated figures and ``law`` the
    per-host factors applied."""

    law: CalibratedLaw | None = None
    model: dict[str, Any] | None = None
    # the floor the mean was held at (scheduler.age_floor), seconds; None where none applied
    mean_floor_seconds: float | None = None
    # the mean of the start the host's record chose, combined with the model's (seconds,
    # scheduler.combined_mean); None where not combined
    record_mean_seconds: float | None = None
    # a split's: the mean of its shares with the new arrivals held to each host's long-run
    # utilisation, combined with the model's (seconds); None where not combined
    held_mean_seconds: float | None = None

    @property
    def criterion(self) -> float:
        """The calibrated law's E[T] + std[T], seconds."""
        assert self.law is not None
        return self.law.mean + self.law.std

    def cdf(self, x: Any) -> np.ndarray:
        assert self.law is not None
        return self.law.cdf(x)

    def to_dict(self) -> dict[str, Any]:
        payload = super().to_dict()
        assert self.law is not None
        names = [level_name(level) for level in self.law.levels]
        for row, reported, factors in zip(payload["hosts"], self.law.host_quantiles,
                                          self.law.factors):
            row["calibrated_quantiles"] = dict(zip(names, map(float, reported)))
            row["calibration_factors"] = dict(zip(names, map(float, factors)))
        payload["model"] = self.model
        payload["calibrated_law"] = {"mean": self.law.mean, "std": self.law.std}
        if self.law.floor > 0.0:
            # the chance every share ends on its dedicated time (scheduler.no_delay)
            payload["calibrated_law"]["no_delay"] = {"chance": self.law.floor,
                                                     "from_seconds": self.law.floor_seconds}
        if self.mean_floor_seconds is not None:
            payload["mean_floor_seconds"] = self.mean_floor_seconds
        if self.record_mean_seconds is not None:
            payload["record_mean_seconds"] = self.record_mean_seconds
        if self.held_mean_seconds is not None:
            payload["held_mean_seconds"] = self.held_mean_seconds
        return payload


def calibrated_prediction(prediction: Prediction, factors: Any, levels: Any = LEVELS,
                          mean_floor_seconds: float | None = None,
                          record_mean_seconds: float | None = None,
                          held_mean_seconds: float | None = None,
                          no_delay: Any = None) -> CalibratedPrediction:
    """``prediction`` with each host's quantile ``factors`` (hosts, levels) at ``levels``
    applied and the hosts' calibrated laws combined (:func:`calibrate`): calibrated
    quantiles and cdf, the model's mean and std. A one-host answer on a host of one core
    whose state is known serves the mean of
    :func:`scheduler.combined_mean.one_host_mean_seconds`: the model's, at least
    ``mean_floor_seconds`` (the running jobs' age floor, :mod:`scheduler.age_floor`),
    combined with ``record_mean_seconds`` (the mean of the record's view: the start the
    host's record chose, idle under the arrivals' load where no job runs). A split whose
    view left the new arrivals unheld serves the mean of
    :func:`scheduler.combined_mean.split_mean_seconds`, combined with ``held_mean_seconds``.
    ``no_delay``: each host's chance of ending on its dedicated time, from its record
    (:func:`calibrate`; a split's). ``model`` keeps the model's."""
    law = calibrate(prediction, factors, levels, no_delay)
    own = {f.name: getattr(prediction, f.name) for f in fields(Prediction)}
    model = {"mean": prediction.mean, "std": prediction.std,
             "quantiles": dict(prediction.quantiles)}
    own.update(quantiles={name: law.quantiles[name] for name in prediction.quantiles})
    if mean_floor_seconds is not None or record_mean_seconds is not None:
        own.update(mean=one_host_mean_seconds(prediction.mean, record_mean_seconds,
                                              mean_floor_seconds))
    elif held_mean_seconds is not None:
        own.update(mean=split_mean_seconds(prediction.mean, held_mean_seconds))
    return CalibratedPrediction(**own, law=law, model=model,
                                mean_floor_seconds=mean_floor_seconds,
                                record_mean_seconds=record_mean_seconds,
                                held_mean_seconds=held_mean_seconds)
