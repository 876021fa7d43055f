"""The power-law tail of a host's calibrated law (see :mod:`scheduler.calibrated`).

Past a host's own last level (its p95) its calibrated CDF is not the level map of the model's
shape but a power law in time through its reported quantiles: between the p95 and the pooled
far tail's p99.6, and on past the last one wherever it is the later finish. Past the served
grid's end the law goes on along it (:func:`_tails` gives each host's scale and exponent).
"""

from __future__ import annotations

import numpy as np

from scheduler.conformal import LEVELS

# from a host's last own level up, its law between reported quantiles is a power law in
# time (_power_tail), not the model's shape
TAIL_FROM = LEVELS[-1]
# _power_tail draws every point of its rows, keeping those it covers, when at least one in
# this many is covered (else it gathers the covered ones)
_DENSE_FROM = 8
# a quantile past the grid's end is searched for up to e^50 times the end, to a relative
# 1e-9 in time
_TAIL_SEARCH_LOG_SPAN = 50.0
_TAIL_SEARCH_STEPS = 70


def _tails(reported: np.ndarray, levels: np.ndarray, working: np.ndarray
           ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(hosts,) scale r_a (seconds; 0 where the host has none) and exponent of each host's
    power law past its last reported quantile, as :func:`_power_tail` draws it (None, None
    when the levels give none)."""
    nominal = np.asarray(levels, dtype=float)
    if nominal.size < 2 or nominal[-2] < TAIL_FROM:
        return None, None
    r_a, _, rising, beta = _segment(reported, nominal, nominal.size - 2, working)
    return np.where(rising, r_a, 0.0), beta


def _segment(reported: np.ndarray, nominal: np.ndarray, a: int, working: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(r_a, r_b, rising, beta) of each host's power law between its reported quantiles at
    levels ``a`` and ``a + 1``: where it rises (r_b > r_a > 0, with work) the exponent
    through both points, 0 elsewhere."""
    r_a, r_b = reported[:, a], reported[:, a + 1]
    rising = (r_b > r_a) & (r_a > 0) & working
    beta = np.zeros(r_a.shape)
    beta[rising] = (np.log((1.0 - nominal[a + 1]) / (1.0 - nominal[a]))
                    / np.log(r_b[rising] / r_a[rising]))
    return r_a, r_b, rising, beta


def _power_tail(mapped: np.ndarray, times: np.ndarray, reported: np.ndarray,
                levels: np.ndarray, working: np.ndarray) -> np.ndarray:
    """``mapped`` (hosts, points), the level map's phi_k(F_k) at ``times`` (seconds, (points,)
    or (hosts, points)), with each host's segments beyond its own last level
    (``TAIL_FROM``) redrawn as a power law in time through its reported quantiles there:
    1 - phi = (1 - l_a) (x / r_a)^beta for r_a <= x <= r_b, with
    beta = log((1 - l_b) / (1 - l_a)) / log(r_b / r_a) < 0, so that it passes (r_a, l_a)
    and (r_b, l_b). Between its own p95 and the pooled far tail the model's own shape is
    what calibration found wrong (a burst, not the model's thin tail, makes the slowest
    shares), and following it put a split's reading point (each share's 0.9^(1/n) level:
    0.993 for 16 hosts) next to the p95. Past the last reported quantile the last
    segment's power law goes on wherever it is later than the level map's (the model's thin
    tail put a split's p95 over 32 hosts, each share's 0.9984 level, next to the p99.6: in
    a heavy-tailed world it covered .89). This draws it on the grid's points; past the
    grid's end the served law's cdf and quantiles follow it (:func:`_tails`), while its
    moments stop at the end. Only the rows ``working`` (hosts, bool): a host without a
    share is finished from the start. In place; returns ``mapped``."""
    nominal = np.asarray(levels, dtype=float)
    x = np.broadcast_to(times, mapped.shape)
    log_x = None
    for a in np.flatnonzero(nominal[:-1] >= TAIL_FROM):
        r_a, r_b, rising, beta = _segment(reported, nominal, int(a), working)
        if not rising.any():
            continue
        if log_x is None:
            # (x / r_a)^beta as exp(beta (log x - log r_a)): the log of the times once (of
            # a shared grid's few hundred points, not of every host's), none of the ratios
            with np.errstate(divide="ignore"):
                log_x = np.broadcast_to(np.log(times), mapped.shape)
        log_r_a = np.log(np.where(rising, r_a, 1.0))
        # past the last reported quantile the same power law goes on where it is the later
        # finish: a split of n shares reads each near 0.95^(1/n), past the pooled p99.6
        # from 11 hosts up, where the model's thin tail put nothing
        last = a + 2 == nominal.size
        # only the points it covers are drawn: far below r_a the power overflows
        drawn = rising[:, None] & (x >= r_a[:, None])
        if not last:
            drawn &= x <= r_b[:, None]
        if np.count_nonzero(drawn) * _DENSE_FROM < drawn.size:
            # a few points in many (a served law's grid, past a p95): gathered
            rows, cols = np.nonzero(drawn)
            at = x[rows, cols]
            law = 1.0 - (1.0 - nominal[a]) * np.exp(beta[rows] * (log_x[rows, cols]
                                                                  - log_r_a[rows]))
            if last:
                law = np.where(at <= r_b[rows], law, np.minimum(mapped[rows, cols], law))
            mapped[rows, cols] = law
        else:
            # a screen's windows run to the grid's end, where half the points or more lie
            # past a member's p95: the same arithmetic over every point, in place, kept
            # where drawn (gathering them cost twice as much); the power is capped at 1
            # below r_a, where it is not kept, so that it cannot overflow
            with np.errstate(invalid="ignore"):
                law = log_x - log_r_a[:, None]
            law *= beta[:, None]
            np.exp(np.minimum(law, 0.0, out=law), out=law)
            law *= 1.0 - nominal[a]
            np.subtract(1.0, law, out=law)
            if last:
                np.minimum(law, mapped, out=law, where=x > r_b[:, None])
            np.copyto(mapped, law, where=drawn)
    return mapped
