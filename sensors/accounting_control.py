"""Process accounting for a sensor's lifetime: which file to read, and switching it safely.

The kernel writes to at most one accounting file at a time (per PID namespace) and
``acct(2)`` silently replaces it, so before switching accounting to its own file the session
probes for an active one (:mod:`sensors.accounting_probe`) and never replaces it.

Modes: ``on`` uses a file the sensor owns (root only; an active file found elsewhere is
shared read-only or refused, never replaced), ``auto`` uses an active readable file if there
is one, ``off`` never reads accounting. The measurement then falls back to the fork counter.
The owner holds ``<file>.lock`` (flock) while it owns the file, so a second sensor with the
same path (an agent and a one-off ``ghs measure``) reads it instead of switching it off, and a
file left active by a run that died is adopted and switched off in the end.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Sequence

from sensors.accounting import RECORD_BYTES, AccountingBatch, AccountingReader
from sensors.accounting_probe import ActiveAccounting, probe_accounting, switch_accounting
from sensors.errors import AccountingError, AccountingInUseError, InvalidArgumentError

__all__ = ["EXISTING_POLICIES", "MODES", "AccountingSession", "probe_accounting",
           "switch_accounting"]

MODES = ("on", "auto", "off")
EXISTING_POLICIES = ("share", "refuse")


class _OwnedFile(AccountingReader):
    """The sensor's own accounting file: emptied between intervals once it grows too big."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        super().__init__(path)

    def skip_to_end(self) -> AccountingBatch:
        if os.stat(self.path).st_size > self.max_bytes:
            # The kernel appends (O_APPEND), so it simply continues at the new end.
            os.truncate(self.path, 0)
            self.offset = 0
        return super().skip_to_end()


class AccountingSession:
    """Accounting for one sensor's lifetime; use as a context manager.

    ``reader`` is an AccountingSource or None (fork-counter fallback); ``source`` is
    "own", "shared" or "none"; ``reason`` says why accounting is not used; ``flags`` go into
    every measurement's quality.
    """

    def __init__(self, mode: str, *, own_path: str, candidates: Sequence[str] = (),
                 existing: str = "share", max_bytes: int = 16_000_000,
                 remove_own_file: bool = False, proc_root: str = "/proc",
                 use_fanotify: bool = True) -> None:
        if mode not in MODES:
            raise InvalidArgumentError(f"accounting mode must be one of {', '.join(MODES)}, "
                                       f"got {mode!r}", field="accounting", value=mode)
        if existing not in EXISTING_POLICIES:
            raise InvalidArgumentError(
                f"accounting_existing must be one of {', '.join(EXISTING_POLICIES)}, got "
                f"{existing!r}", field="accounting_existing", value=existing)
        if max_bytes < RECORD_BYTES * 1024:
            raise InvalidArgumentError(f"max_bytes must be >= {RECORD_BYTES * 1024}, got "
                                       f"{max_bytes!r}", field="max_bytes", value=max_bytes)
        self.mode = mode
        self.own_path = os.path.abspath(own_path)
        self.candidates = tuple(candidates)
        self.existing = existing
        self.max_bytes = max_bytes
        self.remove_own_file = remove_own_file
        self.proc_root = proc_root
        self.use_fanotify = use_fanotify
        self.reader: AccountingReader | None = None
        self.source = "none"
        self.reason = "accounting off" if mode == "off" else ""
        self.flags: tuple[str, ...] = ()
        self._switched_on = False
        self._lock_fd: int | None = None

    def __enter__(self) -> AccountingSession:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> None:
        """Decide where accounting comes from; for ``on``, switch the kernel to our file."""
        if self.mode == "off":
            return
        probe = probe_accounting((*self.candidates, self.own_path), proc_root=self.proc_root,
                                 use_fanotify=self.use_fanotify)
        active = probe.active
        if active is not None and active.path == self.own_path:
            self._close_handle(active)
            if self.mode == "on" and self._take_lock():
                # Left on by an earlier run that died: ours to carry on with and switch off.
                self._use_own(switch=False)
                self._switched_on = True
                self.flags += ("accounting_adopted",)
            else:  # a live sensor owns it (or we only use what is active): read only
                self.reader = AccountingReader(self.own_path)
                self.source = "shared"
                self.flags += ("accounting_shared",)
            return
        if active is not None:
            self._use_existing(active)
            return
        if self.mode == "auto":
            self.reason = "no active accounting file found" + (
                "" if probe.complete else f" (checked {probe.method} only)")
            return
        if os.geteuid() != 0:
            raise AccountingError(
                "accounting mode 'on' needs root (CAP_SYS_PACCT); use --accounting auto or off",
                field="accounting", value=self.mode)
        if not probe.complete:
            raise AccountingInUseError(
                "accounting mode 'on': cannot verify that no other accounting file is active "
                f"(fanotify unavailable, checked {probe.method} only); refusing to switch "
                "process accounting; use --accounting auto or off")
        if not self._take_lock():
            raise AccountingInUseError(
                f"another sensor holds {self.own_path}.lock but accounting is not active; "
                "refusing to switch it under that sensor", path=self.own_path)
        self._use_own(switch=True)

    def _take_lock(self) -> bool:
        """Hold ``<own_path>.lock`` while this session owns the file (False: someone has it)."""
        os.makedirs(os.path.dirname(self.own_path), mode=0o700, exist_ok=True)
        try:
            fd = os.open(self.own_path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise AccountingError(f"cannot create lock {self.own_path}.lock: {exc.strerror}",
                                  field="accounting_path", value=self.own_path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def _use_existing(self, active: ActiveAccounting) -> None:
        where = active.path or f"an unlisted file (device {active.device}, inode {active.inode})"
        if self.mode == "on" and self.existing == "refuse":
            self._close_handle(active)
            raise AccountingInUseError(
                f"process accounting is already active, writing to {where}; the sensor will "
                "not take it over (set sensor.accounting_existing = 'share' to read it "
                "read-only, or use --accounting off)", path=active.path)
        if active.path is not None:
            self._close_handle(active)
            self.reader = AccountingReader(active.path)
        else:
            self.reader = AccountingReader(file=active.file)
            self.flags += ("accounting_unlisted_file",)
        self.source = "shared"
        self.flags += ("accounting_shared",)

    def _use_own(self, *, switch: bool) -> None:
        directory = os.path.dirname(self.own_path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            # Records name every user's commands, hence 0600; O_NOFOLLOW refuses symlinks.
            fd = os.open(self.own_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                         0o600)
        except OSError as exc:
            raise AccountingError(f"cannot create accounting file {self.own_path!r}: "
                                  f"{exc.strerror}", field="accounting_path",
                                  value=self.own_path) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise AccountingError(f"accounting file {self.own_path!r} is not a regular "
                                      "file owned by the sensor's user",
                                      field="accounting_path", value=self.own_path)
        finally:
            os.close(fd)
        if switch:
            switch_accounting(self.own_path)
            self._switched_on = True
        try:
            self.reader = _OwnedFile(self.own_path, self.max_bytes)
        except BaseException:
            self.close()
            raise
        self.source = "own"

    @staticmethod
    def _close_handle(active: ActiveAccounting) -> None:
        if active.file is not None:
            active.file.close()
            active.file = None

    def close(self) -> None:
        """Stop reading; switch accounting off only if it still goes to our own file."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        switched_by_us = self._switched_on
        if self._switched_on:
            self._switched_on = False
            probe = probe_accounting((self.own_path,), proc_root=self.proc_root,
                                     use_fanotify=self.use_fanotify)
            if probe.active is not None:
                ours = probe.active.path == self.own_path
                self._close_handle(probe.active)
                if ours:
                    switch_accounting(None)
        # A file we did not switch on may be another run's (an agent): never delete it.
        if self.remove_own_file and switched_by_us:
            for path in (self.own_path, self.own_path + ".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None
