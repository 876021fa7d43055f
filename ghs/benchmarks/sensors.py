"""The sensor's own cost: CPU share and peak memory of a sensor process sampling this machine.

:func:`sensor_overhead` starts ``python -m ghs.benchmarks.sensors`` as a child, which runs the
adaptive sampler with the default sensor settings (interval, hourly bounds; with no history
the first hour takes the upper bound, the most expensive steady state) and accounting on into
its own file, storing measurements in a temporary store. It runs the agent's own host code
(``ghs.agent.hosts.local_host``): beside the sampler, the capacity series at its cadence with a
running-jobs snapshot and the demand templates (from a second accounting reader) each
interval, every record written into an outbox as the agent does (nothing is sent). The parent
watches the child with
psutil: CPU seconds between the child's "ready" (imports and set-up done) and "done" lines
over the wall time between them, and the peak resident set size.

Target (issue 3): under 0.1 % of one core on average and under 40 MB resident, with
accounting on. Accounting 'on' needs root; otherwise the child runs with accounting off and
the result says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ghs.config import ACCOUNTING_MODES
from ghs.errors import GhsError

_MB = 1024 * 1024


def sensor_overhead(duration_seconds: float, *, accounting: str = "on",
                    python: str = sys.executable) -> dict[str, Any]:
    """Run a sensor for ``duration_seconds`` and report its CPU % of one core and peak RSS MB.

    Keys: duration_seconds, cpu_percent (steady state, after start-up), cpu_seconds,
    startup_cpu_seconds, peak_rss_mb (including start-up), rss_mb (at the end), measurements,
    capacity_intervals, running_snapshots, template_jobs, accounting (own/shared/none), note.
    """
    import psutil

    if not duration_seconds > 0:
        raise GhsError(f"the sensor run must last more than 0 s, got {duration_seconds!r}",
                       field="duration_seconds", value=duration_seconds)
    note = ""
    if accounting == "on" and os.geteuid() != 0:
        accounting, note = "off", "not root: accounting off"
    with tempfile.TemporaryDirectory(prefix="ghs-sensor-bench-") as state_dir:
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        child = subprocess.Popen(
            [python, "-m", "ghs.benchmarks.sensors", "--duration", str(duration_seconds),
             "--accounting", accounting, "--state-dir", state_dir],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        watched = psutil.Process(child.pid)
        peak_rss = last_rss = 0
        stop = threading.Event()

        def watch_memory() -> None:
            nonlocal peak_rss, last_rss
            while not stop.is_set():
                try:
                    last_rss = watched.memory_info().rss
                except psutil.Error:
                    return
                peak_rss = max(peak_rss, last_rss)
                stop.wait(0.2)

        watcher = threading.Thread(target=watch_memory, daemon=True)
        watcher.start()
        try:
            ready = child.stdout.readline()
            if ready.strip() != "ready":
                child.wait(30)
                raise RuntimeError(f"sensor benchmark child failed: {child.stderr.read()[-2000:]}")
            started, cpu_started = time.monotonic(), _cpu_seconds(watched)
            done = child.stdout.readline()
            ended, cpu_ended = time.monotonic(), _cpu_seconds(watched)
            steady_rss = watched.memory_info().rss
            child.wait(60)
        finally:
            stop.set()
            watcher.join()
            if child.poll() is None:
                child.kill()
                child.wait()
        if not done.strip():
            raise RuntimeError(f"sensor benchmark child failed: {child.stderr.read()[-2000:]}")
    report = json.loads(done)
    steady = cpu_ended - cpu_started
    return {
        "duration_seconds": ended - started,
        "cpu_percent": 100.0 * steady / (ended - started),
        "cpu_seconds": steady,
        "startup_cpu_seconds": cpu_started,
        "peak_rss_mb": max(peak_rss, steady_rss, report["maxrss_kib"] * 1024) / _MB,
        "rss_mb": steady_rss / _MB,
        "measurements": report["measurements"],
        "capacity_intervals": report["capacity_intervals"],
        "capacity_interval_seconds": report["capacity_interval_seconds"],
        "running_snapshots": report["running_snapshots"],
        "template_jobs": report["template_jobs"],
        "interval_seconds": report["interval_seconds"],
        "max_per_hour": report["max_per_hour"],
        "accounting": report["accounting"],
        "note": note,
    }


def _peak_rss_kib() -> int:
    """This process's own peak resident set (VmHWM). Not getrusage's ru_maxrss: Linux carries
    that across execve, so a child started by a large process (a test run) reports its
    parent's peak."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _cpu_seconds(process: Any) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _child(duration_seconds: float, accounting: str, state_dir: str) -> None:
    from ghs.daemon import keep_numpy_out

    keep_numpy_out()  # as the real agent does: the sensor itself never needs numpy
    import dataclasses

    from ghs.agent.hosts import local_host
    from ghs.agent.outbox import Outbox
    from ghs.config import SensorConfig

    settings = dataclasses.replace(SensorConfig(), accounting=accounting,
                                   accounting_path=os.path.join(state_dir, "pacct"))
    stop = threading.Event()
    # the agent's own host code, writing into an outbox as the agent does (nothing is sent)
    outbox = Outbox(os.path.join(state_dir, "outbox.sqlite"))
    host = local_host(settings, host_id="bench", store_path=os.path.join(state_dir, "store.db"),
                      stop=stop, sink=outbox, seed=1)
    try:
        threads = [threading.Thread(target=loop, args=(stop,), daemon=True)
                   for _, loop in host.tasks()]
        print("ready", flush=True)
        for thread in threads:
            thread.start()
        stop.wait(duration_seconds)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        counts = {stream: outbox.count(stream=stream)
                  for stream in ("measurements", "capacity", "running", "templates")}
        feeder = host.streams.feeder if host.streams is not None else None
        print(json.dumps({
            "capacity_intervals": counts["capacity"], "running_snapshots": counts["running"],
            "template_updates": counts["templates"],
            "template_jobs": 0 if feeder is None else feeder.records_read,
            "capacity_interval_seconds": settings.capacity_interval_seconds,
            "measurements": counts["measurements"],
            "maxrss_kib": _peak_rss_kib(),
            "accounting": host.accounting_source,
            "interval_seconds": settings.interval_seconds,
            "max_per_hour": settings.max_per_hour,
        }), flush=True)
    finally:
        host.close()
        outbox.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="sensor process for sensor_overhead()")
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--accounting", choices=ACCOUNTING_MODES, required=True)
    parser.add_argument("--state-dir", required=True)
    arguments = parser.parse_args()
    _child(arguments.duration, arguments.accounting, arguments.state_dir)


def show(console: Any, result: dict[str, Any]) -> None:
    """One line of the sensor's overhead, as ``ghs bench --part sensors`` prints it."""
    console.print(
        f"sensor: {result['cpu_percent']:.3f}% of one core over "
        f"{result['duration_seconds']:.0f} s, peak {result['peak_rss_mb']:.1f} MB resident, "
        f"{result['measurements']} measurements, {result['capacity_intervals']} capacity "
        f"intervals, {result['running_snapshots']} running snapshots, "
        f"{result['template_jobs']} template jobs, accounting {result['accounting']}"
        + (f" ({result['note']})" if result.get("note") else ""))
