"""Real ghs daemons for integration tests: subprocesses on free loopback ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ghs.client import Client
from ghs.launch import free_loopback_endpoint, wait_for_manager


def wait_for(predicate: Callable[[], object], timeout: float, what: str,
             interval: float = 0.1) -> object:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # a daemon still starting up
            last_error = exc
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} ({last_error!r})")


class Daemons:
    """Starts ghs processes with an isolated HOME and config; stops them all at the end."""

    def __init__(self, root: Path, **env: str) -> None:
        self.root = root
        (root / "none.toml").write_text("")
        self.env = {**os.environ, "HOME": str(root), "GHS_CONFIG": str(root / "none.toml"),
                    **env}
        self.processes: list[subprocess.Popen] = []

    def start(self, *args: str, log: str, **env: str) -> subprocess.Popen:
        handle = (self.root / log).open("w")
        process = subprocess.Popen([sys.executable, "-m", "ghs", *args], stdout=handle,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**self.env, **env})
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.root / name).read_text()

    def manager(self, database: str = "manager.sqlite", endpoint: str | None = None,
                log: str = "manager.log", *args: str, ping_keys: tuple = (None, None),
                **env: str) -> tuple[subprocess.Popen, str]:
        """A manager on ``endpoint`` (a free loopback port by default), once it answers a ping
        (a CurveZMQ one: with ``ping_keys``, a listed client's pair and the server's key)."""
        endpoint = endpoint or free_loopback_endpoint()
        process = self.start("manager", "--endpoint", endpoint, "--database",
                             str(self.root / database), *args, log=log, **env)
        wait_for_manager(process, endpoint, 30.0, self.root / log, client_keys=ping_keys[0],
                         server_public_key=ping_keys[1])
        return process, endpoint

    def agent(self, endpoint: str, *args: str, outbox: str, log: str, **env: str
              ) -> subprocess.Popen:
        return self.start("agent", "--manager", endpoint, "--outbox", str(self.root / outbox),
                          *args, log=log, **env)

    def client(self, endpoint: str, **options) -> Client:
        return Client(endpoint, timeout_seconds=options.pop("timeout_seconds", 10.0), **options)

    @staticmethod
    def terminate(process: subprocess.Popen, timeout: float = 20.0) -> int:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        return process.wait(timeout)

    def stop_all(self) -> None:
        # everything but managers first, as an operator would: an agent stopping drains its
        # outbox for up to 2 s while acks are due, and a manager gone first never sends them
        managers = [p for p in self.processes if p.args[3:4] == ["manager"]]
        for group in ([p for p in self.processes if p not in managers], managers):
            for process in group:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in group:
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
