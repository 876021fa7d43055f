"""From raw measurements to the forecast of a run window: binning, one-host helpers, and the
model parameters (lam, rho forecast; mu, sigma pooled) for a window.

These replay a host's past into a fresh :class:`~scheduler.forecast.ForecastBank`, which costs
one bank step per bin of history (a few ms per day of history): right for one host, a back-test
or a CLI. A manager serving many hosts keeps one bank per quantity and pushes each completed
bin instead (:meth:`ForecastBank.push`), so a query never replays history.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.forecast import ForecastBank, ForecastSettings, WindowForecast

POOL_SECONDS = 86400.0


def bin_series(end_seconds: Any, values: Any, interval_seconds: Any = None, *,
               until_seconds: float, settings: ForecastSettings | None = None
               ) -> tuple[int, np.ndarray]:
    """(first bin index, interval-weighted mean of each bin, NaN if empty) of a series.

    Each measurement (ending at ``end_seconds``, lasting ``interval_seconds``; 1 s each when
    None) counts in the bin holding its midpoint. Only measurements ended by ``until_seconds``
    count, and the bins returned are the complete ones before it, consecutive from the first
    measured one. No measurement: (bin of until, empty array).
    """
    s = settings or ForecastSettings()
    end, y = _floats("end_seconds", end_seconds), _floats("values", values)
    span = np.ones_like(end) if interval_seconds is None else _floats("interval_seconds",
                                                                        interval_seconds)
    if not (end.shape == y.shape == span.shape):
        raise InvalidArgumentError("end_seconds, values and interval_seconds must have one "
                                   "entry per measurement", field="values", value=None)
    if (span <= 0).any() or (y < 0).any():
        raise InvalidArgumentError("intervals must be > 0 s and values >= 0",
                                   field="values", value=None)
    if not math.isfinite(until_seconds):
        raise InvalidArgumentError(f"until_seconds must be finite, got {until_seconds!r}",
                                   field="until_seconds", value=until_seconds)
    shift, bs = s.utc_offset_seconds, s.bin_seconds
    stop = math.floor((until_seconds + shift) / bs)
    known = end <= until_seconds
    bins = np.floor((end[known] - span[known] / 2 + shift) / bs).astype(np.int64)
    keep = bins < stop
    if not keep.any():
        return stop, np.empty(0)
    bins, weight, y = bins[keep], span[known][keep], y[known][keep]
    first = int(bins.min())
    total = np.bincount(bins - first, weights=weight * y, minlength=stop - first)
    observed = np.bincount(bins - first, weights=weight, minlength=stop - first)
    means = np.divide(total, observed, out=np.full(total.shape, np.nan), where=observed > 0)
    return first, means


def replay(series: list[tuple[int, np.ndarray]], settings: ForecastSettings | None = None
           ) -> ForecastBank:
    """A bank with one row per binned series (from :func:`bin_series`), fed bin by bin."""
    bank = ForecastBank(len(series), settings)
    starts = np.array([first for first, _ in series], dtype=np.int64)
    ends = starts + np.array([means.size for _, means in series], dtype=np.int64)
    if not series:
        return bank
    for b in range(int(starts.min()), int(ends.max())):
        rows = np.nonzero((starts <= b) & (b < ends))[0]
        if rows.size:
            bank.push(rows, b, [series[r][1][b - starts[r]] for r in rows])
    return bank


def forecast_window(end_seconds: Any, values: Any, launch_seconds: float,
                    duration_seconds: float, interval_seconds: Any = None,
                    settings: ForecastSettings | None = None) -> WindowForecast:
    """NWS forecast of one host's series over [launch, launch + duration] (epoch seconds),
    from the measurements ended by the launch. The caller iterates: a forecast gives a
    predicted duration, which gives the next window (see :func:`settle_duration`)."""
    binned = bin_series(end_seconds, values, interval_seconds, until_seconds=launch_seconds,
                        settings=settings)
    return replay([binned], settings).forecast([0], launch_seconds, duration_seconds)


def settle_duration(duration_for: Callable[[float], float], first_seconds: float, *,
                    rel_tol: float = 0.01, max_rounds: int = 8) -> tuple[float, int]:
    """(duration, rounds): iterate d <- duration_for(d) from ``first_seconds`` until it moves
    by less than ``rel_tol`` of itself (a window's load sets the predicted run, which sets the
    window), or ``max_rounds`` rounds."""
    if not (math.isfinite(first_seconds) and first_seconds > 0):
        raise InvalidArgumentError(f"first_seconds must be positive, got {first_seconds!r}",
                                   field="first_seconds", value=first_seconds)
    duration = first_seconds
    for rounds in range(1, max_rounds + 1):
        following = float(duration_for(duration))
        if not (math.isfinite(following) and following > 0):
            raise InvalidArgumentError(f"duration_for gave {following!r} for {duration:g} s",
                                       field="duration_for", value=following)
        moved = abs(following - duration)
        duration = following
        if moved <= rel_tol * duration:
            return duration, rounds
    return duration, max_rounds


@dataclass(frozen=True, eq=False)
class ForecastParameters:
    """Model parameters of one host for a run window: lam (1/s) and rho forecast by the NWS
    rule; mu (1/s) and sigma (s) pooled over the ``POOL_SECONDS`` before the launch (None when
    no local job finished there); ``lam_forecast``/``rho_forecast`` say which forecaster and
    its recent error."""

    lam_per_second: float | None
    rho: float | None
    mu_per_second: float | None
    sigma_seconds: float | None
    lam_forecast: dict[str, Any]
    rho_forecast: dict[str, Any]
    service_count: int

    def to_dict(self) -> dict[str, Any]:
        return {"lam": self.lam_per_second, "rho": self.rho, "mu": self.mu_per_second,
                "sigma": self.sigma_seconds, "service_count": self.service_count,
                "lam_forecast": self.lam_forecast, "rho_forecast": self.rho_forecast}


def forecast_parameters(end_seconds: Any, lam_per_second: Any, rho: Any, service_count: Any,
                        service_sum_seconds: Any, service_sum_squares: Any,
                        launch_seconds: float, duration_seconds: float,
                        interval_seconds: Any = None,
                        settings: ForecastSettings | None = None) -> ForecastParameters:
    """Forecast (lam, rho) and pooled (mu, sigma) over [launch, launch + duration] from a
    host's per-measurement arrays (end times in epoch seconds; service sums in CPU seconds and
    CPU seconds squared). Only measurements ended by the launch are used."""
    end = _floats("end_seconds", end_seconds)
    count = _floats("service_count", service_count)
    total = _floats("service_sum_seconds", service_sum_seconds)
    squares = _floats("service_sum_squares", service_sum_squares)
    if not (end.shape == count.shape == total.shape == squares.shape):
        raise InvalidArgumentError("every per-measurement array needs one entry per "
                                   "measurement", field="service_count", value=None)
    binned = [bin_series(end, v, interval_seconds, until_seconds=launch_seconds,
                         settings=settings) for v in (lam_per_second, rho)]
    answer = replay(binned, settings).forecast([0, 1], launch_seconds, duration_seconds)
    pooled = (end <= launch_seconds) & (end > launch_seconds - POOL_SECONDS)
    n, first, second = count[pooled].sum(), total[pooled].sum(), squares[pooled].sum()
    mean = first / n if n > 0 else 0.0
    mu = 1.0 / mean if mean > 0 else None
    sigma = math.sqrt(max(second / n - mean * mean, 0.0)) if mu is not None else None
    lam, rho_value = (float(v) if math.isfinite(v) else None for v in answer.value)
    return ForecastParameters(lam_per_second=lam, rho=rho_value, mu_per_second=mu,
                              sigma_seconds=sigma, lam_forecast=answer.to_dict(0),
                              rho_forecast=answer.to_dict(1), service_count=int(n))


def _floats(name: str, value: Any) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must be numbers", field=name, value=None) from None
    if not np.isfinite(array).all():
        raise InvalidArgumentError(f"{name} must be finite", field=name, value=None)
    return array
