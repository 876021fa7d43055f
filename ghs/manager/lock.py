"""One manager per database: an OS lock on a sidecar file, held for the manager's life.

Two managers writing one SQLite file would both acknowledge measurements and each count its
own, so the second one must refuse to start. ``flock`` is released by the kernel when the
process dies however it dies, so a crash never leaves a stale lock behind; the sidecar file
itself stays (an empty file is harmless, and deleting it would race with a starting manager).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ghs.errors import GhsError


class DatabaseInUseError(GhsError):
    """Another manager holds the database's lock."""

    code = "database_in_use"


def lock_path(database: Path) -> Path:
    """The sidecar lock file of ``database`` (``manager.sqlite`` -> ``manager.sqlite.lock``)."""
    return database.with_name(database.name + ".lock")


class DatabaseLock:
    """An exclusive, non-blocking ``flock`` on ``lock_path(database)``; ``release`` frees it."""

    def __init__(self, database: Path) -> None:
        self.path = lock_path(database)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise DatabaseInUseError(
                f"database {str(database)!r} is in use by another manager (lock {self.path}); "
                "stop that manager or give --database another file",
                field="database", value=str(database)) from None
        # who holds it, for an administrator looking at the file
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
