"""Host moments of many small predictions in a few batches of integrals.

Each host of a prediction with a backlog is its own integration problem
(:meth:`scheduler.prediction.Prediction.host_moments`); a manager predicting a few hosts at
a time for many hosts pays the integration's rounds once per prediction. Here the problems of
many predictions are integrated together (the same figures, a matrix product's rounding
aside) and each prediction keeps its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.model import _FIELDS, MixtureServers, Servers
from scheduler.prediction import Prediction, _as_mixture, _host_batch, _host_moments_of


def prime_host_moments(predictions: Sequence[Prediction]) -> None:
    """Work out the host moments of every prediction with a backlog in one batch of
    integrals, for :meth:`Prediction.host_moments` to return: each host is its own problem
    either way (the same figures, a matrix product's rounding aside), and many small
    predictions cost one integration's rounds instead of one each."""
    pending = [p for p in predictions if p.backlog_law is not None
               and "_host_moments" not in p.__dict__]
    if len(pending) < 2:
        return
    batches = [_host_batch(p._host_servers if isinstance(p._host_servers, MixtureServers)
                           else _as_mixture(p._host_servers), len(p.hosts)) for p in pending]
    # predictions of one shape (core groups, atoms) integrate together; a few shapes are
    # padded to the largest when each alone would be a batch of one
    shapes: dict[tuple[int, int], list[int]] = {}
    for k, b in enumerate(batches):
        shapes.setdefault(b.weight.shape[1:], []).append(k)
    lone = [k for members in shapes.values() if len(members) == 1 for k in members]
    together = [members for members in shapes.values() if len(members) > 1]
    for members in together + ([lone] if len(lone) > 1 else []):
        groups = max(batches[k].mult.shape[1] for k in members)
        atoms = max(batches[k].weight.shape[2] for k in members)
        joined = _host_moments_of(_concatenate([_padded(batches[k], groups, atoms)
                                                for k in members]))
        start = 0
        for k in members:
            stop = start + batches[k].mult.shape[0]
            # what the cached property would hold (it keeps its value in the instance dict)
            pending[k].__dict__["_host_moments"] = (joined[0][start:stop],
                                                    joined[1][start:stop])
            start = stop


def _padded(batch: MixtureServers, groups: int, atoms: int) -> MixtureServers:
    """``batch`` with unused core groups (mult 0) and atoms of weight 0 up to the sizes
    given: copies of a group and an atom it has, which change no sum."""
    _, have, depth = batch.weight.shape
    take_group = np.minimum(np.arange(groups), have - 1) if have < groups else slice(None)
    take_atom = np.where(np.arange(atoms) < depth, np.arange(atoms), 0) if depth < atoms \
        else slice(None)
    parts = Servers(**{name: getattr(batch.parts, name)[:, take_group][:, :, take_atom]
                       for name in _FIELDS})
    weight = batch.weight[:, take_group][:, :, take_atom]
    mult = batch.mult[:, take_group]
    if have < groups:
        weight[:, have:] = 0.0
        mult[:, have:] = 0.0
    if depth < atoms:
        weight[:, :, depth:] = 0.0
    return MixtureServers(parts, weight, mult)


def _concatenate(batches: Sequence[MixtureServers]) -> MixtureServers:
    parts = Servers(**{name: np.concatenate([getattr(b.parts, name) for b in batches])
                       for name in _FIELDS})
    return MixtureServers(parts, np.concatenate([b.weight for b in batches]),
                          np.concatenate([b.mult for b in batches]))
