"""Demand templates: the law of a running local job's remaining CPU demand D - a given D > a.

A template is a histogram of past jobs' CPU demand (seconds) over log-spaced bins, with
counts that may be fractional (old jobs fade by decay). Within a bin the mass is spread
log-uniformly (density proportional to 1/x): the bins are log-spaced because job demands span
decades, and a flat density inside a wide upper bin would put most of its mass at the bin's
top end, overstating the tail. Log-uniform is also what a continuous density smooth in log x
looks like bin by bin.

When no template has enough jobs, the two-moment law is used: a lognormal with the host's
mean 1/mu and standard deviation sigma, the model's default shape, conditioned the same way.

Every law here gives mean, variance, cdf and sampling of the remaining demand (seconds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from scheduler.errors import InvalidArgumentError

LEVELS = ("user-command", "user", "pooled")
FALLBACK_LEVEL = "two-moment"


def _age(age_seconds: object) -> float:
    try:
        age = float(age_seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"age_seconds must be a number, got {age_seconds!r}",
                                   field="age_seconds", value=age_seconds) from None
    if not math.isfinite(age) or age < 0:
        raise InvalidArgumentError(f"age_seconds must be finite and >= 0, got {age_seconds!r}",
                                   field="age_seconds", value=age_seconds)
    return age


@dataclass(frozen=True, eq=False)
class Histogram:
    """CPU demands of past jobs: ``counts[i]`` jobs (may be fractional) in
    [edges_seconds[i], edges_seconds[i + 1]); edges positive and increasing."""

    edges_seconds: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        try:
            edges = np.asarray(self.edges_seconds, dtype=float).reshape(-1)
            counts = np.asarray(self.counts, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidArgumentError("histogram edges and counts must be numbers",
                                       field="counts", value=self.counts) from None
        if edges.size < 2 or counts.size != edges.size - 1:
            raise InvalidArgumentError(
                f"a histogram needs n + 1 edges for n counts, got {edges.size} edges and "
                f"{counts.size} counts", field="edges_seconds", value=edges.size)
        if not np.isfinite(edges).all() or edges[0] <= 0 or np.any(np.diff(edges) <= 0):
            raise InvalidArgumentError("histogram edges must be finite, > 0 seconds and "
                                       "strictly increasing", field="edges_seconds",
                                       value=edges.tolist())
        if not np.isfinite(counts).all() or np.any(counts < 0):
            raise InvalidArgumentError("histogram counts must be finite and >= 0",
                                       field="counts", value=counts.tolist())
        object.__setattr__(self, "edges_seconds", edges)
        object.__setattr__(self, "counts", counts)

    @property
    def jobs(self) -> float:
        """Jobs the histogram holds (a decayed count may be fractional)."""
        return float(self.counts.sum())

    def remaining(self, age_seconds: float) -> HistogramRemaining:
        """The law of D - a given D > a for a job that has run ``age_seconds`` of CPU."""
        return HistogramRemaining(self, _age(age_seconds))


@dataclass(frozen=True, eq=False)
class HistogramRemaining:
    """Remaining demand of a job of CPU age ``age_seconds`` under a histogram template."""

    histogram: Histogram
    age_seconds: float

    def __post_init__(self) -> None:
        edges, counts, age = self.histogram.edges_seconds, self.histogram.counts, self.age_seconds
        low = np.maximum(edges[:-1], age)
        high = edges[1:]
        alive = high > low
        # the part of each bin above the age, under the log-uniform spread
        fraction = np.where(alive, np.log(high / np.where(alive, low, high))
                            / np.log(edges[1:] / edges[:-1]), 0.0)
        mass = counts * fraction
        object.__setattr__(self, "_low", np.where(alive, low, high))
        object.__setattr__(self, "_high", high)
        object.__setattr__(self, "_mass", mass)

    @property
    def jobs_above_age(self) -> float:
        """Template jobs (weighted) whose demand exceeds the age."""
        return float(self._mass.sum())

    def _moments_of_demand(self) -> tuple[float, float]:
        low, high, mass = self._low, self._high, self._mass
        total = mass.sum()
        if total <= 0:
            raise InvalidArgumentError(
                f"no template job ran longer than the age {self.age_seconds:g} s",
                field="age_seconds", value=self.age_seconds)
        use = mass > 0
        span = np.log(high[use] / low[use])
        first = (high[use] - low[use]) / span
        second = (high[use] ** 2 - low[use] ** 2) / (2 * span)
        weight = mass[use] / total
        return float(weight @ first), float(weight @ second)

    @property
    def mean_seconds(self) -> float:
        """E[D - a | D > a], seconds."""
        first, _ = self._moments_of_demand()
        return first - self.age_seconds

    @property
    def variance_seconds2(self) -> float:
        """Var[D - a | D > a], seconds squared."""
        first, second = self._moments_of_demand()
        return max(second - first * first, 0.0)

    def cdf(self, remaining_seconds: object) -> np.ndarray:
        """P(D - a <= r | D > a) for an array of r (seconds)."""
        r = np.asarray(remaining_seconds, dtype=float)
        x = self.age_seconds + np.maximum(r, 0.0)
        low, high, mass = self._low, self._high, self._mass
        total = mass.sum()
        if total <= 0:
            raise InvalidArgumentError("no template job ran longer than the age",
                                       field="age_seconds", value=self.age_seconds)
        use = mass > 0
        low, high, mass = low[use], high[use], mass[use]
        clipped = np.clip(x[..., None], low, high)
        part = np.log(clipped / low) / np.log(high / low)
        return np.where(r < 0, 0.0, (part * mass).sum(axis=-1) / total)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Independent remaining demands, seconds."""
        total = self._mass.sum()
        if total <= 0:
            raise InvalidArgumentError("no template job ran longer than the age",
                                       field="age_seconds", value=self.age_seconds)
        cumulative = np.cumsum(self._mass) / total
        pick = np.minimum(np.searchsorted(cumulative, rng.random(size), side="right"),
                          len(cumulative) - 1)
        low, high = self._low[pick], self._high[pick]
        return low * (high / low) ** rng.random(np.shape(pick)) - self.age_seconds


@dataclass(frozen=True)
class TwoMomentDemand:
    """The fallback law of a job's demand: lognormal, mean ``mean_seconds``, std ``std_seconds``."""

    mean_seconds: float
    std_seconds: float

    def __post_init__(self) -> None:
        for name in ("mean_seconds", "std_seconds"):
            value = getattr(self, name)
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"{name} must be a number, got {value!r}",
                                           field=name, value=value) from None
            if not math.isfinite(number) or number < 0 or (name == "mean_seconds"
                                                            and number == 0):
                raise InvalidArgumentError(f"{name} must be finite and > 0 (std >= 0), got "
                                           f"{value!r}", field=name, value=value)
            object.__setattr__(self, name, number)

    def remaining(self, age_seconds: float) -> LognormalRemaining:
        """The law of D - a given D > a."""
        return LognormalRemaining(self, _age(age_seconds))


@dataclass(frozen=True)
class LognormalRemaining:
    """Remaining demand of a job of CPU age ``age_seconds`` under the lognormal fallback."""

    demand: TwoMomentDemand
    age_seconds: float

    @property
    def _log_params(self) -> tuple[float, float]:
        cov = self.demand.std_seconds / self.demand.mean_seconds
        s2 = math.log1p(cov * cov)
        return math.log(self.demand.mean_seconds) - s2 / 2, math.sqrt(s2)

    def _partial(self, power: int) -> float:
        """E[D^power | D > a] (power 1 or 2), from the lognormal partial expectations."""
        m, s = self._log_params
        if s == 0:
            return math.exp(power * m)
        if self.age_seconds <= 0:
            return math.exp(power * m + power**2 * s * s / 2)
        z = (m - math.log(self.age_seconds)) / s
        # log of Phi(z + power s) / Phi(z) keeps old ages (tiny survival) finite
        log_ratio = special.log_ndtr(z + power * s) - special.log_ndtr(z)
        return math.exp(power * m + power**2 * s * s / 2 + log_ratio)

    @property
    def jobs_above_age(self) -> float:
        return math.inf

    @property
    def mean_seconds(self) -> float:
        """E[D - a | D > a], seconds."""
        return max(self._partial(1) - self.age_seconds, 0.0)

    @property
    def variance_seconds2(self) -> float:
        """Var[D - a | D > a], seconds squared."""
        first, second = self._partial(1), self._partial(2)
        return max(second - first * first, 0.0)

    def _log_sf(self, x: np.ndarray) -> np.ndarray:
        m, s = self._log_params
        with np.errstate(divide="ignore"):
            return special.log_ndtr((m - np.log(x)) / max(s, 1e-300))

    def cdf(self, remaining_seconds: object) -> np.ndarray:
        """P(D - a <= r | D > a) for an array of r (seconds)."""
        r = np.asarray(remaining_seconds, dtype=float)
        x = self.age_seconds + np.maximum(r, 0.0)
        base = self._log_sf(np.array(self.age_seconds)) if self.age_seconds > 0 else 0.0
        value = -np.expm1(self._log_sf(x) - base)
        return np.where(r < 0, 0.0, value)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Independent remaining demands, seconds (inverse survival function)."""
        m, s = self._log_params
        base = float(self._log_sf(np.array(self.age_seconds))) if self.age_seconds > 0 else 0.0
        log_u = np.log(rng.random(size)) + base
        # isf in log space: log sf = log Phi(-z) -> z = -ndtri(exp(log sf))
        z = -special.ndtri(np.exp(log_u))
        return np.maximum(np.exp(m + s * z) - self.age_seconds, 0.0)


@dataclass(frozen=True)
class TemplateChoice:
    """The template used for a job: its ``level`` (user-command, user, pooled or two-moment),
    the jobs it holds (0 for the two-moment law) and the remaining-demand law at the age."""

    level: str
    jobs: float
    law: HistogramRemaining | LognormalRemaining


def choose_template(candidates: Sequence[tuple[str, Histogram | None]], min_jobs: float,
                    fallback: TwoMomentDemand, age_seconds: float = 0.0) -> TemplateChoice:
    """The most specific template with at least ``min_jobs`` jobs and mass above the age.

    ``candidates``: (level, histogram or None) pairs, most specific first (the order of
    ``LEVELS``); ``fallback``: the two-moment law used when none qualifies.
    """
    try:
        need = float(min_jobs)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"min_jobs must be a number, got {min_jobs!r}",
                                   field="min_jobs", value=min_jobs) from None
    if not math.isfinite(need) or need < 0:
        raise InvalidArgumentError(f"min_jobs must be finite and >= 0, got {min_jobs!r}",
                                   field="min_jobs", value=min_jobs)
    if not isinstance(fallback, TwoMomentDemand):
        raise InvalidArgumentError(f"fallback must be a TwoMomentDemand, got {fallback!r}",
                                   field="fallback", value=fallback)
    age = _age(age_seconds)
    for entry in candidates:
        try:
            level, histogram = entry
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"a candidate is a (level, Histogram) pair, got "
                                       f"{entry!r}", field="candidates", value=entry) from None
        if histogram is None:
            continue
        if not isinstance(histogram, Histogram):
            raise InvalidArgumentError(f"template {level!r} is not a Histogram",
                                       field="candidates", value=level)
        if histogram.jobs < max(need, 1e-300):
            continue
        law = histogram.remaining(age)
        if law.jobs_above_age > 0:
            return TemplateChoice(str(level), histogram.jobs, law)
    return TemplateChoice(FALLBACK_LEVEL, 0.0, fallback.remaining(age))
