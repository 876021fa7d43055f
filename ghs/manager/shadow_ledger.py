"""The ``shadow_launches`` table: every predictor's shadow launch of a host and, once the
capacity series shows it, the launch's realised time (what ``ghs backtest --manager`` reads).
A catch-up's rows are queued and written in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from ghs.manager.transactions import write_transaction

LEDGER = "shadow_launches"


class ShadowLedger:
    """Queued writes to the ledger of ``store`` (a :class:`ghs.manager.store.ManagerStore`)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._writes: list[tuple[dict[str, Any] | None, tuple[Any, ...] | None]] = []
        db = store.db
        if LEDGER not in db.table_names():
            db[LEDGER].create({"host_id": str, "launch_epoch_seconds": float,
                               "length_seconds": float, "predictor": str, "mean": float,
                               "p50": float, "p90": float, "p95": float,
                               "realised_seconds": float},
                              pk=("host_id", "launch_epoch_seconds", "length_seconds",
                                  "predictor"))

    def launch(self, row: dict[str, Any]) -> None:
        """Queue one predictor's launch (a row of the table's columns)."""
        self._writes.append((row, None))

    def outcome(self, realised_seconds: float, host_id: str, launch_epoch_seconds: float,
                length_seconds: float) -> None:
        """Queue the realised time of a launch and length (every predictor's row)."""
        self._writes.append((None, (realised_seconds, host_id, launch_epoch_seconds,
                                    length_seconds)))

    def flush(self) -> None:
        """Write the queued launches and outcomes in one transaction."""
        writes, self._writes = self._writes, []
        if not writes:
            return
        with write_transaction(self.store.db):
            connection = self.store.db.conn
            # runs of launches of the same columns, and of outcomes, each run in one
            # executemany, in the order they were queued
            for columns, run in groupby(writes, key=lambda write: None if write[0] is None
                                        else tuple(write[0])):
                if columns is None:
                    connection.executemany(
                        f"UPDATE {LEDGER} SET realised_seconds = ? WHERE host_id = ? "
                        "AND launch_epoch_seconds = ? AND length_seconds = ?",
                        [outcome for _, outcome in run])
                else:
                    connection.executemany(
                        f"INSERT OR REPLACE INTO {LEDGER} ({', '.join(columns)}) VALUES "
                        f"({', '.join('?' * len(columns))})",
                        [tuple(launch.values()) for launch, _ in run if launch is not None])

    def scored(self, host_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Scored shadow launches (oldest first), every predictor's row."""
        query = f"SELECT * FROM {LEDGER} WHERE realised_seconds IS NOT NULL"
        params: list[Any] = []
        if host_ids:
            query += f" AND host_id IN ({', '.join('?' * len(host_ids))})"
            params = list(host_ids)
        return list(self.store.db.query(query + " ORDER BY launch_epoch_seconds, host_id",
                                        params))

