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
from dataclasses import dataclass, replace

import numpy as np

from scheduler.backlog_atoms import ATOMS, positive_atoms
from scheduler.errors import InvalidArgumentError, InvalidHostError
from scheduler.hosts import MAX_DEMAND_SECONDS, Host, HostArrays

SOURCES = ("snapshot", "steady-state", "idle")
# a stationary backlog whose mean is below this (seconds) is taken as none
_NEGLIGIBLE_BACKLOG_SECONDS = 1e-9


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


def _ages(ages_seconds: Sequence[float] | None, jobs: int) -> tuple[float, ...]:
    """The jobs' ages (CPU seconds used), one per job, or () where not known."""
    if ages_seconds is None:
        return ()
    ages = _numbers("ages_seconds", ages_seconds)
    if ages.size != jobs:
        raise InvalidArgumentError(f"expected {jobs} ages (one per job), got {ages.size}",
                                   field="ages_seconds", value=ages.size)
    return tuple(float(a) for a in ages)


@dataclass(frozen=True)
class Backlog:
    """What one host's cores hold at launch. Build with the class methods, not directly.

    ``kind``: idle, jobs (``job_means``/``job_variances`` in FCFS order, seconds and
    seconds squared; ``job_ages``, where known, the CPU seconds each had used at the
    snapshot, for the one-host mean's floor: :mod:`scheduler.age_floor`), discrete
    (``values``/``probabilities`` of each core's backlog) or steady-state
    (``third_moment``: E[X^3] of a local demand in s^3, None = lognormal with
    the host's mean and sigma). ``source`` is what the prediction reports.
    """

    kind: str
    source: str
    job_means: tuple[float, ...] = ()
    job_variances: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    probabilities: tuple[float, ...] = ()
    third_moment: float | None = None
    weight: float = 1.0
    job_ages: tuple[float, ...] = ()

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
    def from_laws(cls, laws: Sequence[object],
                  ages_seconds: Sequence[float] | None = None) -> Backlog:
        """Local jobs present at launch whose remaining demands are random laws (FCFS order).

        Each law has ``mean_seconds`` and ``variance_seconds2`` (see scheduler.templates);
        ``ages_seconds``, one per law, the CPU seconds each job had used (None: not known).
        """
        try:
            means = [law.mean_seconds for law in laws]  # type: ignore[attr-defined]
            variances = [law.variance_seconds2 for law in laws]  # type: ignore[attr-defined]
        except AttributeError:
            raise InvalidArgumentError("each law needs mean_seconds and variance_seconds2",
                                       field="laws", value=laws) from None
        return cls("jobs", "snapshot", tuple(_numbers("mean_seconds", means)),
                   tuple(_numbers("variance_seconds2", variances)),
                   job_ages=_ages(ages_seconds, len(means)))

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

    def weighted(self, weight: float) -> Backlog:
        """This backlog with every core's work scaled by ``weight`` in [0, 1] (how much of the
        modelled backlog a host's record says to believe: scheduler.backlog_weight)."""
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                or not 0.0 <= weight <= 1.0:
            raise InvalidArgumentError(f"weight must be in [0, 1], got {weight!r}",
                                       field="weight", value=weight)
        return replace(self, weight=float(weight))

    def to_dict(self) -> dict[str, object]:
        """Plain data (lists for tuples), e.g. for a client to rebuild the same prediction."""
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Backlog:
        """The Backlog ``to_dict`` described (validated like the constructors)."""
        weight = data.get("weight", 1.0)
        made = cls._from_dict(data)
        if weight == 1.0:
            return made
        return made.weighted(weight)  # type: ignore[arg-type]

    @classmethod
    def _from_dict(cls, data: Mapping[str, object]) -> Backlog:
        kind = data.get("kind")
        if kind == "idle":
            return cls.idle()
        if kind == "steady-state":
            third = data.get("third_moment")
            return cls.steady_state(None if third is None else float(third))  # type: ignore[arg-type]
        if kind == "jobs":
            means = _numbers("job_means", data.get("job_means", ()))
            variances = _numbers("job_variances", data.get("job_variances", ()))
            if means.size != variances.size:
                raise InvalidArgumentError("job_means and job_variances differ in length",
                                           field="job_variances", value=variances.tolist())
            ages = data.get("job_ages") or None
            return cls("jobs", "snapshot", tuple(means), tuple(variances),
                       job_ages=_ages(ages, means.size))  # type: ignore[arg-type]
        if kind == "discrete":
            return cls.discrete(data.get("values", ()),  # type: ignore[arg-type]
                                data.get("probabilities", ()),  # type: ignore[arg-type]
                                str(data.get("source", "snapshot")))
        raise InvalidArgumentError(f"unknown backlog kind {kind!r}", field="kind", value=kind)


@dataclass(frozen=True)
class BacklogArrays:
    """Per-host core groups: ``mult`` (H, G) cores sharing one law of B. Each law is
    B = low + B', B' = 0 with probability ``none``, else positive; ``extra_mean`` and
    ``extra_var`` are E[B'] and Var[B'] (seconds, s^2). ``core_mean`` (H,) is E[B] averaged
    over the host's cores. ``explicit`` maps a host index to its given discrete law."""

    sources: np.ndarray
    core_mean: np.ndarray
    mult: np.ndarray
    low: np.ndarray
    none: np.ndarray
    extra_mean: np.ndarray
    extra_var: np.ndarray
    explicit: dict[int, tuple[np.ndarray, np.ndarray]]

    def take(self, members: np.ndarray) -> BacklogArrays:
        """Rows for ``members`` (any index array); given discrete laws enter by moments."""
        return BacklogArrays(self.sources[members], self.core_mean[members], self.mult[members],
                             self.low[members], self.none[members], self.extra_mean[members],
                             self.extra_var[members], {})

    def jobs_running(self) -> np.ndarray:
        """(H,) bool (any leading axes of a selection's batches kept): the hosts with a job
        certainly running on some core at launch (a snapshot's), not a steady state's chance
        of one."""
        return np.asarray(((self.mult > 0) & ((self.low > 0) | (self.none <= 0))).any(axis=-1))

    def spread_atoms(self, used: np.ndarray) -> int:
        """Atoms the exact mixture would take over the hosts ``used`` (bool, (H,))."""
        spread = (self.extra_var > 0) & (self.mult > 0) & used[:, None]
        return int(spread.sum()) * (1 + ATOMS) + sum(
            values.size for k, (values, _) in self.explicit.items() if used[k])

    def atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """(H, G, M) atoms (seconds) and probabilities of every group's law of B."""
        spread = self.extra_var > 0
        depth = max([1 + ATOMS if spread.any() else 1,
                     *(values.size for values, _ in self.explicit.values())])
        atoms = np.zeros((*self.low.shape, depth))
        weights = np.zeros_like(atoms)
        atoms[..., 0] = self.low
        weights[..., 0] = 1.0
        if spread.any():
            none = self.none[spread]
            positive = 1.0 - none
            mean = self.extra_mean[spread] / positive
            var = (self.extra_var[spread] + self.extra_mean[spread] ** 2) / positive - mean**2
            values, probs = positive_atoms(mean, np.maximum(var, (1e-3 * mean) ** 2))
            atoms[spread, 1:1 + ATOMS] = self.low[spread][:, None] + values
            weights[spread, 0] = none
            weights[spread, 1:1 + ATOMS] = positive[:, None] * probs
        for k, (values, probs) in self.explicit.items():
            atoms[k, 0, :values.size], weights[k, 0, :values.size] = values, probs
            weights[k, 0, values.size:] = 0.0
        return atoms, weights


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


def build(hosts: Sequence[Host], items: Sequence[Backlog],
          arrays: HostArrays | None = None) -> BacklogArrays:
    """Per-core laws of B for every host, by their moments (atoms on demand).

    Idle and steady-state hosts (one law for all their cores) are computed in array passes;
    only hosts with listed jobs or a given discrete law are visited one by one. ``arrays``:
    the hosts' columns if already built.
    """
    if arrays is None:
        arrays = HostArrays.from_hosts(hosts)
    kinds = np.array([item.kind for item in items])
    listed = [k for k, item in enumerate(items) if item.kind == "discrete" or item.job_means]
    groups = {int(k): _job_groups(hosts[k].cores, items[k].job_means, items[k].job_variances)
              if items[k].kind == "jobs" else [(hosts[k].cores, *_discrete_moments(items[k]))]
              for k in listed}
    width = max([1, *(len(g) for g in groups.values())])
    shape = (len(hosts), width)
    mult, low, none = np.zeros(shape), np.zeros(shape), np.ones(shape)
    extra_mean, extra_var = np.zeros(shape), np.zeros(shape)
    mult[:, 0] = arrays.cores
    steady = kinds == "steady-state"
    if steady.any():
        p_none, mean, var = _steady_state_moments(arrays, items)
        none[steady, 0], extra_mean[steady, 0] = p_none[steady], mean[steady]
        extra_var[steady, 0] = var[steady]
    if groups:
        rows = [k for k, host_groups in groups.items() for _ in host_groups]
        columns = [g for host_groups in groups.values() for g in range(len(host_groups))]
        values = np.array([row for host_groups in groups.values() for row in host_groups])
        mult[list(groups)] = 0.0
        for target, column in zip((mult, low, none, extra_mean, extra_var), values.T):
            target[rows, columns] = column
    explicit = {int(k): (items[k].weight * np.array(items[k].values),
                         np.array(items[k].probabilities))
                for k in listed if items[k].kind == "discrete"}
    weight = np.array([item.weight for item in items])[:, None]
    if (weight != 1.0).any():
        low, extra_mean, extra_var = low * weight, extra_mean * weight, extra_var * weight**2
    core_mean = np.sum(mult * (low + extra_mean), axis=1) / arrays.cores
    _check_scale(hosts, core_mean, extra_var, [item.kind for item in items])
    sources = np.array([item.source for item in items])
    return BacklogArrays(sources, core_mean, mult, low, none, extra_mean, extra_var, explicit)


def _check_scale(hosts: Sequence[Host], core_mean: np.ndarray, extra_var: np.ndarray,
                 kinds: Sequence[str]) -> None:
    """Refuse a backlog past any workstation (a mean per core over MAX_DEMAND_SECONDS, or a
    spread that is not finite): the completion law's quadrature cannot span it beside a
    share of seconds, and it raised a bare ValueError. A steady-state one that large comes
    from parameters that contradict each other (lam 21,588/s with a mean demand of 43 years
    beside a rho of 0.46 gave 3.7e22 s)."""
    spread = np.isfinite(extra_var).all(axis=1)
    bad = ~(np.isfinite(core_mean) & (core_mean <= MAX_DEMAND_SECONDS) & spread)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        host = hosts[k]
        raise InvalidHostError(
            f"host {host.name!r}: its {kinds[k]} backlog averages {core_mean[k]:.3g} s a core"
            f"{'' if spread[k] else ' with a spread past double precision'}, past any "
            f"workstation (at most {MAX_DEMAND_SECONDS:g} s): check its lam "
            f"({host.lam:g}/s), mu ({host.mu:g}/s) and sigma ({host.sigma:g} s), which give "
            f"lam / (cores mu) = {host.lam / (host.cores * host.mu):.3g} beside rho {host.rho:g}",
            field="backlog", value=host.name)


def _discrete_moments(item: Backlog) -> tuple[float, float, float, float]:
    values, probs = np.array(item.values), np.array(item.probabilities)
    low = float(values.min())
    extra = values - low
    mean = float(probs @ extra)
    return low, float(probs[extra == 0].sum()), mean, max(float(probs @ extra**2) - mean**2, 0)


def _job_groups(cores: int, means: Sequence[float], variances: Sequence[float]
                ) -> list[tuple[float, float, float, float, float]]:
    """FCFS spread of the jobs over the cores: (cores, low, none, extra mean, extra var) per
    group, the exact part of a core's work being ``low`` and the random part B'."""
    # plain floats: a few jobs per host, where numpy's per-call cost would dominate
    if cores == 1:
        exact_total = float(sum(m for m, v in zip(means, variances) if v <= 0))
        random_total = float(sum(m for m, v in zip(means, variances) if v > 0))
        variance_total = float(sum(v for v in variances if v > 0))
        if exact_total == 0 and random_total == 0:
            return [(1.0, 0.0, 1.0, 0.0, 0.0)]
        return [(1.0, exact_total, 0.0 if variance_total > 0 else 1.0, random_total,
                 variance_total)]
    load = [0.0] * cores
    exact = [0.0] * cores
    random_mean = [0.0] * cores
    random_var = [0.0] * cores
    for mean, var in zip(means, variances):
        # a job starts on the core whose work ends first (ties: the lowest core)
        j = load.index(min(load))
        load[j] += mean
        if var > 0:
            random_mean[j] += mean
            random_var[j] += var
        else:
            exact[j] += mean
    idle = sum(1 for j in range(cores) if load[j] == 0)
    groups = [(float(idle), 0.0, 1.0, 0.0, 0.0)] if idle else []
    groups.extend((1.0, exact[j], 0.0 if random_var[j] > 0 else 1.0, random_mean[j],
                   random_var[j]) for j in range(cores) if load[j] > 0)
    return groups


def steady_state_within_range(hosts: Sequence[Host]) -> np.ndarray:
    """(hosts,) bool: whether each host's steady-state backlog (its mean and spread per
    core) lies within what :func:`build` takes, in one array pass (a manager checks every
    host it knows on each query)."""
    if not hosts:
        return np.zeros(0, dtype=bool)
    arrays = HostArrays.from_hosts(hosts)
    with np.errstate(over="ignore", invalid="ignore"):
        _, mean, var = _steady_state_moments(arrays, [Backlog.steady_state()] * len(hosts))
        return np.isfinite(var) & (mean <= MAX_DEMAND_SECONDS)


def _steady_state_moments(arrays: HostArrays, items: Sequence[Backlog]
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P(W = 0), E[W], Var[W]) of each core's stationary workload (Pollaczek-Khinchine)."""
    lam = arrays.lam / arrays.cores
    rho = arrays.rho
    mean = 1.0 / arrays.mu
    ex2 = arrays.demand_second_moment
    # a demand too small or too large to square in double precision gives inf or nan here,
    # which the callers' range checks refuse by the host's name
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        lognormal_ex3 = mean**3 * (ex2 / mean**2) ** 3
    given = np.array([np.nan if item.third_moment is None else item.third_moment
                      for item in items])
    ex3 = np.where(np.isnan(given), lognormal_ex3, given)
    # a utilisation so small that 1 - rho rounds to 1 leaves no chance of any backlog (its
    # atoms divided by that chance: at rho 1e-300 they read inf)
    busy = (rho > 0) & (lam > 0) & (1.0 - rho < 1.0)
    safe_rho = np.where(busy, rho, 0.5)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        work_mean = lam * ex2 / (2 * (1 - safe_rho))
        work_square = 2 * work_mean**2 + lam * ex3 / (3 * (1 - safe_rho))
    # under a nanosecond of backlog cannot move a completion, and its atoms' CoV overflowed
    # (lam 1e-200 beside rho 0.1: a mean of 1e-199 s)
    busy &= ~(work_mean < _NEGLIGIBLE_BACKLOG_SECONDS)
    return (np.where(busy, 1 - rho, 1.0), np.where(busy, work_mean, 0.0),
            np.where(busy, np.maximum(work_square - work_mean**2, 0.0), 0.0))
