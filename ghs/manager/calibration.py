"""The manager's predictor, calibrated on each host's own record (Part 6).

Per host the manager keeps, incrementally:

- a forecast bank (``scheduler.ForecastBank``, rows 2k: lam, 2k + 1: rho) fed with each
  completed hour of the host's measurements, so a query forecasts the load of its own run
  window (the NWS rule picks each host's forecaster);
- shadow launches: at every whole hour of the host's own clock, the prediction the manager
  would have served then for a single-host task of each length in ``lengths_seconds``
  (dedicated seconds per core), from what was stored by then: the bins before it, the running
  snapshot of that hour, and (a known leak, small) the demand templates as merged now;
- their outcomes, read off the capacity series (:mod:`ghs.manager.realised`) once it covers
  them: each feeds the host's start battery (:class:`scheduler.backlog_weight.BacklogWeights`:
  how much of the modelled backlog to believe) and the adaptive conformal calibrator of its
  length (:class:`scheduler.Calibrator`, pooled prior) and that length's far-tail corrections
  shared by all hosts (:class:`scheduler.tail_battery.TailBattery`) and the host's count of
  launches that ended on their dedicated time (:class:`scheduler.no_delay.NoDelayRecord`, a
  split's chance of no delay), and is kept in the
  ``shadow_launches`` table, which ``ghs backtest --manager`` reads. A miss is recorded as
  soon as the series shows the task running past its reported p95 (or one of the far tail's
  quantiles), before it finishes.

The work is done when a host's records arrive or a query names it, a few predictions per host
and hour; a query never replays history.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ghs.manager.calibrated_views import BUSY_VIEW, YOUNG_LAUNCHES, CalibratedViews
from ghs.manager.realised import Outcomes
from ghs.manager.shadow_laws import LaunchPlan, prime_quantiles
from ghs.manager.shadow_ledger import ShadowLedger
from ghs.manager.shadow_outcomes import ShadowOutcomes
from ghs.manager.shadow_plans import ShadowLaunch, ShadowPlans
from ghs.manager.shadow_start import ShadowInputs
from scheduler import Calibrator, ForecastBank
from scheduler.backlog_weight import BacklogWeights, WeightSettings
from scheduler.calibrated import SERVED_LEVELS
from scheduler.conformal import LEVELS as CONFORMAL_LEVELS
from scheduler.conformal import TAIL_LEVELS, ConformalSettings
from scheduler.host_moments import prime_host_moments
from scheduler.no_delay import NoDelayRecord
from scheduler.report_floor import ReportRatios
from scheduler.tail_battery import TailBattery

HOUR_SECONDS = 3600.0
VIEWS = ("carried", "state")
# launches (host-hours) one refresh plans before it integrates their laws together
LAUNCHES_PER_BATCH = 32
# predictions whose integrals are worked out in one batch (bounds the arrays' memory)
PREDICTIONS_PER_BATCH = 64


@dataclass
class _Track:
    row: int
    cores: int
    next_launch: float | None = None
    next_bin: int | None = None
    pending: list[ShadowLaunch] = field(default_factory=list)
    # the last catch-up's records, extended by the next one
    inputs: ShadowInputs | None = None
    # (launch, dedicated) of pending launches -> a series end before which they cannot end
    unknown_until: dict[tuple[float, float], float] = field(default_factory=dict)
    # its real tasks' reports, set against the model's quantiles (scheduler.report_floor)
    reports: ReportRatios = field(default_factory=lambda: ReportRatios(CONFORMAL_LEVELS))


@dataclass
class _Run:
    """One host's catch-up: the hours it launches on, its inputs and outcomes, the launches
    planned (when many hosts are refreshed together) and until when it scores at the end."""

    host_id: str
    track: _Track
    inputs: ShadowInputs
    outcomes: Outcomes
    hours: list[float]
    settle_until: float
    plans: list[LaunchPlan | None] = field(default_factory=list)


# the task lengths (dedicated seconds per core) a manager's calibrators learn at
LENGTHS_SECONDS = (900.0, 3600.0, 4 * 3600.0, 16 * 3600.0)


class Calibration(CalibratedViews, ShadowPlans, ShadowOutcomes):
    """Forecasts, start batteries and calibrators of every host, kept current from ``store``
    (a :class:`ghs.manager.store.ManagerStore`)."""

    def __init__(self, store: Any, *, lengths_seconds: Sequence[float] = LENGTHS_SECONDS,
            snapshot_fresh_seconds: float = 180.0,
            max_catch_up_hours: int = 48, history_days: float = 8.0,
            start_by_record: bool = False) -> None:
        self.store = store
        # increasing: a query's factors are interpolated between the lengths around it
        self.lengths = np.sort(np.asarray(lengths_seconds, dtype=float))
        self.snapshot_fresh_seconds = snapshot_fresh_seconds
        self.max_catch_up_hours = max_catch_up_hours
        self.history_days = history_days
        self.bank = ForecastBank(0)
        # the start the record chooses is scored whatever the views: a one-host answer on a
        # host of one core combines its mean with the record view's (scheduler.combined_mean)
        self.weights = BacklogWeights(0, WeightSettings(by_record=True))
        # each way of starting a host is scored and calibrated on its own
        self.views = VIEWS + (("record",) if start_by_record else ())
        young = ConformalSettings(young_launches=YOUNG_LAUNCHES)
        self.calibrators = {view: [Calibrator(0, young if view in ("carried", BUSY_VIEW)
                                              else None) for _ in self.lengths]
                            for view in (*self.views, BUSY_VIEW)}
        # each view's and length's far-tail corrections, one for all hosts
        self.tails = {view: [TailBattery(TAIL_LEVELS) for _ in self.lengths]
                      for view in self.views}
        self.levels = SERVED_LEVELS
        # each host's launches that ended on their dedicated time, by length and state at
        # launch: a split's chance of no delay (scheduler.no_delay)
        self.no_delay = NoDelayRecord(0, self.lengths)
        self.tracks: dict[str, _Track] = {}
        # each host's newest record (epoch seconds) as a query's catch-up check last saw it
        self.latest_seen: dict[str, float | None] = {}
        self.lock = threading.RLock()
        self.shadow_ledger = ShadowLedger(store)
        self._absorbed: set[tuple[int, str]] = set()

    # -- keeping up --------------------------------------------------------------------------

    def track(self, host_id: str, cores: int) -> _Track:
        with self.lock:
            found = self.tracks.get(host_id)
            if found is None:
                found = _Track(len(self.tracks), max(int(cores), 1))
                self.tracks[host_id] = found
                rows = len(self.tracks)
                self.bank.grow(2 * rows)
                self.weights.grow(rows)
                self.no_delay.grow(rows)
                for kept in self.calibrators.values():
                    for calibrator in kept:
                        calibrator.grow(rows)
            return found

    def hours_behind(self, host_id: str, latest_epoch_seconds: float | None = None) -> float:
        """Whole hours of the host's record not yet launched on (inf before the first);
        ``latest_epoch_seconds``: the host's newest record if the caller has it."""
        latest = latest_epoch_seconds
        if latest is None:
            latest = self.store.streams.latest_epoch_seconds(host_id)
        with self.lock:
            track = self.tracks.get(host_id)
            if latest is None:
                return 0.0
            if track is None or track.next_launch is None:
                return math.inf
            return max(0.0, (math.floor(latest / HOUR_SECONDS) * HOUR_SECONDS
                             - track.next_launch) / HOUR_SECONDS + 1.0)

    def advance(self, host_id: str, cores: int, *, max_hours: int | None = None,
                latest_epoch_seconds: float | None = None) -> int:
        """Make the shadow launches of the whole hours the host's records have passed (at
        most ``max_hours`` of them: a long catch-up goes in chunks, so a query waiting for
        the lock waits for one chunk) and score those now known. Returns how many launches
        were made. ``latest_epoch_seconds``: the host's newest record if the caller has it."""
        with self.lock:
            run = self._begin(host_id, cores, max_hours, latest_epoch_seconds)
            if run is None:
                return 0
            made = 0
            for hour in run.hours:
                self._push_bins([(run.track, run.inputs, hour)])
                self._settle(host_id, run.track, run.outcomes, hour)
                made += self._record(host_id, run.track, self._plan(run, hour))
            self._finish(run)
            return made

    def advance_hosts(self, hosts: Sequence[tuple[str, int]], *,
                      max_hours: int | None = None) -> int:
        """:meth:`advance` of each (host id, cores) in turn: the same launches, scores and
        ledger, with the model integrals of many hosts' launches worked out together (the
        scores still move each calibrator host after host, as the launches were reported).
        Returns how many launches were made."""
        if "record" in self.views:
            # the record view's start moves with every score: host by host
            return sum(self.advance(h, c, max_hours=max_hours) for h, c in hosts)
        made, items = 0, list(hosts)
        while items:
            # a batch of about LAUNCHES_PER_BATCH launches holds the lock: a query waits
            # for one batch, as for one host's chunk in advance
            with self.lock:
                runs, planned = [], 0
                while items and planned < LAUNCHES_PER_BATCH:
                    host_id, cores = items.pop(0)
                    run = self._begin(host_id, cores, max_hours, None)
                    if run is not None:
                        runs.append(run)
                        planned += len(run.hours)
                # hour by hour across the hosts: the forecasts of each hour see the bins pushed
                # by then, as in advance (a host's rows are its own), and every host's bins
                # of an hour go to the bank in one push per bin
                for i in range(max((len(run.hours) for run in runs), default=0)):
                    now = [(run, run.hours[i]) for run in runs if i < len(run.hours)]
                    self._push_bins([(run.track, run.inputs, hour) for run, hour in now])
                    for (run, _), plan in zip(now, self._plans(now)):
                        run.plans.append(plan)
                laws = [p for run in runs for plan in run.plans if plan is not None
                        for p in plan.laws.predictions]
                for k in range(0, len(laws), PREDICTIONS_PER_BATCH):
                    prime_host_moments(laws[k:k + PREDICTIONS_PER_BATCH])
                prime_quantiles([plan for run in runs for plan in run.plans if plan is not None])
                for run in runs:
                    for hour, plan in zip(run.hours, run.plans):
                        self._settle(run.host_id, run.track, run.outcomes, hour)
                        made += self._record(run.host_id, run.track, plan)
                    self._finish(run, flush=False)
                # one transaction for the batch's ledger rows
                self.shadow_ledger.flush()
        return made

    def _begin(self, host_id: str, cores: int, max_hours: int | None,
               latest: float | None) -> _Run | None:
        """The hours a catch-up of the host launches on and its inputs (None: nothing to do)."""
        track = self.track(host_id, cores)
        if latest is None:
            latest = self.store.streams.latest_epoch_seconds(host_id)
        if latest is None:
            return None
        last_hour = math.floor(latest / HOUR_SECONDS) * HOUR_SECONDS
        oldest = last_hour - self.max_catch_up_hours * HOUR_SECONDS
        first = oldest if track.next_launch is None else max(track.next_launch, oldest)
        if first > last_hour:
            return None
        stop = last_hour if max_hours is None else min(
            last_hour, first + (max_hours - 1) * HOUR_SECONDS)
        # a new host's forecasters start from the days before its first launch
        since = first - (self.history_days if track.next_bin is None else 2) * 86400.0
        # measurements are needed from the first bin to push and a day before the first
        # launch (its 24-hour estimate); the capacity series from ``since`` (outcomes)
        rows_since = None if track.next_bin is None else min(
            first - 86400.0, track.next_bin * self.bank.settings.bin_seconds
            - self.bank.settings.utc_offset_seconds)
        inputs = ShadowInputs.load(self.store, host_id, track.cores,
                                   since_epoch_seconds=since,
                                   rows_since_epoch_seconds=rows_since,
                                   previous=track.inputs, snapshots_since_epoch_seconds=first)
        if track.next_bin is None:
            track.next_bin = int(self.bank.bin_of(since))
        hours = [float(hour) for hour in np.arange(first, stop + 1.0, HOUR_SECONDS)]
        return _Run(host_id, track, inputs, Outcomes(inputs.capacity, track.unknown_until), hours,
                    latest if stop == last_hour else stop)

    def _finish(self, run: _Run, flush: bool = True) -> None:
        track = run.track
        track.next_launch = run.hours[-1] + HOUR_SECONDS
        # keep what the next catch-up reads again: a day of measurements, 2 of capacity
        bin_start = track.next_bin * self.bank.settings.bin_seconds \
            - self.bank.settings.utc_offset_seconds
        track.inputs = run.inputs.trimmed(min(track.next_launch - 86400.0, bin_start),
                                          track.next_launch - 2 * 86400.0)
        self._settle(run.host_id, track, run.outcomes, run.settle_until)
        if flush:
            self.shadow_ledger.flush()

    def _push_bins(self, items: Sequence[tuple[_Track, ShadowInputs, float]]) -> None:
        """Push each (track, inputs, until)'s completed bins before ``until``: the k-th bin
        of every host in one push (each row as if pushed alone: a host's rows are its own)."""
        queued = []
        for track, inputs, until in items:
            stop = int(self.bank.bin_of(until))
            rows = [2 * track.row, 2 * track.row + 1]
            # never before what the bank already holds (a host's clock may step back)
            start = max(track.next_bin or stop, int(self.bank.next_bin[rows[0]]))
            bins = [(b, *inputs.bin_means(b, self.bank.settings.bin_seconds))
                    for b in range(start, stop)]
            if bins and np.isnan(self.bank.last_value[rows]).all():
                # rows that never held data: the empty bins before their first are one
                # gap, pushed as the bank pushes a skipped run (it leaves the same state)
                seen = next((k for k, (_, lam, rho) in enumerate(bins)
                             if not (math.isnan(lam) and math.isnan(rho))), len(bins) - 1)
                bins = bins[seen:]
            queued.append((rows, bins))
            track.next_bin = max(stop, start)
        for k in range(max((len(bins) for _, bins in queued), default=0)):
            rows, bins, values = [], [], []
            for host_rows, host_bins in queued:
                if k < len(host_bins):
                    b, lam, rho = host_bins[k]
                    rows += host_rows
                    bins += [b, b]
                    values += [lam, rho]
            self.bank.push(rows, bins, values)

    # -- the ledger --------------------------------------------------------------------------

    def ledger(self, host_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Scored shadow launches (oldest first), every predictor's row."""
        return self.shadow_ledger.scored(host_ids)
