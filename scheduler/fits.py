"""Two-moment fits of the conditional delay distribution G: one object per family.

Each family (``GAMMA_FAMILY``, ``WEIBULL_FAMILY``, ``LOGNORMAL_FAMILY``) fits its two
parameters (p1, p2) from a mean and a variance and gives the cdf, survival, quantile, mean and
variance of the fitted law; every method is a numpy array expression over any broadcastable
shape. Families are also coded as small integers (``Family.code``) so a mixed set of hosts (the
``auto`` rule) stays one array; the module-level ``fit``, ``sf``, ``isf``, ``mean`` and
``variance`` take such a code array and send each element to its family.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
from scipy import special

from scheduler.choices import DISTRIBUTIONS
from scheduler.errors import InvalidArgumentError

GAMMA, WEIBULL, LOGNORMAL = 0, 1, 2

# The paper's rule for ``auto``: Gamma below rho 0.15, Weibull up to 0.5, Lognormal above.
AUTO_RHO_EDGES = (0.15, 0.5)

# Weibull: CoV depends on the shape k only, through log(Gamma(1+2/k) / Gamma(1+1/k)^2)
# = log(1 + CoV^2). A table inverts it roughly; two Newton steps polish to machine precision.
_K_TABLE = np.geomspace(0.02, 2000.0, 4000)
_LOG_RATIO_TABLE = special.gammaln(1 + 2 / _K_TABLE) - 2 * special.gammaln(1 + 1 / _K_TABLE)

# Survival probabilities below this are taken as 0: they move log F by less than a rounding
# error, and skipping them saves most of the incomplete-gamma work in a parallel task's tail.
_LOG_NEGLIGIBLE = np.log(1e-20)


def weibull_shape(cov: np.ndarray) -> np.ndarray:
    """Weibull shape k whose coefficient of variation is ``cov`` (> 0)."""
    cov = np.asarray(cov, dtype=float)
    target = np.log1p(cov**2)
    # the table runs from large to small ratios as k grows; interp needs increasing x
    k = np.exp(np.interp(np.log(target), np.log(_LOG_RATIO_TABLE[::-1]),
                         np.log(_K_TABLE[::-1])))
    for _ in range(3):
        inv = 1.0 / k
        value = special.gammaln(1 + 2 * inv) - 2 * special.gammaln(1 + inv) - target
        slope = 2 * inv**2 * (special.digamma(1 + inv) - special.digamma(1 + 2 * inv))
        k = np.clip(k - value / slope, _K_TABLE[0] / 2, None)
    # Beyond the table k is large and CoV ~ pi / (sqrt(6) k): the asymptotic form is exact enough
    return np.where(cov < 6e-4, np.pi / (np.sqrt(6.0) * np.maximum(cov, 1e-300)), k)


class Family(ABC):
    """A two-parameter law on y >= 0 fitted by its first two moments.

    ``fit`` wants mean (seconds) and variance (s^2) both > 0; the other methods take the
    parameters it returns, broadcasting against ``y`` (seconds) or the probabilities.
    """

    name: str = ""
    code: int = -1

    @abstractmethod
    def fit(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Parameters (p1, p2) of the law with this mean (s) and variance (s^2)."""

    @abstractmethod
    def sf(self, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Survival 1 - G(y) at y >= 0 seconds."""

    @abstractmethod
    def isf(self, p1: np.ndarray, p2: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The y (seconds) with survival probability ``q`` in (0, 1]."""

    @abstractmethod
    def mean(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        """E[Y] in seconds."""

    @abstractmethod
    def variance(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        """Var[Y] in s^2."""

    def cdf(self, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
        """G(y) at y >= 0 seconds."""
        return 1.0 - self.sf(p1, p2, y)

    def quantile(self, p1: np.ndarray, p2: np.ndarray, prob: np.ndarray) -> np.ndarray:
        """The y (seconds) with G(y) = ``prob`` in [0, 1)."""
        return self.isf(p1, p2, 1.0 - np.asarray(prob, dtype=float))

    def __repr__(self) -> str:
        return f"<{self.name} family>"


class GammaFamily(Family):
    """Gamma: p1 = shape, p2 = scale (seconds)."""

    name, code = "gamma", GAMMA

    def fit(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return 1.0 / (var / mean**2), var / mean

    def sf(self, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
        z = y / p2
        shape, z = np.broadcast_arrays(p1, z)
        with np.errstate(divide="ignore", invalid="ignore"):
            # Chernoff bound P(X > z) <= (z / a)^a e^(a - z) for z > a (unit scale)
            log_bound = shape * (1.0 + np.log(z / shape)) - z
        need = ~((z > shape) & (log_bound < _LOG_NEGLIGIBLE))
        if need.all():
            return special.gammaincc(shape, z)
        out = np.zeros(z.shape)
        out[need] = special.gammaincc(shape[need], z[need])
        return out

    def isf(self, p1: np.ndarray, p2: np.ndarray, q: np.ndarray) -> np.ndarray:
        return p2 * special.gammainccinv(p1, q)

    def mean(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        return p1 * p2

    def variance(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        return p1 * p2**2


class WeibullFamily(Family):
    """Weibull: p1 = shape k, p2 = scale (seconds)."""

    name, code = "weibull", WEIBULL

    def fit(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = weibull_shape(np.sqrt(var / mean**2))
        return k, mean / np.exp(special.gammaln(1 + 1 / k))

    def sf(self, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
        # far in the tail the power overflows to inf, whose exp(-inf) is the survival, 0
        with np.errstate(over="ignore"):
            return np.exp(-((y / p2) ** p1))

    def isf(self, p1: np.ndarray, p2: np.ndarray, q: np.ndarray) -> np.ndarray:
        return p2 * (-np.log(q)) ** (1.0 / p1)

    def mean(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        return p2 * np.exp(special.gammaln(1 + 1 / np.where(p1 > 0, p1, 1.0)))

    def variance(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        safe = np.where(p1 > 0, p1, 1.0)
        return p2**2 * (np.exp(special.gammaln(1 + 2 / safe))
                        - np.exp(2 * special.gammaln(1 + 1 / safe)))


class LognormalFamily(Family):
    """Lognormal: p1 = sigma of log Y, p2 = mu of log Y (log seconds)."""

    name, code = "lognormal", LOGNORMAL

    def fit(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s2 = np.log1p(var / mean**2)
        return np.sqrt(s2), np.log(mean) - s2 / 2

    def sf(self, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return special.ndtr((p2 - np.log(y)) / p1)

    def isf(self, p1: np.ndarray, p2: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.exp(p2 - p1 * special.ndtri(q))

    def mean(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        return np.exp(p2 + p1**2 / 2)

    def variance(self, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        return np.expm1(p1**2) * np.exp(2 * p2 + p1**2)


GAMMA_FAMILY, WEIBULL_FAMILY, LOGNORMAL_FAMILY = GammaFamily(), WeibullFamily(), LognormalFamily()
FAMILIES: tuple[Family, ...] = (GAMMA_FAMILY, WEIBULL_FAMILY, LOGNORMAL_FAMILY)
"""Every family, indexed by its code."""
BY_NAME = {family.name: family for family in FAMILIES}
CODES = {family.name: family.code for family in FAMILIES}
NAMES = {family.code: family.name for family in FAMILIES}


def family_codes(dist: str, rho: np.ndarray) -> np.ndarray:
    """Per-host family codes for a distribution name (``auto``: the paper's rule on ``rho``)."""
    if dist == "auto":
        return np.where(rho < AUTO_RHO_EDGES[0], GAMMA,
                        np.where(rho <= AUTO_RHO_EDGES[1], WEIBULL, LOGNORMAL))
    family = BY_NAME.get(dist)
    if family is None:
        raise InvalidArgumentError(
            f"unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}",
            field="dist", value=dist)
    return np.full(np.shape(rho), family.code)


def _per_family(method: Callable[[Family], Callable[..., np.ndarray]], code: np.ndarray,
                *arrays: np.ndarray) -> np.ndarray:
    """Apply each element's family ``method`` to the broadcast ``arrays``."""
    code = np.asarray(code)
    if code.size and (code == code.flat[0]).all():
        result = np.asarray(method(FAMILIES[int(code.flat[0])])(*arrays))
        if result.shape == code.shape:
            return result
        # the family's arithmetic broadcasts the arrays; the codes may widen that
        shape = np.broadcast_shapes(code.shape, result.shape)
        return result if result.shape == shape else np.broadcast_to(result, shape)
    code, *columns = np.broadcast_arrays(code, *(np.asarray(a, dtype=float) for a in arrays))
    out = np.empty(code.shape)
    for value in np.unique(code):
        mask = code == value
        out[mask] = method(FAMILIES[int(value)])(*(a[mask] for a in columns))
    return out


def fit(code: np.ndarray, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parameters (p1, p2) of each element's family matching ``mean`` and ``var`` (both > 0).

    gamma: (shape, scale); weibull: (shape, scale); lognormal: (sigma, mu of log).
    """
    code, mean, var = np.broadcast_arrays(np.asarray(code), np.asarray(mean, dtype=float),
                                          np.asarray(var, dtype=float))
    p1 = np.empty(mean.shape)
    p2 = np.empty(mean.shape)
    for family in FAMILIES:
        mask = code == family.code
        if mask.any():
            p1[mask], p2[mask] = family.fit(mean[mask], var[mask])
    return p1, p2


def sf(code: np.ndarray, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Survival function 1 - G(y) for y >= 0, broadcasting all arguments."""
    return _per_family(lambda family: family.sf, code, p1, p2, y)


def isf(code: np.ndarray, p1: np.ndarray, p2: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The y with survival probability ``q`` in (0, 1]."""
    return _per_family(lambda family: family.isf, code, p1, p2, q)


def mean(code: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    """E[Y] of each element's fitted law, seconds."""
    return _per_family(lambda family: family.mean, code, p1, p2)


def variance(code: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    """Var[Y] of each element's fitted law, s^2."""
    return _per_family(lambda family: family.variance, code, p1, p2)
