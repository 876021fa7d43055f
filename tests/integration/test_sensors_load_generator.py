"""Real processes: a Poisson stream of CPU-bound jobs measured by the sensor (root, slow).

A generator process, running as an otherwise unused uid and pinned to one core, forks jobs at
about 2 per second, each burning an exponential CPU demand of mean 0.1 s. Two sensors with
the user filter restricted to that uid measure the same 32 s interval: one reads kernel
accounting, the other uses the fork-counter fallback. Ground truth comes from the generator:
the fork time of every job and its CPU time as ``wait4`` reports it.

The fork counter counts every task the kernel creates (every user, threads included) and
cannot be restricted to one user, so the fallback's lambda is checked against what it can
honestly promise: it sees at least the generator's jobs and at most every task created on
the machine in the interval; its error against the generator's rate (the other users' and
threads' task creations) is printed, not asserted. Its rho (per-user CPU through reaped
children's time) is held to the same 0.05 as with accounting.
"""

from __future__ import annotations

import json
import os
import random
import resource  # noqa: F401 - os.wait4 needs it, and the generator's uid cannot load it
import signal
import statistics
import time
import traceback

import pytest

from ghs.experiments.live_owners import fork_poisson_jobs
from ghs.experiments.live_owners import unused_uid as find_unused_uid
from sensors.accounting_control import AccountingSession
from sensors.clock import SystemClock
from sensors.cpu import ProcStatSource
from sensors.errors import AccountingInUseError
from sensors.measurement import HostSensor
from sensors.processes import ProcfsProcessSource, build_filter

pytestmark = [pytest.mark.root, pytest.mark.slow]

RATE_PER_SECOND = 2.0
MEAN_DEMAND_SECONDS = 0.1
WARM_UP_SECONDS = 4.0
MEASURE_SECONDS = 32.0
SEED = 20240611


def unused_uid() -> int:
    uid = find_unused_uid()
    if uid is None:
        pytest.skip("no unused uid for the generator")
    return uid


def generator(uid: int, core: int, duration_seconds: float, write_fd: int) -> None:
    """Runs in a forked child: become ``uid`` on one core, fork Poisson jobs, report them."""
    os.sched_setaffinity(0, {core})
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    rng = random.Random(SEED)
    start = time.time()
    done = fork_poisson_jobs(start + rng.expovariate(RATE_PER_SECOND), start + duration_seconds,
                             lambda _: rng.expovariate(RATE_PER_SECOND),
                             lambda: rng.expovariate(1.0 / MEAN_DEMAND_SECONDS))
    with os.fdopen(write_fd, "w") as out:
        json.dump(done, out)


def start_generator(uid: int, core: int, seconds: float) -> tuple[int, int]:
    """Fork the generator for ``seconds``; (its pid, the read end of its report pipe)."""
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the generator process
        code = 1
        try:
            os.close(read_fd)
            generator(uid, core, seconds, write_fd)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_fd)
    return child, read_fd


def fork_counter() -> int:
    with open("/proc/stat", encoding="ascii") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("processes "))


def test_poisson_jobs_are_measured_with_accounting_and_with_the_fork_counter(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: runs jobs as another user and switches accounting on")
    uid = unused_uid()
    core = max(os.sched_getaffinity(0))
    child, read_fd = start_generator(uid, core, WARM_UP_SECONDS + MEASURE_SECONDS + 3.0)
    try:
        try:
            session = AccountingSession("on", own_path=str(tmp_path / "pacct")).__enter__()
        except AccountingInUseError as exc:
            pytest.skip(f"cannot use accounting here: {exc.message}")
        try:
            # Not exclude_pids=[os.getpid()]: the generator is this process's child, and an
            # agent's descendants are never local load.
            rules = build_filter(users_allow=[uid])
            clock = SystemClock()
            processes, cpu = ProcfsProcessSource(), ProcStatSource()
            counted = HostSensor(processes=processes, cpu=cpu, accounting=session.reader,
                                 clock=clock, process_filter=rules)
            forked = HostSensor(processes=processes, cpu=cpu, accounting=None, clock=clock,
                                process_filter=rules)
            time.sleep(WARM_UP_SECONDS)
            forks_before = fork_counter()
            start_counted, start_forked = counted.begin(), forked.begin()
            time.sleep(MEASURE_SECONDS)
            with_accounting = counted.end(start_counted)
            fallback = forked.end(start_forked)
            forks_after = fork_counter()
        finally:
            session.__exit__(None, None, None)
        with os.fdopen(read_fd, "r") as report:
            jobs = json.load(report)
        _, status = os.waitpid(child, 0)
        assert status == 0
    finally:
        try:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    t1, t2 = with_accounting.start_time, with_accounting.end_time
    seconds = with_accounting.interval_seconds
    arrived = [job for job in jobs if t1 < job["forked"] <= t2]
    ended = [job for job in jobs if t1 < job["ended"] <= t2]
    lam_true = len(arrived) / seconds
    mean_true = statistics.fmean(job["cpu"] for job in ended)
    rho_true = sum(job["cpu"] for job in arrived) / (seconds * with_accounting.cores)
    m = with_accounting
    lines = [f"truth: lam {lam_true:.3f}/s mean demand {mean_true:.4f} s rho {rho_true:.4f} "
             f"({len(arrived)} arrivals, {len(ended)} exits in {seconds:.1f} s)"]
    lines.append(f"accounting: lam {m.lam:.3f} ({m.lam / lam_true - 1:+.1%}) mean demand "
                 f"{m.mean_service_seconds:.4f} ({m.mean_service_seconds / mean_true - 1:+.1%}) "
                 f"rho {m.rho:.4f} ({m.rho - rho_true:+.4f}) quality {m.quality}")
    f = fallback
    background = (forks_after - forks_before - len(arrived)) / seconds
    lines.append(f"fork counter: lam {f.lam:.3f} ({f.lam / lam_true - 1:+.1%}) mean demand "
                 f"{f.mean_service_seconds:.4f} "
                 f"({f.mean_service_seconds / mean_true - 1:+.1%}) rho {f.rho:.4f} "
                 f"({f.rho - rho_true:+.4f}); other tasks created: {background:.3f}/s")
    print("\n" + "\n".join(lines))

    assert len(arrived) >= 40
    assert m.lambda_source == "accounting" and m.rho_source == "processes"
    assert m.lam == pytest.approx(lam_true, rel=0.10)
    assert m.mean_service_seconds == pytest.approx(mean_true, rel=0.15)
    assert m.rho == pytest.approx(rho_true, abs=0.05)

    assert f.lambda_source == "fork_counter" and "lambda_unfiltered" in f.quality
    assert f.rho == pytest.approx(rho_true, abs=0.05)
    assert f.lam >= 0.9 * lam_true
    assert f.lam * seconds <= (forks_after - forks_before) + 1
