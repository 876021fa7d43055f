"""Server batches without their padding, for the max-product integrals
(:mod:`scheduler.completion`).

A batch of sets pads every host to the most core groups of any and each group to the most
backlog atoms (on a 12-host lab 624 mixture components a point, 169 of them real).
:func:`compacted` gives the same law of each problem for a fraction of the work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.model import _FIELDS, MixtureServers, Servers

__all__ = ["SplitServers", "compacted"]


@dataclass(frozen=True)
class SplitServers:
    """A batch's servers of several backlog atoms (``mixed``, (B, n1)) beside those of one
    (``plain``, (B, n2)), side by side on the server axis: what ``completion`` reads of a
    batch (t, q, mult, log F, upper bounds, rows), each part evaluated at its own depth."""

    mixed: MixtureServers
    plain: Servers

    @property
    def t(self) -> np.ndarray:
        return np.concatenate([self.mixed.t, self.plain.t], axis=-1)

    @property
    def q(self) -> np.ndarray:
        return np.concatenate([self.mixed.q, self.plain.q], axis=-1)

    @property
    def mult(self) -> np.ndarray:
        return np.concatenate([self.mixed.mult, self.plain.mult], axis=-1)

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        """log F(x) of every server, the mixed ones first; x broadcasts as for either part."""
        return np.concatenate([self.mixed.log_cdf(x), self.plain.log_cdf(x)], axis=-1)

    def upper_bound(self, epsilon: Any) -> np.ndarray:
        """A point past which each server's survival is below ``epsilon`` (seconds; one
        for all, or one per server)."""
        eps: Any = np.asarray(epsilon)
        first = self.mixed.mult.shape[-1]
        if eps.ndim and eps.shape[-1] > 1:  # one per server: each part its own
            return np.concatenate([self.mixed.upper_bound(eps[..., :first]),
                                   self.plain.upper_bound(eps[..., first:])], axis=-1)
        return np.concatenate([self.mixed.upper_bound(eps), self.plain.upper_bound(eps)],
                              axis=-1)

    def take(self, rows: np.ndarray) -> SplitServers:
        return SplitServers(self.mixed.take(rows), self.plain.take(rows))

    def expand(self) -> SplitServers:
        return SplitServers(self.mixed.expand(), self.plain.expand())


def compacted(servers: Servers | MixtureServers, *, split: bool = False
              ) -> Servers | MixtureServers | SplitServers:
    """The same laws of (B, n) problems for the max-product integrals, without the padding:
    each problem's servers without work (mult 0, finished from the start) moved after the
    others and the columns no problem uses dropped, and a mixture's atoms of weight 0 (which
    add nothing) likewise, in order. A batch of sets pads every host to the most core groups
    and every group to the most atoms of any: on a 12-host lab 624 components a point, 169
    of them real. Not for callers that read the servers host by host (their layout moves).
    ``split``: a mixture's servers of one atom taken as plain servers beside the others
    (:class:`SplitServers`, whatever their number: read through log F as the mixture is,
    by ``completion``'s integrals and the calibrated criterion), else kept as mixtures."""
    used = servers.mult > 0
    width = max(int(used.sum(axis=-1).max(initial=0)), 1)
    if width < used.shape[-1]:
        order = np.argsort(~used, axis=-1, kind="stable")[..., :width]
        if isinstance(servers, MixtureServers):
            deep = order[..., None]
            servers = MixtureServers(
                _taken(servers.parts, deep),
                np.take_along_axis(servers.weight, deep, axis=-2),
                np.take_along_axis(servers.mult, order, axis=-1))
        else:
            servers = _taken(servers, order, axis=-1)
    if not isinstance(servers, MixtureServers):
        return servers
    real = servers.weight > 0
    # a server of one atom (an idle start, or jobs of known demand) is a plain server
    several = (real.sum(axis=-1) > 1) & (servers.mult > 0)
    mixed_width = int(several.sum(axis=-1).max(initial=0))
    if split and mixed_width < several.shape[-1]:
        order = np.argsort(~several, axis=-1, kind="stable")
        servers = MixtureServers(_taken(servers.parts, order[..., None]),
                                 np.take_along_axis(servers.weight, order[..., None], axis=-2),
                                 np.take_along_axis(servers.mult, order, axis=-1))
        real = servers.weight > 0
        atom = np.argmax(real[..., mixed_width:, :], axis=-1)[..., None]
        rest = _taken(Servers(**{name: np.broadcast_to(
            getattr(servers.parts, name), servers.parts.t.shape)[..., mixed_width:, :]
            for name in _FIELDS}), atom, axis=-1)
        plain = Servers(**{name: getattr(rest, name)[..., 0] for name in _FIELDS
                           if name != "mult"}, mult=servers.mult[..., mixed_width:])
        mixed = MixtureServers(Servers(**{name: getattr(servers.parts, name)[..., :mixed_width, :]
                                          for name in _FIELDS}),
                               servers.weight[..., :mixed_width, :],
                               servers.mult[..., :mixed_width])
        return SplitServers(_shallow(mixed), plain)
    return _shallow(servers)


def _shallow(servers: MixtureServers) -> MixtureServers:
    """``servers`` with the atoms of weight 0 after the others and those no server uses
    dropped."""
    real = servers.weight > 0
    depth = max(int(real.sum(axis=-1).max(initial=0)), 1)
    if depth >= real.shape[-1]:
        return servers
    order = np.argsort(~real, axis=-1, kind="stable")[..., :depth]
    return MixtureServers(_taken(servers.parts, order, axis=-1),
                          np.take_along_axis(servers.weight, order, axis=-1), servers.mult)


def _taken(servers: Servers, order: np.ndarray, axis: int = -2) -> Servers:
    """Every field of ``servers`` taken along ``axis`` at ``order`` (broadcast over the
    rest, as ``np.take_along_axis``)."""
    return Servers(**{name: np.take_along_axis(
        np.broadcast_to(getattr(servers, name), np.broadcast_shapes(
            getattr(servers, name).shape, servers.t.shape)), order, axis=axis)
        for name in _FIELDS})
