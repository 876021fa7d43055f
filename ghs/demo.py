"""``ghs demo``: the whole system on this machine, in about a minute.

A manager, a real agent measuring this machine and an agent running a dozen simulated
heterogeneous workstations on a clock 3600 times faster, all real processes talking ZeroMQ
over loopback. Once every simulated workstation has 24 hours of history, it asks the manager
for the host table, a prediction and a schedule, then stops everything with SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from ghs.answers import Answer
from ghs.client import Client, Status
from ghs.errors import GhsError
from ghs.launch import exited_early, free_loopback_endpoint, wait_for_manager

DAY_HOURS = 24.0


class DemoError(GhsError):
    """The demo could not bring its daemons up or they did not report in time."""

    code = "demo_failed"


@dataclass(frozen=True)
class DemoResult:
    status: Status
    prediction: Answer
    plan: Answer
    endpoint: str
    seconds: float


def _ghs(*args: str) -> list[str]:
    return [sys.executable, "-m", "ghs", *args]


def _start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env,
                            stdin=subprocess.DEVNULL)


def _stop(processes: list[subprocess.Popen], timeout: float = 15.0) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _stop_strays(folder: Path, timeout: float = 15.0) -> None:
    """Stop this process's children whose command line names ``folder``: a daemon an
    interrupt caught while it was being started (the child runs once Popen has forked, but
    Popen never returned for it to be recorded and stopped by :func:`_stop`)."""
    mark = str(folder)
    strays = []
    for child in psutil.Process().children():
        try:
            if any(mark in part for part in child.cmdline()):
                child.terminate()
                strays.append(child)
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(strays, timeout=timeout)
    for child in alive:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=timeout)


def run_demo(*, simulated: int = 12, speedup: float = 3600.0, seed: int = 7,
             work_seconds: float = 8 * 3600.0, timeout_seconds: float = 120.0,
             real_interval_seconds: float = 5.0,
             progress: Callable[[float, Status | None], None] | None = None) -> DemoResult:
    """Run the demo; ``progress(fraction, status)`` is called while history fills.

    Its daemons are stopped and its temporary folder removed on every way out of here,
    including KeyboardInterrupt (the CLI turns SIGTERM into one).
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ghs-demo-") as folder:
        root = Path(folder)
        env = {**os.environ, "GHS_CONFIG": str(root / "none.toml"), "HOME": str(root)}
        (root / "none.toml").write_text("")
        processes: list[subprocess.Popen] = []
        try:
            endpoint = free_loopback_endpoint()
            manager = _start(_ghs("manager", "--endpoint", endpoint,
                                  "--database", str(root / "manager.sqlite")),
                             root / "manager.log", env)
            processes.append(manager)
            try:
                wait_for_manager(manager, endpoint, 30.0, root / "manager.log")
            except GhsError as exc:
                raise DemoError(exc.message) from None
            # the real host measures back to back so it shows up within the demo's minute;
            # accounting stays in auto mode: the demo never takes over the kernel's file
            real_env = {**env, "GHS_SENSOR_MAX_PER_HOUR": str(int(3600 // real_interval_seconds)),
                        "GHS_SENSOR_ACCOUNTING": "auto"}
            processes.append(_start(_ghs(
                "agent", "--manager", endpoint, "--interval", f"{real_interval_seconds:g}s",
                "--outbox", str(root / "real-outbox.sqlite"), "--store",
                str(root / "real-store.sqlite")), root / "agent-real.log",
                real_env))
            processes.append(_start(_ghs(
                "agent", "--manager", endpoint, "--simulate", str(simulated), "--speedup",
                f"{speedup:g}", "--seed", str(seed), "--host-id", "lab",
                "--outbox", str(root / "sim-outbox.sqlite")), root / "agent-sim.log", env))
            with Client(endpoint, timeout_seconds=20.0) as client:
                status = _wait_for_history(client, processes, root, simulated, started,
                                           timeout_seconds, progress)
                prediction = client.predict_answer(work_seconds)
                # the default method (auto), as a user's ``ghs schedule`` gets it
                plan = client.schedule_answer(work_seconds)
                status = client.status()
        finally:
            _stop(processes)
            _stop_strays(root)
        return DemoResult(status, prediction, plan, endpoint, time.monotonic() - started)


def _wait_for_history(client: Client, processes: list[subprocess.Popen], root: Path,
                      simulated: int, started: float, timeout: float,
                      progress: Callable[[float, Status | None], None] | None) -> Status:
    while True:
        exited = exited_early(processes, root)
        if exited is not None:
            raise DemoError(f"a demo daemon exited early {exited}")
        status = client.status()
        simulated_rows = [row for row in status.hosts if row.get("simulated")]
        history = min((row.get("history_hours", 0.0) for row in simulated_rows), default=0.0)
        fraction = min(1.0, history / DAY_HOURS) if len(simulated_rows) == simulated else 0.0
        if progress is not None:
            progress(fraction, status)
        real_rows = [row for row in status.hosts if not row.get("simulated")]
        real_reported = any(row.get("measurements", 0) > 0 for row in real_rows)
        history_done = fraction >= 1.0 and all(not row.get("provisional")
                                               for row in simulated_rows)
        # this machine's agent starts slower (speed benchmark, accounting probe) on a busy
        # machine: give it a little longer to report once the lab is ready
        if history_done and (real_reported or time.monotonic() - started > timeout / 2):
            return status
        if time.monotonic() - started > timeout:
            raise DemoError(f"the simulated hosts did not reach {DAY_HOURS:g} h of history "
                            f"within {timeout:g} s (at {history:.1f} h)")
        time.sleep(0.5)
