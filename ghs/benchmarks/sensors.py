"""The sensor's own cost: CPU share and peak memory of a sensor process sampling this machine.

:func:`sensor_overhead` starts ``python -m ghs.benchmarks.sensors`` as a child, which runs the
adaptive sampler with the default sensor settings (interval, hourly bounds; with no history
the first hour takes the upper bound, the most expensive steady state) and accounting on into
its own file, storing measurements in a temporary store. Beside it, as the agent runs them,
the child records the capacity series at its cadence (a thread of its own), takes a
running-jobs snapshot with each measurement and feeds the demand templates from a second
accounting reader at each capacity interval. The parent watches the child with
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
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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
        raise ValueError(f"duration_seconds must be > 0, got {duration_seconds!r}")
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


def _cpu_seconds(process: Any) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _child(duration_seconds: float, accounting: str, state_dir: str) -> None:
    from ghs.daemon import keep_numpy_out

    keep_numpy_out()  # as the real agent does: the sensor itself never needs numpy
    from ghs.config import SensorConfig
    from sensors.capacity import CapacityRecorder
    from sensors.clock import SystemClock
    from sensors.host import LocalSensor, options_from
    from sensors.sampler import AdaptiveSampler
    from sensors.store import SensorStore
    from sensors.templates import TemplateBook

    settings = SensorConfig()
    options = options_from(settings)
    options.update(accounting=accounting, accounting_path=os.path.join(state_dir, "pacct"))
    stop = threading.Event()
    clock = SystemClock(stop)
    with LocalSensor(clock=clock, exclude_pids=[os.getpid()], proc_root="/proc",
                     remove_accounting_file=True, **options) as local:
        store = SensorStore(os.path.join(state_dir, "sensor.db"),
                            retention_days=settings.retention_days)
        counts = {"capacity_intervals": 0, "running_snapshots": 0, "template_jobs": 0}
        running = local.running_sampler(max_jobs=settings.running_max_jobs)

        def on_measurement(_measurement: object) -> None:
            running.snapshot()
            counts["running_snapshots"] += 1

        sampler = AdaptiveSampler(local, store, clock, random.Random(1),
                                  interval_seconds=settings.interval_seconds,
                                  min_per_hour=settings.min_per_hour,
                                  max_per_hour=settings.max_per_hour,
                                  window_hours=settings.window_hours,
                                  on_measurement=on_measurement)
        capacity_source = local.capacity_source()
        recorder = CapacityRecorder(capacity_source, clock, settings.capacity_interval_seconds)
        feeder = local.template_feeder(
            TemplateBook(settings.template_half_life_seconds, max_keys=settings.template_max_keys),
            excluded_pids=capacity_source.excluded_pids)

        def on_interval(_interval: object) -> None:
            counts["capacity_intervals"] += 1
            if feeder is not None:
                counts["template_jobs"] += feeder.poll()
                feeder.book.take_updates()

        print("ready", flush=True)
        capacity = threading.Thread(target=recorder.run, args=(stop, on_interval), daemon=True)
        capacity.start()
        timer = threading.Timer(duration_seconds, stop.set)
        timer.start()
        sampler.run(stop=stop)
        capacity.join()
        print(json.dumps({
            **counts, "capacity_interval_seconds": settings.capacity_interval_seconds,
            "measurements": len(store.measurements()),
            "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "accounting": local.session.source,
            "interval_seconds": settings.interval_seconds,
            "max_per_hour": settings.max_per_hour,
        }), flush=True)
        store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="sensor process for sensor_overhead()")
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--accounting", choices=("on", "auto", "off"), required=True)
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
