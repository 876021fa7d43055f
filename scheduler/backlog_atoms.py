"""Atoms of a positive law from its mean and variance: what the exact mixture over an
initial backlog B sums over (:meth:`scheduler.backlog.BacklogArrays.atoms`)."""

from __future__ import annotations

import numpy as np
from scipy import special

# probability levels cutting a Gamma law into atoms: coarse in the body, fine in the tail
_LEVELS = np.array([0.0, 0.35, 0.65, 0.85, 0.95, 0.99, 1.0])
ATOMS = 2 * (len(_LEVELS) - 1)


def positive_atoms(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Atoms of a positive law with ``mean`` and ``var``: Gamma up to CoV 1, else Lognormal.

    A stationary workload or a sum of job remainders with CoV above 1 comes from heavy-tailed
    demands, whose tail a Gamma law (exponential tail) understates; up to CoV 1 the Gamma law
    is exact for exponential demands (the M/M/1 workload).
    """
    heavy = var > mean**2 * (1 + 1e-9)
    values, probs = gamma_atoms(mean, var)
    if heavy.any():
        values[heavy], probs[heavy] = lognormal_atoms(mean[heavy], var[heavy])
    return values, probs


def _split_bins(mean: np.ndarray, first: np.ndarray, second: np.ndarray,
                square: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two atoms per bin (conditional mean -/+ std) from the normalised partial moments."""
    first[:, -1] = second[:, -1] = 1.0
    probs = np.diff(_LEVELS)[None, :] * np.ones((len(mean), 1))
    bin_mean = mean[:, None] * np.diff(first, axis=1) / probs
    bin_square = square[:, None] * np.diff(second, axis=1) / probs
    bin_std = np.sqrt(np.maximum(bin_square - bin_mean**2, 0.0))
    values = np.stack([np.maximum(bin_mean - bin_std, 0.0), bin_mean + bin_std], axis=2)
    return values.reshape(len(mean), -1), np.repeat(probs / 2, 2, axis=1)


def lognormal_atoms(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """As ``gamma_atoms`` for a Lognormal law with ``mean`` (s) and ``var`` (s^2)."""
    s = np.sqrt(np.log1p(var / mean**2))[:, None]
    with np.errstate(divide="ignore"):
        z = special.ndtri(_LEVELS)[None, :]
    # E[X^j; X < x] / E[X^j] = Phi(z - j s) where z is x's standard score
    return _split_bins(mean, special.ndtr(z - s), special.ndtr(z - 2 * s), mean**2 + var)


def gamma_atoms(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, ATOMS) atoms and probabilities of a Gamma law with ``mean`` (s) and ``var`` (s^2).

    The law is cut at ``_LEVELS``; each bin becomes two atoms of half its probability at its
    conditional mean plus and minus its conditional std, so the mean and variance are exact
    (up to clipping a lower atom at 0, which only the first bin of a very skewed law needs).
    """
    shape = (mean**2 / var)[:, None]
    cuts = special.gammaincinv(shape, _LEVELS[None, :])
    # E[X^j; X < x] / E[X^j] = P(shape + j, x / scale)
    return _split_bins(mean, special.gammainc(shape + 1, cuts),
                       special.gammainc(shape + 2, cuts), mean**2 + var)
