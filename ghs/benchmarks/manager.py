"""Manager throughput and fan-in (``ghs bench --manager``).

- store: measurements committed per second by ``ManagerStore`` (WAL, synchronous=FULL,
  batches of 1,000 rows)
  against the straightforward way, one transaction per measurement, in the same process;
- stream: a real ``ghs manager`` process fed by agents' DEALER sockets in this process,
  measurements per second stored and acknowledged end to end, and per second of the
  manager's own CPU time;
- fan-in: 1,000 agents connected at once, each saying hello and sending its measurements;
  every (host, seq) must end up stored exactly once.
"""

from __future__ import annotations

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
    decode,
    encode,
)


def _measurement(seq: int) -> Measurement:
    return Measurement(seq=seq, start_epoch_seconds=1.0e9 + 60 * seq,
                       end_epoch_seconds=1.0e9 + 60 * seq + 60, lam_per_second=0.01, rho=0.2,
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


def _start_manager(folder: Path) -> tuple[subprocess.Popen, str]:
    log = folder / "manager.log"
    (folder / "none.toml").write_text("")
    endpoint = free_loopback_endpoint()
    process = subprocess.Popen(
        [sys.executable, "-m", "ghs", "manager", "--endpoint", endpoint,
         "--database", str(folder / "manager.sqlite")],
        stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={"GHS_CONFIG": str(folder / "none.toml"), "PATH": "/usr/bin:/bin",
             "HOME": str(folder)})
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


def _count(database: Path) -> int:
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]


def run(quick: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ghs-bench-") as folder:
        root = Path(folder)
        for name in ("store", "stream", "fan_in"):
            (root / name).mkdir()
        if quick:
            return {"store": bench_store(root / "store", 20_000),
                    "stream": bench_stream(root / "stream", agents=2, batches=5),
                    "fan_in": bench_fan_in(root / "fan_in", agents=50), "quick": True}
        return {"store": bench_store(root / "store"), "stream": bench_stream(root / "stream"),
                "fan_in": bench_fan_in(root / "fan_in"), "quick": False}


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
