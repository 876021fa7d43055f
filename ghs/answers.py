"""What a prediction or schedule rests on, carried beside it to the tables and the JSON.

A number a person acts on must say which hosts were left out (and why), which hosts' estimates
are provisional (less than 24 hours of history) and what the model assumed. The assumptions are
filled in one place, :func:`model_assumptions`, from what the prediction did; parts that change
the model (a steady-state start, a load forecast, calibration) change them there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scheduler import Host, Plan, Prediction
from scheduler.age_floor import AGE_FLOOR_FACTOR
from scheduler.calibrated import CalibratedPrediction
from scheduler.selection import Exclusion

MODEL_CALIBRATION = "none"
CONFORMAL_CALIBRATION = ("each host's quantiles corrected by adaptive conformal inference on "
                         "its own record (hourly shadow launches scored on its capacity "
                         "series), the hosts' corrected laws combined (the hosts of a "
                         "split share the geometric mean of their corrections)")
ALL_CORES = "one process per core: each host's share split evenly over all its cores"
_START_WORDS = {"snapshot": "the jobs running at launch (latest snapshot)",
                "steady-state": "a steady-state backlog (Pollaczek-Khinchine)",
                "idle": "idle (no local job at launch, the paper's model)"}
LOAD_MODELS = {
    "manager": "flat: each host's 24-hour average (Adapt_avg) held for the whole task",
    "host file": "flat: the host file's parameters held for the whole task",
    "manager forecast": "forecast over the task's own run window, per host the forecaster "
                        "of lowest recent error (24-hour, last hour, hour-of-day, "
                        "hour-of-week, Kalman, tendency)",
}

# Where the delay's two-moment fit put the p90 and p95 within 3% of the simulator (`ghs
# experiment envelope`, 2026-11-30: one core started idle, lognormal demands, utilisation
# 0.2-0.8): a share at least FIT_HELD_FROM_LENGTH times its host's mean local demand, whose
# CoV is at most FIT_HELD_TO_COV. Out of it the fit was off by up to 6.5% at 10 times, 47%
# at once the demand on a busy host, and 11-18% late at a CoV of 10 however long the share
# (README, "Where the model's quantiles hold"). Calibration corrects this on a manager.
FIT_HELD_FROM_LENGTH = 100.0
FIT_HELD_TO_COV = 3.0
# the fit those figures are of (the default); the others' are `ghs experiment distributions`'
FIT_MEASURED = "lognormal"
# hosts named in the note before the rest are counted
_NAMED_OUTSIDE = 4


@dataclass(frozen=True)
class Assumptions:
    """The model's premises: queue state at launch, load over the task, calibration, fit;
    ``fit_range`` (uncalibrated answers with the hosts' parameters at hand): whether the
    hosts lie where the fit's quantiles held against the simulator (:func:`fit_range`)."""

    start_state: str
    load_model: str
    calibration: str
    distribution: str
    processes: str = ALL_CORES
    fit_range: str | None = None

    def to_dict(self) -> dict[str, str]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    def line(self) -> str:
        fit = self.distribution if self.fit_range is None else \
            f"{self.distribution} ({self.fit_range})"
        return (f"start {self.start_state}; load {self.load_model}; calibration "
                f"{self.calibration}; fit {fit}; processes {self.processes}")


def fit_range(prediction: Prediction, hosts: Sequence[Host]) -> str:
    """Whether each host with work and local load lies where the delay's fit held its p90 and
    p95 within 3% of the simulator (a share of at least FIT_HELD_FROM_LENGTH times the
    host's mean local demand, a demand CoV of at most FIT_HELD_TO_COV), naming those that
    do not; ``hosts`` are the prediction's, by name."""
    by_name = {host.name: host for host in hosts}
    outside = []
    for name, dedicated in zip(prediction.hosts, prediction.dedicated_seconds):
        host = by_name.get(name)
        if host is None or dedicated <= 0 or host.rho <= 0 or -math.expm1(
                -host.lam / host.cores * dedicated) < 0.05:
            # no work, or interrupted in fewer than one run in twenty: its p90 and p95 are
            # its dedicated time, no fit involved
            continue
        length, cov = dedicated * host.mu, host.sigma * host.mu
        reasons = ([f"share {length:.2g}x"] if length < FIT_HELD_FROM_LENGTH else []) + (
            [f"CoV {cov:.2g}"] if cov > FIT_HELD_TO_COV else [])
        if reasons:
            outside.append(f"{name} ({', '.join(reasons)})")
    held = (f"p90/p95 within 3% of simulation where a share is {FIT_HELD_FROM_LENGTH:g}x "
            f"or more its host's mean local demand of CoV at most {FIT_HELD_TO_COV:g}; "
            f"measured up to 7% off at 10x, 47% at 1x and 18% at a CoV of 10 (README: "
            f"Where the model's quantiles hold)")
    if not outside:
        return f"{held}; every host here is inside"
    more = len(outside) - _NAMED_OUTSIDE
    return (f"{held}; outside: {', '.join(outside[:_NAMED_OUTSIDE])}"
            f"{f' and {more} more' if more > 0 else ''}")


def processes_assumed(placement: Mapping[str, str] | None) -> str:
    """How the hosts' shares run, in words, from ``ghs.placement.placed``'s notes per host."""
    if not placement:
        return ALL_CORES
    hosts_by_note: dict[str, list[str]] = {}
    for name, note in sorted(placement.items()):
        hosts_by_note.setdefault(note, []).append(name)
    if len(hosts_by_note) == 1:
        return next(iter(hosts_by_note))
    return "; ".join(f"{', '.join(names)}: {note}" for note, names in hosts_by_note.items())


def _source_counts(prediction: Prediction) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in prediction.to_dict()["hosts"]:
        source = (row.get("backlog") or {}).get("source", "idle")
        counts[source] = counts.get(source, 0) + 1
    return counts


def start_sources(prediction: Prediction) -> str:
    """The start states of the prediction's hosts, short (e.g. ``steady-state``)."""
    return "/".join(sorted(_source_counts(prediction)))


def start_state(prediction: Prediction) -> str:
    """How the prediction's hosts start, in words (per source, with host counts if mixed)."""
    counts = _source_counts(prediction)
    if len(counts) == 1:
        return _START_WORDS.get(next(iter(counts)), next(iter(counts)))
    return "; ".join(f"{_START_WORDS.get(source, source)}: {n} host{'s' * (n != 1)}"
                     for source, n in sorted(counts.items()))


def model_assumptions(prediction: Prediction, source: str,
                      placement: Mapping[str, str] | None = None,
                      hosts: Sequence[Host] | None = None) -> Assumptions:
    """What ``prediction`` assumed; ``source`` is where its hosts came from (LOAD_MODELS),
    ``placement`` how each host runs its share (ghs.placement.placed); ``hosts``, where the
    caller has their parameters, say whether an uncalibrated fit is in its range."""
    if isinstance(prediction, CalibratedPrediction):
        held = any(row["mean_seconds"] > 0 for row in prediction.backlog())
        split = len(prediction.hosts) > 1
        start = (start_state(prediction) + ", held as backlog under the forecast load of new "
                 + ("arrivals" if split else
                    "arrivals (at most the host's long-run utilisation)") if held else
                 "idle, the local jobs running at launch carried in the forecast measured load")
        if prediction.mean_floor_seconds is not None:
            start += (f"; the mean no earlier than the work plus {AGE_FLOOR_FACTOR:g} x the "
                      f"running jobs' CPU so far ({prediction.mean_floor_seconds:,.0f} s)")
        if prediction.record_mean_seconds is not None:
            start += ("; that mean combined (geometric mean) with the record view's "
                      "(the start the host's record chose where jobs run, else idle under the "
                      f"forecast load of new arrivals; {prediction.record_mean_seconds:,.0f} s)")
        if prediction.held_mean_seconds is not None:
            start += ("; the mean combined (geometric mean) with that of the same shares with "
                      "each host's new arrivals at most its long-run utilisation "
                      f"({prediction.held_mean_seconds:,.0f} s)")
        calibration = CONFORMAL_CALIBRATION
        law = prediction.law
        if law is not None and law.floor > 0.0:
            calibration += (f"; the chance that every share ends on its dedicated time, "
                            f"{law.floor:.2f}, from each host's record of launches that did "
                            f"(the hosts taken as independent)")
        return Assumptions(start_state=start, load_model=LOAD_MODELS["manager forecast"],
                           calibration=calibration,
                           distribution=prediction.distribution,
                           processes=processes_assumed(placement))
    return Assumptions(start_state=start_state(prediction), load_model=LOAD_MODELS[source],
                       calibration=MODEL_CALIBRATION, distribution=prediction.distribution,
                       processes=processes_assumed(placement),
                       fit_range=fit_range(prediction, hosts)
                       if hosts and prediction.distribution == FIT_MEASURED else None)


@dataclass(frozen=True)
class Answer:
    """A Prediction or a Plan with the hosts left out, the provisional ones and the premises;
    ``prediction_id`` and ``served_epoch_seconds``: the manager's track-record id of the
    answer and when it was served (None when computed locally)."""

    result: Prediction | Plan
    excluded: tuple[Exclusion, ...]
    provisional: frozenset[str]
    assumptions: Assumptions
    prediction_id: int | None = None
    served_epoch_seconds: float | None = None
    # a manager's: the predictor that served it, and per host the parameters, the start and
    # what the predictor used (``predictor_view``: forecasters, start, calibration applied)
    predictor: str | None = None
    host_parameters: tuple[dict[str, Any], ...] = ()

    @property
    def prediction(self) -> Prediction:
        return self.result.prediction if isinstance(self.result, Plan) else self.result

    def to_dict(self, units: int | None = None) -> dict[str, Any]:
        """The result's JSON with ``provisional`` per host, ``excluded`` and ``assumptions``."""
        if isinstance(self.result, Plan):
            payload = self.result.to_dict(units)
        else:
            payload = self.result.to_dict()
        for row in payload["hosts"]:
            row["provisional"] = row["name"] in self.provisional
        payload["excluded"] = [{"name": e.name, "reason": e.reason} for e in self.excluded]
        payload["assumptions"] = self.assumptions.to_dict()
        if self.prediction_id is not None:
            payload["prediction_id"] = self.prediction_id
            payload["served_epoch_seconds"] = self.served_epoch_seconds
        if self.predictor is not None:
            payload["predictor"] = self.predictor
        if self.host_parameters:
            payload["host_parameters"] = [dict(row) for row in self.host_parameters]
        return payload


def answer(result: Prediction | Plan, source: str, *, excluded: Iterable[Exclusion] = (),
           provisional: Iterable[str] = (), prediction_id: int | None = None,
           served_epoch_seconds: float | None = None,
           placement: Mapping[str, str] | None = None,
           hosts: Sequence[Host] | None = None, predictor: str | None = None,
           host_parameters: Sequence[Mapping[str, Any]] = ()) -> Answer:
    """``result`` with what it rests on; a Plan's own exclusions come first. ``placement``:
    per host how its processes were placed (ghs.placement.placed); ``hosts``: the hosts'
    parameters, where the caller has them (:func:`model_assumptions`); ``predictor`` and
    ``host_parameters``: a manager's, as it sent them (what each host's answer rests on)."""
    prediction = result.prediction if isinstance(result, Plan) else result
    own = tuple(result.excluded) if isinstance(result, Plan) else ()
    seen = {e.name for e in own}
    extra = tuple(e for e in excluded if e.name not in seen)
    return Answer(result, own + extra, frozenset(provisional),
                  model_assumptions(prediction, source, placement, hosts), prediction_id,
                  served_epoch_seconds, predictor,
                  tuple(dict(row) for row in host_parameters))
