"""The track record: every prediction the manager serves, and when its shares really finished.

Each predict or schedule answer is stored (``predictions``: id, served epoch seconds, hosts,
shares, mean and p50/p90/p95 of the task, and each host's mean and p50/p90/p95) and its id
goes back with the reply. A completion report names the prediction, the host whose share
finished (or none: the whole task) and when; the realised seconds are that time minus the
time the prediction was served, which is when the task is taken to have been launched.
``accuracy`` compares realised and predicted: the share of outcomes at or under p50 and p90,
and the mean |predicted mean - realised|, per host and overall. A task outcome is the whole
task's report, or else the latest of its hosts' when every host with a share has reported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlite_utils

from ghs.errors import GhsError
from ghs.manager.transactions import write_transaction
from scheduler import Prediction
from scheduler.calibrated import CalibratedPrediction
from scheduler.host_quantiles import host_quantiles

LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95}
TASK = ""  # the host column of a whole-task report
_TABLES = (
    "CREATE TABLE IF NOT EXISTS predictions (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "served_epoch_seconds REAL NOT NULL, kind TEXT NOT NULL, hosts TEXT NOT NULL, "
    "shares TEXT NOT NULL, mean REAL NOT NULL, p50 REAL NOT NULL, p90 REAL NOT NULL, "
    "p95 REAL NOT NULL, host_laws TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS predictions_served ON predictions (served_epoch_seconds)",
    "CREATE TABLE IF NOT EXISTS outcomes (prediction_id INTEGER NOT NULL, host TEXT NOT NULL, "
    "finished_epoch_seconds REAL NOT NULL, realised_seconds REAL NOT NULL, "
    "reported_epoch_seconds REAL NOT NULL, PRIMARY KEY (prediction_id, host)) WITHOUT ROWID",
)


class UnknownPredictionError(GhsError):
    code = "unknown_prediction"


class HostNotInPredictionError(GhsError):
    code = "host_not_in_prediction"


class DuplicateReportError(GhsError):
    code = "duplicate_report"


class InvalidReportError(GhsError):
    code = "invalid_report"


@dataclass(frozen=True)
class Outcome:
    """One reported share: its host, launch (the prediction's serving time, epoch seconds),
    what was predicted for it (seconds) and how long it really took (seconds)."""

    prediction_id: int
    host: str
    launch_epoch_seconds: float
    predicted_mean_seconds: float
    p50_seconds: float
    p90_seconds: float
    p95_seconds: float
    realised_seconds: float
    # the share's dedicated time, which chose the calibrators' factors it was served (None:
    # a prediction recorded before it was stored)
    dedicated_seconds: float | None = None
    # the model's own p50/p90/p95 of the share (seconds), before any calibration: what the
    # report floor sets the realised time against (None: recorded before they were stored)
    model_quantiles: tuple[float, float, float] | None = None


def host_laws(prediction: Prediction) -> dict[str, dict[str, Any]]:
    """Each used host's mean and p50/p90/p95 (seconds) of its own completion time, as served
    (a calibrated prediction's per-host quantiles are its calibrated ones), its share's
    dedicated time (seconds), at which its calibration factors were read, and under
    ``model`` the model's own p50/p90/p95 before any calibration (seconds)."""
    means, _ = prediction.host_moments()
    used = np.flatnonzero(prediction.shares > 0)
    law = prediction.law if isinstance(prediction, CalibratedPrediction) else None
    if law is not None:
        points = law.host_quantiles
        model = points if law.model_quantiles is None else law.model_quantiles
        # the served levels hold p50/p90/p95 first (scheduler.calibrated.SERVED_LEVELS)
        columns = [law.levels.index(level) if level in law.levels else k
                   for k, level in enumerate(LEVELS.values())]
        points, model = points[:, columns], model[:, columns]
    else:
        points = model = host_quantiles(prediction, list(LEVELS.values()))
    return {prediction.hosts[k]: {"mean": float(means[k]),
                                  **dict(zip(LEVELS, map(float, points[k]))),
                                  "dedicated_seconds": float(prediction.dedicated_seconds[k]),
                                  "model": dict(zip(LEVELS, map(float, model[k])))}
            for k in used}


def _model(law: dict[str, Any]) -> tuple[float, float, float] | None:
    model = law.get("model")
    if not isinstance(model, dict):
        return None
    return (float(model["p50"]), float(model["p90"]), float(model["p95"]))


class TrackTable:
    """The predictions and outcomes tables; ``db`` gives the calling thread's connection."""

    def __init__(self, db: Callable[[], sqlite_utils.Database]) -> None:
        self._db = db
        for sql in _TABLES:
            db().execute(sql)

    def record(self, prediction: Prediction, served_epoch_seconds: float, kind: str) -> int:
        """Store a served prediction; returns its id."""
        laws = host_laws(prediction)
        q = prediction.quantiles
        db = self._db()
        with write_transaction(db):
            connection = db.conn
            cursor = connection.execute(
                "INSERT INTO predictions (served_epoch_seconds, kind, hosts, shares, mean, p50, "
                "p90, p95, host_laws) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [served_epoch_seconds, kind, json.dumps(list(prediction.hosts)),
                 json.dumps([float(s) for s in prediction.shares]), prediction.mean, q["p50"],
                 q["p90"], q["p95"], json.dumps(laws)])
        return int(cursor.lastrowid)

    def report(self, prediction_id: int, host: str | None, finished_epoch_seconds: float,
               reported_epoch_seconds: float) -> dict[str, Any]:
        """Store that ``host``'s share (None: the whole task) finished at the given time."""
        row = self._prediction(prediction_id)
        if row is None:
            raise UnknownPredictionError(f"no prediction with id {prediction_id}",
                                         field="prediction_id", value=prediction_id)
        laws = json.loads(row["host_laws"])
        if host is not None and host not in laws:
            names = ", ".join(laws) or "none"
            raise HostNotInPredictionError(
                f"host {host!r} has no share in prediction {prediction_id} (hosts: {names})",
                field="host", value=host)
        realised = finished_epoch_seconds - row["served_epoch_seconds"]
        if not (math.isfinite(realised) and realised >= 0):
            raise InvalidReportError(
                f"finished at {finished_epoch_seconds:.3f}, before prediction {prediction_id} "
                f"was served ({row['served_epoch_seconds']:.3f})",
                field="finished_epoch_seconds", value=finished_epoch_seconds)
        db = self._db()
        with write_transaction(db):
            connection = db.conn
            cursor = connection.execute(
                "INSERT OR IGNORE INTO outcomes VALUES (?, ?, ?, ?, ?)",
                [prediction_id, TASK if host is None else host, finished_epoch_seconds,
                 realised, reported_epoch_seconds])
        if cursor.rowcount == 0:
            what = "the whole task" if host is None else f"host {host!r}"
            raise DuplicateReportError(f"prediction {prediction_id} already has a report for "
                                       f"{what}", field="host", value=host)
        return {"prediction_id": prediction_id, "host": host, "realised_seconds": realised}

    def _prediction(self, prediction_id: int) -> dict[str, Any] | None:
        rows = list(self._db().query("SELECT * FROM predictions WHERE id = ?", [prediction_id]))
        return rows[0] if rows else None

    def outcomes(self, since_epoch_seconds: float = 0.0) -> list[Outcome]:
        """Reported host shares of predictions served since ``since_epoch_seconds``: what
        calibration learns from (host, launch, predicted mean and quantiles, realised)."""
        rows = self._db().query(
            "SELECT o.prediction_id, o.host, o.realised_seconds, p.served_epoch_seconds, "
            "p.host_laws FROM outcomes o JOIN predictions p ON p.id = o.prediction_id "
            "WHERE p.served_epoch_seconds >= ? AND o.host != ? "
            "ORDER BY p.served_epoch_seconds, o.prediction_id, o.host",
            [since_epoch_seconds, TASK])
        result = []
        for row in rows:
            law = json.loads(row["host_laws"])[row["host"]]
            result.append(Outcome(row["prediction_id"], row["host"],
                                  row["served_epoch_seconds"], law["mean"], law["p50"],
                                  law["p90"], law["p95"], row["realised_seconds"],
                                  law.get("dedicated_seconds"), _model(law)))
        return result

    def task_outcomes(self, since_epoch_seconds: float = 0.0) -> list[Outcome]:
        """Whole tasks: their own report, else the latest host's once every host reported."""
        predictions = {row["id"]: row for row in self._db().query(
            "SELECT * FROM predictions WHERE served_epoch_seconds >= ? AND id IN "
            "(SELECT prediction_id FROM outcomes)", [since_epoch_seconds])}
        reported: dict[int, dict[str, float]] = {}
        for row in self._db().query(
                "SELECT prediction_id, host, realised_seconds FROM outcomes WHERE prediction_id "
                "IN (SELECT id FROM predictions WHERE served_epoch_seconds >= ?)",
                [since_epoch_seconds]):
            reported.setdefault(row["prediction_id"], {})[row["host"]] = row["realised_seconds"]
        result = []
        for pid, hosts in sorted(reported.items()):
            row = predictions[pid]
            needed = set(json.loads(row["host_laws"]))
            if TASK in hosts:
                realised = hosts[TASK]
            elif needed and needed <= set(hosts):
                realised = max(hosts[name] for name in needed)
            else:
                continue
            result.append(Outcome(pid, TASK, row["served_epoch_seconds"], row["mean"],
                                  row["p50"], row["p90"], row["p95"], realised))
        return result

    def accuracy(self, since_epoch_seconds: float = 0.0) -> dict[str, Any]:
        """Realised coverage of p50/p90 and mean |error| of the mean: per host, of whole
        tasks, and overall (every host share and task pooled)."""
        shares = self.outcomes(since_epoch_seconds)
        tasks = self.task_outcomes(since_epoch_seconds)
        by_host: dict[str, list[Outcome]] = {}
        for outcome in shares:
            by_host.setdefault(outcome.host, []).append(outcome)
        return {"since_epoch_seconds": since_epoch_seconds,
                "hosts": [{"name": name, **summarise(rows)}
                          for name, rows in sorted(by_host.items())],
                "task": summarise(tasks),
                "overall": summarise(shares + tasks)}


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Reports, share realised <= p50 and <= p90, mean |mean - realised| (seconds), and the
    mean realised over predicted mean (1: unbiased; None without reports)."""
    if not outcomes:
        return {"reports": 0, "p50_coverage": None, "p90_coverage": None,
                "mean_abs_error_seconds": None, "realised_over_predicted": None}
    realised = np.array([o.realised_seconds for o in outcomes])
    means = np.array([o.predicted_mean_seconds for o in outcomes])
    return {"reports": len(outcomes),
            "p50_coverage": float(np.mean(realised <= [o.p50_seconds for o in outcomes])),
            "p90_coverage": float(np.mean(realised <= [o.p90_seconds for o in outcomes])),
            "mean_abs_error_seconds": float(np.mean(np.abs(means - realised))),
            "realised_over_predicted": float(realised.sum() / means.sum())
            if means.sum() > 0 else None}
