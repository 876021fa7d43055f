"""What a manager has seen since it started: messages by type, refusals by code, rows stored."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counters:
    """What the manager has seen; read by status replies (under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    received: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    stored: int = 0
    records_stored: Counter = field(default_factory=Counter)
    stored_by_host: Counter = field(default_factory=Counter)
    duplicates: int = 0
    internal_errors: int = 0
    dropped_replies: int = 0
    busy: int = 0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"received": dict(self.received), "rejected": dict(self.rejected),
                    "measurements_stored": self.stored,
                    "records_stored": dict(self.records_stored),
                    "duplicates": self.duplicates,
                    "internal_errors": self.internal_errors,
                    "dropped_replies": self.dropped_replies, "busy": self.busy}
