"""What a Dask run tells about itself while it goes: its ETA, and its completion reports.

The ETA is the law of the remaining time of the current plan's shares (each host's items
of its current segment, done or not), asked of the plan's source (the manager: its hosts'
current state; a host file: steady state), at most every ``eta_seconds``. A plan served by a
manager carries a prediction id; when a host finishes every item that plan gave it, the run
reports the time to the manager's track record. A host whose items were re-planned before it
finished is not reported: the prediction was about other work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from ghs.adapters.planner import PlanSource
from ghs.adapters.progress import LOG
from ghs.errors import GhsError
from ghs.eta import Eta


class RunTracker:
    """ETAs and completion reports of one run; ``clock`` is monotonic seconds, ``wall_clock``
    epoch seconds (what reports carry)."""

    def __init__(self, source: PlanSource, *, work_per_item: float, eta_seconds: float,
                 report: bool, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.work_per_item = work_per_item
        self.eta_seconds = eta_seconds
        self.report = report
        self.clock = clock
        self.wall_clock = wall_clock
        self.reports: list[dict] = []
        self.last_eta: Eta | None = None
        self._prediction_id: int | None = None
        self._waiting: set[str] = set()
        self._last_eta_at = -float("inf")

    def planned(self, prediction_id: int | None, totals: Mapping[str, int]) -> None:
        """A new plan: the hosts given items under it are awaited for a report."""
        self._prediction_id = prediction_id
        self._waiting = ({name for name, count in totals.items() if count > 0}
                         if prediction_id is not None and self.report else set())
        self._last_eta_at = -float("inf")

    def host_finished(self, name: str) -> None:
        """``name`` has done every item of the current plan: report it if it is awaited."""
        if name not in self._waiting or self._prediction_id is None:
            return
        self._waiting.discard(name)
        try:
            self.reports.append(self.source.report(self._prediction_id, self.wall_clock(), name))
        except GhsError as exc:  # the run goes on: a lost report costs only the record
            LOG.warning("ghs: cannot report %s's share of prediction %d: %s", name,
                        self._prediction_id, exc)

    def eta(self, segments: Mapping[str, tuple[int, int]], force: bool = False) -> Eta | None:
        """The ETA from each host's (items done, items) of the current plan, or the last one
        while the previous is younger than ``eta_seconds`` (None once all is done)."""
        segments = {name: (done, total) for name, (done, total) in segments.items()
                    if total > 0}
        if not segments or all(done >= total for done, total in segments.values()):
            self.last_eta = None
            return None
        now = self.clock()
        if not force and now - self._last_eta_at < self.eta_seconds:
            return self.last_eta
        self._last_eta_at = now
        shares = {name: total * self.work_per_item for name, (_, total) in segments.items()}
        fractions = {name: min(done / total, 1.0) for name, (done, total) in segments.items()}
        try:
            self.last_eta = self.source.eta(shares, fractions)
        except GhsError as exc:
            LOG.warning("ghs: no ETA: %s", exc)
            self.last_eta = None
        return self.last_eta
