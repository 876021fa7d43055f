"""The back-test's split launches (``parallel``): one task of each length split over every
station, and what a manager serves for it (see :mod:`ghs.backtest.engine`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ghs.backtest.scoring import (
    DIST,
    LEVELS,
    MODEL_VIEWS,
    PARALLEL_CALIBRATED,
    RECOMBINED,
    RECOMBINED_UNFLOORED,
    RECOMBINED_VIEW,
)
from ghs.backtest.views import day_host, last_utilisation, snapshot_backlog
from ghs.experiments.partition import NAIVE_MAX_UTILISATION
from ghs.manager.envelope import running_jobs
from scheduler import predict, predict_mean
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS, calibrated_prediction
from scheduler.calibrated_selection import length_factors, shared_table
from scheduler.combined_mean import split_mean_seconds
from scheduler.conformal import TAIL_LEVELS, with_pooled
from scheduler.host_quantiles import host_quantiles
from scheduler.level_knots import reported_quantiles
from scheduler.no_delay import SLACK as NO_DELAY_SLACK
from scheduler.no_delay import NoDelayRecord, ended_on_dedicated
from scheduler.trace_simulation import simulate_trace_many

# the far-tail corrections pooled over the stations, beside each station's own (RECOMBINED)
RECOMBINED_TAIL = f"{RECOMBINED}-tail"


class SplitLaunches:
    """The split launches of a back-test run (mixed into the engine's run, whose state and
    single-host helpers they use)."""

    names: list[str]
    keys: list[str]
    traces: list[Any]
    ends: np.ndarray
    work: np.ndarray
    lengths: np.ndarray
    host_lengths: np.ndarray
    scored_work: set[float]
    calibrators: dict[tuple[str, float], Any]
    unfinished: list[dict[str, Any]]
    # each station's shadow launches that ended on their dedicated time, and those whose
    # outcome is not known yet: (known at, station, length index, busy, on time)
    no_delay: NoDelayRecord
    no_delay_pending: list[tuple[float, int, int, bool, bool]]

    def parallel(self, at: float, views: list, scored: bool = True) -> None:
        """One split task of each length; a shadow one (``scored`` False) only feeds the
        calibrators, with the views they correct."""
        rows = list(range(len(views)))
        names = MODEL_VIEWS if scored else {
            v: MODEL_VIEWS[v] for v in PARALLEL_CALIBRATED.values()}
        knowns = [known for _, known in views]
        days = [day_host(self.names[k], e) for k, (e, _) in enumerate(views)]
        backlogs = [snapshot_backlog(known, day)[0] for known, day in zip(knowns, days)]
        free = 1.0 - np.minimum([last_utilisation(k) for k in knowns], NAIVE_MAX_UTILISATION)
        busy = [running_jobs(b) for b in backlogs]
        self.settle_no_delay(at)
        self._host_shadows(at, knowns, backlogs)
        for w in self.work:
            w = float(w)
            if not (scored or w in self.lengths):
                continue
            record = scored and w in self.scored_work
            if record:
                naive_shares = w * free / free.sum()
                self._parallel_record("naive", at, w, naive_shares, w / free.sum(), None)
            for name, (window, start) in names.items():
                chosen = [self._start(start, k, b) for k, b in enumerate(backlogs)]
                starts, arrivals = [b for b, _ in chosen], [a for _, a in chosen]
                if window == "day":
                    p = predict(days, w, DIST, backlog=starts)
                else:
                    # the split's view leaves the new arrivals unheld, its mean combined with
                    # the held one's below (scheduler.combined_mean); its calibrators'
                    # single-host launches keep the hold, as one-host answers
                    p, seen, window_seconds = self._settled(rows, knowns, at, w, starts,
                                                            arrivals_only=arrivals, held=False)
                q = np.array([p.quantiles[level] for level in LEVELS])
                shares = np.asarray(p.shares)
                served_mean = p.mean
                if record and window != "day" and any(arrivals):
                    served_mean = self._split_mean(p, seen, rows, knowns, w, starts,
                                                   arrivals, window_seconds)
                realised, finish = self._parallel_record(name, at, w, shares, p.mean, q,
                                                         keep=record)
                if realised is None:
                    if record:
                        # the predictors served from this view split as it does
                        for calibrated, view in PARALLEL_CALIBRATED.items():
                            if view == name:
                                self._unfinished(calibrated, at, w, shares, served_mean,
                                                 finish, self._served_quantiles(
                                                     calibrated, 0, w, q, float(shares.max())))
                        if name == RECOMBINED_VIEW:
                            for served, floored in ((RECOMBINED, True),
                                                    (RECOMBINED_UNFLOORED, False)):
                                self._unfinished(served, at, w, shares, served_mean, finish,
                                                 self._recombined(p, busy, floored))
                    continue
                if start == "weighted" and record:
                    for k in np.nonzero(shares > 0)[0]:
                        self._score_weights(int(k), at, knowns[k], float(shares[k]),
                                            backlogs[k], finish[k], p.mean)
                for calibrated, view in PARALLEL_CALIBRATED.items():
                    if view == name:
                        reported = self._calibrate(calibrated, 0, w, at, realised, q,
                                                   float(shares.max()))
                        if record:
                            self._parallel_record(calibrated, at, w, shares, served_mean,
                                                  reported)
                if name == RECOMBINED_VIEW and record:
                    for served, floored in ((RECOMBINED, True), (RECOMBINED_UNFLOORED, False)):
                        self._parallel_record(served, at, w, shares, served_mean,
                                              self._recombined(p, busy, floored))

    def _split_mean(self, prediction: Any, unheld: list, rows: list[int], knowns: list,
                    work: float, starts: list[Backlog], arrivals: list[bool],
                    window_seconds: float) -> float:
        """The mean a manager serves for the split (seconds): the geometric mean of its
        view's (``unheld``: its hosts, seen over ``window_seconds``) and that of the same
        shares with the new arrivals held to each station's long-run utilisation, over the
        same window (:func:`split_mean_seconds`); the view's own where no station's arrivals
        were held, as a manager's."""
        held = self.forecasts.hosts(rows, [self.names[k] for k in rows], knowns,
                                    knowns[0].epoch_seconds, window_seconds,
                                    arrivals_only=arrivals)
        if held == unheld:
            return float(prediction.mean)
        held_mean = predict_mean(held, work, DIST, shares=prediction.shares, backlog=starts)
        return split_mean_seconds(prediction.mean, held_mean)

    def _host_shadows(self, at: float, knowns: list, backlogs: list[Backlog]) -> None:
        """A single-host shadow launch on every station at each of a manager's task lengths,
        in the view a manager's answer for several hosts calibrates (the state start): each
        teaches that station's own calibrator of that length, and the far tail pooled over
        the stations, once its outcome is known."""
        _, start = MODEL_VIEWS[RECOMBINED_VIEW]
        lengths = self.host_lengths
        for k, (known, backlog) in enumerate(zip(knowns, backlogs)):
            realised = simulate_trace_many(self.traces[k], lengths, np.full(lengths.size, at))
            begin, arrivals = self._start(start, k, backlog)
            busy = running_jobs(backlog)
            for j, (length, seconds) in enumerate(zip(lengths.tolist(), realised.tolist())):
                if at + seconds > self.ends[k]:
                    continue
                # known once it ends or runs past its dedicated time (either way, not only
                # when it ends: the record would favour the launches that ran undisturbed)
                on_time = bool(ended_on_dedicated(seconds, length))
                self.no_delay_pending.append(
                    (at + min(seconds, length * (1.0 + NO_DELAY_SLACK)), k, j, busy, on_time))
                p, _, _ = self._settled([k], [known], at, length, [begin],
                                        arrivals_only=arrivals)
                q = np.array([p.quantiles[level] for level in LEVELS])
                self._calibrate(RECOMBINED, k, length, at, seconds, q, length)
                self._calibrate(RECOMBINED_TAIL, 0, length, at, seconds,
                                host_quantiles(p, TAIL_LEVELS)[0], length)

    def settle_no_delay(self, at: float) -> None:
        """Record the shadow launches whose chance of no delay is known by ``at``."""
        still = []
        for item in self.no_delay_pending:
            if item[0] <= at:
                self.no_delay.record(*item[1:])
            else:
                still.append(item)
        self.no_delay_pending = still

    def _recombined(self, prediction: Any, busy: list[bool] | None = None,
                    floored: bool = True) -> np.ndarray:
        """The split's quantiles as a manager serves them: each station's factors (its own
        levels' and the pooled far tail's), shared over the stations with work
        (:func:`shared_table`), at its share's dedicated time, interpolated between the
        calibrators' lengths (:func:`length_factors`), applied to its own law, and the laws
        recombined
        (:func:`scheduler.calibrated.calibrated_prediction`)."""
        rows = list(range(len(self.names)))
        table = np.stack([with_pooled(self.calibrators[RECOMBINED, float(length)],
                                      self.calibrators[RECOMBINED_TAIL, float(length)], rows)
                          for length in self.host_lengths], axis=1)
        dedicated = np.asarray(prediction.dedicated_seconds, dtype=float)
        factors = length_factors(shared_table(table, dedicated > 0), self.host_lengths,
                                 dedicated)
        no_delay = None
        if floored and len(rows) > 1:
            # a split's chance of ending on its dedicated time, from each station's record
            no_delay = self.no_delay.chances(rows, busy or [False] * len(rows), dedicated)
        served = calibrated_prediction(prediction, factors, SERVED_LEVELS, no_delay=no_delay)
        return np.array([served.quantiles[level] for level in LEVELS])

    def _parallel_record(self, predictor: str, at: float, work: float, shares: np.ndarray,
                         mean: float, quantiles: np.ndarray | None, keep: bool = True
                         ) -> tuple[float | None, list[float]]:
        """Record the launch (with ``keep``) if every share finishes inside its log: (realised
        seconds of the slowest share, each share's seconds), or (None, ...) when one does
        not."""
        finish = [float(simulate_trace_many(trace, share, at)) if share > 0 else 0.0
                  for trace, share in zip(self.traces, shares)]
        if any(at + f > end for f, end, share in zip(finish, self.ends, shares) if share > 0):
            if keep:
                self._unfinished(predictor, at, work, shares, mean, finish, quantiles)
            return None, finish
        realised = max(finish)
        if not keep:
            return realised, finish
        self._record(predictor, at, work, {key: float(s) for key, s in zip(self.keys, shares)},
                     realised, mean, quantiles)
        return realised, finish

    def _unfinished(self, predictor: str, at: float, work: float, shares: np.ndarray,
                    mean: float, finish: list[float], quantiles: np.ndarray | None) -> None:
        """Keep a scored split that ran past a station's log: its realised time is only
        known to exceed ``known_seconds`` (each share's, up to its log's end), so that
        the predictors can be compared on every launch (scoring._vs_paper) and a quantile
        below that time counted as the miss it is (scoring.summarise)."""
        known = max(min(f, end - at) for f, end, share in zip(finish, self.ends, shares)
                    if share > 0)
        self.unfinished.append({
            "predictor": predictor, "launch_seconds": at, "work": work,
            "shares": {key: float(s) for key, s in zip(self.keys, shares)},
            "known_seconds": float(known), "mean": float(mean),
            "quantiles": None if quantiles is None else dict(zip(LEVELS, map(float,
                                                                           quantiles)))})

    def _served_quantiles(self, name: str, row: int, work: float, quantiles: np.ndarray,
                          dedicated_seconds: float) -> np.ndarray:
        """The calibrated quantiles ``name`` serves for a launch, learning nothing from it:
        never before ``dedicated_seconds``. At a length no calibrator learns at, the
        manager's rule: factors interpolated between the lengths around it."""
        calibrator = self.calibrators.get((name, work))
        if calibrator is None:
            table = np.stack([self.calibrators[name, float(length)].factors([row])[0]
                              for length in self.lengths])
            return reported_quantiles(quantiles, length_factors(table, self.lengths, work),
                                      dedicated_seconds)
        return np.maximum(calibrator.adjust([row], quantiles[None])[0], dedicated_seconds)
