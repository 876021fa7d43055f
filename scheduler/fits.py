"""Two-moment fits of the conditional delay distribution G: Gamma, Weibull and Lognormal.

Every function here is a numpy array expression over any broadcastable shape. Distributions are
coded as small integers so a mixed set of hosts (the ``auto`` rule) stays one array.
"""

from __future__ import annotations

import numpy as np
from scipy import special

GAMMA, WEIBULL, LOGNORMAL = 0, 1, 2
CODES = {"gamma": GAMMA, "weibull": WEIBULL, "lognormal": LOGNORMAL}
NAMES = {code: name for name, code in CODES.items()}

# Weibull: CoV depends on the shape k only, through log(Gamma(1+2/k) / Gamma(1+1/k)^2)
# = log(1 + CoV^2). A table inverts it roughly; two Newton steps polish to machine precision.
_K_TABLE = np.geomspace(0.02, 2000.0, 4000)
_LOG_RATIO_TABLE = special.gammaln(1 + 2 / _K_TABLE) - 2 * special.gammaln(1 + 1 / _K_TABLE)


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


def fit(code: np.ndarray, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parameters (p1, p2) of each distribution matching ``mean`` and ``var`` (both > 0).

    gamma: (shape, scale); weibull: (shape, scale); lognormal: (sigma, mu of log).
    """
    code, mean, var = np.broadcast_arrays(np.asarray(code), np.asarray(mean, dtype=float),
                                          np.asarray(var, dtype=float))
    p1 = np.empty(mean.shape)
    p2 = np.empty(mean.shape)
    cov2 = var / mean**2
    is_gamma = code == GAMMA
    if is_gamma.any():
        p1[is_gamma] = 1.0 / cov2[is_gamma]
        p2[is_gamma] = var[is_gamma] / mean[is_gamma]
    is_weibull = code == WEIBULL
    if is_weibull.any():
        k = weibull_shape(np.sqrt(cov2[is_weibull]))
        p1[is_weibull] = k
        p2[is_weibull] = mean[is_weibull] / np.exp(special.gammaln(1 + 1 / k))
    is_lognormal = code == LOGNORMAL
    if is_lognormal.any():
        s2 = np.log1p(cov2[is_lognormal])
        p1[is_lognormal] = np.sqrt(s2)
        p2[is_lognormal] = np.log(mean[is_lognormal]) - s2 / 2
    return p1, p2


# Survival probabilities below this are taken as 0: they move log F by less than a rounding
# error, and skipping them saves most of the incomplete-gamma work in a parallel task's tail.
_LOG_NEGLIGIBLE = np.log(1e-20)


def _gamma_sf(shape: np.ndarray, scale: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = y / scale
    shape, z = np.broadcast_arrays(shape, z)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Chernoff bound P(X > z) <= (z / a)^a e^(a - z) for z > a (unit scale)
        log_bound = shape * (1.0 + np.log(z / shape)) - z
    need = ~((z > shape) & (log_bound < _LOG_NEGLIGIBLE))
    if need.all():
        return special.gammaincc(shape, z)
    out = np.zeros(z.shape)
    out[need] = special.gammaincc(shape[need], z[need])
    return out


def _sf_one(code: int, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
    if code == GAMMA:
        return _gamma_sf(p1, p2, y)
    if code == WEIBULL:
        return np.exp(-((y / p2) ** p1))
    with np.errstate(divide="ignore"):
        return special.ndtr((p2 - np.log(y)) / p1)


def sf(code: np.ndarray, p1: np.ndarray, p2: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Survival function 1 - G(y) for y >= 0, broadcasting all arguments."""
    code = np.asarray(code)
    first = code.flat[0] if code.size else GAMMA
    if code.size and (code == first).all():
        return np.broadcast_to(_sf_one(int(first), p1, p2, y), np.broadcast_shapes(
            code.shape, np.shape(p1), np.shape(p2), np.shape(y)))
    code, p1, p2, y = np.broadcast_arrays(code, p1, p2, y)
    out = np.empty(y.shape)
    for value in np.unique(code):
        mask = code == value
        out[mask] = _sf_one(int(value), p1[mask], p2[mask], y[mask])
    return out


def isf(code: np.ndarray, p1: np.ndarray, p2: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The y with survival probability ``q`` in (0, 1]."""
    code, p1, p2, q = np.broadcast_arrays(np.asarray(code), np.asarray(p1, dtype=float),
                                          np.asarray(p2, dtype=float),
                                          np.asarray(q, dtype=float))
    out = np.empty(q.shape)
    for value in np.unique(code):
        mask = code == value
        a, b, qq = p1[mask], p2[mask], q[mask]
        if value == GAMMA:
            out[mask] = b * special.gammainccinv(a, qq)
        elif value == WEIBULL:
            out[mask] = b * (-np.log(qq)) ** (1.0 / a)
        else:
            out[mask] = np.exp(b - a * special.ndtri(qq))
    return out
