"""The local jobs running now: a snapshot for each report, and keyed hashing of identities.

A snapshot is built from the same ProcessSource and ProcessClassifier as measurements, so it
reads procfs and a SimulatedHost alike. It lists local processes only (no kernel threads, no
agent, no remote tasks or their children, users allow/deny respected) that are *jobs*: an
owner's sleeping shell or daemon is no backlog, so a process counts when it is runnable now
(state R), or when it used at least ``min_core_share`` of one core since the previous
snapshot (a new process: used any CPU since it started after the previous snapshot). The
first snapshot, having no previous one, lists only runnable processes.

Why a share and not any CPU: a daemon or an owner's shell that wakes now and then (a desktop's
helpers, the manager on the same machine, a workload generator forking jobs) used *some* CPU
between almost any two snapshots. Listed, each was given the remaining demand of its template
as if it were a job about to run to its end, although its CPU comes in short bursts that the
measured utilisation already carries (on a machine at rest the old rule listed a process API
daemon with 26 s of CPU in 17 hours; docs/measurement-log.md has what it did to a real-kernel
run).

At most ``max_jobs`` jobs are kept, largest CPU first; ``omitted_jobs`` says how many were
left out.

The run queue length is the kernel's ``procs_running`` from ``<proc_root>/stat`` less the
thread reading it (a simulated host reports its jobs in the system).

With hashing on, user and command are each replaced by HMAC-SHA256 under a per-site secret
key, hex, truncated to :data:`HASH_HEX_CHARS` characters: stable across hosts sharing the
key and runs, not reversible without it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sensors.clock import Clock
from sensors.errors import InvalidArgumentError, ProcUnavailableError
from sensors.processes import (
    ProcessClassifier,
    ProcessFilter,
    ProcessInfo,
    ProcessKey,
    ProcessSource,
)

HASH_HEX_CHARS = 16
MIN_KEY_BYTES = 16
# a sleeping process seen before is a job only if it used this share of one core since the
# previous snapshot: a job caught waiting on I/O uses far more, a daemon's wake-ups far less
# (a CPU-bound job is runnable whenever it is sampled, and counts whatever its share)
MIN_CORE_SHARE = 0.05


@dataclass(frozen=True)
class RunningJob:
    """One local job: CPU seconds used so far, wall seconds since it started."""

    cpu_seconds: float
    wall_seconds: float
    command: str
    user: str

    def to_dict(self) -> dict[str, Any]:
        return {"cpu_seconds": self.cpu_seconds, "wall_seconds": self.wall_seconds,
                "command": self.command, "user": self.user}


@dataclass(frozen=True)
class RunningSnapshot:
    """The local jobs at ``epoch_seconds``; ``omitted_jobs`` beyond the cap (smallest CPU)."""

    epoch_seconds: float
    run_queue_length: int
    jobs: tuple[RunningJob, ...]
    omitted_jobs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"epoch_seconds": self.epoch_seconds,
                "run_queue_length": self.run_queue_length,
                "jobs": [job.to_dict() for job in self.jobs],
                "omitted_jobs": self.omitted_jobs}


class IdentityHasher:
    """Keyed, truncated HMAC-SHA256 of names (users, commands)."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
            raise InvalidArgumentError(f"identity key must be at least {MIN_KEY_BYTES} bytes",
                                       field="identity_key", value=None)
        self._key = key

    def __call__(self, name: str) -> str:
        digest = hmac.new(self._key, name.encode("utf-8", "surrogateescape"), hashlib.sha256)
        return digest.hexdigest()[:HASH_HEX_CHARS]


def load_identity_key(path: str) -> bytes:
    """The secret key in ``path`` (its bytes, surrounding whitespace stripped)."""
    if not path:
        raise InvalidArgumentError("hash_identities is on but identity_key_path is empty",
                                   field="identity_key_path", value=path)
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            key = handle.read().strip()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read identity key {path!r}: {exc.strerror}",
                                   field="identity_key_path", value=path) from None
    if len(key) < MIN_KEY_BYTES:
        raise InvalidArgumentError(f"identity key {path!r} is shorter than {MIN_KEY_BYTES} "
                                   "bytes", field="identity_key_path", value=path)
    return key


def write_identity_key(path: str) -> None:
    """Create a new random key file readable by its owner only (refuses to overwrite)."""
    try:
        descriptor = os.open(os.path.expanduser(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o600)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot create identity key {path!r}: {exc.strerror}",
                                   field="identity_key_path", value=path) from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(os.urandom(32).hex().encode("ascii") + b"\n")


def identity_hasher(hash_identities: bool, identity_key_path: str) -> IdentityHasher | None:
    """The hasher the config asks for, or None when hashing is off."""
    return IdentityHasher(load_identity_key(identity_key_path)) if hash_identities else None


def read_run_queue_length(proc_root: str = "/proc") -> int:
    """Runnable tasks now (``procs_running``), less the one reading it."""
    path = os.path.join(proc_root, "stat")
    try:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("procs_running "):
                    return max(int(line.split()[1]) - 1, 0)
    except (OSError, ValueError) as exc:
        raise ProcUnavailableError(f"cannot read procs_running from {path}: {exc}",
                                   field="proc_root", value=proc_root) from None
    raise ProcUnavailableError(f"{path} has no procs_running line", field="proc_root",
                               value=proc_root)


def user_name(uid: int) -> str:
    """The login name of ``uid``, or the number as text."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class RunningSampler:
    """Snapshots of the local jobs (see the module doc for the rule)."""

    def __init__(self, processes: ProcessSource, process_filter: ProcessFilter, clock: Clock,
                 run_queue_length: Callable[[], int], *, max_jobs: int = 64,
                 min_core_share: float = MIN_CORE_SHARE,
                 hasher: Callable[[str], str] | None = None,
                 name_of_uid: Callable[[int], str] = user_name) -> None:
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise InvalidArgumentError(f"max_jobs must be a positive integer, got {max_jobs!r}",
                                       field="max_jobs", value=max_jobs)
        if isinstance(min_core_share, bool) or not isinstance(min_core_share, (int, float)) \
                or not 0.0 <= min_core_share <= 1.0:
            raise InvalidArgumentError(
                f"min_core_share must be a share of one core in [0, 1], got {min_core_share!r}",
                field="min_core_share", value=min_core_share)
        self.min_core_share = float(min_core_share)
        self.processes = processes
        self.classifier = ProcessClassifier(process_filter, processes)
        self.clock = clock
        self.run_queue_length = run_queue_length
        self.max_jobs = max_jobs
        self.hasher = hasher
        self.name_of_uid = name_of_uid
        self._previous: dict[ProcessKey, float] | None = None
        self._previous_epoch = 0.0

    def snapshot(self) -> RunningSnapshot:
        epoch = self.clock.now()
        processes = self.processes.snapshot()
        queue = self.run_queue_length()
        local = self.classifier.classify(processes).local
        previous = self._previous
        jobs = [info for key, info in processes.items()
                if key in local and self._is_job(info, previous, epoch)]
        self._previous = {key: processes[key].cpu_seconds for key in local}
        self._previous_epoch = epoch
        jobs.sort(key=lambda info: (-info.cpu_seconds, info.start_time, info.pid))
        kept = jobs[:self.max_jobs]
        return RunningSnapshot(epoch, queue, tuple(self._job(info, epoch) for info in kept),
                               len(jobs) - len(kept))

    def _is_job(self, info: ProcessInfo, previous: dict[ProcessKey, float] | None,
                epoch: float) -> bool:
        if info.state == "R":
            return True
        if previous is None:
            return False
        then = previous.get(info.key)
        if then is None:
            return info.start_time >= self._previous_epoch and info.cpu_seconds > 0
        used = info.cpu_seconds - then
        # share 0: any CPU at all (the rule before the share; the clock may not have moved)
        return used > 0 and used >= self.min_core_share * (epoch - self._previous_epoch)

    def _job(self, info: ProcessInfo, epoch: float) -> RunningJob:
        user, command = self.name_of_uid(info.uid), info.name
        if self.hasher is not None:
            user, command = self.hasher(user), self.hasher(command)
        return RunningJob(info.cpu_seconds, max(epoch - info.start_time, 0.0), command, user)
