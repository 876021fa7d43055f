"""The owners of ``ghs experiment live``: a real local workload as an unused uid on one core.

A forked generator process leaves this process's session, becomes an otherwise unused uid,
pins itself to one core and forks CPU-bound jobs at Poisson arrivals. Each job burns a
heavy-tailed CPU demand (lognormal, coefficient of variation ``DEMAND_COV``, cut at
``MAX_DEMAND_FACTOR`` times the mean). The arrival rate gives each phase its utilisation of
that core: ``utilisations[0]`` for the first half of the run, ``utilisations[1]`` after.
When the run ends, the generator reaps its jobs and writes each one's fork time, exit time,
drawn demand and CPU time (``wait4``) as JSON on a pipe.

Forking (not exec'ing an interpreter) is deliberate: the unused uid may not be able to read
this interpreter's installation, and the generator needs only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pwd
import random
import resource  # noqa: F401 - os.wait4 needs it, and the generator's uid cannot load it
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ghs.errors import GhsError

DEMAND_COV = 2.0
MAX_DEMAND_FACTOR = 30.0
_UID_RANGE = (64_100, 65_000)


class OwnersError(GhsError):
    """The owners' workload could not start or did not report."""

    code = "owners_failed"


def unused_uid(proc_root: str = "/proc") -> int | None:
    """A uid no account and no running process uses (None if the range is exhausted)."""
    busy = set()
    for name in os.listdir(proc_root):
        if name.isdigit():
            try:
                with open(f"{proc_root}/{name}/status", "rb") as handle:
                    for line in handle:
                        if line.startswith(b"Uid:"):
                            busy.add(int(line.split()[1]))
            except OSError:
                continue
    low, high = _UID_RANGE
    for uid in range(low + os.getpid() % 400, high):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in busy:
                return uid
    return None


@dataclass(frozen=True)
class OwnerPlan:
    """What the owners do: ``utilisations`` (first half, second half) of one core,
    ``mean_demand_seconds`` per job, for ``duration_seconds``."""

    uid: int
    core: int
    duration_seconds: float
    utilisations: tuple[float, float]
    mean_demand_seconds: float
    seed: int

    def rate_per_second(self, phase: int) -> float:
        return self.utilisations[phase] / self.mean_demand_seconds


def _demand(rng: random.Random, mean: float) -> float:
    sigma = math.sqrt(math.log1p(DEMAND_COV**2))
    value = rng.lognormvariate(math.log(mean) - sigma**2 / 2, sigma)
    return min(value, MAX_DEMAND_FACTOR * mean)


def reap_children(pending: dict, done: list, block: bool) -> None:
    """Collect ended jobs: ``pending`` maps pid -> (forked epoch s, demand s); each ended job
    goes to ``done`` with its pid, fork and end times (epoch s), demand and CPU used (s)."""
    while pending:
        try:
            pid, _, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        forked, demand = pending.pop(pid)
        done.append({"pid": pid, "forked": forked, "ended": time.time(), "demand": demand,
                     "cpu": usage.ru_utime + usage.ru_stime})


def burn_cpu(seconds: float) -> None:
    """Spin until this process has used ``seconds`` of CPU."""
    began = time.process_time()
    while time.process_time() - began < seconds:
        pass


def fork_poisson_jobs(first_arrival: float, end: float, next_gap: Callable[[float], float],
                      next_demand: Callable[[], float]) -> list[dict]:
    """Fork a CPU-bound job (``next_demand()`` CPU seconds) at each arrival (epoch seconds)
    from ``first_arrival`` until ``end``, the next ``next_gap(arrival)`` seconds later; wait
    for them all and return what :func:`reap_children` recorded of each."""
    arrival = first_arrival
    pending: dict[int, tuple[float, float]] = {}
    done: list[dict] = []
    while arrival < end:
        while (wait := arrival - time.time()) > 0:
            reap_children(pending, done, block=False)
            time.sleep(min(wait, 0.02))
        demand = next_demand()
        forked = time.time()
        pid = os.fork()
        if pid == 0:
            burn_cpu(demand)
            os._exit(0)
        pending[pid] = (forked, demand)
        arrival += next_gap(arrival)
    reap_children(pending, done, block=True)
    return done


def _generate(plan: OwnerPlan, write_fd: int) -> None:
    os.setsid()
    os.sched_setaffinity(0, {plan.core})
    os.setgroups([])
    os.setgid(plan.uid)
    os.setuid(plan.uid)
    rng = random.Random(plan.seed)
    start = time.time()
    middle = start + plan.duration_seconds / 2
    end = start + plan.duration_seconds
    # memoryless arrivals: after the change, the next gap is drawn at the new rate
    done = fork_poisson_jobs(
        start + rng.expovariate(plan.rate_per_second(0)), end,
        lambda arrival: rng.expovariate(plan.rate_per_second(0 if arrival < middle else 1)),
        lambda: _demand(rng, plan.mean_demand_seconds))
    with os.fdopen(write_fd, "w") as out:
        json.dump({"start": start, "middle": middle, "end": end, "jobs": done}, out)


class Owners:
    """The running generator: ``start`` forks it, ``report`` waits for its jobs, ``stop``
    kills its whole session (generator and jobs)."""

    def __init__(self, plan: OwnerPlan) -> None:
        self.plan = plan
        self.pid: int | None = None
        self._read_fd: int | None = None

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the generator process
            code = 1
            try:
                # an interrupt is the parent's to handle: it ends this whole session (stop)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                os.close(read_fd)
                _generate(self.plan, write_fd)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(write_fd)
        self.pid, self._read_fd = child, read_fd

    def report(self) -> dict:
        """The generator's record once it has finished (blocks until then)."""
        if self.pid is None or self._read_fd is None:
            raise OwnersError("the owners' generator was not started")
        with os.fdopen(self._read_fd, "r") as handle:
            text = handle.read()
        self._read_fd = None
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if status != 0 or not text:
            raise OwnersError(f"the owners' generator failed (wait status {status})")
        return json.loads(text)

    def stop(self) -> None:
        if self.pid is not None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:  # killed before it made its own session
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = None
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None


def job_summary(jobs: Sequence[dict], busy: Sequence[tuple[float, float]], start: float,
                end: float) -> dict:
    """Owners' jobs that met a remote task (ran while one of the ``busy`` (start, end)
    intervals was open) against those that did not: counts, mean response seconds and mean
    slowdown (response / CPU seconds); and the CPU the owners used per second of the span."""
    groups: dict[str, list[dict]] = {"with_remote": [], "without_remote": []}
    for job in jobs:
        met = any(a < job["ended"] and job["forked"] < b for a, b in busy)
        groups["with_remote" if met else "without_remote"].append(job)
    out: dict = {"jobs": len(jobs),
                 "utilisation": sum(j["cpu"] for j in jobs) / max(end - start, 1e-9)}
    for name, members in groups.items():
        response = [j["ended"] - j["forked"] for j in members]
        slowdown = [r / max(j["cpu"], 1e-3) for r, j in zip(response, members)]
        out[name] = {"jobs": len(members),
                     "mean_response_seconds": _mean(response),
                     "mean_slowdown": _mean(slowdown)}
    with_remote = out["with_remote"]["mean_slowdown"]
    without = out["without_remote"]["mean_slowdown"]
    out["slowdown_ratio"] = (with_remote / without if with_remote is not None and without
                             else None)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
