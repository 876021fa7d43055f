"""The manager's SQLite store (sqlite-utils, WAL): hosts and their measurements.

Each (host_id, seq) is stored once: a batch goes in with INSERT OR IGNORE inside one
transaction, and only after the commit does the manager acknowledge it, so a crash between
the two makes the agent resend and the duplicate is ignored. Commits are synchronous=FULL
(an acknowledged measurement survives a power cut); ``add_batches`` commits the batches of
one poll cycle together so the fsync is paid once per cycle, not once per batch. Lifetime
totals (measurements stored, duplicates) live in the ``totals`` table, updated in the same
transactions, so they survive restarts.
"""

from __future__ import annotations

import operator
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from ghs.errors import GhsError
from ghs.manager.lock import DatabaseLock
from ghs.manager.streams import Retention, StreamTables
from ghs.manager.track import Outcome, TrackTable
from ghs.manager.transactions import write_transaction
from ghs.record import HostIdentity, identity_columns, measurement_columns

MEASUREMENT_COLUMNS = tuple(measurement_columns())


class StoreError(GhsError):
    """The manager's database cannot be opened or written."""

    code = "store_error"


@dataclass(frozen=True)
class HostFacts(HostIdentity):
    """What an agent said about its host in its hello, and when it was first and last heard
    from (manager's epoch seconds)."""

    first_seen: float = 0.0
    last_seen: float = 0.0


class ManagerStore:
    """Hosts and measurements in one SQLite file; one connection per thread.

    ``path`` None keeps everything in memory (tests); a file uses WAL with
    synchronous=FULL. ``exclusive`` takes the database's lock for this store's life
    (DatabaseInUseError if another manager holds it): what a running manager does.
    """

    def __init__(self, path: str | Path | None, retention: Retention | None = None, *,
                 exclusive: bool = False) -> None:
        self.path = None if path is None else Path(path)
        self._local = threading.local()
        self._memory: sqlite_utils.Database | None = None
        self._lock: DatabaseLock | None = None
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if exclusive:
                    self._lock = DatabaseLock(self.path)
            self._create(self.db)
            self.streams = StreamTables(lambda: self.db, retention or Retention())
            self.track = TrackTable(lambda: self.db)
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise StoreError(f"cannot open manager database {str(path)!r}: {exc}",
                             field="database", value=str(path)) from None

    @property
    def db(self) -> sqlite_utils.Database:
        """This thread's connection."""
        if self.path is None:
            if self._memory is None:
                self._memory = sqlite_utils.Database(
                    sqlite3.connect(":memory:", check_same_thread=False))
            return self._memory
        db = getattr(self._local, "db", None)
        if db is None:
            connection = sqlite3.connect(str(self.path), timeout=30.0)
            db = sqlite_utils.Database(connection)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._local.db = db
        return db

    def _create(self, db: sqlite_utils.Database) -> None:
        # a database from an older manager gains the columns added since (all nullable)
        for table, columns, pk in (("hosts", identity_columns(), "host_id"),
                                   ("measurements", measurement_columns(), ("host_id", "seq"))):
            if table not in db.table_names():
                db[table].create(columns, pk=pk)
            else:
                missing = {k: v for k, v in columns.items() if k not in db[table].columns_dict}
                for name, kind in missing.items():
                    db[table].add_column(name, kind)
        if not any(index.columns == ["host_id", "end_epoch_seconds"]
                   for index in db["measurements"].indexes):
            db["measurements"].create_index(["host_id", "end_epoch_seconds"])
        if "totals" not in db.table_names():
            db["totals"].create({"name": str, "value": int}, pk="name")

    def upsert_host(self, facts: HostFacts) -> None:
        with write_transaction(self.db):
            self._upsert(facts)

    def _upsert(self, facts: HostFacts) -> None:
        existing = self.host(facts.host_id)
        row = facts.row()
        if existing is not None:
            row["first_seen"] = existing.first_seen
        self.db["hosts"].upsert(row, pk="host_id")

    def touch(self, host_id: str, seen: float) -> bool:
        """Record that ``host_id`` was heard from; False if it never said hello."""
        with write_transaction(self.db):
            cursor = self.db.execute("UPDATE hosts SET last_seen = ? WHERE host_id = ?",
                                     [seen, host_id])
        return cursor.rowcount > 0

    def host(self, host_id: str) -> HostFacts | None:
        rows = list(self.db.query("SELECT * FROM hosts WHERE host_id = ?", [host_id]))
        return _facts(rows[0]) if rows else None

    def hosts(self) -> list[HostFacts]:
        return [_facts(row) for row in self.db.query("SELECT * FROM hosts ORDER BY host_id")]

    def add_measurements(self, rows: Sequence[dict[str, Any]]) -> int:
        """Insert rows (``MEASUREMENT_COLUMNS``) once each; returns how many were new."""
        if not rows:
            return 0
        placeholders = ", ".join("?" for _ in MEASUREMENT_COLUMNS)
        sql = (f"INSERT OR IGNORE INTO measurements ({', '.join(MEASUREMENT_COLUMNS)}) "
               f"VALUES ({placeholders})")
        connection = self.db.conn
        before = connection.total_changes
        with write_transaction(self.db):
            connection.executemany(sql, _values(rows))
            new = connection.total_changes - before
            self._add_totals(connection, measurements_stored=new, duplicates=len(rows) - new)
        return new

    def add_batches(self, batches: Sequence[tuple[str, float, Sequence[dict[str, Any]]]],
                    hosts: Sequence[HostFacts] = ()) -> list[int | None]:
        """Store several hosts' batches in ONE transaction (one fsync for all of them).

        ``hosts`` (from hellos) are upserted first, in the same transaction. Each batch is
        (host_id, seen epoch seconds, rows; no rows for a heartbeat); per batch the result is
        how many rows were new, or None when the host never said hello (nothing is stored).
        """
        placeholders = ", ".join("?" for _ in MEASUREMENT_COLUMNS)
        sql = (f"INSERT OR IGNORE INTO measurements ({', '.join(MEASUREMENT_COLUMNS)}) "
               f"VALUES ({placeholders})")
        connection = self.db.conn
        results: list[int | None] = []
        with write_transaction(self.db):
            for facts in hosts:
                self._upsert(facts)
            for host_id, seen, rows in batches:
                cursor = connection.execute("UPDATE hosts SET last_seen = ? WHERE host_id = ?",
                                            [seen, host_id])
                if cursor.rowcount == 0:
                    results.append(None)
                    continue
                before = connection.total_changes
                connection.executemany(sql, _values(rows))
                results.append(connection.total_changes - before)
            new = sum(n for n in results if n is not None)
            offered = sum(len(rows) for (_, _, rows), n in zip(batches, results, strict=True)
                          if n is not None)
            self._add_totals(connection, measurements_stored=new, duplicates=offered - new)
        return results

    @staticmethod
    def _add_totals(connection: sqlite3.Connection, **amounts: int) -> None:
        connection.executemany(
            "INSERT INTO totals (name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            [(name, amount) for name, amount in amounts.items() if amount])

    def totals(self) -> dict[str, int]:
        """Lifetime totals across every run on this database, plus the rows held now."""
        found = {row["name"]: row["value"] for row in self.db.query("SELECT * FROM totals")}
        return {"measurements_stored": found.get("measurements_stored", 0),
                "duplicates": found.get("duplicates", 0),
                "measurements_held": self.count(), "hosts": self.db["hosts"].count}

    def measurements(self, host_id: str, since_end: float | None = None
                     ) -> list[dict[str, Any]]:
        """A host's measurements ending after ``since_end``, oldest first."""
        if since_end is None:
            return list(self.db.query(
                "SELECT * FROM measurements WHERE host_id = ? ORDER BY end_epoch_seconds",
                [host_id]))
        return list(self.db.query(
            "SELECT * FROM measurements WHERE host_id = ? AND end_epoch_seconds > ? "
            "ORDER BY end_epoch_seconds", [host_id, since_end]))

    def summary(self) -> dict[str, tuple[int, float | None, float | None]]:
        """Per host: (measurement count, first start, last end) in epoch seconds."""
        return {row["host_id"]: (row["n"], row["first"], row["last"]) for row in self.db.query(
            "SELECT host_id, COUNT(*) AS n, MIN(start_epoch_seconds) AS first, "
            "MAX(end_epoch_seconds) AS last FROM measurements GROUP BY host_id")}

    def count(self) -> int:
        return self.db["measurements"].count

    def seqs(self, host_id: str) -> list[int]:
        return [row["seq"] for row in self.db.query(
            "SELECT seq FROM measurements WHERE host_id = ? ORDER BY seq", [host_id])]

    def prune(self, keep_seconds: float, host_id: str | None = None) -> int:
        """Drop measurements that ended more than ``keep_seconds`` before their host's latest
        (of one host, or of all): hosts on replayed or accelerated clocks keep the same window
        as live ones."""
        # per host, a look-up and a range delete on the (host_id, end) index: the one-statement
        # form with a correlated MAX per row took most of the manager's time under load
        with write_transaction(self.db):
            connection = self.db.conn
            latest = connection.execute(
                "SELECT host_id, MAX(end_epoch_seconds) FROM measurements "
                + ("WHERE host_id = ?" if host_id is not None else "GROUP BY host_id"),
                [host_id] if host_id is not None else []).fetchall()
            dropped = 0
            for host, last in latest:
                if last is None:
                    continue
                dropped += connection.execute(
                    "DELETE FROM measurements WHERE host_id = ? AND end_epoch_seconds < ?",
                    [host, last - keep_seconds]).rowcount
        return dropped

    def reported_outcomes(self, since_epoch_seconds: float = 0.0) -> list[Outcome]:
        """Completion reports of host shares of predictions served since then: (host, launch
        epoch, predicted mean, p50/p90/p95, realised seconds) each, for calibration."""
        return self.track.outcomes(since_epoch_seconds)

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.conn.close()
            self._local.db = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


_COLUMN_VALUES = operator.itemgetter(*MEASUREMENT_COLUMNS)


def _values(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples in ``MEASUREMENT_COLUMNS`` order (absent columns as NULL)."""
    try:
        return [_COLUMN_VALUES(row) for row in rows]  # the C fast path: every column given
    except KeyError:
        return [tuple(row.get(c) for c in MEASUREMENT_COLUMNS) for row in rows]


def _facts(row: dict[str, Any]) -> HostFacts:
    return HostFacts(**{**row, "simulated": bool(row["simulated"])})
