"""Manager throughput and fan-in (``ghs bench --manager``).

- store: measurements committed per second by ``ManagerStore`` (WAL, synchronous=FULL,
  batches of 1,000 rows)
  against the straightforward way, one transaction per measurement, in the same process;
- stream: a real ``ghs manager`` process fed by agents' DEALER sockets in this process,
  measurements per second stored and acknowledged end to end, and per second of the
  manager's own CPU time;
- fan-in: 1,000 agents connected at once, each saying hello and sending its measurements;
  every (host, seq) must end up stored exactly once;
- capacity: 1,000 agents' capacity series (and running-jobs snapshots) at one record a
  minute each, sent as fast as the manager takes them: the manager process's CPU seconds per
  record, and what that is at the real cadence as a share of one core;
- bytes: what a host-week of capacity (full resolution) and running snapshots take on disk.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import zmq

from ghs.launch import free_loopback_endpoint, wait_for_manager
from ghs.manager.store import ManagerStore
from protocol import (
    Ack,
    Hello,
    Measurement,
    MeasurementBatch,
    RecordBatch,
    decode,
    encode,
)


def _measurement(seq: int) -> Measurement:
    return Measurement(seq=seq, start_epoch_seconds=1.0e9 + 30 * seq,
                       end_epoch_seconds=1.0e9 + 30 * seq + 30, lam_per_second=0.01, rho=0.2,
                       service_count=2, service_cpu_seconds_sum=3.0,
                       service_cpu_seconds_sum_squares=5.0, busy_cpu_seconds=12.0,
                       jobs_started=1, jobs_between=1, running_processes=3)


def _row(host: str, seq: int) -> dict[str, Any]:
    m = _measurement(seq)
    row = {name: getattr(m, name, None) for name in m.__dataclass_fields__}
    row.update(host_id=host, quality="", received_epoch_seconds=time.time())
    return row


def bench_store(folder: Path, count: int = 200_000) -> dict[str, Any]:
    store = ManagerStore(folder / "store.sqlite")
    rows = [_row(f"h{i % 100}", i) for i in range(count)]
    started = time.perf_counter()
    for start in range(0, count, 1000):
        store.add_measurements(rows[start:start + 1000])
    batched = count / (time.perf_counter() - started)
    one_each = ManagerStore(folder / "baseline.sqlite")
    sample = rows[:2000]
    started = time.perf_counter()
    for row in sample:
        one_each.add_measurements([row])
    baseline = len(sample) / (time.perf_counter() - started)
    stored = store.count()
    store.close()
    one_each.close()
    return {"measurements": count, "per_second": batched, "baseline_per_second": baseline,
            "speedup": batched / baseline, "stored": stored}


def _start_manager(folder: Path, **env: str) -> tuple[subprocess.Popen, str]:
    log = folder / "manager.log"
    (folder / "none.toml").write_text("")
    endpoint = free_loopback_endpoint()
    process = subprocess.Popen(
        [sys.executable, "-m", "ghs", "manager", "--endpoint", endpoint,
         "--database", str(folder / "manager.sqlite")],
        stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={"GHS_CONFIG": str(folder / "none.toml"), "PATH": "/usr/bin:/bin",
             "HOME": str(folder), **env})
    try:
        wait_for_manager(process, endpoint, 30.0, log)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process, endpoint


def _dealers(context: zmq.Context, endpoint: str, count: int) -> list[zmq.Socket]:
    sockets = []
    for _ in range(count):
        socket = context.socket(zmq.DEALER)
        socket.linger = 0
        socket.rcvhwm = socket.sndhwm = 10_000
        socket.connect(endpoint)
        sockets.append(socket)
    return sockets


def _hello(socket: zmq.Socket, host: str) -> None:
    socket.send(encode(Hello(request_id=1, host_id=host, hostname=host, cores=1, tau=1.0,
                             os="bench", agent_version="bench")))


def _collect(sockets: list[zmq.Socket], expected: int, timeout: float) -> int:
    poller = zmq.Poller()
    for socket in sockets:
        poller.register(socket, zmq.POLLIN)
    seen = 0
    deadline = time.monotonic() + timeout
    while seen < expected and time.monotonic() < deadline:
        for socket, _ in poller.poll(200):
            while True:
                try:
                    reply = decode(socket.recv(zmq.NOBLOCK))
                except zmq.Again:
                    break
                if isinstance(reply, Ack):
                    seen += 1
    return seen


def bench_stream(folder: Path, agents: int = 8, batches: int = 40, batch_size: int = 500
                 ) -> dict[str, Any]:
    process, endpoint = _start_manager(folder)
    context = zmq.Context()
    try:
        sockets = _dealers(context, endpoint, agents)
        for index, socket in enumerate(sockets):
            _hello(socket, f"stream{index}")
        _collect(sockets, agents, 30)
        payloads = [[encode(MeasurementBatch(
            request_id=2 + b, host_id=f"stream{index}", measurements=tuple(
                _measurement(b * batch_size + k) for k in range(batch_size))))
            for b in range(batches)] for index in range(agents)]
        # the manager's own CPU time too: on a shared machine wall time says more about the
        # neighbours than about the manager
        manager_cpu = psutil.Process(process.pid)
        cpu_before = sum(manager_cpu.cpu_times()[:2])
        started = time.perf_counter()
        for b in range(batches):
            for index, socket in enumerate(sockets):
                socket.send(payloads[index][b])
        acked = _collect(sockets, agents * batches, 120)
        seconds = time.perf_counter() - started
        cpu_seconds = sum(manager_cpu.cpu_times()[:2]) - cpu_before
    finally:
        context.destroy(linger=0)
        process.terminate()
        process.wait(30)
    total = agents * batches * batch_size
    stored = _count(folder / "manager.sqlite")
    return {"agents": agents, "measurements": total, "seconds": seconds,
            "per_second": total / seconds, "acked_batches": acked, "stored": stored,
            "manager_cpu_seconds": cpu_seconds,
            "per_manager_cpu_second": total / max(cpu_seconds, 1e-9)}


def bench_fan_in(folder: Path, agents: int = 1000, per_agent: int = 10) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 4 * agents + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    process, endpoint = _start_manager(folder)
    context = zmq.Context()
    context.set(zmq.MAX_SOCKETS, 4 * agents + 256)
    try:
        started = time.perf_counter()
        sockets = _dealers(context, endpoint, agents)
        for index, socket in enumerate(sockets):
            _hello(socket, f"agent{index:04d}")
        hellos = _collect(sockets, agents, 120)
        for index, socket in enumerate(sockets):
            socket.send(encode(MeasurementBatch(
                request_id=2, host_id=f"agent{index:04d}",
                measurements=tuple(_measurement(k) for k in range(per_agent)))))
        acked = _collect(sockets, agents, 120)
        seconds = time.perf_counter() - started
    finally:
        context.destroy(linger=0)
        process.terminate()
        process.wait(30)
    with sqlite3.connect(folder / "manager.sqlite") as connection:
        per_host = dict(connection.execute(
            "SELECT host_id, COUNT(DISTINCT seq) FROM measurements GROUP BY host_id"))
    exactly_once = len(per_host) == agents and all(n == per_agent for n in per_host.values())
    return {"agents": agents, "hellos_acked": hellos, "batches_acked": acked,
            "stored": sum(per_host.values()), "expected": agents * per_agent,
            "exactly_once": exactly_once, "seconds": seconds}


def _process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _capacity_record(seq: int, cores: int) -> dict[str, Any]:
    end = 1.0e9 + 60.0 * (seq + 1)
    per_core = [20.0 + (seq * 7 + core * 13) % 40 for core in range(cores)]
    return {"seq": seq, "start_epoch_seconds": end - 60.0, "end_epoch_seconds": end,
            "available_cpu_seconds": sum(per_core), "per_core_available_cpu_seconds": per_core}


def _running_record(seq: int) -> dict[str, Any]:
    return {"seq": seq, "epoch_seconds": 1.0e9 + 60.0 * (seq + 1), "run_queue_length": 2,
            "jobs": [{"cpu_seconds": 12.5 + seq, "wall_seconds": 30.0 + seq, "command": "make",
                      "user": "ann"}, {"cpu_seconds": 0.5, "wall_seconds": 2.0,
                                       "command": "cc1", "user": "ann"}]}


def bench_capacity(folder: Path, hosts: int = 1000, minutes: int = 30) -> dict[str, Any]:
    """A real manager fed ``minutes`` rounds of one capacity record and one running snapshot
    per host, one host per agent socket."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * hosts + 256)), hard))
    process, endpoint = _start_manager(folder)
    context = zmq.Context()
    context.set(zmq.MAX_SOCKETS, 4 * hosts + 256)
    figures: dict[str, Any] = {"hosts": hosts, "minutes": minutes}
    try:
        sockets = _dealers(context, endpoint, hosts)
        for index, socket in enumerate(sockets):
            _hello(socket, f"cap{index:04d}")
        _collect(sockets, hosts, 120)
        for stream, make in (("capacity", lambda seq: _capacity_record(seq, 4)),
                             ("running", _running_record)):
            payloads = [[encode(RecordBatch(request_id=10 + minute, host_id=f"cap{index:04d}",
                                            stream=stream, records=(make(minute),)))
                         for index in range(hosts)] for minute in range(minutes)]
            before = _process_cpu_seconds(process.pid)
            started = time.perf_counter()
            for minute in range(minutes):
                for index, socket in enumerate(sockets):
                    socket.send(payloads[minute][index])
                _collect(sockets, hosts, 120)
            seconds = time.perf_counter() - started
            cpu = _process_cpu_seconds(process.pid) - before
            records = hosts * minutes
            figures[stream] = {
                "records": records, "seconds": seconds, "manager_cpu_seconds": cpu,
                "cpu_seconds_per_record": cpu / records,
                # 1,000 hosts at one record a minute each
                "core_percent_at_1000_hosts_per_minute": 100.0 * cpu / records * 1000 / 60.0}
    finally:
        context.destroy(linger=0)
        process.terminate()
        process.wait(30)
    return figures


def bench_bytes(folder: Path, hosts: int = 20) -> dict[str, Any]:
    """Disk bytes per host-week: a week of one-minute capacity rows (1 and 8 cores) and the
    running snapshots that retention keeps of a week of one-a-minute snapshots."""
    week = 7 * 24 * 60
    figures: dict[str, Any] = {}
    for label, cores, stream in (("capacity_1_core", 1, "capacity"),
                                 ("capacity_8_cores", 8, "capacity"),
                                 ("running", 1, "running")):
        store = ManagerStore(folder / f"{label}.sqlite")
        for host in range(hosts):
            for start in range(0, week, 1000):
                records = [_capacity_record(seq, cores) if stream == "capacity"
                           else _running_record(seq) for seq in range(start,
                                                                     min(week, start + 1000))]
                store.streams.add(f"h{host}", stream, records)
        used = store.streams.bytes_used()
        table = "capacity" if stream == "capacity" else "running"
        figures[label] = {"bytes_per_host_week": used.get(table, 0) / hosts,
                          "rows_per_host": week if stream == "capacity" else len(
                              store.streams.running("h0"))}
        store.close()
    return figures


def _count(database: Path) -> int:
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]


def run(quick: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ghs-bench-") as folder:
        root = Path(folder)
        for name in ("store", "stream", "fan_in"):
            (root / name).mkdir()
        for name in ("capacity", "bytes"):
            (root / name).mkdir()
        if quick:
            return {"store": bench_store(root / "store", 20_000),
                    "stream": bench_stream(root / "stream", agents=2, batches=5),
                    "fan_in": bench_fan_in(root / "fan_in", agents=50),
                    "capacity": bench_capacity(root / "capacity", hosts=50, minutes=5),
                    "bytes": bench_bytes(root / "bytes", hosts=2), "quick": True}
        return {"store": bench_store(root / "store"), "stream": bench_stream(root / "stream"),
                "fan_in": bench_fan_in(root / "fan_in"),
                "capacity": bench_capacity(root / "capacity"),
                "bytes": bench_bytes(root / "bytes"), "quick": False}


def show(console: Any, results: dict[str, Any]) -> None:
    store, stream, fan = results["store"], results["stream"], results["fan_in"]
    console.print(f"store: {store['per_second']:,.0f} measurements/s committed in batches "
                  f"(one commit each: {store['baseline_per_second']:,.0f}/s, "
                  f"{store['speedup']:.0f}x)")
    console.print(f"stream: {stream['per_second']:,.0f} measurements/s stored and acked by a "
                  f"manager process from {stream['agents']} agents "
                  f"({stream['stored']:,} stored of {stream['measurements']:,}; "
                  f"{stream['per_manager_cpu_second']:,.0f} per second of the manager's CPU)")
    console.print(f"fan-in: {fan['agents']:,} agents connected at once, {fan['stored']:,} of "
                  f"{fan['expected']:,} measurements stored, exactly once: "
                  f"{fan['exactly_once']}, {fan['seconds']:.1f} s")
    capacity = results["capacity"]
    for stream in ("capacity", "running"):
        figures = capacity[stream]
        console.print(
            f"{stream} series: {figures['cpu_seconds_per_record'] * 1e6:,.0f} us of manager "
            f"CPU a record ({figures['records']:,} from {capacity['hosts']:,} agents); 1,000 "
            f"hosts at one a minute: {figures['core_percent_at_1000_hosts_per_minute']:.2f}% "
            "of a core")
    sizes = results["bytes"]
    console.print("bytes per host-week: " + ", ".join(
        f"{label.replace('_', ' ')} {figures['bytes_per_host_week'] / 1024:,.0f} KiB"
        for label, figures in sizes.items()))
