"""The outcome side of :class:`ghs.manager.calibration.Calibration`: pending shadow launches
scored once the capacity series shows how long they took (or that they overran their p95, or
one of the pooled far tail's quantiles), and completion reports of served predictions
absorbed, each moving its host's calibrators."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ghs.manager.realised import Outcomes
from scheduler.calibrated_selection import length_weights
from scheduler.no_delay import SLACK as NO_DELAY_SLACK
from scheduler.no_delay import ended_on_dedicated


class ShadowOutcomes:
    """Scoring on a calibration's state: ``views``, ``calibrators`` (view -> one per task
    length), ``weights`` (start choices), ``shadow_ledger``, ``tracks`` (host id -> track
    with ``row`` and ``pending`` launches), ``lengths`` (seconds), ``store`` and ``lock``."""

    views: tuple[str, ...]
    calibrators: dict[str, list[Any]]
    tails: dict[str, list[Any]]
    weights: Any
    shadow_ledger: Any
    tracks: dict[str, Any]
    lengths: np.ndarray
    store: Any
    lock: Any
    no_delay: Any
    _absorbed: set[tuple[int, str]]

    def _settle(self, host_id: str, track: Any, outcomes: Outcomes, now: float) -> None:
        still = []
        # read once: a host has dozens of launches pending, asked about every hour
        covered, first_view = outcomes.series.covered_until, self.views[0]
        known = outcomes.realised_seconds
        # The far tail, and the own levels of the views a split reads (STANDING_VIEWS), are
        # scored against their factors as they stand at each outcome, not at launch, one
        # outcome after another. A launch's outcome comes a task length or more later, and
        # hourly launches of one length meet the same load: the launches made before the
        # first outcomes, all scored at the factor they were made with, move it as one. At
        # 0.996 a miss moves the factor 250 times as far as a cover: it ran a 16 h length's
        # to 5,000 on 16 LCG stations in two days. Scored as it moves, a factor tracks its
        # level's quantile of realised over base.
        # (view, length) -> the host's and the pool's factors as they stand: read again
        # only after an outcome moves them (dozens of launches are pending, every hour)
        standing: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

        def own_factors(shadow: Any) -> tuple[np.ndarray, np.ndarray]:
            key = (shadow.calibrator, shadow.length)
            factors = standing.get(key)
            if factors is None:
                factors = standing[key] = self.calibrators[shadow.calibrator][
                    shadow.length].factors_and_pool(track.row)
            return factors

        def own_now(shadow: Any) -> tuple[np.ndarray, np.ndarray]:
            if shadow.at_launch is not None:
                return shadow.at_launch
            factors = own_factors(shadow)
            return (np.maximum.accumulate(shadow.base * factors[0]),
                    np.maximum.accumulate(shadow.base * factors[1]))

        def score_own(shadow: Any, missed: np.ndarray, pool_missed: np.ndarray,
                      overrun: np.ndarray | None = None) -> None:
            self.calibrators[shadow.calibrator][shadow.length].record_each(
                [track.row], missed[None], pool_missed[None],
                None if overrun is None else overrun[None])
            standing.pop((shadow.calibrator, shadow.length), None)

        # (view, length) -> every expert's far-tail factors as they stand, the same way
        # (scheduler.tail_battery: the pooled far tail runs several steps side by side)
        tail_standing: dict[tuple[str, int], np.ndarray] = {}

        def tail_factors(shadow: Any) -> tuple[np.ndarray, float]:
            # every expert's factors, and the least of their first level's
            key = (shadow.view, shadow.length)
            standing_tail = tail_standing.get(key)
            if standing_tail is None:
                factors = self.tails[shadow.view][shadow.length].expert_factors()
                standing_tail = tail_standing[key] = (factors, float(factors[:, 0].min()))
            return standing_tail

        def tail_now(shadow: Any) -> np.ndarray:
            return np.maximum.accumulate(shadow.tail[None, :] * tail_factors(shadow)[0], axis=1)

        def may_pass(shadow: Any) -> bool:
            # most pending launches are still short of every quantile they are scored at: a
            # lower bound on the least of them (each level's quantile is at least the first's,
            # at least the base times the least factor; the p95 at least its base times its
            # factor) settles that without working out the quantiles
            if not shadow.decided:
                if shadow.at_launch is not None:
                    own = float(shadow.at_launch[0][-1])
                else:
                    own = float(shadow.base[-1]) * float(own_factors(shadow)[0][-1])
                if shadow.launch + own <= now:
                    return True
            if shadow.tail_decided is not None and shadow.tail_decided.all():
                return False
            return shadow.launch + float(shadow.tail[0]) * tail_factors(shadow)[1] <= now

        def tail_decided(shadow: Any, tail: np.ndarray) -> np.ndarray:
            if shadow.tail_decided is None:
                shadow.tail_decided = np.zeros(tail.shape, bool)
            return shadow.tail_decided

        def score_tail(shadow: Any, missed: np.ndarray, known_now: np.ndarray) -> None:
            self.tails[shadow.view][shadow.length].record(missed, known_now)
            tail_standing.pop((shadow.view, shadow.length), None)

        def score_tail_loss(shadow: Any, realised: float, quantiles: np.ndarray) -> None:
            # the loss chooses the expert served, not any expert's factors: nothing to read again
            self.tails[shadow.view][shadow.length].score(realised, shadow.tail, quantiles)

        def no_delay(shadow: Any, realised: float | None) -> None:
            # one outcome per launch and length; known once the launch ends or runs past its
            # dedicated time (waiting for the end would favour the undisturbed launches)
            if shadow.no_delay_known or shadow.view != first_view:
                return
            bound = shadow.dedicated * (1.0 + NO_DELAY_SLACK)
            if realised is not None and shadow.launch + min(realised, bound) <= now:
                on_time = bool(ended_on_dedicated(realised, shadow.dedicated))
            elif shadow.launch + bound <= now and outcomes.overran(
                    shadow.launch, shadow.dedicated, bound):
                on_time = False
            else:
                return
            self.no_delay.record(track.row, shadow.length, shadow.busy, on_time)
            shadow.no_delay_known = True

        for shadow in track.pending:
            if shadow.launch >= now:
                still.append(shadow)
                continue
            realised = known(shadow.launch, shadow.dedicated)
            no_delay(shadow, realised)
            if realised is not None and shadow.launch + realised <= now:
                if not shadow.decided:
                    reported, pooled = own_now(shadow)
                    score_own(shadow, realised > reported, realised > pooled,
                              np.log(realised / reported))
                tail = tail_now(shadow)
                if not tail_decided(shadow, tail).all():
                    score_tail(shadow, realised > tail, ~shadow.tail_decided)
                score_tail_loss(shadow, realised, tail)
                if shadow.candidates is not None:
                    self.weights.record([track.row], [realised], shadow.candidates[None])
                if shadow.view == first_view:  # one outcome per launch and length
                    self.shadow_ledger.outcome(realised, host_id, shadow.launch, shadow.dedicated)
                continue
            # a miss known before the task ends: of every level once it has run past its
            # reported p95, of the far tail once past that
            newly = False
            if not may_pass(shadow):
                if covered < shadow.launch + 30 * 86400.0:
                    still.append(shadow)
                continue
            if not shadow.decided:
                reported, pooled = own_now(shadow)
                if shadow.launch + reported[-1] <= now and outcomes.overran(
                        shadow.launch, shadow.dedicated, float(reported[-1])):
                    score_own(shadow, np.ones(reported.shape, bool), pooled > 0)
                    shadow.decided = newly = True
            tail = tail_now(shadow)
            passed = ~tail_decided(shadow, tail) & (shadow.launch + tail <= now)
            for expert in np.flatnonzero(passed.any(axis=1)):
                # the quantiles are non-decreasing: past one, past every one below it
                for k in np.flatnonzero(passed[expert])[::-1]:
                    if outcomes.overran(shadow.launch, shadow.dedicated,
                                        float(tail[expert, k])):
                        known_now = np.zeros(passed.shape, bool)
                        known_now[expert, :k + 1] = passed[expert, :k + 1]
                        score_tail(shadow, np.ones(passed.shape, bool), known_now)
                        shadow.tail_decided = shadow.tail_decided | known_now
                        newly = True
                        break
            if newly or covered < shadow.launch + 30 * 86400.0:
                still.append(shadow)
        track.pending = still
        waiting = track.unknown_until
        if len(waiting) > len(still):
            keep = {(shadow.launch, shadow.dedicated) for shadow in still}
            for key in [key for key in waiting if key not in keep]:
                del waiting[key]

    def absorb_reports(self, since_epoch_seconds: float) -> int:
        """Feed completion reports of served predictions (``ghs report``, the Dask adapter)
        to the calibrators: each reported share is one more scored launch of its host,
        against the quantiles it was served. It teaches the calibrators it was served from:
        the two task lengths around its share's dedicated time, each in proportion to its
        weight there (:func:`length_weights`, the rule its factors were read by), so a
        miss of a 2 h share moves the 1 h and the 4 h calibrators alike. A prediction
        recorded without the dedicated time teaches the length nearest its predicted mean.
        A share recorded with the model's own quantiles also joins its host's report floor
        (:mod:`scheduler.report_floor`). Each is taken once. Returns how many were taken."""
        taken = 0
        with self.lock:
            for outcome in self.store.reported_outcomes(since_epoch_seconds):
                key = (outcome.prediction_id, outcome.host)
                track = self.tracks.get(outcome.host)
                if key in self._absorbed or track is None or not outcome.realised_seconds > 0:
                    continue
                self._absorbed.add(key)
                served = np.array([outcome.p50_seconds, outcome.p90_seconds,
                                   outcome.p95_seconds])
                missed = (outcome.realised_seconds > served)[None]
                with np.errstate(divide="ignore"):
                    overrun = np.log(outcome.realised_seconds / served)[None]
                # the report does not say which start served it: it moves every view's
                for kept in self.calibrators.values():
                    for j, weight in self._taught(outcome):
                        kept[j].record([track.row], missed, missed, weight=[weight],
                                       overrun=overrun)
                if outcome.model_quantiles is not None and outcome.dedicated_seconds:
                    track.reports.add(outcome.dedicated_seconds, outcome.realised_seconds,
                                      outcome.model_quantiles)
                taken += 1
        return taken

    def _taught(self, outcome: Any) -> list[tuple[int, float]]:
        """(length index, weight) of each calibrator a reported share teaches."""
        if outcome.dedicated_seconds is None:
            return [(int(np.argmin(np.abs(np.log(self.lengths) - math.log(
                max(outcome.predicted_mean_seconds, 1.0))))), 1.0)]
        lower, upper, weight = (float(x) for x in length_weights(
            self.lengths, outcome.dedicated_seconds))
        if lower == upper:
            return [(int(lower), 1.0)]
        return [(int(j), w) for j, w in ((lower, 1.0 - weight), (upper, weight)) if w > 0]
