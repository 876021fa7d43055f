"""A host's completion moments in closed form where one process on one core runs its share.

Its completion is then a mixture over the backlog atoms of one server each, T_j = t_j + U_j
with U_j = 0 with probability 1 - q_j, else the fitted delay of mean m1_j and variance v_j:
E[T_j] = t_j + q_j m1_j and Var[T_j] = q_j v_j + q_j (1 - q_j) m1_j^2 (SPEC section 3), so
E[T] and E[T^2] are the atoms' weighted sums. The quadrature gives the same to about 1e-10
at many times the cost (a manager's hourly shadow launches ask for thousands of these), and
misses a tail as heavy as a demand CoV of 1e4, whose survival past 1e-10 still holds percent
of the mean. A host of several cores takes the slowest of them, which needs the integral.
"""

from __future__ import annotations

import numpy as np

from scheduler import fits
from scheduler.model import _FIELDS, MixtureServers, Servers


def single_core_moments(batch: MixtureServers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(which, mean, variance) of each host of ``batch`` (hosts, groups, atoms): ``which``
    marks the hosts whose work one core group of multiplicity 1 runs, with finite moments
    (seconds, s^2); the others' entries are 0, for the quadrature."""
    mult = batch.mult
    used = mult > 0
    which = (used.sum(axis=1) == 1) & (np.where(used, mult, 0.0).sum(axis=1) == 1)
    mean = np.zeros(mult.shape[0])
    variance = np.zeros(mult.shape[0])
    if not which.any():
        return which, mean, variance
    rows = np.flatnonzero(which)
    group = np.argmax(used[rows], axis=1)
    parts = batch.parts
    pick = (rows, group)
    t, q, weight = parts.t[pick], parts.q[pick], batch.weight[pick]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        m1 = np.where(q > 0, fits.mean(parts.code[pick], parts.p1[pick], parts.p2[pick]), 0.0)
        v = np.where(q > 0, fits.variance(parts.code[pick], parts.p1[pick], parts.p2[pick]),
                     0.0)
        atom_mean = t + q * m1
        atom_second = q * v + q * (1.0 - q) * m1**2 + atom_mean**2
        first = np.sum(np.where(weight > 0, weight * atom_mean, 0.0), axis=1)
        second = np.sum(np.where(weight > 0, weight * atom_second, 0.0), axis=1)
        var = np.maximum(second - first**2, 0.0)
    finite = np.isfinite(first) & np.isfinite(var)
    which[rows[~finite]] = False
    mean[rows[finite]] = first[finite]
    variance[rows[finite]] = var[finite]
    return which, mean, variance


def as_mixture(servers: Servers) -> MixtureServers:
    """Fitted (one-law) servers as one-atom mixtures, for the host-by-host routes."""
    parts = Servers(**{name: getattr(servers, name)[..., None] for name in _FIELDS})
    return MixtureServers(parts, np.ones((*servers.t.shape, 1)), servers.mult)


def task_moments(servers: Servers | MixtureServers) -> tuple[float, float] | None:
    """(E[T], std[T]) of a task (one problem of (1, n) servers) in closed form when one of
    its servers, of multiplicity 1, finishes it (one process on one core), else None."""
    used = servers.mult[0] > 0
    if used.sum() != 1 or servers.mult[0][used][0] != 1:
        return None  # a split's task: no array work on the prediction's hot path
    batch = servers if isinstance(servers, MixtureServers) else as_mixture(servers)
    which, mean, variance = single_core_moments(batch)
    if not which[0]:
        return None
    return float(mean[0]), float(np.sqrt(variance[0]))
