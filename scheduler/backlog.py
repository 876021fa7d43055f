"""The local work a remote sub-task finds at launch, per core, as a discrete law.

Given a core's initial backlog B = b, a remote sub-task of dedicated time t behind
preemptive-priority local jobs finishes at the end of the busy period started by work b + t,
so T | B = b has exactly the idle-start law of dedicated time b + t (SPEC section 3). The
completion law is the mixture over B; this module turns each host's state into per-core
atoms (values, probabilities) of B that keep E[B] and, up to the discretisation noted below,
E[B^2].

Sources of B:
- ``Backlog.exact``: the local jobs present at launch with known remaining demands.
- ``Backlog.from_laws``: the same with random remaining demands (templates), given by their
  mean and variance; each core's sum is fitted by a Gamma law (exact two moments).
- ``Backlog.discrete``: a law of each core's backlog given directly, cores i.i.d.
- ``Backlog.steady_state``: the stationary M/G/1 workload of each core (Pollaczek-Khinchine:
  0 with probability 1 - rho, else positive with E[W] = lam EX2 / (2 (1 - rho)) and
  E[W^2] = 2 E[W]^2 + lam EX3 / (3 (1 - rho))); the positive part is fitted by a Gamma law.

Multi-core hosts (c independent cores, lam / c each, as the model): the jobs present are
spread as an FCFS M/G/c queue would hold them, one job per core in the given order and each
further job behind the core whose work ends first (by mean when demands are random).

Discretisation: a Gamma law is cut at fixed probability levels, finer in the tail, and each
bin becomes two atoms at its conditional mean plus and minus its conditional std: the mean
and variance of B are exact, its shape is the Gamma law's at bin resolution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host, HostArrays

SOURCES = ("snapshot", "steady-state", "idle")
# probability levels cutting a Gamma law into atoms: coarse in the body, fine in the tail
_LEVELS = np.array([0.0, 0.35, 0.65, 0.85, 0.95, 0.99, 1.0])
ATOMS = 2 * (len(_LEVELS) - 1)


def _numbers(field: str, values: object) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{field} must be numbers, got {values!r}", field=field,
                                   value=values) from None
    if not np.isfinite(array).all() or (array < 0).any():
        raise InvalidArgumentError(f"{field} must be finite and >= 0", field=field,
                                   value=array.tolist())
    return array


@dataclass(frozen=True)
class Backlog:
    """What one host's cores hold at launch. Build with the class methods, not directly.

    ``kind``: idle, jobs (``job_means``/``job_variances`` in FCFS order, seconds and
    seconds squared), discrete (``values``/``probabilities`` of each core's backlog) or
    steady-state (``third_moment``: E[X^3] of a local demand in s^3, None = lognormal with
    the host's mean and sigma). ``source`` is what the prediction reports.
    """

    kind: str
    source: str
    job_means: tuple[float, ...] = ()
    job_variances: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    probabilities: tuple[float, ...] = ()
    third_moment: float | None = None

    @classmethod
    def idle(cls) -> Backlog:
        """No local work at launch (the paper's assumption)."""
        return cls("idle", "idle")

    @classmethod
    def exact(cls, remaining_seconds: Sequence[float]) -> Backlog:
        """Local jobs present at launch with known remaining CPU demands (seconds, FCFS order)."""
        means = _numbers("remaining_seconds", remaining_seconds)
        return cls("jobs", "snapshot", tuple(means), tuple(np.zeros(means.size)))

    @classmethod
    def from_laws(cls, laws: Sequence[object]) -> Backlog:
        """Local jobs present at launch whose remaining demands are random laws (FCFS order).

        Each law has ``mean_seconds`` and ``variance_seconds2`` (see scheduler.templates).
        """
        try:
            means = [law.mean_seconds for law in laws]  # type: ignore[attr-defined]
            variances = [law.variance_seconds2 for law in laws]  # type: ignore[attr-defined]
        except AttributeError:
            raise InvalidArgumentError("each law needs mean_seconds and variance_seconds2",
                                       field="laws", value=laws) from None
        return cls("jobs", "snapshot", tuple(_numbers("mean_seconds", means)),
                   tuple(_numbers("variance_seconds2", variances)))

    @classmethod
    def discrete(cls, values_seconds: Sequence[float], probabilities: Sequence[float],
                 source: str = "snapshot") -> Backlog:
        """Each core's backlog takes ``values_seconds`` with ``probabilities`` (cores i.i.d.)."""
        values = _numbers("values_seconds", values_seconds)
        probs = _numbers("probabilities", probabilities)
        if values.size == 0 or values.size != probs.size or not math.isclose(
                probs.sum(), 1.0, rel_tol=1e-9):
            raise InvalidArgumentError("values and probabilities must pair up and the "
                                       "probabilities sum to 1", field="probabilities",
                                       value=probs.tolist())
        if source not in SOURCES:
            raise InvalidArgumentError(f"source must be one of {', '.join(SOURCES)}",
                                       field="source", value=source)
        return cls("discrete", source, values=tuple(values), probabilities=tuple(probs))

    @classmethod
    def steady_state(cls, third_moment_seconds3: float | None = None) -> Backlog:
        """The stationary backlog of each core (for a host with no fresh snapshot).

        ``third_moment_seconds3``: E[X^3] of a local job's demand; None assumes a lognormal
        demand with the host's mean 1/mu and std sigma (the model's default shape).
        """
        if third_moment_seconds3 is not None:
            third_moment_seconds3 = float(_numbers("third_moment_seconds3",
                                                   [third_moment_seconds3])[0])
        return cls("steady-state", "steady-state", third_moment=third_moment_seconds3)


@dataclass(frozen=True)
class BacklogArrays:
    """Per-host core groups: ``mult`` (H, G) cores sharing a law of B given by ``atoms`` and
    ``weights`` (H, G, M); ``core_mean`` (H,) E[B] averaged over the cores (seconds)."""

    sources: np.ndarray
    core_mean: np.ndarray
    mult: np.ndarray
    atoms: np.ndarray
    weights: np.ndarray

    def take(self, members: np.ndarray) -> BacklogArrays:
        return BacklogArrays(self.sources[members], self.core_mean[members], self.mult[members],
                             self.atoms[members], self.weights[members])


def align(hosts: Sequence[Host], backlog: Sequence[Backlog] | Mapping[str, Backlog]
          ) -> list[Backlog]:
    """``backlog`` as one Backlog per host: a sequence aligned with ``hosts`` or a mapping by
    host name (hosts not named start idle)."""
    if isinstance(backlog, Backlog):
        backlog = [backlog]
    if isinstance(backlog, Mapping):
        unknown = set(backlog) - {h.name for h in hosts}
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidArgumentError(f"backlog names unknown host {name!r}",
                                       field="backlog", value=name)
        items = [backlog.get(h.name, Backlog.idle()) for h in hosts]
    else:
        items = list(backlog)
        if len(items) != len(hosts):
            raise InvalidArgumentError(f"expected {len(hosts)} backlogs (one per host), got "
                                       f"{len(items)}", field="backlog", value=len(items))
    for item in items:
        if not isinstance(item, Backlog):
            raise InvalidArgumentError(f"expected Backlog objects, got {item!r}",
                                       field="backlog", value=item)
    return items


def build(hosts: Sequence[Host], items: Sequence[Backlog]) -> BacklogArrays:
    """Per-core discrete laws of B for every host.

    Idle and steady-state hosts (one law for all their cores) are packed in array passes;
    only hosts with listed jobs or a given discrete law are visited one by one.
    """
    arrays = HostArrays.from_hosts(hosts)
    kinds = np.array([item.kind for item in items])
    steady = kinds == "steady-state"
    listed = np.flatnonzero((kinds == "discrete") | ((kinds == "jobs") & np.array(
        [bool(item.job_means) for item in items])))
    groups = {int(k): (_job_groups(hosts[k].cores, np.array(items[k].job_means),
                                   np.array(items[k].job_variances))
                       if items[k].kind == "jobs" else
                       [(hosts[k].cores, np.array(items[k].values),
                         np.array(items[k].probabilities))])
              for k in listed}
    width = max([1, *(len(g) for g in groups.values())])
    depth = max([1, *(len(values) for g in groups.values() for _, values, _ in g)])
    if steady.any():
        depth = max(depth, 1 + ATOMS)
    mult = np.zeros((len(hosts), width))
    atoms = np.zeros((len(hosts), width, depth))
    weights = np.zeros((len(hosts), width, depth))
    mult[:, 0] = arrays.cores
    weights[:, 0, 0] = 1.0
    if steady.any():
        values, probs = _steady_state_atoms(arrays, items, steady)
        atoms[steady, 0, :1 + ATOMS] = values[steady]
        weights[steady, 0, :1 + ATOMS] = probs[steady]
    for k, host_groups in groups.items():
        mult[k], weights[k] = 0.0, 0.0
        for g, (count, values, probs) in enumerate(host_groups):
            mult[k, g] = count
            atoms[k, g, :values.size] = values
            weights[k, g, :values.size] = probs
    core_mean = np.einsum("hg,hgm,hgm->h", mult, atoms, weights) / arrays.cores
    sources = np.array([item.source for item in items])
    return BacklogArrays(sources, core_mean, mult, atoms, weights)


def _job_groups(cores: int, means: np.ndarray, variances: np.ndarray
                ) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """FCFS spread of the jobs over the cores; each core's sum as atoms."""
    core_mean = np.zeros(cores)
    core_var = np.zeros(cores)
    for mean, var in zip(means, variances):
        # a job starts on the core whose work ends first (ties: the lowest core)
        j = int(np.argmin(core_mean))
        core_mean[j] += mean
        core_var[j] += var
    groups = []
    idle = int(np.sum(core_mean == 0))
    if idle:
        groups.append((idle, np.zeros(1), np.ones(1)))
    for mean, var in zip(core_mean[core_mean > 0], core_var[core_mean > 0]):
        if var <= 0:
            groups.append((1, np.array([mean]), np.ones(1)))
        else:
            values, probs = positive_atoms(np.array([mean]), np.array([var]))
            groups.append((1, values[0], probs[0]))
    return groups


def _steady_state_atoms(arrays: HostArrays, items: Sequence[Backlog], steady: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """(H, 1 + ATOMS) atoms and probabilities of each core's stationary workload."""
    lam = arrays.lam / arrays.cores
    rho = arrays.rho
    mean = 1.0 / arrays.mu
    ex2 = arrays.demand_second_moment
    lognormal_ex3 = mean**3 * (ex2 / mean**2) ** 3
    given = np.array([np.nan if item.third_moment is None else item.third_moment
                      for item in items])
    ex3 = np.where(np.isnan(given), lognormal_ex3, given)
    busy = steady & (rho > 0) & (lam > 0)
    safe_rho = np.where(busy, rho, 0.5)
    work_mean = lam * ex2 / (2 * (1 - safe_rho))
    work_square = 2 * work_mean**2 + lam * ex3 / (3 * (1 - safe_rho))
    positive_mean = np.where(busy, work_mean / safe_rho, 1.0)
    positive_var = np.where(busy, work_square / safe_rho - positive_mean**2, 1.0)
    values, probs = positive_atoms(positive_mean, np.maximum(positive_var,
                                                          (1e-3 * positive_mean) ** 2))
    values = np.concatenate([np.zeros((len(rho), 1)), values], axis=1)
    probs = np.concatenate([(1 - safe_rho)[:, None], safe_rho[:, None] * probs], axis=1)
    probs = np.where(busy[:, None], probs, np.eye(1, values.shape[1])[0])
    return np.where(busy[:, None], values, 0.0), probs


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
