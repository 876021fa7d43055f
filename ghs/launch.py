"""Starting a manager as a process and knowing when it is ready (demo, benchmarks, tests).

Readiness is the manager's answer to a ``ping``, not a line in its log: a log line says the
socket is bound, the ping says the whole loop is serving.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from ghs.client import Client
from ghs.errors import GhsError
from protocol import KeyPair


class ManagerStartError(GhsError):
    """A manager process exited, or did not answer a ping, while starting."""

    code = "manager_start"


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 free right now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_loopback_endpoint() -> str:
    """``tcp://127.0.0.1:PORT`` with a port free right now."""
    return f"tcp://127.0.0.1:{free_loopback_port()}"


def exited_early(processes: list[subprocess.Popen], log_folder: Path) -> str | None:
    """None while every process runs; else which one exited, with the end of each ``*.log``
    in ``log_folder`` (for the caller's one-line error)."""
    for process in processes:
        if process.poll() is not None:
            logs = " | ".join(p.read_text().strip()[-200:] for p in log_folder.glob("*.log"))
            return f"(code {process.returncode}): {logs}"
    return None


def wait_for_manager(process: subprocess.Popen, endpoint: str, timeout_seconds: float,
                     log: Path | None = None, *, client_keys: KeyPair | None = None,
                     server_public_key: bytes | None = None) -> dict:
    """Ping the manager ``process`` serves at ``endpoint`` until it answers; its answer.

    ManagerStartError (with the end of ``log``) if the process exits or stays silent. A
    CurveZMQ manager needs an allow-listed client's keys and its own public key.
    """

    def alive() -> None:
        if process.poll() is not None:
            raise ManagerStartError(f"the manager exited at start (code {process.returncode})"
                                    f"{_tail(log)}", field="manager", value=endpoint)

    with Client(endpoint, timeout_seconds=timeout_seconds, client_keys=client_keys,
                server_public_key=server_public_key) as client:
        try:
            return client.wait_ready(timeout_seconds, check=alive)
        except GhsError as exc:
            if isinstance(exc, ManagerStartError):
                raise
            raise ManagerStartError(f"{exc.message}{_tail(log)}", field="manager",
                                    value=endpoint) from None


def _tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    return ": " + log.read_text().strip()[-300:]
