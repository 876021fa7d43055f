"""What one hour's shadow launch of a host predicts before any calibration: the paper model's
law of a single-host task of each length, and each view's model law (the host as the view
sees its run window, from the view's start).

The laws are predicted first and their integrals worked out later
(:func:`scheduler.host_moments.prime_host_moments`), so a refresh of many hosts integrates all
their launches in a few batches (:meth:`ghs.manager.calibration.Calibration.advance_hosts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler import Host
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS
from scheduler.host_quantiles import grouped_host_quantiles, joint_host_quantiles
from scheduler.prediction import Prediction, predict_hosts

DIST = "lognormal"
LEVELS = ("p50", "p90", "p95")
# the views' laws are read at the served levels (the calibrators' and the pooled tail's)
LAW_LEVELS = SERVED_LEVELS


@dataclass(frozen=True, eq=False)
class HostLaws:
    """Single-host tasks predicted in groups: ``groups[g]`` are the rows (tasks) predicted
    by ``predictions[g]``."""

    groups: tuple[np.ndarray, ...]
    predictions: tuple[Prediction, ...]
    # each prediction's (tasks, levels) quantiles once worked out (:func:`prime_quantiles`)
    _quantiles: list[np.ndarray] = field(default_factory=list, repr=False)

    @classmethod
    def predict(cls, hosts: Sequence[Host], shares: np.ndarray, starts: Sequence[Backlog]
                ) -> HostLaws:
        """Tasks of ``shares`` (reference-CPU-seconds) on ``hosts`` from ``starts``, as one
        prediction of them all gives them. When the others keep the exact backlog mixture,
        the hosts that start idle are predicted apart: an idle start is a one-atom mixture,
        the same numbers as among the others' atoms at a fraction of the cost."""
        idle = np.array([start.kind == "idle" for start in starts])
        groups = [np.flatnonzero(~idle), np.flatnonzero(idle)]
        predictions: list[Prediction] = []
        for rows in groups if idle.any() and not idle.all() else []:
            predictions.append(predict_hosts(copies_of([hosts[k] for k in rows]),
                                             shares[rows], DIST,
                                             backlog=[starts[k] for k in rows]))
            if predictions[0].backlog_law != "mixture":
                break
        if len(predictions) < 2:
            groups = [np.arange(len(hosts))]
            predictions = [predict_hosts(copies_of(hosts), shares, DIST, backlog=starts)]
        return cls(tuple(groups), tuple(predictions))

    def means_and_quantiles(self) -> tuple[np.ndarray, np.ndarray]:
        """(tasks,) means and (tasks, LAW_LEVELS) quantiles, seconds."""
        size = sum(rows.size for rows in self.groups)
        means = np.empty(size)
        quantiles = np.empty((size, len(LAW_LEVELS)))
        for rows, prediction, q in zip(self.groups, self.predictions,
                                       self._quantiles or joint_host_quantiles(
                                           self.predictions, LAW_LEVELS)):
            means[rows], quantiles[rows] = prediction.host_moments()[0], q
        return means, quantiles


def prime_quantiles(plans: Sequence[LaunchPlan]) -> None:
    """Work out the quantiles of every launch's laws and paper model together (each host CDF
    route's problems in one evaluation, each launch on its own grids: the same figures), for
    :meth:`HostLaws.means_and_quantiles` and :attr:`LaunchPlan.paper_quantiles` to return.
    The laws' host moments should be primed."""
    found = grouped_host_quantiles([plan.laws.predictions for plan in plans]
                                   + [[plan.paper] for plan in plans], LAW_LEVELS)
    for plan, laws, paper in zip(plans, found, found[len(plans):]):
        plan.laws._quantiles[:] = laws
        plan._paper_quantiles[:] = [paper[0][:, :len(LEVELS)]]


@dataclass(frozen=True, eq=False)
class LaunchPlan:
    """One hour's shadow launch of a host: launched ``at`` (epoch seconds) on the 24-hour
    host ``day`` holding ``backlog``, tasks of ``works`` (reference-CPU-seconds); the paper
    model's prediction and means, and the views' laws (views x lengths rows, view-major)."""

    at: float
    day: Host
    backlog: Backlog
    works: np.ndarray
    paper_means: np.ndarray
    paper: Prediction
    laws: HostLaws
    # (lengths, candidates) means of the start candidates (scheduler.backlog_weight) at a
    # launch that found jobs running, where they are scored; None otherwise
    candidates: np.ndarray | None = None
    _paper_quantiles: list[np.ndarray] = field(default_factory=list, repr=False)

    @property
    def paper_quantiles(self) -> np.ndarray:
        """(lengths, levels) quantiles of the paper model, seconds."""
        return self._paper_quantiles[0] if self._paper_quantiles \
            else joint_host_quantiles([self.paper])[0]


def copies_of(hosts: Sequence[Host]) -> list[Host]:
    """The hosts renamed apart (a prediction needs distinct names)."""
    return [_renamed(host, f"{host.name}#{k}") for k, host in enumerate(hosts)]


def _renamed(host: Host, name: str) -> Host:
    """``host`` under another (non-empty) name: its fields as checked when it was made (a
    refresh renames thousands of hosts, and ``replace`` checks every field again)."""
    copy = object.__new__(type(host))
    copy.__dict__.update(host.__dict__)
    object.__setattr__(copy, "name", name)
    return copy
