"""How to start a host with local work at launch, as its record says (the NWS rule).

The remaining demand of the jobs running at launch comes from demand templates; on hosts whose
jobs are heavy-tailed (a job's conditional remaining demand is huge in expectation and small
most of the time) the full backlog puts the mean far above what usually happens. The host's own
record settles it. The candidates: the backlog scaled by each weight (0 = ignore it, 1 = the
model's) under the forecast of the new arrivals' load, and, when ``carried`` is on, an idle start
under the forecast of the measured utilisation, which carries the running jobs as load (what
the forecast-only view does). Every launch that started with local work is predicted by each
candidate, each candidate's relative error |mean - realised| / realised is kept as an
exponentially decayed average per host, and the candidate of lowest recent error is used, as
the Network Weather Service picks its forecaster. Before a host or the pool has any record the
carried-load start is used (the model's backlog when ``carried`` is off), and it is the
default choice whatever the record says (``by_record`` off): on the six real logs tried it had
the smallest error of the candidates on launches with jobs running, and choosing by the
record did worse there, since a busy period's launches are scored only once its long jobs end
(the short ones first), which biases the record toward the backlog.
A host with a short record leans on the pool's errors (``prior_launches`` worth of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.row_state import RowState, check_hosts

WEIGHTS = (0.0, 0.1, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class WeightSettings:
    """weights: candidate fractions of the modelled backlog, increasing in [0, 1];
    decay: weight of the older errors at each scored launch; prior_launches: how many launches
    the pool's errors are worth to a host."""

    weights: tuple[float, ...] = field(default=WEIGHTS)
    carried: bool = True
    by_record: bool = False
    decay: float = 0.9
    prior_launches: float = 5.0

    def __post_init__(self) -> None:
        try:
            weights = np.asarray(self.weights, dtype=float)
        except (TypeError, ValueError):
            weights = np.array([np.nan])
        object.__setattr__(self, "weights", tuple(weights.ravel().tolist()))
        if weights.ndim != 1 or weights.size == 0 or not ((weights >= 0) & (weights <= 1)).all() \
                or (np.diff(weights) <= 0).any():
            raise InvalidArgumentError(f"weights must be increasing numbers in [0, 1], got "
                                       f"{self.weights!r}", field="weights", value=self.weights)
        for name, value, low, high in (("decay", self.decay, 0.0, 0.999999),
                                       ("prior_launches", self.prior_launches, 0.0, 1e6)):
            if not (isinstance(value, (int, float)) and low <= value <= high):
                raise InvalidArgumentError(f"{name} must be in [{low:g}, {high:g}], got "
                                           f"{value!r}", field=name, value=value)


class BacklogWeights(RowState):
    """Per-host decayed relative errors of each candidate backlog weight; plain arrays."""

    FIELDS = ("error", "mass", "scored", "pool_error", "pool_mass")
    ROW_FIELDS = ("error", "mass", "scored")
    SETTINGS = WeightSettings

    def __init__(self, hosts: int, settings: WeightSettings | None = None) -> None:
        hosts = check_hosts(hosts)
        self.settings = settings or WeightSettings()
        k = len(self.settings.weights) + int(self.settings.carried)
        self.error = np.zeros((hosts, k))
        self.mass = np.zeros(hosts)
        self.scored = np.zeros(hosts, dtype=np.int64)
        self.pool_error = np.zeros(k)
        self.pool_mass = np.zeros(1)

    @property
    def weights(self) -> np.ndarray:
        return np.asarray(self.settings.weights, dtype=float)

    @property
    def candidates(self) -> int:
        return int(self.error.shape[1])

    def choose(self, host_indices: Any) -> np.ndarray:
        """Each host's candidate now: an index into ``weights``, or ``len(weights)`` for the
        carried-load start."""
        return self._best(self.rows(host_indices))

    def describe(self, candidate: int) -> dict[str, Any]:
        """A candidate as JSON: {"start": "backlog", "weight": w} or {"start": "carried"}."""
        if candidate == self.weights.size and self.settings.carried:
            return {"start": "carried"}
        return {"start": "backlog", "weight": float(self.weights[candidate])}

    def recent_error(self, host_indices: Any) -> np.ndarray:
        """(hosts, candidates) recent mean relative error (pool-blended; NaN: no record)."""
        idx = self.rows(host_indices)
        return self._blended(idx)

    def record(self, host_indices: Any, realised_seconds: Any, candidate_means: Any) -> None:
        """Score finished launches: ``realised_seconds`` per launch and ``candidate_means``
        (launches, candidates), each candidate's predicted mean (seconds) for it."""
        idx = self.rows(host_indices)
        realised = np.broadcast_to(np.asarray(realised_seconds, dtype=float), idx.shape)
        means = np.asarray(candidate_means, dtype=float)
        if means.shape != (idx.size, self.candidates) or not np.isfinite(means).all() \
                or not (np.isfinite(realised).all() and (realised > 0).all()):
            raise InvalidArgumentError(f"realised times must be positive and candidate means "
                                       f"finite, shape ({idx.size}, {self.candidates})",
                                       field="candidate_means", value=None)
        errors = np.abs(means - realised[:, None]) / realised[:, None]
        decay = self.settings.decay
        # one launch at a time, in order: a host may appear more than once in a batch
        for row, err in zip(idx, errors):
            self.error[row] = decay * self.error[row] + err
            self.mass[row] = decay * self.mass[row] + 1.0
            self.scored[row] += 1
        self.pool_error = decay * self.pool_error + errors.mean(axis=0)
        self.pool_mass = decay * self.pool_mass + 1.0

    # -- private ------------------------------------------------------------------------------

    def _blended(self, idx: np.ndarray) -> np.ndarray:
        k = self.settings.prior_launches
        pool = self.pool_error / self.pool_mass[0] if self.pool_mass[0] > 0 else \
            np.full(self.candidates, np.nan)
        own_mass = self.mass[idx][:, None]
        own = np.divide(self.error[idx], own_mass, out=np.full(self.error[idx].shape, np.nan),
                        where=own_mass > 0)
        if not np.isfinite(pool).all():
            return own
        own = np.where(np.isnan(own), pool, own)
        n = np.minimum(self.scored[idx], 1e9)[:, None].astype(float)
        return (n * own + k * pool) / (n + k) if k > 0 else own

    def _best(self, idx: np.ndarray) -> np.ndarray:
        model = self.candidates - 1  # before any record: carried load (or the full backlog)
        if not self.settings.by_record:
            return np.full(idx.size, model)
        score = self._blended(idx)
        known = np.isfinite(score).all(axis=1)
        best = np.argmin(np.where(np.isfinite(score), score, np.inf), axis=1)
        return np.where(known, best, model)
