"""What both daemons share: stopping cleanly on SIGTERM/SIGINT, logging, paths."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (call from the main thread)."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt like Ctrl-C (call from the main
    thread), so ``finally`` clauses and context managers clean up on either signal.

    Only the first SIGTERM interrupts: a second one during the cleanup is ignored so the
    cleanup itself is not cut short.
    """
    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def configure_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


def expand(path: str) -> str:
    """``~`` expanded; an empty string stays empty."""
    return str(Path(os.path.expanduser(path))) if path else path


def keep_numpy_out() -> None:
    """Stop numpy from loading in this process (a real agent or sensor needs none of it).

    sqlite-utils imports numpy when it is installed, only to convert numpy values; refusing
    the import saves about 12 MB resident in a daemon that runs on every workstation. Call it
    before anything imports sqlite-utils; it does nothing if numpy is already loaded.
    """
    if "numpy" not in sys.modules:
        sys.modules["numpy"] = None  # type: ignore[assignment]


def open_metrics(address: str, port: int) -> tuple[Any, Any]:
    """(registry, server): an empty prometheus_client CollectorRegistry served at
    http://ADDRESS:PORT/metrics on a daemon thread (``server.shutdown()`` stops it), opened
    before the daemon builds anything so a port in use fails fast; (None, None) when port is 0.
    """
    if port == 0:
        return None, None
    from prometheus_client import CollectorRegistry, start_http_server

    from ghs.errors import GhsError

    registry = CollectorRegistry()
    try:
        server, _ = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        raise GhsError(f"cannot serve metrics on {address}:{port}: {exc.strerror}",
                       field="metrics_port", value=port) from None
    return registry, server
