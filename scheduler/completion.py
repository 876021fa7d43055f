"""The completion time of a parallel task: T = max over servers, F(x) = prod F_k(x).

Moments come from E[T] = x0 + int (1 - F) and E[(T - x0)^2] = 2 int (x - x0)(1 - F) over
[x0, x_hi], where x0 is the largest dedicated time (F = 0 below it) and 1 - F < 1e-10 past
x_hi. The integrals use adaptive Gauss-Kronrod (7/15 points) vectorised over every open
interval of every problem in a batch, so one call evaluates many machine sets at once.
"""

from __future__ import annotations

import numpy as np

from scheduler.model import Servers

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
# Initial panels as fractions of [x0, x_hi]: geometric near x0, where a Gamma fit with shape
# below 1 makes the integrand steep, and where the bulk sits when the tail bound is far out.
_INITIAL_EDGES = np.concatenate([[0.0], np.geomspace(1e-6, 1.0, 7)])
MAX_ROUNDS = 40


def log_cdf(servers: Servers, x: np.ndarray) -> np.ndarray:
    """log F(x) of the max over each problem's servers; x has shape (B, K), servers (B, n)."""
    per_server = servers_log_cdf(servers, x)
    return np.sum(np.where(servers.mult[:, None, :] > 0,
                           servers.mult[:, None, :] * per_server, 0.0), axis=-1)


def servers_log_cdf(servers: Servers, x: np.ndarray) -> np.ndarray:
    """(B, K, n) log F_k at x (B, K) for every server of every problem."""
    expanded = Servers(**{name: getattr(servers, name)[:, None, :]
                          for name in ("t", "q", "code", "p1", "p2", "mult")})
    return expanded.log_cdf(x[:, :, None])


def start_point(servers: Servers) -> np.ndarray:
    """x0 per problem: the largest dedicated time among used servers, seconds."""
    return np.max(np.where(servers.mult > 0, servers.t, 0.0), axis=-1)


def tail_point(servers: Servers, epsilon: float = TAIL_EPSILON) -> np.ndarray:
    """A point per problem past which 1 - F < epsilon (a union bound over servers)."""
    total = np.maximum(np.sum(servers.mult, axis=-1, keepdims=True), 1.0)
    upper = servers.upper_bound(epsilon / total)
    return np.max(np.where(servers.mult > 0, upper, 0.0), axis=-1)


def _take(servers: Servers, owner: np.ndarray) -> Servers:
    return Servers(**{name: getattr(servers, name)[owner]
                      for name in ("t", "q", "code", "p1", "p2", "mult")})


def moments(servers: Servers, rel_tol: float = 1e-7) -> tuple[np.ndarray, np.ndarray, int]:
    """(mean, variance, server evaluations) of T for each problem of a (B, n) batch.

    Relative accuracy ``rel_tol`` is asked of both the mean and the variance.
    """
    n_problems = servers.t.shape[0]
    x0 = start_point(servers)
    x_hi = np.maximum(tail_point(servers), x0)
    span = x_hi - x0
    q_mean = np.zeros(n_problems)
    q_square = np.zeros(n_problems)
    owner = np.repeat(np.arange(n_problems), len(_INITIAL_EDGES) - 1)
    lo = (x0[:, None] + span[:, None] * _INITIAL_EDGES[None, :-1]).ravel()
    hi = (x0[:, None] + span[:, None] * _INITIAL_EDGES[None, 1:]).ravel()
    keep = hi > lo
    owner, lo, hi = owner[keep], lo[keep], hi[keep]
    evaluations = 0
    # running estimates of each problem's integrals, for the relative error allowances
    est_mean = np.zeros(n_problems)
    est_square = np.zeros(n_problems)
    for _ in range(MAX_ROUNDS):
        if owner.size == 0:
            break
        half = (hi - lo) / 2
        mid = (hi + lo) / 2
        x = mid[:, None] + half[:, None] * NODES[None, :]
        sub = _take(servers, owner)
        survival = -np.expm1(log_cdf(sub, x))
        evaluations += x.size * servers.t.shape[1]
        y = x - x0[owner][:, None]
        k0 = half * (survival @ WEIGHTS_K)
        g0 = half * (survival[:, _GAUSS_INDEX] @ WEIGHTS_G)
        moment_integrand = y * survival
        k1 = half * (moment_integrand @ WEIGHTS_K)
        g1 = half * (moment_integrand[:, _GAUSS_INDEX] @ WEIGHTS_G)
        est_mean = q_mean + np.bincount(owner, k0, n_problems)
        est_square = q_square + np.bincount(owner, k1, n_problems)
        variance = np.maximum(2 * est_square - est_mean**2, 1e-300)
        count = np.bincount(owner, minlength=n_problems)
        share = np.maximum((hi - lo) / np.where(span > 0, span, 1.0)[owner],
                           1.0 / np.maximum(count[owner], 1))
        err_mean = np.abs(k0 - g0)
        err_var = 2 * np.abs(k1 - g1) + 2 * est_mean[owner] * err_mean
        allowed_mean = rel_tol * (x0 + est_mean)[owner] * share
        allowed_var = rel_tol * variance[owner] * share
        done = (err_mean <= allowed_mean) & (err_var <= allowed_var)
        done |= (hi - lo) <= 1e-12 * np.maximum(x0[owner], 1.0)
        q_mean += np.bincount(owner[done], k0[done], n_problems)
        q_square += np.bincount(owner[done], k1[done], n_problems)
        owner, lo, hi, mid = owner[~done], lo[~done], hi[~done], mid[~done]
        owner = np.repeat(owner, 2)
        lo, hi = np.column_stack([lo, mid]).ravel(), np.column_stack([mid, hi]).ravel()
    else:  # pragma: no cover - only on pathological inputs
        q_mean = est_mean
        q_square = est_square
    mean = x0 + q_mean
    var = np.maximum(2 * q_square - q_mean**2, 0.0)
    return mean, var, evaluations


def quantiles(servers: Servers, probs: np.ndarray, mean: np.ndarray, std: np.ndarray,
              rel_tol: float = 1e-7) -> np.ndarray:
    """(B, P) quantiles of T: the smallest x with F(x) >= p, by bracketed regula falsi."""
    probs = np.asarray(probs, dtype=float)
    n_problems = servers.t.shape[0]
    x0 = start_point(servers)
    target = np.log(probs)[None, :] * np.ones((n_problems, 1))
    at_start = log_cdf(servers, x0[:, None])
    lo = np.repeat(x0[:, None], len(probs), axis=1)
    f_lo = np.repeat(at_start, len(probs), axis=1) - target
    # expand an upper bracket from mean + k std until F(x) >= p
    hi = np.maximum(mean + 3 * std, x0 * (1 + 1e-9) + 1e-9)[:, None] * np.ones((1, len(probs)))
    f_hi = log_cdf(servers, hi) - target
    for _ in range(200):
        short = f_hi < 0
        if not short.any():
            break
        width = np.maximum(hi - x0[:, None], std[:, None] + 1e-9)
        lo = np.where(short, hi, lo)
        f_lo = np.where(short, f_hi, f_lo)
        hi = np.where(short, hi + 2 * width, hi)
        f_hi = np.where(short, log_cdf(servers, hi) - target, f_hi)
    solved = f_lo >= 0  # the atom at x0 already reaches p
    result = np.where(solved, lo, hi)
    side = np.zeros_like(lo)
    for _ in range(100):
        if np.all(solved | (hi - lo <= rel_tol * np.maximum(np.abs(hi), 1e-12))):
            break
        finite_lo = np.isfinite(f_lo)
        # Illinois regula falsi; bisection where the lower value is -inf (F = 0)
        guess = np.where(finite_lo, hi - f_hi * (hi - lo) / np.where(
            f_hi - f_lo != 0, f_hi - f_lo, 1.0), (lo + hi) / 2)
        guess = np.clip(guess, lo + 0.0 * (hi - lo), hi)
        inside = (guess > lo) & (guess < hi)
        guess = np.where(inside, guess, (lo + hi) / 2)
        f_guess = log_cdf(servers, guess) - target
        upper = f_guess >= 0
        hi = np.where(upper, guess, hi)
        f_hi = np.where(upper, f_guess, f_hi)
        lo = np.where(upper, lo, guess)
        f_lo = np.where(upper, f_lo, f_guess)
        # Illinois step: halve the retained end's value when the same end stays twice
        f_lo = np.where(upper & (side > 0) & finite_lo, f_lo / 2, f_lo)
        f_hi = np.where(~upper & (side < 0), f_hi / 2, f_hi)
        side = np.where(upper, 1.0, -1.0)
        result = np.where(solved, result, hi)
    return np.where(solved, lo, hi)
