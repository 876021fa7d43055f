"""What each host costs a set's criterion per unit of work it takes: the scores that order the
near-optimal search's candidates (``scheduler.search``).

Joining a set S with completion law F_S, host k raises E[T] by exactly  int F_S (1 - F_k) dx
and E[T^2] by  int 2x F_S (1 - F_k) dx  (for a member, the same with S without k); to first
order that moves E[T] + std[T] by  dE + (dE2 - 2 E dE) / (2 std). What the host brings is its
share at the set's scale, the work it takes off the others when it joins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler import completion
from scheduler.model import Servers

if TYPE_CHECKING:  # the evaluator lives in scheduler.selection, which imports the search
    from scheduler.selection import SetEvaluator

# points of the damage integrals: fractions of the way from the set's start to its tail
_DAMAGE_FRACTIONS = np.concatenate([[0.0], np.geomspace(1e-4, 1.0, 24), [1.5, 2.5, 4.0]])
_DAMAGE_TAIL = 1e-6


def damage_per_share(evaluator: SetEvaluator, chosen: np.ndarray, *, calibrated: bool
                     ) -> np.ndarray:
    """First-order change of the criterion per reference-CPU-second of share, for every
    candidate: for an outsider, joining ``chosen``; for a member, its part in it (see the
    module docstring). ``calibrated``: the hosts' laws are the calibrated ones (the
    evaluator's level maps applied), else the model's."""
    # (1, m x groups): each candidate's core groups (several where a backlog gives its
    # cores different laws), host by host, the set's members among them
    hosts = evaluator.every_host_servers(chosen)
    member = np.zeros(len(evaluator.arrays.lam), dtype=bool)
    member[chosen] = True
    groups = hosts.t.shape[1] // member.size
    in_set = Servers(t=hosts.t, q=hosts.q, code=hosts.code, p1=hosts.p1, p2=hosts.p2,
                     mult=np.where(np.repeat(member, groups), hosts.mult, 0.0))
    x0 = completion.start_point(in_set)
    tail = completion.tail_point(in_set, _DAMAGE_TAIL)
    grid = x0[0] + (tail[0] - x0[0]) * _DAMAGE_FRACTIONS
    log_host = evaluator.every_host_log_cdf(chosen, hosts, grid, calibrated=calibrated)
    log_set = np.sum(log_host[:, member], axis=1)
    # F of the set without the host (members) or as it is (outsiders), beside 1 - F_host
    with np.errstate(invalid="ignore"):
        others = np.exp(np.minimum(np.where(member[None, :], log_set[:, None] - log_host,
                                            log_set[:, None]), 0.0))
    others[np.isnan(others)] = 0.0  # -inf - -inf: a member that cannot have finished
    running = -np.expm1(log_host)
    # trapezoid weights on the grid, for integrals of f and of 2x f
    step = np.diff(grid)
    weights = np.concatenate([step, [0.0]]) / 2 + np.concatenate([[0.0], step]) / 2
    weights_x = 2 * grid * weights
    joint = others * running
    d_mean, d_square = weights @ joint, weights_x @ joint
    survival = -np.expm1(log_set)
    mean = x0[0] + weights @ survival
    square = x0[0] ** 2 + weights_x @ survival
    std = np.sqrt(max(square - mean**2, (1e-6 * mean) ** 2))
    damage = d_mean + (d_square - 2 * mean * d_mean) / (2 * std)
    # what a host brings is the work it takes at this scale (joining, it lowers every other
    # share by that much over the total): its share, reference-CPU-seconds, here with the
    # least work a backlog holds its cores with (its servers' t); on 30 pools of 9-14
    # one-core hosts, half with a job running, the share alone ranked them worse (the
    # optimum on 25 against 28)
    served = hosts.t[0] * hosts.mult[0]
    share = (served if groups == 1 else served.reshape(-1, groups).sum(axis=1)) \
        * evaluator.arrays.tau
    # a host that would get no work (its backlog outlasts the set's finish) brings nothing:
    # it ranks last
    return np.divide(damage, share, out=np.full_like(damage, np.inf), where=share > 0)
