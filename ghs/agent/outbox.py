"""The agent's SQLite outbox: every measurement, numbered per host, kept until acknowledged.

A measurement is committed here before anything is sent, and deleted only when the manager's
acknowledgement (sent after the manager's own commit) arrives, so neither side's restart nor a
dropped network loses one.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import sqlite_utils

from ghs.errors import GhsError


class OutboxError(GhsError):
    """The outbox database cannot be opened or written."""

    code = "outbox_error"


class Outbox:
    """Unacknowledged measurements per host. Safe to share between threads.

    ``path`` None keeps it in memory (tests only: nothing survives a restart then).
    ``clock`` (epoch seconds) stamps when each measurement was queued.
    """

    def __init__(self, path: str | Path | None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        try:
            if path is None:
                connection = sqlite3.connect(":memory:", check_same_thread=False)
            else:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
            self.db = sqlite_utils.Database(connection)
            if path is not None:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
            if "outbox" not in self.db.table_names():
                self.db["outbox"].create({"host_id": str, "seq": int, "payload": str,
                                          "queued_epoch_seconds": float},
                                         pk=("host_id", "seq"))
            elif "queued_epoch_seconds" not in self.db["outbox"].columns_dict:
                # an outbox from before queue ages were kept: its rows' ages are unknown
                self.db["outbox"].add_column("queued_epoch_seconds", float)
            if "set_aside" not in self.db.table_names():
                self.db["set_aside"].create({"host_id": str, "seq": int, "payload": str,
                                             "reason": str}, pk=("host_id", "seq"))
            if "sequence" not in self.db.table_names():
                self.db["sequence"].create({"host_id": str, "next_seq": int}, pk="host_id")
        except (sqlite3.Error, OSError) as exc:
            raise OutboxError(f"cannot open the agent outbox {str(path)!r}: {exc}",
                              field="outbox", value=str(path)) from None

    def add(self, host_id: str, fields: dict[str, Any]) -> int:
        """Store one measurement (protocol fields without ``seq``); returns its seq."""
        with self._lock, self.db.conn:
            rows = list(self.db.query("SELECT next_seq FROM sequence WHERE host_id = ?",
                                      [host_id]))
            seq = rows[0]["next_seq"] if rows else 0
            self.db.execute("INSERT OR REPLACE INTO sequence (host_id, next_seq) VALUES (?, ?)",
                            [host_id, seq + 1])
            self.db.execute("INSERT INTO outbox (host_id, seq, payload, queued_epoch_seconds) "
                            "VALUES (?, ?, ?, ?)",
                            [host_id, seq, json.dumps(fields), self.clock()])
        return seq

    def pending(self, host_id: str, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """The oldest ``limit`` unacknowledged measurements of a host: (seq, fields)."""
        with self._lock:
            rows = list(self.db.query(
                "SELECT seq, payload FROM outbox WHERE host_id = ? ORDER BY seq LIMIT ?",
                [host_id, limit]))
        return [(row["seq"], json.loads(row["payload"])) for row in rows]

    def ack(self, host_id: str, ranges: Iterable[tuple[int, int]]) -> int:
        """Forget acknowledged measurements; returns how many were removed."""
        removed = 0
        with self._lock, self.db.conn:
            for first, last in ranges:
                cursor = self.db.execute(
                    "DELETE FROM outbox WHERE host_id = ? AND seq BETWEEN ? AND ?",
                    [host_id, first, last])
                removed += cursor.rowcount
        return removed

    def set_aside(self, host_id: str, seq: int, reason: str) -> None:
        """Move a measurement the protocol refuses out of the queue, keeping it and why."""
        with self._lock, self.db.conn:
            self.db.execute(
                "INSERT OR REPLACE INTO set_aside (host_id, seq, payload, reason) "
                "SELECT host_id, seq, payload, ? FROM outbox WHERE host_id = ? AND seq = ?",
                [reason, host_id, seq])
            self.db.execute("DELETE FROM outbox WHERE host_id = ? AND seq = ?",
                            [host_id, seq])

    def count(self, host_id: str | None = None) -> int:
        with self._lock:
            if host_id is None:
                return self.db["outbox"].count
            return next(iter(self.db.query(
                "SELECT COUNT(*) AS n FROM outbox WHERE host_id = ?", [host_id])))["n"]

    def oldest_queued(self) -> float | None:
        """When the oldest unacknowledged measurement was queued (epoch seconds); None if
        the outbox is empty (or holds only rows from before queue times were kept)."""
        with self._lock:
            return next(iter(self.db.query(
                "SELECT MIN(queued_epoch_seconds) AS t FROM outbox")))["t"]

    def hosts(self) -> list[str]:
        with self._lock:
            return [row["host_id"] for row in self.db.query(
                "SELECT DISTINCT host_id FROM outbox ORDER BY host_id")]

    def close(self) -> None:
        with self._lock:
            self.db.conn.close()
