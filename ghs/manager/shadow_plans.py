"""The launch side of :class:`ghs.manager.calibration.Calibration`: each whole hour's shadow
launch of a host predicted (every task length and view at once), calibrated by the
calibrators as they stand, queued for its outcome (:mod:`ghs.manager.shadow_outcomes` scores
it) and written to the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ghs.manager.calibrated_views import BUSY_VIEW
from ghs.manager.envelope import envelope_of, running_jobs
from ghs.manager.shadow_laws import DIST, LEVELS, HostLaws, LaunchPlan, copies_of
from ghs.manager.shadow_start import host_at
from scheduler import Host
from scheduler.age_floor import age_floor_seconds
from scheduler.backlog import Backlog
from scheduler.combined_mean import one_host_mean_seconds
from scheduler.conformal import TAIL_LEVELS
from scheduler.prediction import predict_hosts, single_process_means

# view -> (its calibrated and uncalibrated predictors in the ledger)
LEDGER_NAMES = {"carried": ("calibrated", "uncalibrated"),
                "state": ("calibrated-state", "uncalibrated-state"),
                "record": ("calibrated-record", "uncalibrated-record")}
# The views whose own levels are scored against their factors as they stand when each
# outcome is known (the pooled far tail always is; ghs.manager.shadow_outcomes). A split
# reads the state view's laws at each member's 0.92-0.999 levels and ends with its slowest
# share, so one member's factor swung high moves the split: scored at their launches'
# factors, hourly launches of 4-16 h (outcomes a task length later, meeting the same load)
# left Poisson hosts' p90 and p95 factors at 1.6-1.7 where 1.03-1.05 cover, and a split
# over eight of them covered its p50 86% of the time (73% scored as they stand). The
# carried view is what a one-host answer serves, at those very levels: scored at its
# launches' quantiles it keeps adaptive conformal inference's guarantee on what is served
# (scored as they stand, single tasks' p95 covered .89 on LCG, against .93).
STANDING_VIEWS = ("state",)


@dataclass
class ShadowLaunch:
    """A shadow launch whose outcome is not yet known."""

    launch: float
    length: int
    dedicated: float
    # the model's quantiles at the host's own levels (seconds), which its calibrator's
    # factors scale
    base: np.ndarray
    candidates: np.ndarray | None
    view: str = "carried"
    decided: bool = False
    # the calibrators that score it (``self.calibrators[calibrator]``): its view's (None),
    # or BUSY_VIEW's for a carried launch that found jobs running
    calibrator: str | None = None
    # (host's, pool's) quantiles served at launch, scored against; None in the
    # STANDING_VIEWS, scored against the factors as they stand when the outcome is known
    at_launch: tuple[np.ndarray, np.ndarray] | None = None
    # the same for the pooled far tail's levels, and which of their outcomes were recorded
    tail: np.ndarray = field(default_factory=lambda: np.full(len(TAIL_LEVELS), np.inf))
    # (for every step the far tail runs, scheduler.tail_battery: (steps, levels); None:
    # none yet)
    tail_decided: np.ndarray | None = None
    # it found local jobs running; whether it ended on its dedicated time is known and
    # recorded (scheduler.no_delay)
    busy: bool = False
    no_delay_known: bool = False

    def __post_init__(self) -> None:
        if self.calibrator is None:
            self.calibrator = self.view


class ShadowPlans:
    """Planning and recording on a calibration's state: ``views``, ``calibrators`` (view ->
    one per task length), ``weights`` (start choices), ``shadow_ledger``, ``lengths``
    (seconds) and ``snapshot_fresh_seconds``, with the views of
    :class:`ghs.manager.calibrated_views.CalibratedViews` (``_windows``, ``_view_of``)."""

    views: tuple[str, ...]
    calibrators: dict[str, list[Any]]
    weights: Any
    shadow_ledger: Any
    lengths: np.ndarray
    snapshot_fresh_seconds: float
    _windows: Any
    _view_of: Any

    def _plan(self, run: Any, hour: float) -> LaunchPlan | None:
        """One hour's launch predicted, every task length at once (one prediction of a copy
        of the host per length, each copy's own law being that single-host task's); None
        before any arrival was measured."""
        return self._plans([(run, hour)])[0]

    def _plans(self, items: Sequence[tuple[Any, float]]) -> list[LaunchPlan | None]:
        """:meth:`_plan` of each (run, hour) of distinct hosts, their window forecasts in one
        call (each host's as alone, but for the order of the sums over bins)."""
        plans: list[LaunchPlan | None] = [None] * len(items)
        ready = []
        for k, (run, hour) in enumerate(items):
            snapshot = run.inputs.snapshot_near(hour, self.snapshot_fresh_seconds)
            at = hour if snapshot is None else float(snapshot["epoch_seconds"])
            day = host_at(run.host_id, run.inputs, at)
            if day is not None:
                works = self.lengths * run.track.cores * day.tau
                paper = predict_hosts(copies_of([day] * len(works)), works, DIST)
                ready.append((k, run.track, at, day, run.inputs.backlog_at(day, snapshot),
                              works, paper, paper.host_moments()[0]))
        if not ready:
            return plans
        tracks, ats, days, backlogs = ([r[c] for r in ready] for c in range(1, 5))
        # one window forecast per host and length serves every view
        windows = self._windows(tracks, ats, np.array([r[7] for r in ready]))
        seen = [self._view_of(*window, tracks, days, backlogs, view)[:2]
                for view in self.views for window in windows]
        lengths = len(windows)
        carried = seen[:lengths]
        held = seen[self.views.index("state") * lengths:][:lengths]
        for h, (k, _, at, day, backlog, works, paper, paper_means) in enumerate(ready):
            laws = HostLaws.predict([hosts[h] for hosts, _ in seen],
                                    np.tile(works, len(self.views)),
                                    [starts[h] for _, starts in seen])
            candidates = self._candidate_means(
                [hosts[h] for hosts, _ in held], [hosts[h] for hosts, _ in carried], backlog,
                works) if running_jobs(backlog) else None
            plans[k] = LaunchPlan(at, day, backlog, works, paper_means, paper, laws,
                                  candidates)
        return plans

    def _record(self, host_id: str, track: Any, plan: LaunchPlan | None) -> int:
        """A planned launch calibrated (each view's calibrators as they stand now), queued
        for its outcome and written to the ledger. Returns the launches made."""
        if plan is None:
            return 0
        n, at = len(plan.works), plan.at
        means, model_q = plan.laws.means_and_quantiles()
        means, model_q = means.reshape(len(self.views), n), model_q.reshape(len(self.views), n,
                                                                            -1)
        candidates = plan.candidates
        busy = running_jobs(plan.backlog)
        rows = [("paper", plan.paper_means, plan.paper_quantiles)]
        own = len(LEVELS)
        for v, view in enumerate(self.views):
            reported_all = []
            kept = BUSY_VIEW if view == "carried" and busy else view
            for j, length in enumerate(self.lengths):
                base = model_q[v, j, :own]
                reported, pooled = self.calibrators[kept][j].adjust_and_pool(track.row, base)
                # served never before the dedicated time (the calibrated law's floor);
                # the calibrator learns from its own quantiles (scheduler.calibrated)
                reported_all.append(np.maximum(reported, float(length)))
                track.pending.append(ShadowLaunch(
                    at, j, float(length), base, None if candidates is None else candidates[j],
                    view, tail=model_q[v, j, own:],
                    at_launch=None if view in STANDING_VIEWS else (reported, pooled),
                    calibrator=kept, busy=busy))
            rows += [(LEDGER_NAMES[view][0], means[v], np.array(reported_all)),
                     (LEDGER_NAMES[view][1], means[v], model_q[v, :, :own])]
        # the ledger keeps what a one-host query is served: its mean combined with the
        # record view's (scheduler.combined_mean), its quantiles with jobs running the
        # envelope with the held view's (ghs.manager.envelope)
        if track.cores == 1 and plan.backlog.kind == "jobs":
            choice = int(self.weights.choose([track.row])[0])
            # with no job running the record's view is the state view (idle, new arrivals)
            records = means[self.views.index("state")] if not busy else (
                [None] * n if candidates is None else candidates[:, choice])
            served = [self._one_host_mean(track, float(length), plan.backlog, float(mean),
                                          None if record is None else float(record))
                      for length, mean, record in zip(self.lengths, rows[1][1], records)]
            rows[1] = (rows[1][0], np.array(served), rows[1][2])
        if busy:
            rows[1] = (rows[1][0], rows[1][1], envelope_of(rows[1][2], rows[3][2]))
        for name, mean, q in rows:
            for j, length in enumerate(self.lengths):
                self.shadow_ledger.launch({"host_id": host_id, "launch_epoch_seconds": at,
                                           "length_seconds": float(length), "predictor": name,
                                           "mean": float(mean[j]),
                                           **dict(zip(LEVELS, map(float, q[j]))),
                                           "realised_seconds": None})
        return n

    def _candidate_means(self, held: Sequence[Host], carried: Sequence[Host],
                         backlog: Backlog, works: np.ndarray) -> np.ndarray | None:
        """(lengths, candidates) means of every start candidate, each length on its run
        window's view: the state view's host (new arrivals' load) for the backlog at each
        weight, the carried view's idle. On a host of one core (whose answers combine their
        mean with the record's start, scheduler.combined_mean) the single process's exact means;
        on several, integrated, and only where the ``record`` view reads them (else None)."""
        one_core = held[0].cores == 1
        if not (one_core or "record" in self.views):
            return None
        hosts, starts, shares = [], [], []
        for work, arrivals, measured in zip(works, held, carried):
            for weight in self.weights.weights:
                hosts.append(arrivals)
                starts.append(backlog.weighted(float(weight)))
                shares.append(work)
            if self.weights.settings.carried:
                hosts.append(measured)
                starts.append(Backlog.idle())
                shares.append(work)
        if one_core:
            means = single_process_means(copies_of(hosts), shares, DIST, backlog=starts)
        else:
            means = predict_hosts(copies_of(hosts), shares, DIST,
                                  backlog=starts).host_moments()[0]
        return means.reshape(len(works), -1)

    def _one_host_mean(self, track: Any, length: float, backlog: Backlog, carried: float,
                       record: float | None) -> float:
        """A one-host answer's mean on a host of one core whose state a fresh snapshot
        gave: the carried view's, at its age floor where jobs run, combined with the mean
        ``record`` of the record's view (None: not known)."""
        floor = age_floor_seconds(length, backlog, track.cores)
        return one_host_mean_seconds(carried, record, floor)
