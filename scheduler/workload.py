"""Local workload generators: CPU-demand distributions, Poisson job streams and job traces.

Demands are parameterised by their mean (seconds) and coefficient of variation (CoV =
std / mean). Everything takes an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from scheduler.choices import DEMAND_KINDS
from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host

_FIXED_COV = {"exponential": 1.0, "deterministic": 0.0}
_LOGUNIFORM_MAX_COV = 15.0  # ln(b/a) ~ 2 (1 + cov^2) must stay far below float overflow


def _finite(field_name: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{field_name} must be a number, got {value!r}",
                                   field=field_name, value=value) from None
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{field_name} must be finite, got {value!r}",
                                   field=field_name, value=value)
    return number


def _loguniform_log_ratio(cov: float) -> float:
    """ln(b/a) of a log-uniform law on [a, b] with the given CoV.

    With y = ln(b/a): E[X^2]/E[X]^2 = (r+1) ln r / (2 (r-1)) = y / (2 tanh(y/2)), so solve
    y / (2 tanh(y/2)) - 1 = cov^2; the series y^2/12 - y^4/720 avoids cancellation near 0.
    """
    target = cov * cov

    def excess(y: float) -> float:
        if y < 1e-3:
            return y * y / 12.0 - y**4 / 720.0 - target
        return y / (2.0 * math.tanh(y / 2.0)) - 1.0 - target

    # excess is below 0 at y -> 0 and y / 2 - 1 - target <= excess(y), which brackets the root.
    return brentq(excess, 1e-300, 2.0 * (1.0 + target) + 2.0, xtol=1e-300, rtol=1e-15,
                  maxiter=500)


def _checked(kind: str, mean_seconds: object, cov: object) -> tuple[float, float]:
    if kind not in DEMAND_KINDS:
        raise InvalidArgumentError(
            f"unknown demand kind {kind!r}; allowed: {', '.join(DEMAND_KINDS)}",
            field="kind", value=kind)
    mean = _finite("mean_seconds", mean_seconds)
    if mean <= 0:
        raise InvalidArgumentError(f"mean_seconds must be > 0, got {mean_seconds!r}",
                                   field="mean_seconds", value=mean_seconds)
    if cov is None:
        if kind not in _FIXED_COV:
            raise InvalidArgumentError(f"{kind} demand needs a cov (>= 0), got None",
                                       field="cov", value=cov)
        cov = _FIXED_COV[kind]
    cv = _finite("cov", cov)
    if cv < 0:
        raise InvalidArgumentError(f"cov must be >= 0, got {cov!r}", field="cov", value=cov)
    if kind in _FIXED_COV and cv != _FIXED_COV[kind]:
        raise InvalidArgumentError(
            f"{kind} demand has cov {_FIXED_COV[kind]:g}, got {cov!r}; choose lognormal, "
            "gamma, hyperexponential or loguniform for another cov", field="cov", value=cov)
    if not math.isfinite(mean * mean * (1.0 + cv * cv)):
        # a walk's demands would be inf or nan, and a chain whose backlog is nan never ends
        raise InvalidArgumentError(
            f"a demand of mean {mean:g} s and cov {cv:g} has a second moment past double "
            "precision", field="cov", value=cov)
    if kind == "loguniform" and cv > _LOGUNIFORM_MAX_COV:
        raise InvalidArgumentError(
            f"loguniform demand needs cov <= {_LOGUNIFORM_MAX_COV:g} (its range b/a would "
            f"overflow), got {cov!r}", field="cov", value=cov)
    if kind == "hyperexponential" and cv < 1:
        raise InvalidArgumentError(
            f"hyperexponential demand needs cov >= 1, got {cov!r}", field="cov", value=cov)
    return mean, cv


@dataclass(frozen=True)
class Demand:
    """The CPU demand (seconds) of one local job: ``kind`` with the given mean and CoV.

    A CoV of 0 makes every kind but ``exponential`` a point mass at the mean; ``cov=None``
    means the fixed CoV of exponential (1) or deterministic (0). Arguments are validated as
    in :func:`demand`.
    """

    kind: str
    mean_seconds: float
    cov: float | None = None
    _params: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mean, cov = _checked(self.kind, self.mean_seconds, self.cov)
        object.__setattr__(self, "mean_seconds", mean)
        object.__setattr__(self, "cov", cov)
        object.__setattr__(self, "_params", self._solve_params())

    def _solve_params(self) -> tuple:
        mean, cov = self.mean_seconds, self._cov
        if self.kind == "exponential" or (cov == 0.0 and self.kind != "hyperexponential"):
            return ()
        if self.kind == "lognormal":
            s2 = math.log1p(cov * cov)
            return (math.log(mean) - s2 / 2.0, math.sqrt(s2))
        if self.kind == "gamma":
            return (1.0 / (cov * cov), mean * cov * cov)  # shape, scale
        if self.kind == "hyperexponential":
            c2 = cov * cov
            p1 = 0.5 * (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0)))
            # Balanced means: p_i * (phase mean_i) = mean / 2 for both phases.
            return (p1, mean / (2.0 * p1), mean / (2.0 * (1.0 - p1)))
        if self.kind == "loguniform":
            y = _loguniform_log_ratio(cov)
            low = mean * y / math.expm1(y)
            return (low, low * math.exp(y), y)
        return ()

    @property
    def _cov(self) -> float:
        """The demand CoV, always set after construction (None asks for the kind's own)."""
        return 1.0 if self.cov is None else float(self.cov)

    @property
    def second_moment(self) -> float:
        """E[X^2] in seconds squared."""
        return self.mean_seconds**2 * (1.0 + self._cov**2)

    @property
    def excess_mean_seconds(self) -> float:
        """Mean of the stationary-excess law, E[X^2] / (2 E[X]) seconds."""
        return self.second_moment / (2.0 * self.mean_seconds)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Independent demands in seconds, an array of shape ``size``."""
        mean, p = self.mean_seconds, self._params
        if self.kind == "exponential":
            return rng.exponential(mean, size)
        if not p:
            return np.full(size, mean)
        if self.kind == "lognormal":
            return rng.lognormal(p[0], p[1], size)
        if self.kind == "gamma":
            return rng.gamma(p[0], p[1], size)
        if self.kind == "hyperexponential":
            phase_mean = np.where(rng.random(size) < p[0], p[1], p[2])
            return rng.standard_exponential(size) * phase_mean
        return p[0] * np.exp(rng.random(size) * p[2])  # loguniform

    def sample_excess(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Draws of the stationary-excess (equilibrium residual) law, density (1 - F(x)) / E[X].

        It is a uniform fraction of a length-biased demand (density x f(x) / E[X]); the
        length-biased law of each kind is known in closed form.
        """
        mean, p = self.mean_seconds, self._params
        if self.kind == "exponential":
            biased = rng.gamma(2.0, mean, size)
        elif not p:
            biased = np.full(size, mean)
        elif self.kind == "lognormal":
            biased = rng.lognormal(p[0] + p[1] ** 2, p[1], size)
        elif self.kind == "gamma":
            biased = rng.gamma(p[0] + 1.0, p[1], size)
        elif self.kind == "hyperexponential":
            # Balanced means weight both phases 1/2 under length-biasing.
            phase_mean = np.where(rng.random(size) < 0.5, p[1], p[2])
            biased = rng.gamma(2.0, 1.0, size) * phase_mean
        else:  # loguniform: x * (1 / x) is flat on [a, b]
            biased = rng.uniform(p[0], p[1], size)
        return rng.random(size) * biased


def demand(kind: str, mean_seconds: float, cov: float | None = None) -> Demand:
    """A validated :class:`Demand`. ``cov=None`` means 1 for exponential, 0 for deterministic.

    exponential needs CoV 1, deterministic CoV 0, hyperexponential CoV >= 1; lognormal, gamma
    and loguniform take any CoV >= 0 (loguniform at most 15).
    """
    return Demand(kind, mean_seconds, cov)


def demand_for_host(host: Host, kind: str) -> Demand:
    """The demand law of ``host``'s local jobs: mean 1/mu seconds, CoV sigma*mu.

    exponential and deterministic have a fixed CoV, so they ignore ``host.sigma``.
    """
    if not isinstance(host, Host):
        raise InvalidArgumentError(f"expected a Host, got {host!r}", field="host", value=host)
    cov = None if kind in _FIXED_COV else host.sigma * host.mu
    try:
        return demand(kind, 1.0 / host.mu, cov)
    except InvalidArgumentError as err:
        raise InvalidArgumentError(
            f"host {host.name!r}: {err} (its mu {host.mu:g}/s and sigma {host.sigma:g} s)",
            field="hosts", value=host.name) from None


def stationary_backlog(rate_per_second: float, demand: Demand, rng: np.random.Generator,
                       size: int) -> np.ndarray:
    """Unfinished local work (seconds) of a stationary M/G/1 queue seen at a random time.

    Exact sampling by the Pollaczek-Khinchine (Benes) form: a Geometric(rho) number of
    stationary-excess demands, where rho = rate * mean demand must be below 1.
    """
    rate = _finite("rate_per_second", rate_per_second)
    if rate < 0:
        raise InvalidArgumentError(f"rate_per_second must be >= 0, got {rate_per_second!r}",
                                   field="rate_per_second", value=rate_per_second)
    if not isinstance(demand, Demand):
        raise InvalidArgumentError(f"expected a Demand, got {demand!r}", field="demand",
                                   value=demand)
    rho = rate * demand.mean_seconds
    if rho >= 1:
        raise InvalidArgumentError(
            f"utilisation rate * mean demand = {rho:g} must be < 1 for a stationary queue",
            field="rate_per_second", value=rate_per_second)
    count = _count("size", size)
    jobs = rng.geometric(1.0 - rho, count) - 1
    excess = demand.sample_excess(rng, int(jobs.sum()))
    owner = np.repeat(np.arange(count), jobs)
    return np.bincount(owner, weights=excess, minlength=count).astype(float)


def _count(field_name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgumentError(f"{field_name} must be a whole number >= 0, got {value!r}",
                                   field=field_name, value=value)
    return int(value)


def poisson_jobs(rate_per_second: float, demand: Demand, rng: np.random.Generator,
                 start_seconds: float, end_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Local jobs of a Poisson stream on [start, end): (arrival_seconds, cpu_seconds), sorted."""
    rate = _finite("rate_per_second", rate_per_second)
    start = _finite("start_seconds", start_seconds)
    end = _finite("end_seconds", end_seconds)
    if rate < 0:
        raise InvalidArgumentError(f"rate_per_second must be >= 0, got {rate_per_second!r}",
                                   field="rate_per_second", value=rate_per_second)
    if end < start:
        raise InvalidArgumentError(
            f"end_seconds ({end_seconds!r}) must not precede start_seconds ({start_seconds!r})",
            field="end_seconds", value=end_seconds)
    if not isinstance(demand, Demand):
        raise InvalidArgumentError(f"expected a Demand, got {demand!r}", field="demand",
                                   value=demand)
    # Given their number, Poisson arrival times are independent uniforms on the window.
    count = int(rng.poisson(rate * (end - start)))
    arrivals = np.sort(rng.uniform(start, end, count))
    return arrivals, demand.sample(rng, count)


@dataclass(frozen=True, eq=False)
class Trace:
    """Local jobs as (arrival_seconds, cpu_seconds) columns, sorted by arrival.

    Arrivals are finite and non-decreasing; demands finite and >= 0. The arrays are
    read-only copies.
    """

    arrival_seconds: np.ndarray
    cpu_seconds: np.ndarray

    def __post_init__(self) -> None:
        arrivals = np.array(self.arrival_seconds, dtype=float, copy=True).reshape(-1)
        demands = np.array(self.cpu_seconds, dtype=float, copy=True).reshape(-1)
        if arrivals.shape != demands.shape:
            raise InvalidArgumentError(
                f"trace has {arrivals.size} arrivals but {demands.size} demands",
                field="cpu_seconds", value=demands.size)
        for name, column in (("arrival_seconds", arrivals), ("cpu_seconds", demands)):
            bad = ~np.isfinite(column)
            if bad.any():
                index = int(np.argmax(bad))
                raise InvalidArgumentError(f"trace {name}[{index}] is not finite: "
                                           f"{column[index]!r}", field=name, value=column[index])
        if (demands < 0).any():
            index = int(np.argmax(demands < 0))
            raise InvalidArgumentError(f"trace cpu_seconds[{index}] is negative: "
                                       f"{demands[index]!r}", field="cpu_seconds",
                                       value=demands[index])
        if (np.diff(arrivals) < 0).any():
            index = int(np.argmax(np.diff(arrivals) < 0)) + 1
            raise InvalidArgumentError(
                f"trace arrival_seconds must be non-decreasing; [{index}] = {arrivals[index]!r} "
                f"follows {arrivals[index - 1]!r}", field="arrival_seconds",
                value=arrivals[index])
        arrivals.flags.writeable = False
        demands.flags.writeable = False
        object.__setattr__(self, "arrival_seconds", arrivals)
        object.__setattr__(self, "cpu_seconds", demands)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[float, float]]) -> Trace:
        """A trace from (arrival_seconds, cpu_seconds) pairs in any order (sorted stably)."""
        try:
            table = np.array([(float(a), float(c)) for a, c in rows], dtype=float)
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                "trace rows must be (arrival_seconds, cpu_seconds) number pairs",
                field="rows") from None
        table = table.reshape(-1, 2)
        order = np.argsort(table[:, 0], kind="stable")
        return cls(table[order, 0], table[order, 1])

    def __len__(self) -> int:
        return int(self.arrival_seconds.size)

    def backlog_seconds(self, at_seconds: object) -> np.ndarray:
        """Unfinished local work (seconds) of one core fed by this trace, at each given time.

        The core is idle before the first job; jobs arriving exactly at a time are not
        counted yet.
        """
        try:
            times = np.asarray(at_seconds, dtype=float)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"at_seconds must be numbers, got {at_seconds!r}",
                                       field="at_seconds", value=at_seconds) from None
        if not np.isfinite(times).all():
            raise InvalidArgumentError("at_seconds must be finite", field="at_seconds",
                                       value=at_seconds)
        arrivals, demands = self.arrival_seconds, self.cpu_seconds
        if arrivals.size == 0:
            return np.zeros(times.shape)
        # Lindley in closed form: after jobs 0..j the backlog at time s is
        # max(0, max_k (work of jobs k..j) - (s - a_k)) = max(0, c_j - s + max_k (a_k - c_k-1))
        # with c the cumulative work; times relative to the first arrival keep sums small.
        origin = arrivals[0]
        total = np.cumsum(demands)
        best = np.maximum.accumulate((arrivals - origin) - (total - demands))
        last = np.searchsorted(arrivals, times, side="left") - 1
        safe = np.maximum(last, 0)
        backlog = np.maximum(total[safe] - (times - origin) + best[safe], 0.0)
        return np.where(last >= 0, backlog, 0.0)
