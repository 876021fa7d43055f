"""What both daemons share: stopping cleanly on SIGTERM/SIGINT, logging, paths."""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (call from the main thread)."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def configure_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


def expand(path: str) -> str:
    """``~`` expanded; an empty string stays empty."""
    return str(Path(os.path.expanduser(path))) if path else path
