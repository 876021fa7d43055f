"""The manager's tables for protocol version 2's record streams: capacity, running, templates.

Sizes are what a few hundred workstations over months need, so rows are compact: hosts get
small integer keys, times are whole milliseconds, tables are WITHOUT ROWID keyed by (host,
time), and a capacity row keeps its per-core split as 16-bit fractions of the interval (none
for a one-core host). Retention follows each host's OWN latest record, not the manager's
clock, so replayed and simulated hosts on their own clocks keep the same window as live ones:

- capacity at full resolution for ``capacity_days`` (8), and as hourly sums for
  ``hourly_days`` (90), the hourly rows rebuilt from the full-resolution rows of each hour a
  batch touches (so a resend changes nothing);
- running-jobs snapshots: every one of the last hour, then the first of each hour for
  ``capacity_days``;
- demand templates: one row per (scope, user, command), merged with exponential decay of
  half-life ``template_half_life_seconds``; an increment is merged once (the host's last
  merged sequence number is kept with the row set).

Everything a stream brings is stored in one transaction with its host's pruning, and only
then acknowledged.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from ghs.manager.transactions import write_transaction

_HOUR_MS = 3_600_000
_DAY_MS = 86_400_000
_FRACTION_SCALE = 65535


@dataclass(frozen=True)
class Retention:
    """How long each stream is kept, relative to the host's latest record."""

    capacity_days: float = 8.0
    hourly_days: float = 90.0
    template_half_life_seconds: float = 7 * 86400.0


_TABLES = {
    "host_keys": "CREATE TABLE IF NOT EXISTS host_keys (host_key INTEGER PRIMARY KEY, "
                 "host_id TEXT NOT NULL UNIQUE)",
    # keyed by time for range reads and by seq so that two records are never one: a
    # restarted simulated agent can replay the same stretch of virtual time
    "capacity": "CREATE TABLE IF NOT EXISTS capacity (host_key INTEGER NOT NULL, "
                "end_ms INTEGER NOT NULL, seq INTEGER NOT NULL, interval_ms INTEGER NOT NULL, "
                "available_ms INTEGER NOT NULL, per_core BLOB, "
                "PRIMARY KEY (host_key, end_ms, seq)) WITHOUT ROWID",
    "capacity_hourly": "CREATE TABLE IF NOT EXISTS capacity_hourly (host_key INTEGER NOT NULL, "
                       "hour INTEGER NOT NULL, covered_ms INTEGER NOT NULL, "
                       "available_ms INTEGER NOT NULL, per_core TEXT, "
                       "PRIMARY KEY (host_key, hour)) WITHOUT ROWID",
    "running": "CREATE TABLE IF NOT EXISTS running (host_key INTEGER NOT NULL, "
               "epoch_ms INTEGER NOT NULL, seq INTEGER NOT NULL, "
               "run_queue_length INTEGER NOT NULL, jobs_omitted INTEGER NOT NULL, "
               "jobs TEXT NOT NULL, PRIMARY KEY (host_key, epoch_ms, seq)) WITHOUT ROWID",
    "templates": "CREATE TABLE IF NOT EXISTS templates (host_key INTEGER NOT NULL, "
                 "scope TEXT NOT NULL, user TEXT NOT NULL, command TEXT NOT NULL, "
                 "as_of REAL NOT NULL, count REAL NOT NULL, cpu_seconds_sum REAL NOT NULL, "
                 "cpu_seconds_sum_squares REAL NOT NULL, bins TEXT NOT NULL, "
                 "PRIMARY KEY (host_key, scope, user, command)) WITHOUT ROWID",
    "template_seq": "CREATE TABLE IF NOT EXISTS template_seq (host_key INTEGER PRIMARY KEY, "
                    "last_seq INTEGER NOT NULL)",
}


def create_tables(db: sqlite_utils.Database) -> None:
    for sql in _TABLES.values():
        db.execute(sql)


def _ms(seconds: float) -> int:
    return round(seconds * 1000.0)


def pack_per_core(per_core_seconds: Sequence[float], interval_seconds: float) -> bytes | None:
    """Per-core available seconds as 16-bit fractions of the interval (None for one core)."""
    if len(per_core_seconds) <= 1:
        return None
    scale = _FRACTION_SCALE / interval_seconds
    return struct.pack(f"<{len(per_core_seconds)}H", *(
        min(_FRACTION_SCALE, max(0, round(value * scale))) for value in per_core_seconds))


def unpack_per_core(blob: bytes | None, interval_ms: int, available_ms: int) -> list[float]:
    """Per-core available seconds of one capacity row (one core: the total)."""
    if blob is None:
        return [available_ms / 1000.0]
    interval_seconds = interval_ms / 1000.0
    return [value * interval_seconds / _FRACTION_SCALE
            for value in struct.unpack(f"<{len(blob) // 2}H", blob)]


class StreamTables:
    """Capacity, running snapshots and templates in the manager's database.

    ``database`` is called for the calling thread's sqlite_utils Database (the manager's
    store keeps one connection per thread).
    """

    def __init__(self, database: Any, retention: Retention = Retention()) -> None:
        self._database = database
        self.retention = retention
        create_tables(database())

    @property
    def db(self) -> sqlite_utils.Database:
        return self._database()

    # -- writing ----------------------------------------------------------------------------

    def host_key(self, host_id: str) -> int:
        db = self.db
        db.execute("INSERT OR IGNORE INTO host_keys (host_id) VALUES (?)", [host_id])
        return db.execute("SELECT host_key FROM host_keys WHERE host_id = ?",
                          [host_id]).fetchone()[0]

    def add(self, host_id: str, stream: str, records: Sequence[Mapping[str, Any]]) -> int:
        """Store one batch of a stream (validated records) in one transaction; returns how
        many records were new."""
        with write_transaction(self.db):
            key = self.host_key(host_id)
            if stream == "capacity":
                return self._add_capacity(key, records)
            if stream == "running":
                return self._add_running(key, records)
            if stream == "templates":
                return self._add_templates(key, records)
            raise ValueError(f"unknown stream {stream!r}")

    def _add_capacity(self, key: int, records: Sequence[Mapping[str, Any]]) -> int:
        rows = []
        for record in records:
            interval = record["end_epoch_seconds"] - record["start_epoch_seconds"]
            rows.append((key, _ms(record["end_epoch_seconds"]), record["seq"], _ms(interval),
                         _ms(record["available_cpu_seconds"]),
                         pack_per_core(record["per_core_available_cpu_seconds"], interval)))
        # an hour older than the retention already lost its full-resolution rows: a late
        # record is added to its sum instead of rebuilding it from what is left
        pruned_before = (self._latest_ms("capacity", "end_ms", key)
                         - int(self.retention.capacity_days * _DAY_MS))
        late = [row for row in rows if row[1] <= pruned_before and self.db.execute(
            "SELECT 1 FROM capacity WHERE host_key = ? AND end_ms = ? AND seq = ?", row[:3]
        ).fetchone() is None]
        new = self.db.conn.executemany(
            "INSERT OR IGNORE INTO capacity (host_key, end_ms, seq, interval_ms, available_ms, "
            "per_core) VALUES (?, ?, ?, ?, ?, ?)", rows).rowcount
        for hour in sorted({(row[1] - 1) // _HOUR_MS for row in rows}):
            if (hour + 1) * _HOUR_MS > pruned_before:
                self._rebuild_hour(key, hour)
        for row in late:
            self._add_to_hour(key, (row[1] - 1) // _HOUR_MS, [row[3:]])
        self._prune_capacity(key, self._latest_ms("capacity", "end_ms", key))
        return new

    @staticmethod
    def _sums(rows: Sequence[Sequence[Any]]) -> tuple[int, int, list[float] | None]:
        """Covered and available ms, and per-core seconds, of (interval, available, blob)."""
        covered = sum(row[0] for row in rows)
        available = sum(row[1] for row in rows)
        per_core = None
        if any(row[2] is not None for row in rows):
            columns = [unpack_per_core(row[2], row[0], row[1]) for row in rows]
            per_core = [sum(values) for values in zip(*columns)]
        return covered, available, per_core

    def _rebuild_hour(self, key: int, hour: int) -> None:
        rows = self.db.execute(
            "SELECT interval_ms, available_ms, per_core FROM capacity WHERE host_key = ? "
            "AND end_ms > ? AND end_ms <= ?", [key, hour * _HOUR_MS, (hour + 1) * _HOUR_MS]
        ).fetchall()
        self._write_hour(key, hour, *self._sums(rows))

    def _add_to_hour(self, key: int, hour: int, rows: Sequence[Sequence[Any]]) -> None:
        covered, available, per_core = self._sums(rows)
        old = self.db.execute("SELECT covered_ms, available_ms, per_core FROM capacity_hourly "
                              "WHERE host_key = ? AND hour = ?", [key, hour]).fetchone()
        if old is not None:
            covered, available = covered + old[0], available + old[1]
            if per_core is not None and old[2] is not None:
                per_core = [a + b for a, b in zip(per_core, json.loads(old[2]))]
        self._write_hour(key, hour, covered, available, per_core)

    def _write_hour(self, key: int, hour: int, covered: int, available: int,
                    per_core: list[float] | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO capacity_hourly (host_key, hour, covered_ms, "
                        "available_ms, per_core) VALUES (?, ?, ?, ?, ?)",
                        [key, hour, covered, available, None if per_core is None else
                         json.dumps([round(value, 3) for value in per_core])])

    def _prune_capacity(self, key: int, latest_ms: int) -> None:
        self.db.execute("DELETE FROM capacity WHERE host_key = ? AND end_ms < ?",
                        [key, latest_ms - int(self.retention.capacity_days * _DAY_MS)])
        self.db.execute("DELETE FROM capacity_hourly WHERE host_key = ? AND hour < ?",
                        [key, (latest_ms - int(self.retention.hourly_days * _DAY_MS))
                         // _HOUR_MS])

    def _add_running(self, key: int, records: Sequence[Mapping[str, Any]]) -> int:
        new = self.db.conn.executemany(
            "INSERT OR IGNORE INTO running (host_key, epoch_ms, seq, run_queue_length, "
            "jobs_omitted, jobs) VALUES (?, ?, ?, ?, ?, ?)",
            [(key, _ms(r["epoch_seconds"]), r["seq"], r["run_queue_length"],
              r.get("jobs_omitted", 0),
              json.dumps(list(r["jobs"]), separators=(",", ":"))) for r in records]).rowcount
        latest = self._latest_ms("running", "epoch_ms", key)
        # the last hour in full, then the first snapshot of each hour (for back-tests)
        self.db.execute(
            "DELETE FROM running WHERE host_key = ? AND epoch_ms < ? AND epoch_ms NOT IN "
            "(SELECT MIN(epoch_ms) FROM running WHERE host_key = ? GROUP BY epoch_ms / ?)",
            [key, latest - _HOUR_MS, key, _HOUR_MS])
        self.db.execute("DELETE FROM running WHERE host_key = ? AND epoch_ms < ?",
                        [key, latest - int(self.retention.capacity_days * _DAY_MS)])
        return new

    def _add_templates(self, key: int, records: Sequence[Mapping[str, Any]]) -> int:
        row = self.db.execute("SELECT last_seq FROM template_seq WHERE host_key = ?",
                              [key]).fetchone()
        last_seq = -1 if row is None else row[0]
        merged = 0
        for record in sorted(records, key=lambda r: r["seq"]):
            if record["seq"] <= last_seq:
                continue  # a resend of an increment already merged
            self._merge_template(key, record)
            last_seq = record["seq"]
            merged += 1
        self.db.execute("INSERT OR REPLACE INTO template_seq (host_key, last_seq) VALUES (?, ?)",
                        [key, last_seq])
        return merged

    def _merge_template(self, key: int, record: Mapping[str, Any]) -> None:
        ident = (key, record["scope"], record.get("user") or "", record.get("command") or "")
        old = self.db.execute(
            "SELECT as_of, count, cpu_seconds_sum, cpu_seconds_sum_squares, bins FROM templates "
            "WHERE host_key = ? AND scope = ? AND user = ? AND command = ?", ident).fetchone()
        as_of = record["as_of_epoch_seconds"]
        bins = {int(index): float(count) for index, count in record["bins"]}
        totals = [record["count"], record["cpu_seconds_sum"], record["cpu_seconds_sum_squares"]]
        if old is not None:
            # decay the older side to the newer one's time: both ends apply the same rule
            newer = max(as_of, old[0])
            factor_old = 0.5 ** ((newer - old[0]) / self.retention.template_half_life_seconds)
            factor_new = 0.5 ** ((newer - as_of) / self.retention.template_half_life_seconds)
            as_of = newer
            bins = {index: count * factor_new for index, count in bins.items()}
            for index, count in json.loads(old[4]):
                bins[index] = bins.get(index, 0.0) + count * factor_old
            totals = [new * factor_new + before * factor_old
                      for new, before in zip(totals, old[1:4])]
        self.db.execute(
            "INSERT OR REPLACE INTO templates (host_key, scope, user, command, as_of, count, "
            "cpu_seconds_sum, cpu_seconds_sum_squares, bins) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [*ident, as_of, *totals,
             json.dumps(sorted([index, round(count, 6)] for index, count in bins.items()
                               if count > 1e-9))])

    def _latest_ms(self, table: str, column: str, key: int) -> int:
        value = self.db.execute(f"SELECT MAX({column}) FROM {table} WHERE host_key = ?",
                                [key]).fetchone()[0]
        return 0 if value is None else int(value)

    # -- reading ----------------------------------------------------------------------------

    def _key(self, host_id: str) -> int | None:
        row = self.db.execute("SELECT host_key FROM host_keys WHERE host_id = ?",
                              [host_id]).fetchone()
        return None if row is None else row[0]

    def latest_epoch_seconds(self, host_id: str) -> float | None:
        """The newest capacity or running record of a host (None if there is none)."""
        key = self._key(host_id)
        if key is None:
            return None
        latest = max(self._latest_ms("capacity", "end_ms", key),
                     self._latest_ms("running", "epoch_ms", key))
        return latest / 1000.0 if latest > 0 else None

    def capacity(self, host_id: str, since_epoch_seconds: float | None = None
                 ) -> list[dict[str, Any]]:
        """Full-resolution capacity intervals ending after ``since`` (oldest first):
        end_epoch_seconds, interval_seconds, available_cpu_seconds, per_core."""
        key = self._key(host_id)
        if key is None:
            return []
        since = -1 if since_epoch_seconds is None else _ms(since_epoch_seconds)
        rows = self.db.execute(
            "SELECT end_ms, interval_ms, available_ms, per_core FROM capacity WHERE "
            "host_key = ? AND end_ms > ? ORDER BY end_ms", [key, since]).fetchall()
        return [{"end_epoch_seconds": end / 1000.0, "interval_seconds": interval / 1000.0,
                 "available_cpu_seconds": available / 1000.0,
                 "per_core_available_cpu_seconds": unpack_per_core(blob, interval, available)}
                for end, interval, available, blob in rows]

    def capacity_hourly(self, host_id: str) -> list[dict[str, Any]]:
        """Hourly sums (oldest first): hour_start_epoch_seconds, covered_seconds,
        available_cpu_seconds, per_core (None for one core)."""
        key = self._key(host_id)
        if key is None:
            return []
        rows = self.db.execute(
            "SELECT hour, covered_ms, available_ms, per_core FROM capacity_hourly WHERE "
            "host_key = ? ORDER BY hour", [key]).fetchall()
        return [{"hour_start_epoch_seconds": hour * 3600.0, "covered_seconds": covered / 1e3,
                 "available_cpu_seconds": available / 1e3,
                 "per_core_available_cpu_seconds": None if per_core is None
                 else json.loads(per_core)} for hour, covered, available, per_core in rows]

    def latest_running(self, host_id: str) -> dict[str, Any] | None:
        """The newest running-jobs snapshot: epoch_seconds, run_queue_length, jobs,
        jobs_omitted."""
        snapshots = self.running(host_id, limit=1)
        return snapshots[0] if snapshots else None

    def running(self, host_id: str, limit: int | None = None,
                since_epoch_seconds: float | None = None) -> list[dict[str, Any]]:
        """Stored snapshots (taken at or after ``since_epoch_seconds`` if given), newest
        first."""
        key = self._key(host_id)
        if key is None:
            return []
        since = -1 if since_epoch_seconds is None else math.ceil(since_epoch_seconds * 1000.0)
        rows = self.db.execute(
            "SELECT epoch_ms, run_queue_length, jobs_omitted, jobs FROM running WHERE "
            "host_key = ? AND epoch_ms >= ? ORDER BY epoch_ms DESC LIMIT ?",
            [key, since, -1 if limit is None else limit]).fetchall()
        return [{"epoch_seconds": epoch / 1000.0, "run_queue_length": queue,
                 "jobs_omitted": omitted, "jobs": json.loads(jobs)}
                for epoch, queue, omitted, jobs in rows]

    def templates(self, host_id: str) -> list[dict[str, Any]]:
        """The host's merged demand histograms (decayed to their own ``as_of``)."""
        key = self._key(host_id)
        if key is None:
            return []
        rows = self.db.execute(
            "SELECT scope, user, command, as_of, count, cpu_seconds_sum, "
            "cpu_seconds_sum_squares, bins FROM templates WHERE host_key = ? "
            "ORDER BY scope, user, command", [key]).fetchall()
        return [{"scope": scope, "user": user or None, "command": command or None,
                 "as_of_epoch_seconds": as_of, "count": count, "cpu_seconds_sum": total,
                 "cpu_seconds_sum_squares": squares, "bins": json.loads(bins)}
                for scope, user, command, as_of, count, total, squares, bins in rows]

    def bytes_used(self) -> dict[str, int]:
        """Bytes each stream table takes on disk (SQLite's dbstat; empty if unavailable)."""
        try:
            rows = self.db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"
                                   ).fetchall()
        except Exception:  # dbstat is a compile-time option of SQLite
            return {}
        return {name: int(size) for name, size in rows}
