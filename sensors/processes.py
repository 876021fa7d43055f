"""Process snapshots, and which processes count as local load.

A snapshot maps (pid, start ticks) to a :class:`ProcessInfo`, so a reused pid is a different
process. It is read straight from ``<proc_root>/<pid>/stat`` and ``status`` (about three
times cheaper than going through psutil, and the procfs root stays injectable, which psutil
only allows through a module-wide setting). Kernel threads are marked and never counted;
processes that exit while the directory is scanned are simply skipped.

Local load is every user process except the agent's own (``exclude_pids``), remote tasks
(configured users, a cgroup path prefix, or an environment marker variable) and everything
they started, and users outside the allow list or on the deny list.
"""

from __future__ import annotations

import math
import os
import pwd
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from sensors.errors import InvalidArgumentError, ProcUnavailableError

ProcessKey = tuple[int, int]  # (pid, start time in clock ticks since boot)
Snapshot = Mapping[ProcessKey, "ProcessInfo"]
_PF_KTHREAD = 0x00200000


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process at one moment. CPU times in seconds; ``start_time`` in epoch seconds.

    ``children_cpu_seconds`` is the CPU time of exited children this process has reaped;
    ``processor`` the core it last ran on (-1 if unknown).
    """

    pid: int
    start_ticks: int
    ppid: int
    uid: int
    name: str
    state: str
    start_time: float
    cpu_seconds: float
    children_cpu_seconds: float
    kernel_thread: bool = False
    processor: int = -1  # core it last ran on (field 39 of stat); -1 if unknown

    @property
    def key(self) -> ProcessKey:
        return (self.pid, self.start_ticks)


class ProcessSource(Protocol):
    """Where snapshots come from (procfs, or a simulated host)."""

    def snapshot(self) -> dict[ProcessKey, ProcessInfo]:
        """Every process alive now, kernel threads included (marked)."""
        ...

    def cgroup_paths(self, pid: int) -> tuple[str, ...] | None:
        """The process's cgroup paths, or None if unknown (exited, not readable)."""
        ...

    def environment_names(self, pid: int) -> frozenset[str] | None:
        """Names of the process's initial environment variables, or None if unreadable."""
        ...


def read_boot_time(proc_root: str = "/proc") -> float:
    """Boot time in epoch seconds, from the ``btime`` line of ``<proc_root>/stat``."""
    try:
        with open(os.path.join(proc_root, "stat"), encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError) as exc:
        raise ProcUnavailableError(f"cannot read boot time from {proc_root}/stat: {exc}",
                                   field="proc_root", value=proc_root) from None
    raise ProcUnavailableError(f"{proc_root}/stat has no btime line", field="proc_root",
                               value=proc_root)


class RecentSnapshot:
    """A process source that hands the same snapshot to readers within ``max_age_seconds``
    of each other (by ``monotonic``): the capacity series and the running-jobs snapshot are
    taken together every interval, and one scan of /proc serves both. Not for measurement
    boundaries, which need their own moment. Safe between threads."""

    def __init__(self, source: ProcessSource, max_age_seconds: float,
                 monotonic: Callable[[], float]) -> None:
        self.source = source
        self.max_age_seconds = max_age_seconds
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._taken = -math.inf
        self._snapshot: dict[ProcessKey, ProcessInfo] = {}

    def snapshot(self) -> dict[ProcessKey, ProcessInfo]:
        with self._lock:
            now = self.monotonic()
            if now - self._taken > self.max_age_seconds:
                self._snapshot = self.source.snapshot()
                self._taken = now
            return self._snapshot

    def cgroup_paths(self, pid: int) -> tuple[str, ...] | None:
        return self.source.cgroup_paths(pid)

    def environment_names(self, pid: int) -> frozenset[str] | None:
        return self.source.environment_names(pid)


class ProcfsProcessSource:
    """Snapshots of the processes under ``proc_root``."""

    def __init__(self, proc_root: str = "/proc", *, ticks_per_second: int | None = None,
                 boot_time: float | None = None) -> None:
        if not os.path.isdir(proc_root):
            raise ProcUnavailableError(f"{proc_root!r} is not a directory (is /proc mounted?)",
                                       field="proc_root", value=proc_root)
        self.proc_root = proc_root
        self.ticks_per_second = ticks_per_second or os.sysconf("SC_CLK_TCK")
        self.boot_time = read_boot_time(proc_root) if boot_time is None else boot_time

    def snapshot(self) -> dict[ProcessKey, ProcessInfo]:
        try:
            names = os.listdir(self.proc_root)
        except OSError as exc:
            raise ProcUnavailableError(f"cannot list {self.proc_root}: {exc.strerror}",
                                       field="proc_root", value=self.proc_root) from None
        processes: dict[ProcessKey, ProcessInfo] = {}
        for name in names:
            if name.isdigit():
                info = self._read(name)
                if info is not None:
                    processes[info.key] = info
        return processes

    def _read(self, pid_name: str) -> ProcessInfo | None:
        base = os.path.join(self.proc_root, pid_name)
        try:
            with open(base + "/stat", "rb") as handle:
                stat_line = handle.read()
            with open(base + "/status", "rb") as handle:
                status = handle.read()
        except OSError:  # exited during the scan (ENOENT, ESRCH) or otherwise gone
            return None
        return parse_process(stat_line, status, self.ticks_per_second, self.boot_time)

    def cgroup_paths(self, pid: int) -> tuple[str, ...] | None:
        try:
            with open(os.path.join(self.proc_root, str(pid), "cgroup"), encoding="utf-8",
                      errors="replace") as handle:
                return tuple(line.rstrip("\n").split(":", 2)[-1] for line in handle if line)
        except OSError:
            return None

    def environment_names(self, pid: int) -> frozenset[str] | None:
        try:
            with open(os.path.join(self.proc_root, str(pid), "environ"), "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        return frozenset(entry.split(b"=", 1)[0].decode("utf-8", "replace")
                         for entry in data.split(b"\0") if entry)


def parse_process(stat_line: bytes, status: bytes, ticks_per_second: int,
                  boot_time: float) -> ProcessInfo | None:
    """A ProcessInfo from the contents of ``/proc/<pid>/stat`` and ``status`` (None if bad)."""
    try:
        open_paren = stat_line.index(b"(")
        close_paren = stat_line.rindex(b")")  # the command may itself contain ')'
        pid = int(stat_line[:open_paren])
        name = stat_line[open_paren + 1:close_paren].decode("utf-8", "replace")
        rest = stat_line[close_paren + 2:].split()
        state = rest[0].decode("ascii", "replace")
        ppid, flags = int(rest[1]), int(rest[6])
        utime, stime, cutime, cstime = (int(value) for value in rest[11:15])
        start_ticks = int(rest[19])
        processor = int(rest[36]) if len(rest) > 36 else -1
        uid = -1
        for line in status.splitlines():
            if line.startswith(b"Uid:"):
                uid = int(line.split()[1])  # real uid, as accounting records it
                break
    except (ValueError, IndexError):
        return None
    return ProcessInfo(
        pid=pid, start_ticks=start_ticks, ppid=ppid, uid=uid, name=name, state=state,
        start_time=boot_time + start_ticks / ticks_per_second,
        cpu_seconds=(utime + stime) / ticks_per_second,
        children_cpu_seconds=(cutime + cstime) / ticks_per_second,
        kernel_thread=bool(flags & _PF_KTHREAD), processor=processor)


def uid_of(user: str | int) -> int:
    """A user id from a name or number (names through the password database)."""
    if isinstance(user, int) and not isinstance(user, bool):
        return user
    text = str(user).strip()
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise InvalidArgumentError(f"unknown user {text!r}", field="users", value=text) from None


@dataclass(frozen=True)
class ProcessFilter:
    """Which processes are local load. Sets of uids and pids; empty allow set = everyone."""

    users_allow: frozenset[int] = frozenset()
    users_deny: frozenset[int] = frozenset()
    remote_users: frozenset[int] = frozenset()
    remote_cgroup: str = ""
    remote_marker: str = ""
    exclude_pids: frozenset[int] = frozenset()

    def user_counts(self, uid: int) -> bool:
        """True if this user's processes count as local load (lists only)."""
        if uid in self.users_deny or uid in self.remote_users:
            return False
        return not self.users_allow or uid in self.users_allow


def build_filter(*, users_allow: Iterable[str | int] = (), users_deny: Iterable[str | int] = (),
                 remote_users: Iterable[str | int] = (), remote_cgroup: str = "",
                 remote_marker: str = "", exclude_pids: Iterable[int] = (),
                 resolve_uid: Callable[[str | int], int] = uid_of) -> ProcessFilter:
    """A validated ProcessFilter; users by name or uid (``resolve_uid`` maps names)."""
    if remote_cgroup and not remote_cgroup.startswith("/"):
        raise InvalidArgumentError(f"remote cgroup must be an absolute cgroup path, got "
                                   f"{remote_cgroup!r}", field="remote_cgroup",
                                   value=remote_cgroup)
    if "=" in remote_marker or "\0" in remote_marker:
        raise InvalidArgumentError(f"remote marker must be an environment variable name, got "
                                   f"{remote_marker!r}", field="remote_marker",
                                   value=remote_marker)
    pids = frozenset(int(pid) for pid in exclude_pids)
    return ProcessFilter(
        users_allow=frozenset(resolve_uid(user) for user in users_allow),
        users_deny=frozenset(resolve_uid(user) for user in users_deny),
        remote_users=frozenset(resolve_uid(user) for user in remote_users),
        remote_cgroup=remote_cgroup.rstrip("/") or ("/" if remote_cgroup else ""),
        remote_marker=remote_marker, exclude_pids=pids)


@dataclass(frozen=True)
class Classified:
    """A snapshot split into local load and the rest (kernel threads are in neither).

    ``excluded_pids``: the agent's, remote tasks' and their descendants' pids (children
    inherit exclusion, so accounting records can be matched through their parent).
    """

    local: frozenset[ProcessKey]
    other: frozenset[ProcessKey]
    excluded_pids: frozenset[int]


class ProcessClassifier:
    """Applies a ProcessFilter to snapshots, remembering per-process cgroup/marker lookups."""

    def __init__(self, process_filter: ProcessFilter, source: ProcessSource) -> None:
        self.filter = process_filter
        self.source = source
        self._remote_cache: dict[ProcessKey, bool] = {}

    def _is_remote_root(self, info: ProcessInfo) -> bool:
        rules = self.filter
        if info.pid in rules.exclude_pids or info.uid in rules.remote_users:
            return True
        if not rules.remote_cgroup and not rules.remote_marker:
            return False
        cached = self._remote_cache.get(info.key)
        if cached is None:
            cached = False
            if rules.remote_cgroup:
                prefix = rules.remote_cgroup
                paths = self.source.cgroup_paths(info.pid) or ()
                cached = any(path == prefix or path.startswith(prefix.rstrip("/") + "/")
                             for path in paths)
            if not cached and rules.remote_marker:
                cached = rules.remote_marker in (self.source.environment_names(info.pid) or ())
            self._remote_cache[info.key] = cached
        return cached

    def classify(self, snapshot: Snapshot) -> Classified:
        by_pid = {info.pid: info for info in snapshot.values()}
        excluded: dict[int, bool] = {}

        def is_excluded(pid: int) -> bool:
            chain: list[int] = []
            verdict = False
            while pid in by_pid and pid not in excluded and pid not in chain:
                chain.append(pid)
                info = by_pid[pid]
                if not info.kernel_thread and self._is_remote_root(info):
                    verdict = True
                    break
                pid = info.ppid
            else:
                verdict = excluded.get(pid, False)
            for member in chain:
                excluded[member] = verdict
            return verdict

        local: set[ProcessKey] = set()
        other: set[ProcessKey] = set()
        for key, info in snapshot.items():
            if info.kernel_thread:
                continue
            if is_excluded(info.pid) or not self.filter.user_counts(info.uid):
                other.add(key)
            else:
                local.add(key)
        live = set(snapshot)
        for key in [key for key in self._remote_cache if key not in live]:
            del self._remote_cache[key]
        return Classified(frozenset(local), frozenset(other),
                          frozenset(pid for pid, flag in excluded.items() if flag))
