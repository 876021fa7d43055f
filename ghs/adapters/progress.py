"""Progress of a divisible run: snapshots per host, and the reporters that show them.

A reporter is any callable taking a ``RunProgress``; ``reporter_for`` picks a rich progress
bar on a terminal and log lines otherwise. A snapshot carries the run's latest ETA (the
remaining-time law of the current plan, see ghs.adapters.tracking), which both show.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler import Plan

LOG = logging.getLogger("ghs.adapters")


@dataclass(frozen=True)
class HostProgress:
    """One host's items: ``done`` of ``total`` assigned so far, ``in_flight`` running;
    ``state`` is "running" or "lost" (no workers left)."""

    name: str
    done: int
    total: int
    in_flight: int
    state: str


@dataclass(frozen=True)
class RunProgress:
    """A snapshot of a run: per-host progress, seconds since the start, the current plan and
    the number of re-plans so far; ``event`` says what triggered it ("start", "item",
    "replan", "end"); ``eta``: the latest remaining-time law (a ghs.eta.Eta) or None."""

    event: str
    elapsed_seconds: float
    hosts: tuple[HostProgress, ...]
    plan: Plan
    replans: int
    items_done: int
    items_total: int
    eta: Any = None  # ghs.eta.Eta of the remaining time, when one is known


Reporter = Callable[[RunProgress], None]


def reporter_for(progress: Reporter | bool | None) -> tuple[Reporter | None, Callable[[], None]]:
    """(reporter, close) for ``progress``: a callable is used as is; False means silence;
    None means a rich bar when stderr is a terminal, log lines on logger "ghs.adapters"
    otherwise."""
    if progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    if progress is not None and progress is not True:
        from ghs.adapters.errors import AdapterError

        raise AdapterError(f"progress must be a callable, True, False or None, got "
                           f"{type(progress).__name__}", field="progress", value=progress)
    if sys.stderr.isatty():
        bar = _RichBar()
        return bar, bar.close
    return _LogLines(), lambda: None


class _LogLines:
    """A log line at the start, every tenth of the items, each re-plan, and the end."""

    def __init__(self) -> None:
        self._tenths = -1

    def __call__(self, snapshot: RunProgress) -> None:
        tenths = 10 * snapshot.items_done // max(snapshot.items_total, 1)
        if snapshot.event == "item" and tenths == self._tenths:
            return
        self._tenths = tenths
        hosts = ", ".join(f"{h.name} {h.done}/{h.total}" + ("" if h.state == "running"
                                                             else f" ({h.state})")
                          for h in snapshot.hosts)
        eta = "" if snapshot.eta is None else f"; ETA {snapshot.eta.line()}"
        LOG.info("ghs %s: %d/%d items after %.1f s [%s]%s", snapshot.event,
                 snapshot.items_done, snapshot.items_total, snapshot.elapsed_seconds, hosts, eta)


class _RichBar:
    """One bar per host plus a total, redrawn on every snapshot."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._bar = Progress("[progress.description]{task.description}", BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(),
                             console=Console(stderr=True))
        self._tasks: dict[str, Any] = {}
        self._bar.start()

    def __call__(self, snapshot: RunProgress) -> None:
        eta = "" if snapshot.eta is None else f" (ETA {snapshot.eta.line()})"
        rows = [("all hosts", snapshot.items_done, snapshot.items_total, eta)]
        rows += [(h.name, h.done, h.total, "" if h.state == "running" else f" ({h.state})")
                 for h in snapshot.hosts]
        for name, done, total, note in rows:
            if name not in self._tasks:
                self._tasks[name] = self._bar.add_task(name, total=total)
            self._bar.update(self._tasks[name], completed=done, total=max(total, done),
                             description=f"{name}{note}")

    def close(self) -> None:
        self._bar.stop()
