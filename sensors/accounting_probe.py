"""Is kernel process accounting on, and into which file? Also the ``acct(2)`` switch itself.

Linux has no call that names the active accounting file, and ``acct(2)`` silently replaces
it. The probe makes the kernel show it: watch every mounted filesystem with fanotify, fork a
child that exits at once, and see which file the kernel writes that child's exit record to
(the write is reported with the child's pid; the kernel writes through an internal mount, so
the file is identified by device and inode and matched against known paths). Without
fanotify (not root, old kernel) only known paths can be checked, which cannot rule out a
file elsewhere: the result then says it is incomplete.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import stat
import struct
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

from sensors.accounting import RECORD_BYTES, decode_record
from sensors.errors import AccountingError

_FAN_CLOEXEC, _FAN_NONBLOCK = 0x1, 0x2
_FAN_MARK_ADD, _FAN_MARK_FILESYSTEM = 0x1, 0x100
_FAN_MODIFY = 0x2
_AT_FDCWD = -100
_EVENT = struct.Struct("=IBBHQii")
# Filesystems an accounting file cannot live on (or that reject fanotify marks).
_PSEUDO_FS = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "securityfs",
              "debugfs", "tracefs", "pstore", "bpf", "configfs", "fusectl", "binfmt_misc",
              "hugetlbfs", "autofs", "efivarfs", "nsfs", "rpc_pipefs"}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def switch_accounting(path: str | None) -> None:
    """Call ``acct(2)``: send accounting to ``path``, or switch it off with None.

    Raises AccountingError with the reason (needs root / CAP_SYS_PACCT, kernel without
    BSD_PROCESS_ACCT, path not a regular file, ...).
    """
    libc = _libc()
    libc.acct.argtypes = [ctypes.c_char_p]
    result = libc.acct(None if path is None else os.fsencode(path))
    if result != 0:
        errno = ctypes.get_errno()
        what = "switch process accounting off" if path is None else \
            f"switch process accounting to {path!r}"
        raise AccountingError(f"cannot {what}: {os.strerror(errno)}"
                              + (" (needs root)" if errno == 1 else ""),
                              field="accounting_path", value=path)


@dataclass
class ActiveAccounting:
    """An accounting file the probe saw the kernel write to.

    ``path`` is None when the file is not at any known path (the kernel writes through an
    internal mount, so only device and inode identify it); ``file`` is a read-only handle.
    """

    device: int
    inode: int
    path: str | None
    file: BinaryIO | None


@dataclass
class ProbeResult:
    """What the probe found; ``complete`` is False when only known paths were checked."""

    active: ActiveAccounting | None
    complete: bool
    method: str


def _mount_points(proc_root: str) -> list[str]:
    points: list[str] = []
    try:
        with open(os.path.join(proc_root, "self", "mountinfo"), encoding="utf-8",
                  errors="replace") as handle:
            for line in handle:
                parts = line.split()
                dash = parts.index("-") if "-" in parts else -1
                if dash < 0 or len(parts) <= dash + 1:
                    continue
                if parts[dash + 1] not in _PSEUDO_FS:
                    points.append(parts[4].replace("\\040", " "))
    except OSError:
        return []
    return points


_PROBE_SECONDS = 2.0


def _spawn_exiting_child() -> int:
    with warnings.catch_warnings():
        # The child only calls _exit, which is safe even in a multi-threaded parent.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only exits
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def _record_of(data: bytes, pid: int) -> bool:
    usable = len(data) - len(data) % RECORD_BYTES
    return any((record := decode_record(data, offset)) is not None and record.pid == pid
               for offset in range(0, usable, RECORD_BYTES))


def _identify(device: int, inode: int, candidates: Sequence[str]) -> str | None:
    for path in candidates:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            if (info.st_dev, info.st_ino) == (device, inode):
                return path
    return None


def _probe_fanotify(candidates: Sequence[str], proc_root: str) -> ProbeResult | None:
    libc = _libc()
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                   ctypes.c_char_p]
    group = libc.fanotify_init(_FAN_CLOEXEC | _FAN_NONBLOCK,
                               os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
    if group < 0:
        return None
    try:
        marked = sum(
            libc.fanotify_mark(group, _FAN_MARK_ADD | _FAN_MARK_FILESYSTEM, _FAN_MODIFY,
                               _AT_FDCWD, os.fsencode(point)) == 0
            for point in _mount_points(proc_root))
        if marked == 0:
            return None
        child = _spawn_exiting_child()
        found: ActiveAccounting | None = None
        # The exit record is written before the child is reaped; the short wait only covers
        # event delivery. The deadline matters on a busy machine, where other writers keep
        # the queue from ever running dry.
        deadline = time.monotonic() + _PROBE_SECONDS
        while (found is None and time.monotonic() < deadline
               and select.select([group], [], [], 0.2)[0]):
            try:
                buffer = os.read(group, 65536)
            except BlockingIOError:
                break
            offset = 0
            while offset + _EVENT.size <= len(buffer):
                length, _, _, _, _, event_fd, pid = _EVENT.unpack_from(buffer, offset)
                offset += max(length, _EVENT.size)
                if event_fd < 0:
                    continue
                handle = os.fdopen(event_fd, "rb")
                if found is None and pid == child and _is_record_file(handle, child):
                    info = os.fstat(event_fd)
                    path = _identify(info.st_dev, info.st_ino, candidates)
                    found = ActiveAccounting(info.st_dev, info.st_ino, path, handle)
                else:
                    handle.close()
        return ProbeResult(found, complete=True, method="fanotify")
    finally:
        os.close(group)


def _is_record_file(handle: BinaryIO, pid: int) -> bool:
    info = os.fstat(handle.fileno())
    if not stat.S_ISREG(info.st_mode) or info.st_size < RECORD_BYTES:
        return False
    handle.seek(max(0, info.st_size - 16 * RECORD_BYTES))
    return _record_of(handle.read(), pid)


def _probe_candidates(candidates: Sequence[str]) -> ProbeResult:
    sizes: dict[str, int] = {}
    for path in candidates:
        with contextlib.suppress(OSError):
            if os.access(path, os.R_OK):
                sizes[path] = os.stat(path).st_size
    child = _spawn_exiting_child()
    for path, size in sizes.items():
        with contextlib.suppress(OSError), open(path, "rb") as handle:
            handle.seek(size)
            if _record_of(handle.read(), child):
                info = os.stat(path)
                return ProbeResult(ActiveAccounting(info.st_dev, info.st_ino, path,
                                                    open(path, "rb")),
                                   complete=False, method="known paths")
    return ProbeResult(None, complete=False, method="known paths")


def probe_accounting(candidates: Sequence[str] = (), *, proc_root: str = "/proc",
                     use_fanotify: bool = True) -> ProbeResult:
    """Find the accounting file the kernel is writing to, if any (forks one short child).

    fanotify (root) sees a file anywhere; otherwise only ``candidates`` are checked.
    """
    if use_fanotify:
        result = _probe_fanotify(list(candidates), proc_root)
        if result is not None:
            return result
    return _probe_candidates(list(candidates))
