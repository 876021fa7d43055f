"""The per-host completion-time model of SPEC section 3, as array expressions.

A host with c cores is c identical servers, each receiving local jobs at lam / c and 1/c of the
host's share. For one server with dedicated time t (seconds):

    S ~ Poisson(lam t) interruptions, p0 = P(S = 0) = exp(-lam t)
    E[U] = rho / (1 - rho) t,  Var[U] = lam t E[X^2] / (1 - rho)^3
    F(x) = 0 for x < t, p0 + (1 - p0) G(x - t) for x >= t

with G fitted to the exact conditional moments of U given S > 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler import fits
from scheduler.errors import InvalidArgumentError
from scheduler.hosts import HostArrays

# The paper's rule for ``auto``: Gamma below rho 0.15, Weibull up to 0.5, Lognormal above.
AUTO_RHO_EDGES = (0.15, 0.5)
DIST_CHOICES = ("gamma", "weibull", "lognormal", "auto")
# Chosen from the simulation study in the README ("Which distribution"): Lognormal has the
# smallest worst-case p90/p99 error over exponential, lognormal (CoV 2) and log-uniform demands.
DEFAULT_DIST = "lognormal"
MIN_CONDITIONAL_COV = 0.05


def distribution_codes(dist: str, rho: np.ndarray) -> np.ndarray:
    """Per-host distribution codes for a ``dist`` name."""
    if dist == "auto":
        return np.where(rho < AUTO_RHO_EDGES[0], fits.GAMMA,
                        np.where(rho <= AUTO_RHO_EDGES[1], fits.WEIBULL, fits.LOGNORMAL))
    try:
        return np.full(np.shape(rho), fits.CODES[dist])
    except KeyError:
        raise InvalidArgumentError(
            f"unknown distribution {dist!r}; choose one of {', '.join(DIST_CHOICES)}",
            field="dist", value=dist) from None


@dataclass(frozen=True)
class Servers:
    """Completion-time law of a batch of server types; arrays broadcast as (..., servers).

    ``t``: dedicated seconds; ``q``: P(at least one interruption); ``p1``/``p2``: parameters
    of G; ``code``: G's family; ``mult``: how many identical servers (0 = not in the set).
    """

    t: np.ndarray
    q: np.ndarray
    code: np.ndarray
    p1: np.ndarray
    p2: np.ndarray
    mult: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """E[T] of each server, seconds."""
        return self.t + self.q * self._m1

    @property
    def _m1(self) -> np.ndarray:
        return np.where(self.q > 0, _moment_one(self.code, self.p1, self.p2), 0.0)

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        """log F(x) of each server type, -inf below t; x broadcasts against the arrays."""
        y = x - self.t
        with np.errstate(divide="ignore", invalid="ignore"):
            survival = fits.sf(self.code, self.p1, self.p2, np.maximum(y, 0.0))
            # q * sf rather than p0 + q G keeps the upper tail precise
            value = np.log1p(-self.q * survival)
        return np.where(y >= 0, value, -np.inf)

    def upper_bound(self, epsilon: float) -> np.ndarray:
        """A point past which each server's survival is below ``epsilon`` (seconds)."""
        need = self.q > epsilon
        ratio = np.where(need, epsilon / np.where(need, self.q, 1.0), 1.0)
        tail = fits.isf(self.code, self.p1, self.p2, ratio)
        return self.t + np.where(need, tail, 0.0)


def _moment_one(code: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:

    with np.errstate(over='ignore', invalid='ignore', divide='ignore'):
        return _moment_one_all(code, p1, p2)


def _moment_one_all(code: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    from scipy import special

    gamma_mean = p1 * p2
    weibull_mean = p2 * np.exp(special.gammaln(1 + 1 / np.where(p1 > 0, p1, 1.0)))
    lognormal_mean = np.exp(p2 + p1**2 / 2)
    return np.select([code == fits.GAMMA, code == fits.WEIBULL],
                     [gamma_mean, weibull_mean], lognormal_mean)


def conditional_moments(lam_server: np.ndarray, rho: np.ndarray, ex2: np.ndarray,
                        t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, m1, v): P(S > 0), E[U | S > 0] and Var[U | S > 0] of one server, SPEC section 3.

    lam_server: arrivals per second at this server; ex2: E[X^2] of a local demand (s^2);
    t: dedicated seconds. Where q == 0 (no arrivals or no work) m1 and v are 0.
    """
    expected_arrivals = lam_server * t
    q = -np.expm1(-expected_arrivals)
    p0 = 1.0 - q
    delay_mean = rho / (1.0 - rho) * t
    delay_var = expected_arrivals * ex2 / (1.0 - rho) ** 3
    safe_q = np.where(q > 0, q, 1.0)
    m1 = delay_mean / safe_q
    # Var[U|S>0] = Var[U]/q - E[U]^2 p0 / q^2, the exact conditional form
    v = delay_var / safe_q - delay_mean**2 * p0 / safe_q**2
    # When the measured rho is well above lam / (cores mu) the exact form can dip to <= 0;
    # the conditional CoV is then floored at MIN_CONDITIONAL_COV instead of giving NaN or a
    # step the quadrature cannot resolve.
    v = np.maximum(v, (MIN_CONDITIONAL_COV * m1) ** 2)
    usable = (q > 0) & (m1 > 0)
    return np.where(usable, q, 0.0), np.where(usable, m1, 0.0), np.where(usable, v, 0.0)


def build_servers(arrays: HostArrays, shares: np.ndarray, codes: np.ndarray) -> Servers:
    """Server types for hosts given work shares (reference-CPU-seconds), any leading shape.

    ``shares`` has shape (..., hosts); a zero share means the host is not used.
    """
    cores = arrays.cores
    t = shares / (cores * arrays.tau)
    lam_server = arrays.lam / cores
    q, m1, v = conditional_moments(lam_server, arrays.rho, arrays.demand_second_moment, t)
    has_delay = q > 0
    p1, p2 = fits.fit(codes, np.where(has_delay, m1, 1.0), np.where(has_delay, v, 1.0))
    mult = np.where(shares > 0, cores, 0.0)
    return Servers(t=t, q=q, code=np.broadcast_to(codes, t.shape), p1=p1, p2=p2, mult=mult)
