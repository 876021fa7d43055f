"""The paper's adaptive sample size (eq. 8-9) and 24-hour estimates (eq. 10).

For a parameter x measured x_1..x_n over the previous 24 hours, the number of measurements
needed for 95 % confidence and 5 % accuracy is ``n_s = 1536.64 (d / xbar)^2`` with ``d`` the
sample standard deviation (1536.64 = (100 * 1.96 / 5)^2). The next hour takes
``ceil(max_x n_s / 24)`` measurements, clamped to configured bounds.

``Adapt_avg(x, t)`` averages x over the previous 24 hours. Every measurement has the same
interval length, so the plain average of lam (and of rho) equals the pooled rate, which is
what is computed here (total arrivals over total observed seconds). mu and sigma are pooled
exactly from the per-measurement sufficient statistics (count, sum, sum of squares), not
averaged from per-measurement values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sensors.errors import InvalidArgumentError
from sensors.measurement import Measurement

Z_FACTOR = 1536.64  # (100 * z_0.975 / r)^2 with z = 1.96 and r = 5 % (paper eq. 8)
PARAMETERS = ("lam", "rho", "mean_service_seconds", "sigma")
DAY_SECONDS = 86400.0


def parameter_values(measurements: Iterable[Measurement]) -> dict[str, list[float]]:
    """Per-measurement values of each parameter (a measurement without one is left out)."""
    values: dict[str, list[float]] = {name: [] for name in PARAMETERS}
    for m in measurements:
        values["lam"].append(m.lam)
        values["rho"].append(m.rho)
        if m.service_count > 0:
            values["mean_service_seconds"].append(m.service_sum_seconds / m.service_count)
        sigma = m.sigma
        if sigma is not None:
            values["sigma"].append(sigma)
    return values


def sample_size(values: Sequence[float]) -> float | None:
    """Eq. 8: ``1536.64 (d / xbar)^2``; None with fewer than two values, 0 if all are 0."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    if mean <= 0:
        return 0.0
    variance = math.fsum((x - mean) ** 2 for x in values) / (n - 1)
    return Z_FACTOR * variance / (mean * mean)


def required_samples(measurements: Iterable[Measurement]) -> dict[str, float | None]:
    """n_s of every parameter over the given measurements."""
    return {name: sample_size(values)
            for name, values in parameter_values(measurements).items()}


def measurements_next_hour(n_s: Mapping[str, float | None], *, min_per_hour: int,
                           max_per_hour: int, interval_seconds: float) -> int:
    """``ceil(max n_s / 24)`` clamped to [min, max] and to what fits in an hour.

    With no usable n_s yet (too little history) the upper bound is taken.
    """
    if not 1 <= min_per_hour <= max_per_hour:
        raise InvalidArgumentError(f"need 1 <= min_per_hour <= max_per_hour, got "
                                   f"{min_per_hour!r} and {max_per_hour!r}",
                                   field="min_per_hour", value=min_per_hour)
    if not interval_seconds > 0:
        raise InvalidArgumentError(f"interval must be > 0 s, got {interval_seconds!r}",
                                   field="interval_seconds", value=interval_seconds)
    fit = max(1, int(3600 // interval_seconds))
    known = [value for value in n_s.values() if value is not None]
    wanted = max_per_hour if not known else math.ceil(max(known) / 24.0)
    return min(max(wanted, min_per_hour), max_per_hour, fit)


@dataclass(frozen=True)
class Estimate:
    """Adapt_avg estimates at ``time`` over ``window_seconds`` (rates per second).

    ``provisional`` until ``history_seconds`` (since the first measurement) reaches the
    window. ``mu_source``: "accounting" (pooled service times), "utilisation" (arrivals per
    busy CPU-second, no accounting) or None. Values are None when nothing was measured.
    """

    time: float
    lam: float | None
    rho: float | None
    mu: float | None
    sigma: float | None
    measurements: int
    service_count: int
    observed_seconds: float
    window_seconds: float
    history_seconds: float
    provisional: bool
    mu_source: str | None
    fork_counter_share: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pooled_service(measurements: Iterable[Measurement]) -> tuple[int, float, float | None]:
    """(count, mean seconds, sample std dev seconds or None) of all exited jobs together."""
    totals = WindowTotals.of(list(measurements))
    return _pooled(totals.service_count, totals.service_sum_seconds, totals.service_sum_squares)


def _pooled(count: int, total: float, squares: float) -> tuple[int, float, float | None]:
    if count == 0:
        return 0, math.nan, None
    mean = total / count
    if count < 2:
        return count, mean, None
    variance = (squares - total * total / count) / (count - 1)
    return count, mean, math.sqrt(max(variance, 0.0))


@dataclass(frozen=True)
class WindowTotals:
    """What the 24-hour estimate pools from a window's measurements.

    ``observed_seconds`` and ``rho_seconds`` (sum of rho x interval) and ``busy_cpu_seconds``
    are exactly rounded sums (``math.fsum``); the service sums are running sums in the
    measurements' order, as the sensors add them. Whoever builds these from stored columns
    must sum the same way for the estimate to be the sensors' to the bit.
    """

    measurements: int
    observed_seconds: float
    arrivals: int
    rho_seconds: float
    service_count: int
    service_sum_seconds: float
    service_sum_squares: float
    busy_cpu_seconds: float
    fork_counter_measurements: int

    @classmethod
    def of(cls, measurements: Sequence[Measurement]) -> WindowTotals:
        count = 0
        total = squares = 0.0
        for m in measurements:
            count += m.service_count
            total += m.service_sum_seconds
            squares += m.service_sum_squares
        return cls(
            measurements=len(measurements),
            observed_seconds=math.fsum(m.interval_seconds for m in measurements),
            arrivals=sum(m.arrivals for m in measurements),
            rho_seconds=math.fsum(m.rho * m.interval_seconds for m in measurements),
            service_count=count, service_sum_seconds=total, service_sum_squares=squares,
            busy_cpu_seconds=math.fsum(m.busy_cpu_seconds for m in measurements),
            fork_counter_measurements=sum(1 for m in measurements
                                          if m.lambda_source == "fork_counter"))


def adapt_avg(measurements: Iterable[Measurement], *, now: float,
              window_seconds: float = DAY_SECONDS,
              history_start: float | None = None) -> Estimate:
    """Estimates at ``now`` from the measurements that ended in (now - window, now].

    ``history_start``: when the first measurement ever started (None: no history).
    """
    _check_window(window_seconds)
    chosen = [m for m in measurements if now - window_seconds < m.end_time <= now]
    return _estimate(WindowTotals.of(chosen), now, window_seconds, history_start)


def estimate_from_totals(totals: WindowTotals, *, now: float,
                         window_seconds: float = DAY_SECONDS,
                         history_start: float | None = None) -> Estimate:
    """:func:`adapt_avg` from the totals of the measurements that ended in
    (now - window, now] (for a caller that keeps them as columns)."""
    _check_window(window_seconds)
    return _estimate(totals, now, window_seconds, history_start)


def _check_window(window_seconds: float) -> None:
    if not window_seconds > 0:
        raise InvalidArgumentError(f"window must be > 0 s, got {window_seconds!r}",
                                   field="window_seconds", value=window_seconds)


def _estimate(totals: WindowTotals, now: float, window_seconds: float,
              history_start: float | None) -> Estimate:
    history = 0.0 if history_start is None else max(0.0, now - history_start)
    observed = totals.observed_seconds
    lam = rho = mu = sigma = None
    mu_source = None
    if observed > 0:
        lam = totals.arrivals / observed
        rho = totals.rho_seconds / observed
        count, mean, sigma = _pooled(totals.service_count, totals.service_sum_seconds,
                                     totals.service_sum_squares)
        if count > 0:
            mu = 1.0 / mean if mean > 0 else None
            mu_source = "accounting"
        else:
            busy = totals.busy_cpu_seconds
            arrivals = totals.arrivals
            if busy > 0 and arrivals > 0:
                mu, mu_source = arrivals / busy, "utilisation"
    chosen = totals.measurements
    return Estimate(
        time=now, lam=lam, rho=rho, mu=mu, sigma=sigma, measurements=chosen,
        service_count=totals.service_count, observed_seconds=observed,
        window_seconds=window_seconds, history_seconds=history,
        provisional=history < window_seconds, mu_source=mu_source,
        fork_counter_share=totals.fork_counter_measurements / chosen if chosen else 0.0)
