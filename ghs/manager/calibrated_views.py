"""How the calibrated predictor sees a host at a query: the run window's forecast load, the
start, and the calibration at the task's length (the answering half of
:class:`ghs.manager.calibration.Calibration`, which keeps the state this reads)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.manager.shadow_laws import LAW_LEVELS, LEVELS
from ghs.manager.shadow_start import starts_of
from ghs.placement import scaled
from scheduler import Host, predict_mean
from scheduler.age_floor import AGE_FLOOR_FACTOR, age_floor_seconds
from scheduler.backlog import Backlog
from scheduler.calibrated_selection import length_factors, length_weights, shared_table
from scheduler.conformal import level_name, with_pooled

# The carried view's launches that found local jobs running are calibrated apart (Mondrian
# conformal: each group's levels hold on their own). The carried load is late when a host is
# idle and early when jobs are running, and one calibrator for both covered .22-.41 of the
# busy launches at p50 and .60-.90 of the idle ones (13 back-tests of 7 logs); apart (with
# the young-record steps below), .44-.66 of the busy ones, the p90 and p95 within .02 of
# before and inside the targets on all 13, the intervals up to 17% narrower (5% wider on
# one) (README, "Back-tests on real logs"). Such launches' outcomes teach
# ``BUSY_VIEW``'s calibrators, which a one-host answer with jobs running reads. Their
# p90 and p95 stay the envelope with the held view (ghs.manager.envelope): a fifth to a
# third of a record is too few launches for their own to learn in days.
BUSY_VIEW = "carried-busy"
# The one-host answer's calibrators (the carried view's, both sets) take larger steps while a
# host's record is young: step x sqrt(YOUNG_LAUNCHES / (n + 1)) for its n-th outcome, the
# step itself from the YOUNG_LAUNCHES-th on (scheduler.conformal). Apart, each set sees
# fewer outcomes and climbs from the model's factor more slowly: on a log of one station
# (Lublin, 252 scored launches in ten days) the held-out p90 and p95 covered .85 and .88;
# with these steps .88 and .93, and on the 13 back-tests p90 .88-.94 and p95 .93-.96, at
# p90/p50 up to a fifth wider than with the plain step (README, "Back-tests on real logs").
# The state view's calibrators (what a split reads) keep the plain step.
YOUNG_LAUNCHES = 30.0


class CalibratedViews:
    """Queries on a calibration's state: ``bank`` (forecasts, rows 2k and 2k + 1 of host
    row k), ``weights`` (start choices), ``no_delay`` (launches that ended on their
    dedicated time), ``calibrators`` (view -> one per task length),
    ``lengths`` (seconds) and ``lock``."""

    bank: Any
    weights: Any
    no_delay: Any
    calibrators: dict[str, list[Any]]
    tails: dict[str, list[Any]]
    lengths: np.ndarray
    lock: Any

    def view_hosts(self, tracks: Sequence[Any], days: Sequence[Host],
                   backlogs: Sequence[Backlog], at: Any, duration_seconds: float,
                   mode: str = "carried", held: bool = True
                   ) -> tuple[list[Host], list[Backlog], list[dict[str, Any]]]:
        """Each host as the calibrated predictor sees a run of ``duration_seconds`` from
        ``at`` (epoch seconds, one for all or one per host): the forecast load, the start,
        and what was used (JSON). ``mode``: ``carried`` (idle under the forecast measured
        load, which carries the jobs running now), ``state`` (the given start, its jobs held
        as backlog under the forecast load of new arrivals) or ``record`` (for a host with
        jobs running, the start of lowest recent error on its record; else as ``state``).
        ``held``: a view that holds the jobs as backlog holds the new arrivals' load to at
        most the host's long-run utilisation (:func:`ghs.manager.shadow_start.arrivals_load`);
        a split's own view does not (see ``QueryService._calibrated_view``)."""
        return self._view_of(*self._window(tracks, at, duration_seconds), tracks, days,
                             backlogs, mode, held)

    def one_host_means(self, track: Any, day: Host, backlog: Backlog, at: float,
                       duration_seconds: float, prediction: Any, dist: str,
                       scale: float | None, described: dict[str, Any]
                       ) -> tuple[float | None, float]:
        """(age floor or None, the record view's mean), seconds, that a one-host answer's mean
        on a host of one core whose state a fresh snapshot gave is combined with
        (:func:`scheduler.combined_mean.one_host_mean_seconds`): the floor where jobs run,
        and the record's view of the same work over the same window. Each is described in
        ``described`` (``mean_floor``, ``record_start``)."""
        floor = age_floor_seconds(float(prediction.dedicated_seconds[0]), backlog, day.cores)
        if floor is not None:
            described["mean_floor"] = {"seconds": floor, "factor": AGE_FLOOR_FACTOR,
                                       "job_ages_seconds": list(backlog.job_ages),
                                       "applied": floor > prediction.mean}
        held, starts, seen = self.view_hosts([track], [day], [backlog], np.array([at]),
                                             duration_seconds, "record")
        record = predict_mean(scaled(held, None if scale is None else [scale]),
                              float(np.sum(prediction.shares)), dist, backlog=starts)
        described["record_start"] = {**seen[0], "mean_seconds": record}
        return floor, record

    def held_split_mean(self, tracks: Sequence[Any], days: Sequence[Host],
                        backlogs: Sequence[Backlog], at: Any, duration_seconds: float,
                        mode: str, shares: Sequence[float], dist: str,
                        scales: Sequence[float] | None = None) -> float | None:
        """A split's other mean (seconds; :func:`scheduler.combined_mean.split_mean_seconds`):
        its ``shares`` (reference-CPU-seconds per host) seen in its ``mode`` view over the
        same window with each host's new arrivals held to its long-run utilisation. None
        where no host's arrivals were held: the two views are then the same."""
        hosts, starts, described = self.view_hosts(tracks, days, backlogs, at,
                                                   duration_seconds, mode, held=True)
        if not any(d["forecast"]["held_to_long_run"] for d in described):
            return None
        return predict_mean(scaled(hosts, scales), float(np.sum(shares)), dist,
                            shares=shares, backlog=starts)

    def _window(self, tracks: Sequence[Any], at: Any, duration_seconds: float
                ) -> tuple[Any, np.ndarray]:
        """The window forecast of each host's lam and rho, and each host's start choice."""
        return self._windows(tracks, at, [duration_seconds])[0]

    def _windows(self, tracks: Sequence[Any], at: Any, durations_seconds: Any
                 ) -> list[tuple[Any, np.ndarray]]:
        """:meth:`_window` for each of several run lengths (seconds) at once: a list of
        lengths for every host, or an array (hosts, lengths) of each host's own."""
        rows = np.array([[2 * t.row, 2 * t.row + 1] for t in tracks]).reshape(-1)
        launch = np.repeat(np.broadcast_to(np.asarray(at, dtype=float), (len(tracks),)), 2)
        own = np.asarray(durations_seconds, dtype=float)
        lengths = [np.repeat(np.maximum(own[:, j], 1.0), 2) for j in range(own.shape[1])] \
            if own.ndim == 2 else [max(float(d), 1.0) for d in durations_seconds]
        with self.lock:
            found = self.bank.forecast_windows(rows, launch, lengths)
            choices = self.weights.choose([t.row for t in tracks])
        return [(window, choices) for window in found]

    def _view_of(self, found: Any, choices: np.ndarray, tracks: Sequence[Any],
                 days: Sequence[Host], backlogs: Sequence[Backlog], mode: str,
                 held: bool = True
                 ) -> tuple[list[Host], list[Backlog], list[dict[str, Any]]]:
        values = found.value.reshape(-1, 2)
        long_run = found.long_run.reshape(-1, 2)[:, 1]
        held_to = long_run if held else np.full(long_run.shape, np.nan)
        hosts, starts, described = [], [], []
        for k, (day, backlog) in enumerate(zip(days, backlogs)):
            busy = backlog.kind == "jobs" and bool(backlog.job_means)
            if mode == "carried":
                choice = {"start": "carried"}
            elif mode == "record" and busy:
                choice = self.weights.describe(int(choices[k]))
            else:
                choice = {"start": "state"}
            carried = choice["start"] == "carried" or backlog.kind == "idle"
            hosts.append(starts_of(day, values[k], arrivals_only=not carried,
                                   long_run_rho=float(held_to[k])))
            if choice["start"] == "carried":
                starts.append(Backlog.idle())
            else:
                starts.append(backlog.weighted(choice.get("weight", 1.0)))
            described.append({
                "start": choice, "scored_launches": int(self.weights.scored[tracks[k].row]),
                "forecast": {"lam_per_second": _forecaster(found, 2 * k),
                             "rho": _forecaster(found, 2 * k + 1),
                             "load": "arrivals" if not carried else "measured",
                             "long_run_rho": _number(long_run[k]),
                             # the arrivals' rate lowered to the long-run utilisation's
                             "held_to_long_run": bool(not carried
                                                      and hosts[-1].lam < values[k, 0])}})
        return hosts, starts, described

    def factors(self, tracks: Sequence[Any], dedicated_seconds: Sequence[float],
                mode: str = "carried", shared: bool = False,
                jobs_running: Sequence[bool] | None = None
                ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """(hosts, LAW_LEVELS) quantile factors from the ``mode`` view's calibrators (the
        host's own levels, then the far tail pooled over hosts), each host's interpolated at
        its dedicated time between the two task lengths around it
        (:func:`scheduler.calibrated_selection.length_factors`), and what was applied
        (JSON: the nearer length's calibrator, and both lengths with their weights). With
        ``shared`` (one task split over ``tracks``), the hosts with work take the geometric
        mean of their tables (:func:`scheduler.calibrated_selection.shared_table`); the JSON
        then gives each host's own factors too. ``jobs_running`` (one flag per host, with
        the carried view): a host with local jobs running at launch reads the calibrators
        of the carried launches that found jobs running (``BUSY_VIEW``)."""
        tails = self.tails[mode]
        busy = np.zeros(len(tracks), bool) if jobs_running is None or mode != "carried" \
            else np.asarray(jobs_running, dtype=bool)
        rows = [track.row for track in tracks]
        views = [BUSY_VIEW if b else mode for b in busy]
        own = np.stack([with_pooled(calibrator, tail, rows)
                        for calibrator, tail in zip(self.calibrators[mode], tails)], axis=1)
        if busy.any():
            apart = np.stack([with_pooled(calibrator, tail, rows)
                              for calibrator, tail in zip(self.calibrators[BUSY_VIEW], tails)],
                             axis=1)
            own = np.where(busy[:, None, None], apart, own)
        dedicated = np.asarray(dedicated_seconds, dtype=float)
        sharing = dedicated > 0
        table = shared_table(own, sharing) if shared else own
        out = length_factors(table, self.lengths, dedicated)
        own_out = length_factors(own, self.lengths, dedicated) if shared else out
        floors = self._report_floors(tracks, dedicated, out)
        lower, upper, weight = length_weights(self.lengths, dedicated)
        described, names = [], [level_name(level) for level in LAW_LEVELS]
        for k, track in enumerate(tracks):
            ends = [(int(lower[k]), 1.0 - float(weight[k])), (int(upper[k]), float(weight[k]))]
            j = ends[1][0] if weight[k] > 0.5 else ends[0][0]
            # a calibrated length itself, or beyond the ends: one calibrator
            ends = [end for end in ends if end[1] > 0] if lower[k] != upper[k] else ends[:1]
            calibrator = self.calibrators[views[k]][j]
            coverage = calibrator.coverage([track.row])[0]
            tail = tails[j]
            described.append({
                "view": views[k], "length_seconds": float(self.lengths[j]),
                "levels": list(LAW_LEVELS),
                "factors": dict(zip(names, map(float, out[k]))),
                "between": [{"length_seconds": float(self.lengths[i]), "weight": w,
                             "factors": dict(zip(names, map(float, table[k, i])))}
                            for i, w in ends],
                **({"shared": {"hosts": int(sharing.sum()),
                               "own_factors": dict(zip(names, map(float, own_out[k])))}}
                   if shared and sharing[k] and sharing.sum() > 1 else {}),
                "scored_launches": int(calibrator.scored[track.row, 0]),
                "coverage": {level: _number(c) for level, c in zip(LEVELS, coverage)},
                "pooled_tail": {level_name(level): {"scored_launches": int(n),
                                                    "coverage": _number(c),
                                                    "step": tail.steps[tail.served]}
                                for level, n, c in zip(tail.levels, tail.scored[tail.served],
                                                       tail.coverage([0])[0])},
                **({"report_floor": floors[k]} if floors[k] is not None else {})})
        return out, described

    def _report_floors(self, tracks: Sequence[Any], dedicated: np.ndarray, out: np.ndarray
                       ) -> list[dict[str, Any] | None]:
        """Hold each host's factors (``out``, hosts x LAW_LEVELS, in place) at least at the
        split-conformal floors of its real tasks' reports at its share's dedicated time
        (:mod:`scheduler.report_floor`); per host what was found (JSON; None: no report)."""
        found: list[dict[str, Any] | None] = []
        for k, track in enumerate(tracks):
            if not len(track.reports) or not dedicated[k] > 0:
                found.append(None)
                continue
            floors, comparable = track.reports.floors(float(dedicated[k]))
            ahead = out[k, :len(LEVELS)]
            held = np.isfinite(floors) & (floors > ahead)
            ahead[held] = floors[held]
            found.append({"reports": comparable,
                          "factors": {name: _number(f) for name, f in zip(LEVELS, floors)},
                          "applied": [name for name, h in zip(LEVELS, held) if h]})
        return found

    def no_delay_chances(self, tracks: Sequence[Any], dedicated_seconds: Sequence[float],
                         jobs_running: Sequence[bool]) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """(hosts,) each host's chance of ending on its share's dedicated time, from its
        record in its state at launch (:class:`scheduler.no_delay.NoDelayRecord`), and what
        it was read from (JSON): a split's law is at least their product from its longest
        share's dedicated time on (:func:`scheduler.calibrated.calibrate`)."""
        rows = [track.row for track in tracks]
        busy = np.asarray(jobs_running, dtype=bool)
        with self.lock:
            chances = self.no_delay.chances(rows, busy, dedicated_seconds)
            scored = self.no_delay.scored[rows, :, busy.astype(int)]
        return chances, [{"chance": float(c), "jobs_running": bool(b),
                          "scored_launches": int(n.sum())}
                         for c, b, n in zip(chances, busy, scored)]

    def no_delay_table(self, tracks: Sequence[Any], jobs_running: Sequence[bool]
                       ) -> np.ndarray:
        """(hosts, lengths) each host's chance at every calibrated length (selection's)."""
        with self.lock:
            return self.no_delay.length_table([track.row for track in tracks], jobs_running)


def _number(x: Any) -> float | None:
    """A JSON number, None where not finite."""
    value = float(x)
    return value if math.isfinite(value) else None


def _forecaster(found: Any, row: int) -> dict[str, Any]:
    return {"forecaster": found.forecaster[row], "value": _number(found.value[row]),
            "recent_error": _number(found.recent_error[row])}
