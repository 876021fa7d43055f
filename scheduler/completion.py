"""The completion time of a parallel task: T = max over servers, F(x) = prod F_k(x).

Moments come from E[T] = x0 + int (1 - F) and E[(T - x0)^2] = 2 int (x - x0)(1 - F) over
[x0, x_hi], where x0 is the largest dedicated time (F = 0 below it) and 1 - F < 1e-10 past
x_hi. The integrals use adaptive Gauss-Kronrod (7/15 points) vectorised over every open
interval of every problem in a batch, so one call evaluates many machine sets at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.model import ServerLaws

# Kronrod 15-point nodes (non-negative half) and weights, with the embedded 7-point Gauss
# weights; standard published constants.
_XK = np.array([0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
                0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
                0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
                0.207784955007898467600689403773245, 0.0])
_WK = np.array([0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
                0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
                0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
                0.204432940075298892414161999234649, 0.209482141084727828012999174891714])
_WG = np.array([0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
                0.381830050505118944950369775488975, 0.417959183673469387755102040816327])
NODES = np.concatenate([-_XK[:-1], _XK[::-1]])
WEIGHTS_K = np.concatenate([_WK[:-1], _WK[::-1]])
_GAUSS_INDEX = np.array([1, 3, 5, 7, 9, 11, 13])
WEIGHTS_G = np.concatenate([_WG[:-1], _WG[::-1]])

TAIL_EPSILON = 1e-10
_ADAPTIVE_PANELS = 4
MAX_ROUNDS = 40


def log_cdf(servers: ServerLaws, x: np.ndarray) -> np.ndarray:
    """log F(x) of the max over each problem's servers; x has shape (B, K), servers (B, n)."""
    per_server = servers_log_cdf(servers, x)
    # a server of no processes (0 x -inf before its start) is left out, not multiplied
    with np.errstate(invalid="ignore"):
        return np.sum(np.where(servers.mult[:, None, :] > 0,
                               servers.mult[:, None, :] * per_server, 0.0), axis=-1)


def servers_log_cdf(servers: ServerLaws, x: np.ndarray) -> np.ndarray:
    """(B, K, n) log F_k at x (B, K) for every server of every problem."""
    return servers.expand().log_cdf(x[:, :, None])


def start_point(servers: ServerLaws) -> np.ndarray:
    """x0 per problem: the largest dedicated time among used servers, seconds."""
    return np.max(np.where(servers.mult > 0, servers.t, 0.0), axis=-1)


def tail_point(servers: ServerLaws, epsilon: float = TAIL_EPSILON) -> np.ndarray:
    """A point per problem past which 1 - F < epsilon (a union bound over servers)."""
    total = np.maximum(np.sum(servers.mult, axis=-1, keepdims=True), 1.0)
    upper = servers.upper_bound(epsilon / total)
    return np.max(np.where(servers.mult > 0, upper, 0.0), axis=-1)


def _take(servers: ServerLaws, owner: np.ndarray) -> ServerLaws:
    return servers.take(owner)


def _clenshaw_curtis(order: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (ascending, on [-1, 1]) and weights of the (order + 1)-point Clenshaw-Curtis rule."""
    k = np.arange(order + 1)
    theta = np.pi * k / order
    weights = np.ones(order + 1)
    for j in range(1, order // 2 + 1):
        b = 1.0 if 2 * j == order else 2.0
        weights -= b / (4 * j * j - 1) * np.cos(2 * j * theta)
    weights *= np.where((k == 0) | (k == order), 1.0, 2.0) / order
    return -np.cos(theta), weights


# Coarse geometric probe of 1 - F over [x0, x_hi] (fractions of the span), then one
# Clenshaw-Curtis rule in log(x - x0) over the bracket where 1 - F moves; the nested half-order
# rule estimates its error. Problems that miss the tolerance go to adaptive Gauss-Kronrod.
_PROBE = np.geomspace(1e-10, 1.0, 21)
_CC_NODES = _clenshaw_curtis(64)[0]
# points -> (weights, weights of the embedded half-order rule)
_CC_RULES = {points: (_clenshaw_curtis(points - 1)[1], _clenshaw_curtis((points - 1) // 2)[1])
             for points in (33, 65)}
_FLAT = 1e-13
_STD_FLOOR = 1e-4
_MAX_INTERVALS = 1 << 18
_QUANTILE_LOG_TOL = 1e-9
_HEAD_SHARE = 1e-10


def moments(servers: ServerLaws, rel_tol: float = 1e-7) -> tuple[np.ndarray, np.ndarray, int]:
    """(mean, variance, server evaluations) of T for each problem of a (B, n) batch.

    Relative accuracy ``rel_tol`` is asked of both the mean and the variance (the error
    estimates are pessimistic; the achieved accuracy is usually far better).
    """
    mean, var, evaluations, _ = moments_and_samples(servers, rel_tol)
    return mean, var, evaluations


def moments_and_samples(servers: ServerLaws, rel_tol: float = 1e-7
                        ) -> tuple[np.ndarray, np.ndarray, int, tuple[np.ndarray, np.ndarray]]:
    """``moments`` plus the (x, log F) points it evaluated, (B, K) each, for quantiles."""
    x0 = start_point(servers)
    span = np.maximum(tail_point(servers) - x0, 0.0)
    # no used server can be interrupted: T is exactly x0
    certain = ~np.any((servers.mult > 0) & (servers.q > 0), axis=-1)
    span = np.where(certain, 0.0, span)
    bracket, evaluations = _bracket(servers, x0, span)
    samples = bracket[5:]
    bracket = bracket[:5]
    q_mean, q_square, ok, extra, nodes = _clenshaw_curtis_body(servers, x0, bracket, rel_tol)
    samples = (np.concatenate([samples[0], nodes[0]], axis=1),
               np.concatenate([samples[1], nodes[1]], axis=1))
    evaluations += extra
    if not ok.all():
        bad = np.flatnonzero(~ok)
        sub = _take(servers, bad)
        sub_bracket = tuple(part[bad] for part in bracket)
        fixed_mean, fixed_square, extra = _adaptive_body(sub, x0[bad], sub_bracket, rel_tol)
        q_mean[bad], q_square[bad] = fixed_mean, fixed_square
        evaluations += extra
    q_mean = np.where(certain, 0.0, q_mean)
    var = np.where(certain, 0.0, np.maximum(2 * q_square - q_mean**2, 0.0))
    return x0 + q_mean, var, evaluations, samples


def _bracket(servers: ServerLaws, x0: np.ndarray, span: np.ndarray
             ) -> tuple[tuple[np.ndarray, ...], int]:
    """Where 1 - F moves: (log y_a, log y_b, head integrals, head error) with y = x - x0.

    Past y_b, 1 - F is under 1e-13. The head [0, y_a] is either flat (1 - F within 1e-13 of
    1) or so short that the trapezoid on its ends misses by at most ``head error``, which
    keeps a long log-range of almost constant 1 - F out of the quadrature.
    """
    span = np.where(span > 0, span, np.maximum(x0, 1.0) * 1e-6)
    y_probe = span[:, None] * _PROBE[None, :]
    x_probe = x0[:, None] + np.concatenate([np.zeros((len(x0), 1)), y_probe], axis=1)
    log_probe = log_cdf(servers, x_probe)
    survival = -np.expm1(log_probe)
    at_start, survival = survival[:, 0], survival[:, 1:]
    last = len(_PROBE) - 1
    below = survival <= _FLAT
    stop = np.where(below.any(axis=1), np.argmax(below, axis=1), last)
    # head error bound of the trapezoid on [0, y]: (S(0) - S(y)) y / 2, S being monotone;
    # allowed: a thousandth of the tolerance against a crude lower bound of the integral
    head_error = (at_start[:, None] - survival) * y_probe / 2
    lower_mean = np.max(y_probe * survival, axis=1)
    allowed = _HEAD_SHARE * np.maximum(x0 + lower_mean, 1e-300)
    fits_head = (head_error <= allowed[:, None]) & (np.arange(last + 1)[None, :] < stop[:, None])
    start = np.where(fits_head.any(axis=1), last - np.argmax(fits_head[:, ::-1], axis=1), 0)
    stop = np.maximum(stop, start + 1)
    rows = np.arange(len(x0))
    y_a, y_b = y_probe[rows, start], y_probe[rows, stop]
    s_a = survival[rows, start]
    head_mean = y_a * (at_start + s_a) / 2
    head_square = y_a**2 / 2 * (at_start + s_a) / 2
    head_err = (at_start - s_a) * y_a / 2
    bracket = (np.log(y_a), np.log(y_b), head_mean, head_square, head_err, x_probe, log_probe)
    return bracket, (y_probe.size + len(x0)) * servers.t.shape[1]


def _integrands(servers: ServerLaws, x0: np.ndarray, u: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """(1 - F) dy/du and y (1 - F) dy/du at log-offsets u (rows follow the problems)."""
    f0, f1, _, _ = _integrands_and_points(servers, x0, u)
    return f0, f1


def _integrands_and_points(servers: ServerLaws, x0: np.ndarray, u: np.ndarray
                           ) -> tuple[np.ndarray, ...]:
    y = np.exp(u)
    x = x0[:, None] + y
    values = log_cdf(servers, x)
    f0 = -np.expm1(values) * y
    return f0, f0 * y, x, values


def _accept(x0: np.ndarray, q_mean: np.ndarray, q_square: np.ndarray, err_mean: np.ndarray,
            err_square: np.ndarray, rel_tol: float, share: np.ndarray | float = 1.0
            ) -> np.ndarray:
    mean = x0 + q_mean
    # a std below 1e-4 of the mean needs no relative accuracy of its own
    variance = np.maximum(2 * q_square - q_mean**2, (_STD_FLOOR * mean) ** 2)
    err_var = 2 * err_square + 2 * q_mean * err_mean
    return (err_mean <= rel_tol * mean * share) & (err_var <= rel_tol * variance * share)


def _clenshaw_curtis_body(servers: ServerLaws, x0: np.ndarray, bracket: tuple[np.ndarray, ...],
                          rel_tol: float) -> tuple[Any, ...]:
    """Nested Clenshaw-Curtis in log y: 33 points checked by 17, then 65 checked by 33."""
    u_a, u_b, head_mean, head_square, head_err = bracket
    half = (u_b - u_a) / 2
    centre = (u_a + u_b) / 2
    nodes_33 = _CC_NODES[::2]
    f0, f1, x_nodes, log_nodes = _integrands_and_points(
        servers, x0, centre[:, None] + half[:, None] * nodes_33[None, :])
    evaluations = f0.size * servers.t.shape[1]
    q_mean, q_square, err_mean, err_square = _cc_estimate(half, head_mean, head_square, f0, f1)
    ok = _accept(x0, q_mean, q_square, err_mean + head_err, err_square, rel_tol)
    retry = np.flatnonzero(~ok)
    if retry.size:
        sub = _take(servers, retry)
        g0, g1 = _integrands(sub, x0[retry], centre[retry, None]
                             + half[retry, None] * _CC_NODES[None, 1::2])
        evaluations += g0.size * servers.t.shape[1]
        full0 = np.empty((retry.size, len(_CC_NODES)))
        full1 = np.empty_like(full0)
        full0[:, ::2], full0[:, 1::2] = f0[retry], g0
        full1[:, ::2], full1[:, 1::2] = f1[retry], g1
        estimate = _cc_estimate(half[retry], head_mean[retry], head_square[retry], full0, full1)
        q_mean[retry], q_square[retry] = estimate[0], estimate[1]
        ok[retry] = _accept(x0[retry], estimate[0], estimate[1],
                            estimate[2] + head_err[retry], estimate[3], rel_tol)
    return q_mean, q_square, ok, evaluations, (x_nodes, log_nodes)


def _cc_estimate(half: np.ndarray, head_mean: np.ndarray, head_square: np.ndarray,
                 f0: np.ndarray, f1: np.ndarray) -> tuple[np.ndarray, ...]:
    """Integrals over head + body from a CC rule of f0/f1's width, and the error estimates."""
    weights, check = _CC_RULES[f0.shape[1]]
    body0, body1 = half * (f0 @ weights), half * (f1 @ weights)
    err0 = np.abs(body0 - half * (f0[:, ::2] @ check))
    err1 = np.abs(body1 - half * (f1[:, ::2] @ check))
    return head_mean + body0, head_square + body1, err0, err1


def _adaptive_body(servers: ServerLaws, x0: np.ndarray, bracket: tuple[np.ndarray, ...],
                   rel_tol: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Adaptive Gauss-Kronrod over the bracket in log y, all problems' intervals at once."""
    u_a, u_b, head_mean, head_square, _ = bracket
    n_problems = len(x0)
    width_total = u_b - u_a
    owner = np.repeat(np.arange(n_problems), _ADAPTIVE_PANELS)
    edges = u_a[:, None] + width_total[:, None] * np.linspace(0, 1, _ADAPTIVE_PANELS + 1)
    lo, hi = edges[:, :-1].ravel(), edges[:, 1:].ravel()
    q_mean, q_square = head_mean.copy(), head_square.copy()
    est_mean, est_square = q_mean.copy(), q_square.copy()
    evaluations = 0
    for _ in range(MAX_ROUNDS):
        if owner.size == 0:
            break
        if owner.size > _MAX_INTERVALS:  # pragma: no cover - pathological inputs only
            q_mean, q_square = est_mean, est_square
            break
        half = (hi - lo) / 2
        mid = (hi + lo) / 2
        sub = _take(servers, owner)
        f0, f1 = _integrands(sub, x0[owner], mid[:, None] + half[:, None] * NODES[None, :])
        evaluations += f0.size * servers.t.shape[1]
        k0, k1 = half * (f0 @ WEIGHTS_K), half * (f1 @ WEIGHTS_K)
        err0 = np.abs(k0 - half * (f0[:, _GAUSS_INDEX] @ WEIGHTS_G))
        err1 = np.abs(k1 - half * (f1[:, _GAUSS_INDEX] @ WEIGHTS_G))
        est_mean = q_mean + np.bincount(owner, k0, n_problems)
        est_square = q_square + np.bincount(owner, k1, n_problems)
        # every interval may use at least a tenth of the allowance: the Kronrod estimate
        # overstates the error by orders of magnitude on smooth integrands
        share = np.maximum((hi - lo) / width_total[owner], 0.1)
        done = _accept(x0[owner], est_mean[owner], est_square[owner], err0, err1, rel_tol,
                       share)
        done |= half <= 1e-9
        q_mean += np.bincount(owner[done], k0[done], n_problems)
        q_square += np.bincount(owner[done], k1[done], n_problems)
        owner, lo, hi, mid = owner[~done], lo[~done], hi[~done], mid[~done]
        owner = np.repeat(owner, 2)
        lo, hi = np.column_stack([lo, mid]).ravel(), np.column_stack([mid, hi]).ravel()
    else:  # pragma: no cover - pathological inputs only; keep the best estimate
        q_mean, q_square = est_mean, est_square
    return q_mean, q_square, evaluations


def _residual(servers: ServerLaws, x: np.ndarray, target: np.ndarray) -> np.ndarray:
    """log(-log p) - log(-log F(x)): increasing in x, -inf where F = 0, +inf where F = 1.

    The double log makes the max of many servers' CDF (Gumbel-like) nearly linear in x, so
    regula falsi converges in a few steps.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return target - np.log(-log_cdf(servers, x))


def quantiles(servers: ServerLaws, probs: np.ndarray, mean: np.ndarray, std: np.ndarray,
              rel_tol: float = 1e-7,
              samples: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(B, P) quantiles of T: the smallest x with F(x) >= p, by bracketed Illinois steps.

    ``samples`` ((B, K) points and their log F, e.g. from ``moments_and_samples``) give the
    first brackets; without them the bracket grows from mean + 3 std.
    """
    probs = np.asarray(probs, dtype=float)
    n_problems = servers.t.shape[0]
    x0 = start_point(servers)
    target = np.log(-np.log(probs))[None, :] * np.ones((n_problems, 1))
    lo = np.repeat(x0[:, None], len(probs), axis=1)
    hi = np.repeat(np.maximum(mean + 3 * std, x0 * (1 + 1e-9) + 1e-9)[:, None], len(probs),
                   axis=1)
    if samples is None:
        r_lo, r_hi = _residual(servers, lo, target), _residual(servers, hi, target)
    else:
        # the residual at every sample is already known (the same arithmetic as
        # _residual's): the brackets cost no evaluation unless no sample reaches p
        points, values = samples
        with np.errstate(divide="ignore"):
            gap = target[:, :, None] - np.log(-values[:, None, :])  # (B, P, K)
        below, above = gap < 0, gap >= 0
        low_at = np.argmax(np.where(below, points[:, None, :], -np.inf), axis=2)
        high_at = np.argmin(np.where(above, points[:, None, :], np.inf), axis=2)
        rows = np.arange(n_problems)[:, None]
        low_side = np.where(below.any(axis=2), points[rows, low_at], -np.inf)
        high_side = np.where(above.any(axis=2), points[rows, high_at], np.inf)
        better_lo = low_side > lo
        # x0 itself is a sample (F(x0) >= p there when no sample is below p)
        at_start = np.argmin(points, axis=1)[:, None]
        r_lo = np.where(better_lo, gap[rows, np.arange(len(probs))[None, :], low_at],
                        gap[rows, np.arange(len(probs))[None, :], at_start])
        lo = np.where(better_lo, low_side, lo)
        given = np.isfinite(high_side) & (high_side > lo)
        hi = np.where(given, high_side, hi)
        r_hi = gap[rows, np.arange(len(probs))[None, :], high_at]
        if not given.all():
            r_hi = np.where(given, r_hi, _residual(servers, hi, target))
    for _ in range(200):
        short = r_hi < 0
        if not short.any():
            break
        width = np.maximum(hi - x0[:, None], std[:, None] + 1e-9)
        lo = np.where(short, hi, lo)
        r_lo = np.where(short, r_hi, r_lo)
        hi = np.where(short, hi + 2 * width, hi)
        r_hi = np.where(short, _residual(servers, hi, target), r_hi)
    solved = r_lo >= 0  # the atom at x0 already reaches p
    result = np.where(solved, lo, hi)
    # secant steps from the latest two points, kept inside the bracket (bisection otherwise)
    prev_x, prev_r = lo, r_lo
    last_x, last_r = hi, r_hi
    for _ in range(100):
        converged = solved | (hi - lo <= rel_tol * np.maximum(np.abs(hi), 1e-12))
        if np.all(converged):
            break
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            secant = last_x - last_r * (last_x - prev_x) / (last_r - prev_r)
        usable = np.isfinite(secant) & (secant > lo) & (secant < hi)
        guess = np.where(usable, secant, (lo + hi) / 2)
        r_guess = _residual(servers, guess, target)
        hit = ~converged & (np.abs(r_guess) <= _QUANTILE_LOG_TOL)
        result = np.where(hit, guess, result)
        solved |= hit
        upper = r_guess >= 0
        hi = np.where(upper, guess, hi)
        r_hi = np.where(upper, r_guess, r_hi)
        lo = np.where(upper, lo, guess)
        r_lo = np.where(upper, r_lo, r_guess)
        prev_x, prev_r = last_x, last_r
        last_x, last_r = guess, r_guess
        result = np.where(solved, result, hi)
    # each level is solved to rel_tol on its own: where F rises by several levels within that
    # (a share's end on a steep law), a higher level could come out a hair earlier
    order = np.argsort(probs, kind="stable")
    result[:, order] = np.maximum.accumulate(result[:, order], axis=1)
    return result
