"""The back-test: predictors scored side by side at past launches of replayed workstations.

At each launch (``start`` and every ``every`` seconds after, on the log's clock) every station
is advanced to the launch through the real sampler and streams (:mod:`ghs.backtest.world`), and
each predictor predicts from what was known then. The realised completion of a
lowest-priority task launched then is exact: :func:`scheduler.trace_simulation.simulate_trace_many`
walks the station's log from the backlog its earlier jobs left (one core, local jobs first).
A record is kept only if the task finishes while the station is known: before the end of the
log it was cut from (idle after its own last job), and not after ``--end``.

Predictors (``PREDICTORS``): ``paper`` (24-hour average, idle start), ``naive``
(dedicated / (1 - last measured utilisation); no quantiles), ``state`` (24-hour average,
backlog of the running snapshot), ``forecast`` (run-window forecast of the measured load, which
carries the running jobs; idle start), ``uncalibrated`` (forecast of the new arrivals' load and
the full backlog), ``weighted`` (the start the station's record chose:
:class:`scheduler.backlog_weight.BacklogWeights` with ``by_record``) and ``calibrated``, the
default (the manager's): ``forecast`` (with ``parallel``: ``uncalibrated``, the state start a
split needs) with its quantiles corrected by adaptive conformal
inference (:class:`scheduler.Calibrator`, one per task length, a row per station, pooled
prior) on this station's own record (its mean, as a manager's one-host answer's, is the
model's combined with ``weighted``'s on every launch after a snapshot,
:mod:`scheduler.combined_mean`, held first on a launch that found local jobs running at
least at the work plus half their ages, :mod:`scheduler.age_floor`; scaling it like the
median made it worse on every log tried),
apart for launches that found local jobs running and those that did not
(``BY_JOBS_RUNNING``, as a manager's); on a launch that found local jobs running, its p90
and p95 are the upper envelope of its own and ``calibrated-held``'s (``ENVELOPE``).
``calibrated-state`` does the same to ``weighted`` and ``calibrated-held`` to
``uncalibrated`` (the running jobs held as a backlog).
As the manager does, the calibrators learn from shadow launches every hour of each station's
record (``shadow_every``, from ``shadow_lead`` before the first scored launch), not only from
the scored launches: with launches every 3 h a calibrator of one task length saw some 60
outcomes in 10 days, too few for the adaptive steps to settle. An outcome feeds the
calibrator only once known at a later hour: when the task has finished, or (a miss) once it
has run past a reported quantile: against the quantiles served at its launch, or (the
calibrators ``STANDING``, as the manager's state view and far tail) against those its
calibrator reports as it stands then, one outcome after another. With
``parallel``, one task of each length is split over all stations by each predictor's own
equal-mean view and completes with its slowest share; its
calibration is per task length on the parallel (shadow and scored) launches themselves (the
per-host laws are not recombined). Beside it, ``calibrated-hosts`` (``RECOMBINED``) is what a
manager serves for a split: every hour each station also makes a single-host shadow launch at
each of a manager's task lengths (``ghs.manager.calibration.LENGTHS_SECONDS``, or
``calibration_lengths_seconds``) in the state view, which teaches that station's own
calibrator and the far-tail corrections pooled over the stations
(:class:`scheduler.tail_battery.TailBattery`); a split is served each station's factors at
its share's dedicated time,
interpolated between those lengths, applied to its law and recombined
(:func:`scheduler.calibrated.calibrated_prediction`), the split's law held at least at the
chance that every share ends on its dedicated time, from each station's shadow launches that
did (:mod:`scheduler.no_delay`, known once each ends or runs past that time);
``calibrated-hosts-unfloored`` is the same without that floor. With ``calibration_lengths_seconds``
the calibrators learn at those lengths only, as a manager's fixed ones, and a scored length
between them is served factors interpolated in log length
(:func:`scheduler.calibrated_selection.length_factors`, the manager's rule); its outcomes
teach no calibrator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ghs.agent.replay import Station
from ghs.backtest.scoring import (
    BY_JOBS_RUNNING,
    CALIBRATED,
    DEFAULT_PREDICTOR,
    DIST,
    ENVELOPE,
    JOBS_RUNNING,
    LEVELS,
    MODEL_VIEWS,
    RECOMBINED,
    RECORD_VIEW,
    summarise,
)
from ghs.backtest.settings import BacktestSettings, check_span, validate
from ghs.backtest.split import RECOMBINED_TAIL, SplitLaunches
from ghs.backtest.views import (
    Forecasts,
    day_host,
    last_utilisation,
    snapshot_backlog,
)
from ghs.backtest.world import BacktestError, StationWorld
from ghs.experiments.partition import NAIVE_MAX_UTILISATION
from ghs.manager.calibrated_views import YOUNG_LAUNCHES
from ghs.manager.calibration import LENGTHS_SECONDS
from ghs.manager.envelope import envelope_of
from scheduler import Calibrator, predict, predict_mean
from scheduler.age_floor import age_floor_seconds
from scheduler.backlog import Backlog
from scheduler.backlog_weight import BacklogWeights, WeightSettings
from scheduler.combined_mean import one_host_mean_seconds
from scheduler.conformal import ConformalSettings
from scheduler.no_delay import NoDelayRecord
from scheduler.tail_battery import TailBattery
from scheduler.trace_simulation import simulate_trace_many
from scheduler.window_forecast import settle_duration
from scheduler.workload import Trace

# the calibrators whose launches are scored against the factors as they stand when each
# outcome is known, as the manager's state view and pooled far tail are
# (ghs.manager.shadow_plans.STANDING_VIEWS says why): what a split reads and the single-host
# envelope's held view; the others against the quantiles their launch was served
STANDING = (RECOMBINED, RECOMBINED_TAIL, *ENVELOPE.values())


@dataclass
class _Pending:
    """A calibrated launch whose outcome is not yet fully known: the model quantiles its
    calibrator's factors scale (seconds), and (host's, pool's) quantiles served at launch,
    None where it is scored against the factors as they stand (``STANDING``)."""

    row: int
    key: tuple[str, float]
    launch: float
    realised: float
    base: np.ndarray
    decided: np.ndarray
    pool_decided: np.ndarray
    at_launch: tuple[np.ndarray, np.ndarray] | None = None


def _settle_tail(tail: TailBattery, p: _Pending, elapsed: float, finished: bool) -> bool:
    """Score a pending launch on the pooled far tail's every expert, as each stands (what
    became known by ``elapsed`` seconds after launch), and once the task has finished its
    loss. Returns whether it is done with (finished)."""
    reported = tail.expert_quantiles(p.base)
    decided = ~p.decided & (finished | (elapsed > reported))
    if decided.any():
        tail.record(p.realised > reported, decided)
        p.decided |= decided
    if finished:
        tail.score(p.realised, p.base, reported)
    return finished


def run_backtest(stations: Sequence[Station], keys: Sequence[str], works: Sequence[float],
                 settings: BacktestSettings = BacktestSettings()) -> dict[str, Any]:
    """Score every predictor on ``stations`` (keys name them in ``shares``) for task lengths
    ``works`` (dedicated seconds at tau 1). Returns the JSON of ``ghs backtest``."""
    work = validate(stations, keys, works, settings)
    ends = _station_ends(stations, settings.end_seconds)
    if settings.end_seconds is not None:
        stations = [Station(s.name, tuple(r for r in s.rows if r[0] < settings.end_seconds),
                            s.header_zero_epoch_seconds, s.end_seconds) for s in stations]
    if not any(s.rows for s in stations):
        raise BacktestError(
            f"none of the {len(stations)} stations has a job"
            + ("" if settings.end_seconds is None
               else f" before --end {settings.end_seconds:g} s")
            + ": end later, or give other logs", field="end", value=settings.end_seconds)
    traces = [Trace(np.array([r[0] for r in s.rows], dtype=float),
                    np.array([r[1] for r in s.rows], dtype=float)) for s in stations]
    check_span(float(ends.max()), settings)
    launches = np.arange(settings.start_seconds, ends.max(), settings.every_seconds)
    if settings.last_launch_seconds is not None:
        launches = launches[launches <= settings.last_launch_seconds]
    if launches.size == 0:
        raise BacktestError(f"no launch fits: the logs end by {ends.max():g} s, before "
                            f"--start {settings.start_seconds:g} s", field="start",
                            value=settings.start_seconds)
    worlds = [StationWorld(s, zero_epoch_seconds=settings.zero_epoch_seconds,
                           settings=settings.sensor, seed=settings.seed * 1000 + k)
              for k, s in enumerate(stations)]
    run = _Run(stations, keys, traces, ends, work, settings)
    first = settings.start_seconds - min(settings.start_seconds, settings.shadow_lead_seconds)
    shadows = np.arange(first, ends.max(), settings.shadow_every_seconds)
    if settings.last_launch_seconds is not None:
        shadows = shadows[shadows <= settings.last_launch_seconds]
    scored = set(launches.tolist())
    try:
        for at in np.union1d(launches, shadows):
            knowns = [w.advance(float(at)) for w in worlds]
            run.forecasts.update(knowns)
            run.settle(float(at))
            views = [(w.estimate(), known) for w, known in zip(worlds, knowns)]
            if settings.parallel:
                run.parallel(float(at), views, scored=float(at) in scored)
            else:
                run.single(float(at), views, scored=float(at) in scored)
    finally:
        for w in worlds:
            w.close()
    summary = [{**row, "mode": run.mode} for row in summarise(run.records, run.unfinished)]
    return {"default_predictor": DEFAULT_PREDICTOR, "mode": run.mode,
            "stations": list(keys), "launches": run.records, "unfinished": run.unfinished,
            "summary": summary}


def _station_ends(stations: Sequence[Station], end_seconds: float | None) -> np.ndarray:
    """Log seconds to which each station is known: the end of the log it was cut from
    (``Station.end_seconds``, else its own last job), not past ``end_seconds`` (--end).
    A station of a cut log is idle after its own last job until the log ends: taking that
    job as its end kept a 32-way split of KTH over 30 days from every launch after day 7,
    when one station's users stopped. A station with neither (no job, no log end) is known
    as far as the other stations are."""
    ends = np.array([s.end_seconds if s.end_seconds is not None
                     else (s.rows[-1][0] if s.rows else np.nan) for s in stations], dtype=float)
    if end_seconds is not None:
        ends = np.minimum(ends, end_seconds)
    return np.where(np.isnan(ends), np.nanmax(ends) if (~np.isnan(ends)).any() else 0.0, ends)


class _Run(SplitLaunches):
    def __init__(self, stations, keys, traces, ends, work, settings) -> None:
        self.names = [s.name for s in stations]
        self.keys = list(keys)
        self.traces = traces
        self.ends = ends
        self.settings = settings
        self.mode = "parallel" if settings.parallel else "single"
        rows = 1 if settings.parallel else len(stations)
        # scored lengths, and the lengths the calibrators learn at (launched, not scored)
        self.scored_work = {float(w) for w in work}
        lengths = settings.calibration_lengths_seconds
        self.lengths = np.unique(np.asarray(work if lengths is None else lengths, dtype=float))
        self.work = np.union1d(work, self.lengths)
        apart = tuple(name + JOBS_RUNNING for name in BY_JOBS_RUNNING)
        # the one-host default's calibrators take a manager's young-record steps
        young = ConformalSettings(young_launches=YOUNG_LAUNCHES)
        self.calibrators = {(name, float(w)): Calibrator(rows, young if (
            name in BY_JOBS_RUNNING or name in apart) and not settings.parallel else None)
                            for name in (*CALIBRATED, *apart) for w in self.lengths}
        # with ``parallel``, each station's own calibrators too (a row each), at a manager's
        # task lengths, taught by single-host shadow launches as a manager's are (RECOMBINED)
        self.host_lengths = np.sort(np.asarray(LENGTHS_SECONDS if lengths is None
                                               else lengths, dtype=float))
        if settings.parallel:
            self.calibrators.update({(RECOMBINED, float(w)): Calibrator(len(stations))
                                     for w in self.host_lengths})
            self.calibrators.update({(RECOMBINED_TAIL, float(w)): TailBattery()
                                     for w in self.host_lengths})
        self.no_delay = NoDelayRecord(len(stations), self.host_lengths)
        self.no_delay_pending = []
        self.forecasts = Forecasts(len(stations))
        # scored splits that ran past a station's log (SplitLaunches._unfinished)
        self.unfinished: list[dict[str, Any]] = []
        self.pending: list[_Pending] = []
        self.weights = BacklogWeights(len(stations), WeightSettings(by_record=True))
        # (row, finished at, realised, candidate means) of launches that began with local work
        self.weight_pending: list[tuple[int, float, float, np.ndarray]] = []
        self.records: list[dict[str, Any]] = []

    # -- calibration -----------------------------------------------------------------------

    def settle(self, at: float) -> None:
        """Feed the calibrators what became known by ``at`` (see the module doc)."""
        done = [p for p in self.weight_pending if p[1] <= at]
        if done:
            self.weights.record([p[0] for p in done], [p[2] for p in done],
                                np.array([p[3] for p in done]))
            self.weight_pending = [p for p in self.weight_pending if p[1] > at]
        still = []
        for p in self.pending:
            elapsed = at - p.launch
            finished = p.launch + p.realised <= at
            calibrator = self.calibrators[p.key]
            if isinstance(calibrator, TailBattery):
                if not _settle_tail(calibrator, p, elapsed, finished):
                    still.append(p)
                continue
            if p.at_launch is None:
                reported = calibrator.adjust([p.row], p.base[None])[0]
                pooled = calibrator.pool_adjust(p.base[None])[0]
            else:
                reported, pooled = p.at_launch
            decided = ~p.decided & (finished | (elapsed > reported))
            pool_decided = ~p.pool_decided & (finished | (elapsed > pooled))
            if decided.any() or pool_decided.any():
                # how far it overran is known once it ended, as to a manager
                overrun = np.log(p.realised / reported) if finished else None
                calibrator.record([p.row], (p.realised > reported)[None],
                                  (p.realised > pooled)[None], decided[None],
                                  pool_decided[None],
                                  overrun=None if overrun is None else overrun[None])
                p.decided |= decided
                p.pool_decided |= pool_decided
            if not (p.decided.all() and p.pool_decided.all()):
                still.append(p)
        self.pending = still

    def _calibrate(self, name: str, row: int, work: float, at: float, realised: float,
                   quantiles: np.ndarray, dedicated_seconds: float) -> np.ndarray:
        """The calibrated quantiles served for this launch: never before the task's
        ``dedicated_seconds`` (its slowest share's), as the served law's. The calibrator
        learns from its own, unfloored ones: a floor that covers would lower its factor
        without end."""
        calibrator = self.calibrators.get((name, work))
        if calibrator is None:
            # a length no calibrator learns at: the outcome teaches nothing
            return self._served_quantiles(name, row, work, quantiles, dedicated_seconds)
        reported = calibrator.adjust([row], quantiles[None])[0]
        at_launch = None if name.removesuffix(JOBS_RUNNING) in STANDING else (
            reported, calibrator.pool_adjust(quantiles[None])[0])
        levels = np.zeros(quantiles.size if not isinstance(calibrator, TailBattery) else
                          (len(calibrator.steps), quantiles.size), bool)
        self.pending.append(_Pending(row, (name, work), at, realised, quantiles.copy(), levels,
                                     levels.copy(), at_launch))
        return np.maximum(reported, dedicated_seconds)

    # -- launches --------------------------------------------------------------------------

    def _record(self, predictor: str, at: float, work: float, shares: dict[str, float],
                realised: float, mean: float, quantiles: np.ndarray | None) -> None:
        self.records.append({
            "predictor": predictor, "launch_seconds": at, "work": work, "shares": shares,
            "realised_seconds": realised, "mean": float(mean),
            "quantiles": None if quantiles is None else dict(zip(LEVELS, map(float,
                                                                           quantiles)))})

    def _start(self, start: str, row: int, backlog: Backlog) -> tuple[Backlog, bool]:
        """(the start, whether the load forecast is of new arrivals only)."""
        if start == "idle":
            return Backlog.idle(), False
        if start == "weighted" and backlog.job_means:
            choice = self.weights.describe(int(self.weights.choose([row])[0]))
            if choice["start"] == "carried":
                return Backlog.idle(), False
            return backlog.weighted(choice["weight"]), True
        return backlog, True

    def _score_weights(self, row: int, at: float, known: Any, share: float,
                       backlog: Backlog, realised: float, duration: float) -> None:
        """Keep each start candidate's mean for this launch (its load forecast over the
        served prediction's window, ``duration`` seconds), scored once it has finished."""
        if not backlog.job_means:
            return
        arrivals = self.forecasts.hosts([row], [self.names[row]], [known],
                                        known.epoch_seconds, duration, arrivals_only=True)
        means = [predict_mean(arrivals, share, DIST, backlog=[backlog.weighted(c)])
                 for c in self.weights.weights]
        if self.weights.settings.carried:
            carried = self.forecasts.hosts([row], [self.names[row]], [known],
                                           known.epoch_seconds, duration)
            means.append(predict_mean(carried, share, DIST))
        self.weight_pending.append((row, at + realised, realised, np.array(means)))

    def single(self, at: float, views: list, scored: bool = True) -> None:
        """One launch on every station; a shadow one (``scored`` False) only feeds the
        calibrators, with the views they correct."""
        realised_all = [simulate_trace_many(trace, self.work, np.full(self.work.size, at))
                        for trace in self.traces]
        names = MODEL_VIEWS if scored else {v: MODEL_VIEWS[v] for v in CALIBRATED.values()}
        for k, (estimate, known) in enumerate(views):
            day = day_host(self.names[k], estimate)
            backlog, _ = snapshot_backlog(known, day)
            rho = min(last_utilisation(known), NAIVE_MAX_UTILISATION)
            for j, w in enumerate(self.work):
                realised = float(realised_all[k][j])
                if at + realised > self.ends[k] or not (scored or float(w) in self.lengths):
                    continue
                shares = {self.keys[k]: float(w)}
                record = scored and float(w) in self.scored_work
                if record:
                    self._record("naive", at, float(w), shares, realised, w / (1.0 - rho),
                                 None)
                reported_by, means_by, view_means = {}, {}, {}
                for name, (window, start) in names.items():
                    begin, arrivals = self._start(start, k, backlog)
                    if window == "day":
                        p = predict([day], w, DIST, backlog=[begin])
                    else:
                        p, _, _ = self._settled([k], [known], at, w, [begin],
                                             arrivals_only=arrivals)
                        if start == "weighted" and record:
                            self._score_weights(k, at, known, float(w), backlog, realised,
                                                p.mean)
                    q = np.array([p.quantiles[level] for level in LEVELS])
                    if record:
                        self._record(name, at, float(w), shares, realised, p.mean, q)
                    for calibrated, view in CALIBRATED.items():
                        if view == name:
                            # the floor the walk's time is exact against: the work
                            # itself (tau 1), not the partition's arithmetic of it
                            key = calibrated + JOBS_RUNNING if (
                                calibrated in BY_JOBS_RUNNING and backlog.job_means) \
                                else calibrated
                            reported_by[calibrated] = self._calibrate(
                                key, k, float(w), at, realised, q, float(w))
                            means_by[calibrated] = p.mean
                    view_means[name] = p.mean
                if not record:
                    continue
                if known.running is not None:
                    # a one-host answer's mean on a one-core station whose state a snapshot
                    # gave (scheduler.combined_mean), held at the age floor where jobs run
                    means_by[DEFAULT_PREDICTOR] = one_host_mean_seconds(
                        means_by[DEFAULT_PREDICTOR], view_means[RECORD_VIEW],
                        age_floor_seconds(float(w), backlog))
                for calibrated, reported in reported_by.items():
                    other = ENVELOPE.get(calibrated)
                    if other is not None and backlog.job_means:
                        reported = envelope_of(reported, reported_by[other])
                    self._record(calibrated, at, float(w), shares, realised,
                                 means_by[calibrated], reported)

    def _settled(self, rows: list[int], knowns: list, at: float, work: float,
                 backlogs: list[Backlog], shares: np.ndarray | None = None,
                 arrivals_only: bool | list[bool] = False, held: bool = True):
        epoch = knowns[0].epoch_seconds
        names = [self.names[k] for k in rows]
        found: dict[str, Any] = {}

        def mean_for(duration: float) -> float:
            found["hosts"] = self.forecasts.hosts(rows, names, knowns, epoch, duration,
                                                  arrivals_only=arrivals_only, held=held)
            found["window"] = duration
            return predict_mean(found["hosts"], work, DIST, backlog=backlogs, shares=shares)

        settle_duration(mean_for, work)
        # the whole law once, on the window the settled mean came from (seconds; a window's
        # forecast can move with its length, so the rounds may stop short of a fixed point)
        return (predict(found["hosts"], work, DIST, backlog=backlogs, shares=shares),
                found["hosts"], found["window"])
