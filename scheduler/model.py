"""The per-host completion-time model of SPEC section 3, as array expressions.

A host with c cores is c identical servers, each receiving local jobs at lam / c and 1/c of the
host's share. A share run by n < c processes goes to n of those servers, 1/n each (every
process sees the host's average core; see scheduler.placement). For one server with dedicated
time t (seconds):

    S ~ Poisson(lam t) interruptions, p0 = P(S = 0) = exp(-lam t)
    E[U] = rho / (1 - rho) t,  Var[U] = lam t E[X^2] / (1 - rho)^3
    F(x) = 0 for x < t, p0 + (1 - p0) G(x - t) for x >= t

with G fitted to the exact conditional moments of U given S > 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, overload

import numpy as np

from scheduler import fits, held_phase
from scheduler.choices import DEFAULT_DISTRIBUTION
from scheduler.hosts import HostArrays

MIN_CONDITIONAL_COV = 0.05
# A server the model sees as never interrupted (no arrivals or no load in the window, or no
# backlog beyond an atom) keeps q = 0, but is given a delay law for the case it is: as long
# as its own dedicated time on average, CoV 1 (scale-free: such a host has often seen no job
# to take a demand law from). The calibrated law (scheduler.calibrated, and selection's
# criterion of it) gives it this vanishing chance of that delay
# (:func:`with_vanishing_interruption`): it maps the model's law level by level, and on a pure
# atom at the dedicated time it had no tail to put a later quantile on, so every calibrated
# quantile was served at about that time whatever the host's record said (NASA and CTC
# stations are forecast no arrivals on half their launches, whose calibrated p90 is 1.1-1.5
# times the dedicated time). The model's own law, and every uncalibrated answer, stays the
# atom.
VANISHING_INTERRUPTION = 1e-9
DEFAULT_DIST = DEFAULT_DISTRIBUTION
distribution_codes = fits.family_codes
"""Per-host family codes for a distribution name (see ``scheduler.fits.family_codes``)."""


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

    def survival(self, x: np.ndarray) -> np.ndarray:
        """1 - F(x) of each server type: q sf(x - t) from t on, 1 below it, and 0 past the
        point where it falls below ``NEGLIGIBLE_SURVIVAL``; x broadcasts against the
        arrays. Only the points between are evaluated."""
        y = x - self.t
        shape = y.shape
        if self.t.size * _POINTS_PER_BOUND > y.size:
            # a law per point (a caller's runs of points, each with its servers repeated):
            # a bound per point would cost what the points do
            with np.errstate(divide="ignore", invalid="ignore"):
                value = self.q * fits.sf(self.code, self.p1, self.p2, np.maximum(y, 0.0))
            return np.where(y >= 0, value, 1.0)
        # a server's law is evaluated only on its own stretch: a backlog mixture's atoms
        # each finish at their own time, and most of a batch's (point, atom) pairs lie
        # before an atom's start or past its end (60% past it in a schedule's batches)
        reach = self.upper_bound(NEGLIGIBLE_SURVIVAL) - self.t
        live = (y >= 0) & (y < reach)
        value = np.where(y < 0, 1.0, 0.0)
        if live.any():
            def at(a: np.ndarray) -> np.ndarray:
                return np.broadcast_to(a, shape)[live]

            code = np.asarray(self.code)
            with np.errstate(divide="ignore", invalid="ignore"):
                if code.size and (code == code.flat[0]).all():
                    # one family (the usual case): told by the servers, not by every point
                    tail = fits.FAMILIES[int(code.flat[0])].sf(at(self.p1), at(self.p2),
                                                               y[live])
                else:
                    tail = fits.sf(at(code), at(self.p1), at(self.p2), y[live])
                value[live] = at(self.q) * tail
        return value

    def upper_bound(self, epsilon: float | np.ndarray) -> np.ndarray:
        """A point past which each server's survival is below ``epsilon`` (seconds)."""
        need = self.q > epsilon
        ratio = np.where(need, epsilon / np.where(need, self.q, 1.0), 1.0)
        tail = fits.isf(self.code, self.p1, self.p2, ratio)
        return self.t + np.where(need, tail, 0.0)

    def take(self, rows: np.ndarray | slice) -> Servers:
        """The problems ``rows`` of a (B, n) batch (a slice gives views)."""
        return Servers(**{name: getattr(self, name)[rows] for name in _FIELDS})

    def expand(self) -> Servers:
        """(B, 1, n) view, to evaluate at (B, K, 1) points."""
        return Servers(**{name: getattr(self, name)[:, None, :] for name in _FIELDS})


_FIELDS = ("t", "q", "code", "p1", "p2", "mult")
# A survival below this is taken as 0 in a mixture's sum of its atoms' survivals: 13 atoms
# of it move the sum by 1e-29, under a rounding of any survival a quantile or an integral
# reads (those below 1e-20 leave exp(mult log F) at 1 for any mult up to 5,000).
NEGLIGIBLE_SURVIVAL = 1e-30
# Servers.survival bounds each server's stretch when its laws are shared by at least this
# many points each
_POINTS_PER_BOUND = 4


@dataclass(frozen=True)
class MixtureServers:
    """Servers whose law is a mixture over the initial backlog: ``parts`` has arrays of shape
    (..., n, M), one component per backlog atom (dedicated time plus that atom), ``weight``
    (..., n, M) their probabilities and ``mult`` (..., n) as in Servers."""

    parts: Servers
    weight: np.ndarray
    mult: np.ndarray

    @property
    def t(self) -> np.ndarray:
        """The earliest possible completion of each server, seconds."""
        return np.min(np.where(self.weight > 0, self.parts.t, np.inf), axis=-1)

    @property
    def q(self) -> np.ndarray:
        """1 where the completion is random (a spread backlog or interruptions), else 0."""
        spread = np.max(np.where(self.weight > 0, self.parts.t, -np.inf), axis=-1) > self.t
        random = np.any((self.weight > 0) & (self.parts.q > 0), axis=-1)
        return (spread | random).astype(float)

    @property
    def mean(self) -> np.ndarray:
        """E[T] of each server, seconds."""
        return np.sum(self.weight * self.parts.mean, axis=-1)

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        """log of sum_j w_j F_j(x); survivals are summed directly where F is near 1."""
        # each atom's survival q sf, not the exp of its log F: a log and an exp less for
        # every atom at every point, where most of a mixture's time went
        each = self.parts.survival(np.asarray(x, dtype=float)[..., None])
        survival = np.sum(self.weight * each, axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log1p(-np.minimum(survival, 1.0))
        # the log-sum-exp only where F is not near 1 (each point's arithmetic its own)
        far = ~(survival < 0.5)
        if far.any():
            with np.errstate(divide="ignore"):
                log_weight = np.broadcast_to(np.log(self.weight), each.shape)[far]
                # log F_j, -inf before the atom's start (a survival of 1)
                terms = np.log1p(-each[far]) + log_weight
            top = np.max(terms, axis=-1)
            finite = np.isfinite(top)
            safe_top = np.where(finite, top, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                summed = safe_top + np.log(np.sum(np.exp(terms - safe_top[..., None]),
                                                  axis=-1))
            out[far] = np.where(finite, summed, -np.inf)
        return out

    def upper_bound(self, epsilon: float) -> np.ndarray:
        """A point past which each server's survival is below ``epsilon`` (seconds)."""
        bound = self.parts.upper_bound(np.asarray(epsilon)[..., None])
        return np.max(np.where(self.weight > 0, bound, 0.0), axis=-1)

    def take(self, rows: np.ndarray) -> MixtureServers:
        return MixtureServers(self.parts.take(rows), self.weight[rows], self.mult[rows])

    def expand(self) -> MixtureServers:
        parts = Servers(**{name: getattr(self.parts, name)[:, None] for name in _FIELDS})
        return MixtureServers(parts, self.weight[:, None], self.mult[:, None])


def _moment_one(code: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return fits.mean(code, p1, p2)


# Below this chance of any local arrival during the task it is run as never interrupted, as
# with no arrivals at all: a measured rho well above lam / mu (a long job running, hardly any
# arriving) puts the delay's whole mean rho t / (1 - rho) on that chance, and at lam 1e-300
# its square overflowed (m1 ~ 1e296 s) and the prediction read NaN.
_MIN_INTERRUPTION = 1e-12
# Below this mean delay (as a fraction of the dedicated time, given an interruption) the delay
# cannot move the completion time in double precision, and is run as none: a forecast rho of
# 1e-178 beside arrivals at 1.4e-4/s gave a mean delay of 1e-174 s whose square underflowed
# beside the arrivals' variance, and the fitted delay law read NaN.
_MIN_DELAY_FRACTION = 1e-15


def conditional_moments(lam_server: np.ndarray, rho: np.ndarray, ex2: np.ndarray,
                        t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, m1, v): P(S > 0), E[U | S > 0] and Var[U | S > 0] of one server, SPEC section 3.

    lam_server: arrivals per second at this server; ex2: E[X^2] of a local demand (s^2);
    t: dedicated seconds. Where q <= _MIN_INTERRUPTION (no arrivals, next to none, or no
    work), or the delay's mean is too small to move t (``_MIN_DELAY_FRACTION``), q, m1 and v
    are 0.
    """
    expected_arrivals = lam_server * t
    q = -np.expm1(-expected_arrivals)
    p0 = 1.0 - q
    delay_mean = rho / (1.0 - rho) * t
    delay_var = expected_arrivals * ex2 / (1.0 - rho) ** 3
    safe_q = np.where(q > _MIN_INTERRUPTION, q, 1.0)
    m1 = delay_mean / safe_q
    # Var[U|S>0] = Var[U]/q - E[U]^2 p0 / q^2, the exact conditional form
    v = delay_var / safe_q - delay_mean**2 * p0 / safe_q**2
    # When the measured rho is well above lam / (cores mu) the exact form can dip to <= 0;
    # the conditional CoV is then floored at MIN_CONDITIONAL_COV instead of giving NaN or a
    # step the quadrature cannot resolve.
    v = np.maximum(v, (MIN_CONDITIONAL_COV * m1) ** 2)
    usable = (q > _MIN_INTERRUPTION) & (m1 > _MIN_DELAY_FRACTION * t)
    return np.where(usable, q, 0.0), np.where(usable, m1, 0.0), np.where(usable, v, 0.0)


def _vanishing(q: np.ndarray, m1: np.ndarray, v: np.ndarray, t: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, m1, v) with the delay law of every server that has work (``t`` dedicated
    seconds) and no chance of delay set to mean t, CoV 1; q stays 0 (see
    ``VANISHING_INTERRUPTION``)."""
    never = (q <= 0) & (t > 0)
    if not never.any():
        return q, m1, v
    return q, np.where(never, t, m1), np.where(never, t * t, v)


@overload
def with_vanishing_interruption(servers: Servers) -> Servers: ...


@overload
def with_vanishing_interruption(servers: MixtureServers) -> MixtureServers: ...


def with_vanishing_interruption(servers: Servers | MixtureServers) -> Servers | MixtureServers:
    """``servers`` with ``VANISHING_INTERRUPTION`` as the chance of delay of every server
    that has work and none (its delay law is already the one :func:`build_servers` gives
    it: mean its dedicated time, CoV 1): what the calibrated law maps instead of a pure
    atom."""
    if isinstance(servers, MixtureServers):
        return MixtureServers(_plain_vanishing(servers.parts), servers.weight, servers.mult)
    return _plain_vanishing(servers)


def _plain_vanishing(servers: Servers) -> Servers:
    never = (servers.q <= 0) & (servers.t > 0)
    if not never.any():
        return servers
    return replace(servers, q=np.where(never, VANISHING_INTERRUPTION, servers.q))


AnyServers = Servers | MixtureServers
"""A batch's servers as the model builds them: plain servers or a backlog mixture."""


class ServerLaws(Protocol):
    """What the completion-time integrals (:mod:`scheduler.completion`) read of a batch of
    (B, n) servers: either kind above, or both side by side
    (:class:`scheduler.compact_servers.SplitServers`)."""

    @property
    def t(self) -> np.ndarray: ...

    @property
    def q(self) -> np.ndarray: ...

    @property
    def mult(self) -> np.ndarray: ...

    def log_cdf(self, x: np.ndarray) -> np.ndarray: ...

    def upper_bound(self, epsilon: float) -> np.ndarray: ...

    def take(self, rows: np.ndarray) -> ServerLaws: ...

    def expand(self) -> ServerLaws: ...


def build_servers(arrays: HostArrays, shares: np.ndarray, codes: np.ndarray,
                  mixture: bool = False) -> Servers | MixtureServers:
    """Server types for hosts given work shares (reference-CPU-seconds), any leading shape.

    ``shares`` has shape (..., hosts); a zero share means the host is not used. With a
    backlog (``arrays.backlog``) every host contributes one server type per core group,
    (..., hosts * groups): the exact mixture over the group's backlog atoms if ``mixture``,
    else one law fitted to the mixture's exact moments (``collapsed_servers``).
    """
    if arrays.backlog is not None:
        if mixture:
            return _build_mixture(arrays, shares, codes)
        return collapsed_servers(arrays, shares, codes)
    t = shares / (arrays.processes * arrays.tau)
    lam_server = arrays.lam / arrays.cores
    q, m1, v = _vanishing(*conditional_moments(lam_server, arrays.rho,
                                               arrays.demand_second_moment, t), t)
    has_delay = m1 > 0
    p1, p2 = fits.fit(codes, np.where(has_delay, m1, 1.0), np.where(has_delay, v, 1.0))
    mult = np.where(shares > 0, arrays.server_processes, 0.0)
    return Servers(t=t, q=q, code=np.broadcast_to(codes, t.shape), p1=p1, p2=p2, mult=mult)


def _build_mixture(arrays: HostArrays, shares: np.ndarray, codes: np.ndarray
                   ) -> MixtureServers:
    # T | B = b is the idle-start law of dedicated time b + t (the busy period of b + t)
    backlog = arrays.backlog
    atoms, weights = backlog.atoms()
    # a host given no work is not in the set: its backlog must not hold back log F
    dedicated = shares / (arrays.processes * arrays.tau)
    t = dedicated[..., None, None] + np.where(shares[..., None, None] > 0, atoms, 0.0)
    t = np.where(backlog.mult[..., None] > 0, t, 0.0)
    least = held_phase.least_held_mult(arrays)
    placed = held_phase.process_mult(arrays, least)
    lam_server, rho = _loads(arrays, dedicated, least)
    lam_server, rho = lam_server[..., None, None], rho[..., None, None]
    expand = (slice(None),) * (arrays.lam.ndim) + (None, None)
    q, m1, v = _vanishing(*conditional_moments(lam_server, rho,
                                               arrays.demand_second_moment[expand], t), t)
    has_delay = m1 > 0
    code = np.broadcast_to(np.asarray(codes)[..., None, None], t.shape)
    p1, p2 = fits.fit(code, np.where(has_delay, m1, 1.0), np.where(has_delay, v, 1.0))
    flat = (*t.shape[:-3], t.shape[-3] * t.shape[-2], t.shape[-1])
    weight = np.broadcast_to(weights, t.shape).reshape(flat)
    mult = np.where(shares[..., None] > 0, placed, 0.0).reshape(flat[:-1])
    parts = Servers(t=t.reshape(flat), q=q.reshape(flat), code=code.reshape(flat),
                    p1=p1.reshape(flat), p2=p2.reshape(flat),
                    mult=np.zeros(flat))
    return MixtureServers(parts, weight, mult)


def collapsed_servers(arrays: HostArrays, shares: np.ndarray, codes: np.ndarray) -> Servers:
    """One law per core group fitted to the exact moments of the mixture over the backlog.

    With B = b_min + B' (b_min the smallest backlog atom), T | B is the busy period of
    t' + B' where t' = t + b_min: E[T] = (t' + E[B']) / (1 - rho), Var[T] = (t' + E[B']) lam
    EX2 / (1 - rho)^3 + Var[B'] / (1 - rho)^2 and P(T = t') = P(B' = 0) exp(-lam t'), all
    exact; G is fitted to the conditional mean and variance of T - t' given T > t'.
    """
    backlog = arrays.backlog
    used = shares[..., None] > 0
    low = np.where(used, backlog.low, 0.0)
    extra_mean = np.where(used, backlog.extra_mean, 0.0)
    extra_var = np.where(used, backlog.extra_var, 0.0)
    none = np.where(used, backlog.none, 1.0)
    expand = (slice(None),) * (arrays.lam.ndim) + (None,)
    dedicated = shares / (arrays.processes * arrays.tau)
    least = held_phase.least_held_mult(arrays)
    placed = held_phase.process_mult(arrays, least)
    lam, rho = _loads(arrays, dedicated, least)
    lam, rho = lam[..., None], rho[..., None]
    ex2 = arrays.demand_second_moment[expand]
    start = dedicated[..., None] + low
    # padding groups (no cores) must not hold back F: they finish at once
    start = np.where(backlog.mult > 0, start, 0.0)
    base = start + extra_mean
    delay_mean = (base / (1.0 - rho)) - start
    delay_var = base * lam * ex2 / (1.0 - rho) ** 3 + extra_var / (1.0 - rho) ** 2
    p0 = none * np.exp(-lam * start)
    q = 1.0 - p0
    safe_q = np.where(q > 0, q, 1.0)
    m1 = delay_mean / safe_q
    v = np.maximum(delay_var / safe_q - delay_mean**2 * p0 / safe_q**2,
                   (MIN_CONDITIONAL_COV * m1) ** 2)
    usable = (q > 1e-300) & (m1 > 0)
    q, m1, v = _vanishing(np.where(usable, q, 0.0), np.where(usable, m1, 0.0),
                          np.where(usable, v, 0.0), start)
    usable = m1 > 0
    code = np.broadcast_to(np.asarray(codes)[..., None], start.shape)
    p1, p2 = fits.fit(code, np.where(usable, m1, 1.0), np.where(usable, v, 1.0))
    flat = (*start.shape[:-2], start.shape[-2] * start.shape[-1])
    mult = np.where(shares[..., None] > 0, placed, 0.0)
    return Servers(t=start.reshape(flat), q=np.where(usable, q, 0.0).reshape(flat),
                   code=code.reshape(flat), p1=p1.reshape(flat), p2=p2.reshape(flat),
                   mult=mult.reshape(flat))


def _loads(arrays: HostArrays, dedicated: np.ndarray, least_held: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Each server's local arrival rate (1/s) and utilisation, (H,) or the shares' shape
    where jobs held at launch change the load the processes meet (scheduler.held_phase)."""
    lam, rho = arrays.lam / arrays.cores, arrays.rho
    ratio = held_phase.load_ratio(arrays, dedicated, least_held)
    return (lam, rho) if ratio is None else (lam * ratio, rho * ratio)
