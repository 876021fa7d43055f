"""The agent's SQLite outbox: every record, numbered per host and stream, kept until acknowledged.

A record (a measurement, or one of protocol version 2's capacity, running and templates
records) is committed here before anything is sent, and deleted only when the manager's
acknowledgement (sent after the manager's own commit) arrives, so neither side's restart nor a
dropped network loses one. Each (host, stream) has its own sequence.

A record the outbox cannot write (a full disk, an I/O error) is held in memory, in order, and
written ahead of the next record, or when the sender next asks (:meth:`Outbox.flush_held`):
the sampler keeps measuring and nothing is lost while the agent runs. Past ``hold_max_records``
the oldest held record is dropped, counted and logged; at close, held records that still
cannot be written are logged as lost.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import sqlite_utils

from ghs.errors import GhsError

MEASUREMENTS = "measurements"
LOG = logging.getLogger("ghs.agent")


class OutboxError(GhsError):
    """The outbox database cannot be opened or written."""

    code = "outbox_error"


class Outbox:
    """Unacknowledged measurements per host. Safe to share between threads.

    ``path`` None keeps it in memory (tests only: nothing survives a restart then).
    ``clock`` (epoch seconds) stamps when each measurement was queued.
    ``hold_max_records``: records held in memory while the database cannot be written;
    after a failed write the next try waits ``retry_seconds`` on ``monotonic`` (records added
    meanwhile join the held ones).
    """

    def __init__(self, path: str | Path | None, *,
                 clock: Callable[[], float] = time.time,
                 hold_max_records: int = 20000, retry_seconds: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        self.monotonic = monotonic
        self.hold_max_records = hold_max_records
        self.retry_seconds = retry_seconds
        # (host_id, stream, fields, queued epoch seconds) not yet written, oldest first
        self._held: list[tuple[str, str, dict[str, Any], float]] = []
        self.write_failures = 0  # writes that failed (their records were then held)
        self.dropped_records = 0  # held records dropped past hold_max_records
        self._retry_at = 0.0  # monotonic time before which no write is tried while held
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
            tables = (("outbox", {"payload": str, "queued_epoch_seconds": float},
                       ("host_id", "stream", "seq")),
                      ("set_aside", {"payload": str, "reason": str},
                       ("host_id", "stream", "seq")),
                      ("sequence", {"next_seq": int}, ("host_id", "stream")))
            for name, columns, pk in tables:
                table = self.db[name]
                if not table.exists():
                    keys = {"host_id": str, "stream": str, "seq": int}
                    table.create({k: keys[k] for k in pk} | columns, pk=pk)
                    continue
                if "stream" not in table.columns_dict:
                    # an outbox from before the record streams: all of it is measurements
                    table.add_column("stream", str, not_null_default=MEASUREMENTS)
                    table.transform(pk=pk)
                for column, kind in columns.items():
                    if column not in table.columns_dict:
                        # e.g. queue ages, not kept before: those rows' ages are unknown
                        table.add_column(column, kind)
        except (sqlite3.Error, OSError) as exc:
            raise OutboxError(f"cannot open the agent outbox {str(path)!r}: {exc}",
                              field="outbox", value=str(path)) from None

    def add(self, host_id: str, fields: dict[str, Any], stream: str = MEASUREMENTS
            ) -> int | None:
        """Store one record (protocol fields without ``seq``); returns its seq (None: held)."""
        seqs = self.add_many(host_id, [(stream, fields)])
        return seqs[0] if seqs else None

    def add_many(self, host_id: str, records: list[tuple[str, dict[str, Any]]]) -> list[int]:
        """Store (stream, fields) records of one host in one transaction, after any held
        records; returns their seqs, or [] when the write failed and they are held."""
        queued = self.clock()
        with self._lock:
            batch = self._held + [(host_id, stream, fields, queued) for stream, fields in records]
            if self._held and self.monotonic() < self._retry_at:
                self._hold(batch)  # the disk refused a moment ago: no new try yet
                return []
            written = self._write(batch)
        return written[len(batch) - len(records):]

    def flush_held(self) -> int:
        """Write the held records if the database takes them now (after a failure, tried
        again once ``retry_seconds`` have passed); returns how many were written."""
        with self._lock:
            if not self._held or self.monotonic() < self._retry_at:
                return 0
            return len(self._write(list(self._held)))

    def held_count(self) -> int:
        """Records held in memory because the database could not be written."""
        with self._lock:
            return len(self._held)

    def _write(self, batch: list[tuple[str, str, dict[str, Any], float]]) -> list[int]:
        """Write ``batch`` in order in one transaction (the caller holds the lock); if the
        database cannot be written now, hold all of it instead. Returns the seqs written."""
        seqs = []
        try:
            with self.db.atomic():
                for host_id, stream, fields, queued in batch:
                    rows = list(self.db.query(
                        "SELECT next_seq FROM sequence WHERE host_id = ? AND stream = ?",
                        [host_id, stream]))
                    seq = rows[0]["next_seq"] if rows else 0
                    self.db.execute("INSERT OR REPLACE INTO sequence (host_id, stream, "
                                    "next_seq) VALUES (?, ?, ?)", [host_id, stream, seq + 1])
                    self.db.execute("INSERT INTO outbox (host_id, stream, seq, payload, "
                                    "queued_epoch_seconds) VALUES (?, ?, ?, ?, ?)",
                                    [host_id, stream, seq, json.dumps(fields), queued])
                    seqs.append(seq)
        except sqlite3.OperationalError as exc:
            # a full disk, an I/O error, a lock held too long: it passes. A record the
            # database refuses outright (a constraint) raises to the caller instead, and
            # what was held stays held, so one bad record never blocks the others.
            self.write_failures += 1
            self._retry_at = self.monotonic() + self.retry_seconds
            if not self._held:
                LOG.error("cannot write the agent outbox (%s): holding records in memory, "
                          "up to %d, until it can", exc, self.hold_max_records)
            self._hold(batch)
            return []
        if self._held:
            LOG.warning("agent outbox writable again: %d held records written", len(self._held))
        self._held = []
        return seqs

    def pending(self, host_id: str, limit: int, stream: str = MEASUREMENTS
                ) -> list[tuple[int, dict[str, Any]]]:
        """The oldest ``limit`` unacknowledged records of a host's stream: (seq, fields)."""
        with self._lock:
            rows = list(self.db.query(
                "SELECT seq, payload FROM outbox WHERE host_id = ? AND stream = ? "
                "ORDER BY seq LIMIT ?", [host_id, stream, limit]))
        return [(row["seq"], json.loads(row["payload"])) for row in rows]

    def ack(self, host_id: str, ranges: Iterable[tuple[int, int]],
            stream: str = MEASUREMENTS) -> int:
        """Forget acknowledged records; returns how many were removed."""
        removed = 0
        with self._lock, self.db.atomic():
            for first, last in ranges:
                cursor = self.db.execute(
                    "DELETE FROM outbox WHERE host_id = ? AND stream = ? "
                    "AND seq BETWEEN ? AND ?", [host_id, stream, first, last])
                removed += cursor.rowcount
        return removed

    def set_aside(self, host_id: str, seq: int, reason: str,
                  stream: str = MEASUREMENTS) -> None:
        """Move a record the protocol refuses out of the queue, keeping it and why."""
        where = "host_id = ? AND stream = ? AND seq = ?"
        with self._lock, self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO set_aside (host_id, stream, seq, payload, reason) "
                f"SELECT host_id, stream, seq, payload, ? FROM outbox WHERE {where}",
                [reason, host_id, stream, seq])
            self.db.execute(f"DELETE FROM outbox WHERE {where}", [host_id, stream, seq])

    def count(self, host_id: str | None = None, stream: str | None = None) -> int:
        """Unacknowledged records, of one host and/or stream or of all."""
        clauses = [(name, value) for name, value in (("host_id", host_id), ("stream", stream))
                   if value is not None]
        where = " AND ".join(f"{name} = ?" for name, _ in clauses) or "1"
        with self._lock:
            return next(iter(self.db.query(f"SELECT COUNT(*) AS n FROM outbox WHERE {where}",
                                           [value for _, value in clauses])))["n"]

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

    def _hold(self, batch: list[tuple[str, str, dict[str, Any], float]]) -> None:
        """Keep ``batch`` as the held records, the newest ``hold_max_records`` of it."""
        excess = max(0, len(batch) - self.hold_max_records)
        if excess:
            self.dropped_records += excess
            LOG.error("outbox hold full: %d oldest records dropped (%d in all)", excess,
                      self.dropped_records)
        self._held = batch[excess:]

    def close(self) -> None:
        """Write what is held if the database takes it, then close; what it still refuses
        is lost with the process, and logged."""
        with self._lock:
            if self._held:
                self._write(list(self._held))
            if self._held:
                LOG.error("agent stopping: %d records it measured could not be written to the "
                          "outbox and are lost", len(self._held))
            self.db.conn.close()
