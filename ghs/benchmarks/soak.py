"""Soak (``ghs bench --part soak``): simulated hosts for days of virtual time against one manager.

A real manager process and real agent processes simulating ``hosts`` workstations on a clock
``speedup`` times faster than real time run until ``days`` of virtual time have passed. Every
few real seconds the manager's resident memory (VmRSS) and its database's size on disk (file
plus WAL) are read; the result is both curves against virtual days, and what was stored, so a
reader can see them level off at the retention bounds (full-resolution series and
measurements: ``pcm.retention_days``; hourly sums: ``pcm.hourly_retention_days``).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ghs.benchmarks.manager import _start_manager

DAY_SECONDS = 86400.0


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _database_bytes(database: Path) -> int:
    return sum(path.stat().st_size for path in (database, database.with_name(
        database.name + "-wal")) if path.exists())


def run(hosts: int = 100, days: float = 10.0, speedup: float = 3600.0,
        sample_every_seconds: float = 2.0, retention_days: float = 8.0,
        agents: int = 4) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ghs-soak-") as folder:
        root = Path(folder)
        manager, endpoint = _start_manager(root, GHS_PCM_RETENTION_DAYS=str(retention_days))
        database = root / "manager.sqlite"
        # the hosts split over several agent processes, as over several machines (one
        # Python process cannot simulate a hundred hosts at this speed alone)
        shares = [hosts // agents + (k < hosts % agents) for k in range(agents)]
        fleet = [subprocess.Popen(
            [sys.executable, "-m", "ghs", "agent", "--manager", endpoint, "--simulate",
             str(count), "--speedup", str(speedup), "--seed", str(k + 1), "--host-id",
             f"soak{k}", "--outbox", str(root / f"outbox{k}.sqlite")],
            stdout=(root / f"agent{k}.log").open("w"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env={**os.environ, "GHS_CONFIG": str(root / "none.toml"),
                                           "HOME": str(root)})
            for k, count in enumerate(shares) if count]
        started = time.monotonic()
        curve = []
        try:
            while True:
                elapsed = time.monotonic() - started
                virtual_days = elapsed * speedup / DAY_SECONDS
                curve.append({"virtual_days": round(virtual_days, 3),
                              "manager_rss_mb": _rss_bytes(manager.pid) / 1e6,
                              "database_mb": _database_bytes(database) / 1e6})
                if virtual_days >= days or any(a.poll() is not None for a in fleet):
                    break
                time.sleep(sample_every_seconds)
        finally:
            for agent in fleet:
                agent.terminate()
            for agent in fleet:
                agent.wait(60)
            manager.terminate()
            manager.wait(60)
        stored = _stored(database)
        stored["outbox_backlog"] = sum(_outbox_backlog(root / f"outbox{k}.sqlite")
                                       for k in range(len(fleet)))
        return {"hosts": hosts, "agents": len(fleet), "days": days, "speedup": speedup,
                "retention_days": retention_days, "real_seconds": time.monotonic() - started,
                "curve": curve, "stored": stored,
                "agent_exits": [agent.returncode for agent in fleet]}


def _stored(database: Path) -> dict[str, Any]:
    with sqlite3.connect(database) as connection:
        count = {table: connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                 for table in ("measurements", "capacity", "capacity_hourly", "running")}
        # each host's own window: the retention counts back from its own latest record
        span = connection.execute(
            "SELECT MAX(span) FROM (SELECT (MAX(end_ms) - MIN(end_ms)) / 86400000.0 AS span "
            "FROM capacity GROUP BY host_key)").fetchone()[0]
        try:
            tables = dict(connection.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY "
                                             "name").fetchall())
        except sqlite3.Error:
            tables = {}
    return {"rows": count, "capacity_span_days": span,
            "table_mb": {name: size / 1e6 for name, size in tables.items()
                         if size > 100_000}}


def _outbox_backlog(outbox: Path) -> int:
    """Records the agent had not yet delivered when the soak stopped (it fell behind if >0)."""
    with sqlite3.connect(outbox) as connection:
        return connection.execute("SELECT COUNT(*) FROM outbox").fetchone()[0]


def show(console: Any, results: dict[str, Any]) -> None:
    curve = results["curve"]
    console.print(f"soak: {results['hosts']} simulated hosts ({results['agents']} agents), "
                  f"{results['days']:g} virtual days "
                  f"at {results['speedup']:g}x in {results['real_seconds']:.0f} s; retention "
                  f"{results['retention_days']:g} days")
    marks = []
    for day in range(int(results["days"]) + 1):
        point = min(curve, key=lambda p: abs(p["virtual_days"] - day))
        marks.append(f"day {point['virtual_days']:.1f}: RSS {point['manager_rss_mb']:.0f} MB, "
                     f"database {point['database_mb']:.1f} MB")
    for line in marks:
        console.print(f"  {line}")
    stored = results["stored"]
    console.print(f"  stored at the end: {stored['rows']}; a host's full-resolution capacity "
                  f"spans at most {stored['capacity_span_days'] or 0:.2f} days; records still "
                  f"in the agent's outbox: {stored['outbox_backlog']:,}")
