"""The sensor's local store (SQLite through sqlite-utils): measurements, hourly plans, estimates.

Rows older than ``retention_days`` (at least 8: forecasting later needs a full week plus the
current day) are pruned, and each table is also capped at a row count, so the file stays
bounded whatever the clock does. Times are epoch seconds.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import sqlite_utils

from sensors.errors import InvalidArgumentError, StoreError
from sensors.estimates import Estimate
from sensors.measurement import Measurement

MIN_RETENTION_DAYS = 8.0
_MEASUREMENT_FIELDS = [f.name for f in fields(Measurement)]
# column types follow the record's annotations; anything not a number (the quality flags) is
# stored as JSON text
_SQL_TYPES = {"float": float, "int": int}
_MEASUREMENT_COLUMNS: dict[str, type] = {
    "id": int, **{f.name: _SQL_TYPES.get(str(f.type), str) for f in fields(Measurement)}}
_ESTIMATE_FIELDS = [f.name for f in fields(Estimate)]


class SensorStore:
    """Measurements, sampling plans and estimates of one host.

    ``database``: a sqlite_utils Database, a file path, or None for memory.
    ``max_rows``: cap per table (oldest rows go first).
    """

    def __init__(self, database: sqlite_utils.Database | str | Path | None = None, *,
                 retention_days: float = MIN_RETENTION_DAYS, max_rows: int = 100_000) -> None:
        if not (isinstance(retention_days, (int, float)) and math.isfinite(retention_days)
                and retention_days >= MIN_RETENTION_DAYS):
            raise InvalidArgumentError(
                f"retention must be at least {MIN_RETENTION_DAYS:g} days, got "
                f"{retention_days!r}", field="retention_days", value=retention_days)
        if not isinstance(max_rows, int) or max_rows < 1:
            raise InvalidArgumentError(f"max_rows must be a positive integer, got {max_rows!r}",
                                       field="max_rows", value=max_rows)
        self.retention_seconds = retention_days * 86400.0
        self.max_rows = max_rows
        try:
            if isinstance(database, sqlite_utils.Database):
                self.db = database
            elif database is None:
                self.db = sqlite_utils.Database(memory=True)
            else:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite_utils.Database(database)
                self.db.enable_wal()
            self._create()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open sensor store {database!s}: {exc}",
                             field="database", value=str(database)) from None

    def _create(self) -> None:
        measurements = self.db["measurements"]
        if not measurements.exists():
            measurements.create(_MEASUREMENT_COLUMNS, pk="id")
            measurements.create_index(["end_time"])
        if not self.db["plans"].exists():
            self.db["plans"].create({"hour_start": float, "count": int, "n_s": str,
                                     "times": str, "created": float}, pk="hour_start")
        if not self.db["estimates"].exists():
            columns: dict[str, Any] = {name: float for name in _ESTIMATE_FIELDS}
            columns.update(measurements=int, service_count=int, provisional=int, mu_source=str)
            self.db["estimates"].create(columns, pk="time")

    def _write(self, table: str, row: dict[str, Any], **options: Any) -> None:
        try:
            self.db[table].insert(row, **options)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to the sensor store ({table}): {exc}",
                             field=table) from None

    def add_measurement(self, measurement: Measurement) -> None:
        row = {name: getattr(measurement, name) for name in _MEASUREMENT_FIELDS}
        row["quality"] = json.dumps(list(measurement.quality))
        self._write("measurements", row)

    def measurements(self, since: float | None = None,
                     until: float | None = None) -> list[Measurement]:
        """Measurements that ended in (since, until], oldest first."""
        where, args = _window("end_time", since, until)
        rows = self.db["measurements"].rows_where(where, args, order_by="end_time")
        return [_measurement(row) for row in rows]

    def history_start(self) -> float | None:
        """Start of the oldest stored measurement (None if there is none)."""
        row = next(self.db.query("select min(start_time) as first from measurements"))
        return row["first"]

    def add_plan(self, hour_start: float, count: int, n_s: Mapping[str, float | None],
                 times: Sequence[float], created: float) -> None:
        self._write("plans", {"hour_start": hour_start, "count": count,
                              "n_s": json.dumps(dict(n_s)), "times": json.dumps(list(times)),
                              "created": created}, replace=True)

    def plans(self, since: float | None = None) -> list[dict[str, Any]]:
        """Hourly plans (hour_start, count, n_s per parameter, times), oldest first."""
        where, args = _window("hour_start", since, None)
        result = []
        for row in self.db["plans"].rows_where(where, args, order_by="hour_start"):
            row["n_s"] = json.loads(row["n_s"])
            row["times"] = json.loads(row["times"])
            result.append(row)
        return result

    def add_estimate(self, estimate: Estimate) -> None:
        row = estimate.to_dict()
        row["provisional"] = int(estimate.provisional)
        self._write("estimates", row, replace=True)

    def estimates(self, since: float | None = None) -> list[Estimate]:
        where, args = _window("time", since, None)
        return [_estimate(row) for row in
                self.db["estimates"].rows_where(where, args, order_by="time")]

    def latest_estimate(self) -> Estimate | None:
        rows = list(self.db["estimates"].rows_where(order_by="time desc", limit=1))
        return _estimate(rows[0]) if rows else None

    def prune(self, now: float) -> int:
        """Drop rows older than the retention and beyond the row cap; returns rows dropped."""
        cutoff = now - self.retention_seconds
        dropped = 0
        with self.db.atomic():  # one commit, not one a statement
            for table, column in (("measurements", "end_time"), ("plans", "hour_start"),
                                  ("estimates", "time")):
                before = self.db[table].count
                self.db[table].delete_where(f"{column} < ?", [cutoff])
                excess = self.db[table].count - self.max_rows
                if excess > 0:
                    self.db.execute(
                        f"delete from {table} where rowid in (select rowid from {table} "
                        f"order by {column} limit ?)", [excess])
                dropped += before - self.db[table].count
        return dropped

    def close(self) -> None:
        self.db.close()


def _window(column: str, since: float | None, until: float | None) -> tuple[str | None, list]:
    clauses, args = [], []
    if since is not None:
        clauses.append(f"{column} > ?")
        args.append(since)
    if until is not None:
        clauses.append(f"{column} <= ?")
        args.append(until)
    return (" and ".join(clauses) or None), args


def _measurement(row: dict[str, Any]) -> Measurement:
    values = {name: row[name] for name in _MEASUREMENT_FIELDS}
    values["quality"] = tuple(json.loads(row["quality"] or "[]"))
    return Measurement(**values)


def _estimate(row: dict[str, Any]) -> Estimate:
    values = {name: row[name] for name in _ESTIMATE_FIELDS}
    values["provisional"] = bool(values["provisional"])
    return Estimate(**values)
