"""Machine-set selection on the calibrated law: each host's quantile factors, per task length.

The manager serves the calibrated law (:mod:`scheduler.calibrated`): each host's model CDF F_k
is mapped through phi_k, the piecewise-linear map of [0, 1] through (F_k(reported q-quantile),
q) with the reported quantile = model quantile x factor, and the task's CDF is the product.
Selection ranks sets by that law's mean + std, the same figures as ``calibrated_prediction``,
so the set chosen is the best for the answer served.

For a batch of sets (vectorised over sets, hosts and grid points): every member's F_k on one
geometric grid per set, its model quantiles and the factors of the calibrator whose task length
is nearest its dedicated time (the manager's rule), phi_k(F_k), the product. The moments are
the model's (from the quadrature) plus the difference between the calibrated and the model
law's integrals on the same grid, so the grid's error cancels (exact when every factor is 1),
as in ``scheduler.calibrated``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler import completion
from scheduler.calibrated import GRID_POINTS
from scheduler.conformal import LEVELS, level_map
from scheduler.errors import InvalidArgumentError


@dataclass(frozen=True)
class SelectionCalibration:
    """Quantile factors the selection ranks sets with.

    ``lengths_seconds``: the calibrators' task lengths (dedicated seconds), increasing;
    ``factors``: host name -> (lengths, levels) factors > 0 of each length's calibrator (a
    host not named is taken as uncalibrated, factors 1); ``levels``: the quantile levels.
    A member uses the row of the length nearest (in log) its dedicated time in the set.
    """

    lengths_seconds: tuple[float, ...]
    factors: Mapping[str, Any]
    levels: tuple[float, ...] = field(default=LEVELS)

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths_seconds, dtype=float)
        if lengths.ndim != 1 or lengths.size == 0 or not (np.isfinite(lengths).all()
                                                          and (lengths > 0).all()):
            raise InvalidArgumentError("lengths_seconds must be positive seconds, at least one",
                                       field="lengths_seconds", value=self.lengths_seconds)
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

    def table(self, names: Sequence[str]) -> np.ndarray:
        """(hosts, lengths, levels) factors of ``names`` in order (1 where not given)."""
        out = np.ones((len(names), len(self.lengths_seconds), len(self.levels)))
        for k, name in enumerate(names):
            if name in self.factors:
                out[k] = np.asarray(self.factors[name], dtype=float)
        return out


def nearest_factors(table: np.ndarray, lengths_seconds: np.ndarray,
                    dedicated_seconds: np.ndarray) -> np.ndarray:
    """(..., levels) factors of the length nearest each dedicated time (log distance, at
    least 1 s); ``table`` is (..., lengths, levels) broadcast against ``dedicated_seconds``."""
    log_length = np.log(np.asarray(lengths_seconds, dtype=float))
    distance = np.abs(log_length - np.log(np.maximum(dedicated_seconds, 1.0))[..., None])
    j = np.argmin(distance, axis=-1)
    return np.take_along_axis(table, j[..., None, None], axis=-2)[..., 0, :]


def calibrated_moments(servers: Any, dedicated_seconds: np.ndarray, factors: np.ndarray,
                       levels: np.ndarray, model_mean: np.ndarray, model_var: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of each set's calibrated law, seconds and s^2.

    ``servers``: (B, hosts x groups) laws laid out host by host, as ``build_servers`` gives
    them; ``dedicated_seconds``: (B, hosts), 0 where a host has no work; ``factors``:
    (B, hosts, levels), 1 where a host has no work; ``model_mean``/``model_var``: the model
    law's moments of each set.
    """
    count, hosts = dedicated_seconds.shape
    # the served law's grid (scheduler.calibrated): its quantiles and level map are read on
    # it, and a CDF with atoms is mapped differently on another
    positive = np.where(dedicated_seconds > 0, dedicated_seconds, np.inf).min(axis=1)
    low = 0.05 * np.where(np.isfinite(positive), positive, np.maximum(model_mean, 1e-3))
    high = ((model_mean + 12.0 * np.sqrt(model_var)) * np.maximum(1.0, factors.max(axis=(1, 2)))
            * 1.5)
    high = np.maximum(high, 4.0 * low)
    grid = np.exp(np.linspace(np.log(low), np.log(high), GRID_POINTS, axis=1))  # (B, K)
    per_server = completion.servers_log_cdf(servers, grid)  # (B, K, hosts x groups)
    per_server = np.where(servers.mult[:, None, :] > 0,
                          servers.mult[:, None, :] * per_server, 0.0)
    log_host = per_server.reshape(count, GRID_POINTS, hosts, -1).sum(axis=3)
    host_cdf = np.maximum.accumulate(np.exp(np.moveaxis(log_host, 1, 2)), axis=2)  # (B, n, K)
    model_q = _quantiles(grid, host_cdf, levels)
    reported = np.maximum.accumulate(model_q * factors, axis=2)
    at_reported = np.maximum.accumulate(_interp(grid, host_cdf, reported), axis=2)
    flat = level_map(host_cdf.reshape(-1, GRID_POINTS),
                     np.clip(at_reported.reshape(-1, levels.size), 0.0, 1.0), levels)
    task_cdf = np.maximum.accumulate(np.prod(flat.reshape(host_cdf.shape), axis=1), axis=1)
    model_cdf = np.maximum.accumulate(np.prod(host_cdf, axis=1), axis=1)
    first_gap = _integral(grid, 1.0 - task_cdf, 1) - _integral(grid, 1.0 - model_cdf, 1)
    second_gap = _integral(grid, 1.0 - task_cdf, 2) - _integral(grid, 1.0 - model_cdf, 2)
    mean = model_mean + first_gap
    second = model_var + model_mean**2 + second_gap
    return mean, np.maximum(second - mean**2, 0.0)


def _integral(grid: np.ndarray, survival: np.ndarray, power: int) -> np.ndarray:
    """E[T^power] of each row from its survival on its own grid (unfinished below it)."""
    weight = power * grid ** (power - 1) * survival
    return grid[:, 0] ** power * survival[:, 0] + np.trapezoid(weight, grid, axis=1)


def _quantiles(grid: np.ndarray, cdf: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(B, n, L) times where each (B, n) row's CDF on its set's grid (B, K) reaches a level,
    linear between grid points (the grid's ends where it never does)."""
    last = grid.shape[1] - 1
    above = (cdf[..., None, :] < levels[:, None]).sum(axis=-1)  # first index reaching it
    hi = np.clip(above, 1, last)
    lo = hi - 1
    f_lo = np.take_along_axis(cdf, lo, axis=2)
    f_hi = np.take_along_axis(cdf, hi, axis=2)
    x_lo = np.take_along_axis(grid[:, None, :], lo, axis=2)
    x_hi = np.take_along_axis(grid[:, None, :], hi, axis=2)
    rise = f_hi - f_lo
    step = np.divide(levels - f_lo, rise, out=np.ones_like(rise), where=rise > 0)
    x = x_lo + np.clip(step, 0.0, 1.0) * (x_hi - x_lo)
    return np.where(above == 0, grid[:, :1, None], np.where(above > last, grid[:, -1:, None], x))


def _interp(grid: np.ndarray, cdf: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each (B, n) row's CDF at its own times ``x`` (B, n, L), linear between the points of
    its set's geometric grid (B, K)."""
    last = grid.shape[1] - 1
    log_low = np.log(grid[:, :1, None])
    log_step = (np.log(grid[:, -1:, None]) - log_low) / last
    # the first grid point at or above x, from the grid's constant ratio
    hi = np.clip(np.ceil((np.log(np.maximum(x, 1e-300)) - log_low) / log_step), 1, last)
    hi = hi.astype(np.int64)
    lo = hi - 1
    x_lo = np.take_along_axis(grid[:, None, :], lo, axis=2)
    x_hi = np.take_along_axis(grid[:, None, :], hi, axis=2)
    frac = np.clip((x - x_lo) / (x_hi - x_lo), 0.0, 1.0)
    f_lo = np.take_along_axis(cdf, lo, axis=2)
    return f_lo + frac * (np.take_along_axis(cdf, hi, axis=2) - f_lo)
