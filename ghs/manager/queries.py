"""Answers to status, predict, schedule and eta queries, from the current host estimates.

Every predict and schedule answer is recorded in the track record (ghs.manager.track) and
carries its ``prediction_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ghs.config import SchedulerConfig
from ghs.errors import GhsError
from ghs.manager.calibration import Calibration
from ghs.manager.envelope import held_envelope, running_jobs
from ghs.manager.estimates import EstimateCache, HostState
from ghs.manager.record_view import manager_backtest
from ghs.manager.state import host_backlog
from ghs.placement import load_scales, placed, scaled
from protocol import (
    AccuracyReply,
    AccuracyRequest,
    EtaReply,
    EtaRequest,
    Message,
    ReportReply,
    ReportRequest,
)
from scheduler import Backlog, Host, Prediction, predict, predict_mean, schedule
from scheduler.calibrated import calibrated_prediction
from scheduler.calibrated_selection import SelectionCalibration
from scheduler.eta import remaining
from scheduler.selection import Exclusion

TRACKING_REQUESTS = (EtaRequest, ReportRequest, AccuracyRequest)


QUERY_CATCH_UP_HOURS = 2


class UnknownHostError(GhsError):
    """A query named a host the manager has never heard of, or one it cannot use."""

    code = "unknown_host"


def host_parameters(hosts: Sequence[Host], backlogs: Sequence[Backlog] | None = None,
                    described: Mapping[str, dict[str, Any]] | None = None
                    ) -> list[dict[str, Any]]:
    """Hosts as plain maps, with the state each started from, so a client can rebuild the
    same Prediction locally and a person can see why."""
    rows = []
    for index, h in enumerate(hosts):
        row = {"name": h.name, "lam": h.lam, "mu": h.mu, "sigma": h.sigma, "rho": h.rho,
               "tau": h.tau, "cores": h.cores}
        # how its processes run (scheduler.placement.migrating), where it changes the law
        if h.core_rho is not None:
            row["core_rho"] = h.core_rho
        if h.pooled:
            row["pooled"] = True
        if backlogs is not None:
            row["backlog"] = backlogs[index].to_dict()
            row["start"] = (described or {}).get(h.name)
        rows.append(row)
    return rows


class QueryService:
    """Status, predict and schedule from ``cache``; ``clock`` is real epoch seconds."""

    def __init__(self, cache: EstimateCache, settings: SchedulerConfig, *,
                 stale_after_seconds: float, clock: Callable[[], float],
                 snapshot_fresh_seconds: float = 180.0) -> None:
        self.cache = cache
        self.settings = settings
        self.stale_after_seconds = stale_after_seconds
        self.snapshot_fresh_seconds = snapshot_fresh_seconds
        self.clock = clock
        self.calibration = Calibration(cache.store, snapshot_fresh_seconds=snapshot_fresh_seconds,
                                       start_by_record=settings.start_choice == "record")

    @property
    def calibrated(self) -> bool:
        return self.settings.predictor == "calibrated"

    def refresh(self, chunk_hours: int = 6) -> int:
        """One pass bringing every host's forecast and calibration up to date, at most
        ``chunk_hours`` of each host's record (shadow launches made; call again while > 0)."""
        made = self.calibration.advance_hosts(
            [(facts.host_id, facts.cores) for facts in self.cache.store.hosts()],
            max_hours=chunk_hours)
        # reports of the last two days (what a restarted manager's record spans)
        self.calibration.absorb_reports(self.clock() - 2 * 86400.0)
        return made

    def _top_up(self, host_id: str, cores: int) -> None:
        """A query brings a nearly current host up to date; a long catch-up is left to the
        background refresh (the host is answered from the record it has so far)."""
        latest = self.cache.store.streams.latest_epoch_seconds(host_id)
        self.calibration.latest_seen[host_id] = latest
        if self.calibration.hours_behind(host_id, latest) <= QUERY_CATCH_UP_HOURS:
            self.calibration.advance(host_id, cores, latest_epoch_seconds=latest)

    def backtest(self, hosts: Sequence[str] | None = None,
                 work_seconds: Sequence[float] | None = None,
                 launch_every_seconds: float | None = None,
                 start_seconds: float | None = None) -> dict[str, Any]:
        """The manager's record of its own predictions (see ghs.manager.record_view)."""
        known = {facts.host_id: facts for facts in self.cache.store.hosts()}
        for name in hosts or ():
            if name not in known:
                raise UnknownHostError(f"unknown host {name!r}", field="hosts", value=name)
        for name in hosts or known:
            self._top_up(name, known[name].cores)
        return manager_backtest(self.calibration.ledger(hosts),
                                lengths_seconds=list(self.calibration.lengths),
                                work_seconds=work_seconds,
                                launch_every_seconds=launch_every_seconds,
                                start_seconds=start_seconds)

    def _calibrated_view(self, chosen: Sequence[Host], backlogs: list[Backlog] | None,
                         work_seconds: float, predict_with: Callable[..., Any],
                         scales: Sequence[float] | None = None, age_floor: bool = False
                         ) -> tuple[Any, list[Host], list[Backlog], list[dict[str, Any]]]:
        """Run ``predict_with(hosts, backlogs)`` on the forecast view of ``chosen`` for the
        task's own run window (two rounds: the window's load sets the run), then calibrate
        the resulting prediction with each host's factors. Returns (result, hosts, starts,
        per-host descriptions). The start (``scheduler.start_choice``): ``auto`` carries
        the running jobs in the measured load when the task has one host, and holds them as
        each host's backlog when it is split over several (the split must see which hosts
        are busy now); the back-tests chose both, and that a split's view leaves the new
        arrivals' load unheld where a one-host view holds it to the long-run level
        (:func:`ghs.manager.shadow_start.arrivals_load`). ``scales``: each host's load
        scaling by where its processes run (``ghs.placement.load_scales``), applied to the
        forecast.
        ``age_floor``: a fresh answer for one host of one core holds its mean at the work
        plus half the running jobs' ages (:mod:`scheduler.age_floor`); not an ETA, whose
        record was not measured with it."""
        starts_in = backlogs or [Backlog.steady_state()] * len(chosen)
        mode = self._start_mode(len(chosen))
        tracks = []
        for host in chosen:
            self._top_up(host.name, host.cores)
            tracks.append(self.calibration.track(host.name, host.cores))
        now = self.clock()
        # each host's newest record as its catch-up check looked it up (once per host)
        at = np.array([self.calibration.latest_seen.get(h.name) or now for h in chosen])
        duration = predict_mean(list(chosen), work_seconds, self.settings.distribution,
                                backlog=starts_in)
        one_host = len(chosen) == 1
        for _ in range(2):
            window = duration  # what the hosts were seen over
            hosts, starts, described = self.calibration.view_hosts(tracks, chosen, starts_in,
                                                                   at, window, mode, one_host)
            hosts = scaled(hosts, scales)
            result = predict_with(hosts, starts)
            prediction = result.prediction if hasattr(result, "prediction") else result
            duration = prediction.mean
        used = {h.name: k for k, h in enumerate(hosts)}
        kept = [used[name] for name in prediction.hosts]
        # a split's hosts share their factors (scheduler.calibrated_selection.shared_table)
        factors, applied = self.calibration.factors(
            [tracks[k] for k in kept], list(prediction.dedicated_seconds), mode,
            shared=len(kept) > 1, jobs_running=[running_jobs(starts_in[k]) for k in kept])
        envelopes: list[dict[str, Any] | None] = [None] * len(kept)
        if mode == "carried":
            factors, envelopes = held_envelope(self.calibration, tracks, chosen, starts_in, at,
                                               duration, prediction, kept, factors,
                                               self.settings.distribution, scales)
        floor = record = None
        if age_floor and mode == "carried" and len(kept) == 1 \
                and chosen[kept[0]].cores == 1 and starts_in[kept[0]].kind == "jobs":
            # one core whose state a fresh snapshot gave (scheduler.combined_mean)
            one = kept[0]
            floor, record = self.calibration.one_host_means(
                tracks[one], chosen[one], starts_in[one], at[one], duration, prediction,
                self.settings.distribution, None if scales is None else scales[one],
                described[one])
        split_held = None
        if age_floor and not one_host:
            # a split's (or a pool's pick's) mean combined with the held view's
            split_held = self.calibration.held_split_mean(
                [tracks[k] for k in kept], [chosen[k] for k in kept],
                [starts_in[k] for k in kept], at[kept], window, mode, prediction.shares,
                self.settings.distribution, None if scales is None else [scales[k] for k in kept])
        no_delay, no_delay_seen = None, [None] * len(kept)
        if len(kept) > 1:
            # a split's chance of ending on its dedicated time (scheduler.no_delay)
            no_delay, no_delay_seen = self.calibration.no_delay_chances(
                [tracks[k] for k in kept], list(prediction.dedicated_seconds),
                [running_jobs(starts_in[k]) for k in kept])
        calibrated = calibrated_prediction(prediction, factors, self.calibration.levels,
                                           floor, record, split_held, no_delay)
        for i, (k, detail, envelope) in enumerate(zip(kept, applied, envelopes)):
            described[k]["calibration"] = detail if envelope is None else {
                **detail, "envelope": envelope,
                "factors": dict(zip(detail["factors"], map(float, factors[i])))}
            if no_delay_seen[i] is not None:
                described[k]["calibration"]["no_delay"] = no_delay_seen[i]
        if hasattr(result, "prediction"):
            result = replace(result, prediction=calibrated)
        else:
            result = calibrated
        return result, hosts, starts, described

    def _start_mode(self, hosts: int) -> str:
        mode = self.settings.start_choice
        if mode == "auto":
            mode = "carried" if hosts == 1 else "state"
        return mode

    def _selection_calibration(self, hosts: Sequence[Host],
                               starts: Sequence[Backlog] | None) -> SelectionCalibration:
        """Each host's factors at every calibrated task length, and its chance of ending on
        its dedicated time in its state at launch (``starts``), for selection to rank sets
        by the calibrated law served (the view and rule ``_calibrated_view`` applies
        after)."""
        tracks = [self.calibration.track(h.name, h.cores) for h in hosts]
        mode = self._start_mode(len(hosts))
        lengths = [float(length) for length in self.calibration.lengths]
        table = np.stack([self.calibration.factors(tracks, [length] * len(hosts), mode)[0]
                          for length in lengths], axis=1)
        names = [h.name for h in hosts]
        busy = [running_jobs(start) for start in starts] if starts else [False] * len(hosts)
        no_delay = self.calibration.no_delay_table(tracks, busy)
        return SelectionCalibration(tuple(lengths), dict(zip(names, table)),
                                    self.calibration.levels, dict(zip(names, no_delay)))

    def backlogs(self, hosts: Sequence[Host]) -> tuple[list[Backlog] | None,
                                                      dict[str, dict[str, Any]]]:
        """Each host's state at launch (see ghs.manager.state) and its description."""
        if self.settings.start_state == "idle":
            return None, {}
        streams = self.cache.store.streams
        backlogs, described = [], {}
        for host in hosts:
            if self.settings.start_state == "steady-state":
                running, fresh = None, False
            else:
                running = streams.latest_running(host.name)
                latest = streams.latest_epoch_seconds(host.name)
                fresh = (running is not None and latest is not None and
                         latest - running["epoch_seconds"] <= self.snapshot_fresh_seconds)
            templates = streams.templates(host.name) if fresh else []
            backlog, description = host_backlog(host, running, templates, fresh=fresh)
            backlogs.append(backlog)
            described[host.name] = description
        return backlogs, described

    def states(self) -> list[HostState]:
        return self.cache.states(self.clock(), self.stale_after_seconds)

    def status(self, counters: Mapping[str, Any]) -> dict[str, Any]:
        return {"hosts": [state.to_dict() for state in self.states()],
                "counters": dict(counters), "time": self.clock()}

    def _usable(self, names: Sequence[str] | None
                ) -> tuple[list[Host], list[Exclusion], list[str]]:
        """Usable hosts, the ones left out, and which usable ones have provisional estimates."""
        states = self.states()
        provisional = [state.facts.host_id for state in states
                       if state.host is not None and state.estimate is not None
                       and state.estimate.provisional]
        if names:
            by_name = {state.facts.host_id: state for state in states}
            chosen = []
            for name in names:
                state = by_name.get(name)
                if state is None:
                    raise UnknownHostError(f"unknown host {name!r}", field="hosts", value=name)
                if state.host is None:
                    raise UnknownHostError(f"host {name!r} is unusable: {state.reason}",
                                           field="hosts", value=name)
                chosen.append(state.host)
            return chosen, [], provisional
        usable = [state.host for state in states if state.host is not None]
        excluded = [Exclusion(state.facts.host_id, state.reason or "unusable")
                    for state in states if state.host is None]
        if not usable:
            detail = "; ".join(f"{e.name}: {e.reason}" for e in excluded[:3])
            raise UnknownHostError("no usable hosts" + (f" ({detail})" if detail else
                                                        ": no agent has reported yet"),
                                   field="hosts", value=None)
        return usable, excluded, provisional

    def predict(self, work_seconds: float, hosts: Sequence[str] | None = None,
                distribution: str | None = None, partition: str | None = None,
                processes_per_host: int | None = None, pinned: bool | None = None
                ) -> dict[str, Any]:
        usable, excluded, provisional = self._usable(hosts)
        chosen, placement = placed(usable, self.cache.store.streams, processes_per_host, pinned)
        backlogs, described = self.backlogs(chosen)
        dist = distribution or self.settings.distribution
        split = partition or self.settings.partition
        if self.calibrated:
            result, used, starts, views = self._calibrated_view(
                chosen, backlogs, work_seconds,
                lambda hs, bs: predict(hs, work_seconds, dist, split, backlog=bs),
                load_scales(usable, chosen), age_floor=True)
            body = result.to_dict()
            body["host_parameters"] = _with_views(host_parameters(used, starts, described),
                                                  views)
        else:
            result = predict(chosen, work_seconds, dist, split, backlog=backlogs)
            body = result.to_dict()
            body["host_parameters"] = host_parameters(chosen, backlogs, described)
        body["predictor"] = self.settings.predictor
        body["excluded"] = [{"name": e.name, "reason": e.reason} for e in excluded]
        body["provisional"] = provisional
        body["placement"] = placement
        self._track(result, "predict", body)
        return body

    def _track(self, prediction: Prediction, kind: str, body: dict[str, Any]) -> None:
        """Record the answer in the track record; its id and serving time go in the body."""
        served = self.clock()
        body["prediction_id"] = self.cache.store.track.record(prediction, served, kind)
        body["served_epoch_seconds"] = served

    def eta(self, hosts: Sequence[str], shares_seconds: Sequence[float],
            fraction_done: Sequence[float], elapsed_seconds: float | None = None,
            distribution: str | None = None) -> dict[str, Any]:
        """The remaining-time law of a running task from each host's state now (its latest
        fresh running snapshot, else its steady state)."""
        chosen, _, provisional = self._usable(hosts)
        backlogs, described = self.backlogs(chosen)
        if backlogs is None:  # an idle start means nothing in the middle of a run
            backlogs = [Backlog.steady_state() for _ in chosen]
        progress = dict(zip(hosts, fraction_done))
        dist = distribution or self.settings.distribution

        def law_for(candidates: Sequence[Host], starts: Sequence[Backlog] | None) -> Any:
            return remaining(candidates, list(shares_seconds), fraction_done=progress,
                             backlog=starts, dist=dist)

        if self.calibrated:
            # the same view and calibration as a fresh answer, for the work left from now
            left = float(sum(s * (1.0 - progress.get(h, 0.0))
                             for h, s in zip(hosts, shares_seconds)))
            law, used, starts, views = self._calibrated_view(chosen, backlogs,
                                                             max(left, 1.0), law_for)
            body = law.to_dict()
            body["host_parameters"] = _with_views(host_parameters(used, starts, described),
                                                  views)
        else:
            law = law_for(chosen, backlogs)
            body = law.to_dict()
            body["host_parameters"] = host_parameters(chosen, backlogs, described)
        body["predictor"] = self.settings.predictor
        body["fraction_done"] = dict(zip(hosts, fraction_done))
        body["elapsed_seconds"] = elapsed_seconds
        body["provisional"] = provisional
        body["time"] = self.clock()
        return body

    def tracking_reply(self, message: Message) -> Message:
        """The answer to an eta, report or accuracy request (see ghs.manager.track)."""
        track = self.cache.store.track
        if isinstance(message, EtaRequest):
            return EtaReply(request_id=message.request_id, body=self.eta(
                message.hosts, message.shares_seconds, message.fraction_done,
                message.elapsed_seconds, message.distribution))
        if isinstance(message, ReportRequest):
            return ReportReply(request_id=message.request_id, body=track.report(
                message.prediction_id, message.host, message.finished_epoch_seconds,
                self.clock()))
        assert isinstance(message, AccuracyRequest)
        return AccuracyReply(request_id=message.request_id,
                             body=track.accuracy(message.since_epoch_seconds or 0.0))

    def schedule(self, work_seconds: float, hosts: Sequence[str] | None = None,
                 distribution: str | None = None, partition: str | None = None,
                 method: str | None = None, units: int | None = None,
                 rho_max: float | None = None, processes_per_host: int | None = None,
                 pinned: bool | None = None) -> dict[str, Any]:
        usable, excluded, provisional = self._usable(hosts)
        chosen, placement = placed(usable, self.cache.store.streams, processes_per_host, pinned)
        settings = self.settings
        backlogs, described = self.backlogs(chosen)

        def plan_for(candidates: Sequence[Host], starts: Sequence[Backlog] | None) -> Any:
            by_name = None if starts is None else dict(zip((h.name for h in candidates),
                                                          starts))
            # the calibrated predictor's sets are ranked by the calibrated law it serves
            calibration = self._selection_calibration(candidates, starts) \
                if self.calibrated else None
            return schedule(candidates, work_seconds, method or settings.method,
                            distribution or settings.distribution,
                            partition or settings.partition,
                            rho_max=settings.rho_max if rho_max is None else rho_max,
                            max_optimal_hosts=settings.optimal_max_hosts,
                            optimal_budget_seconds=settings.optimal_budget_seconds,
                            task_ratio=settings.task_ratio, excluded=excluded,
                            backlog=by_name, calibration=calibration)

        views = None
        if self.calibrated:
            plan, used, starts, views = self._calibrated_view(chosen, backlogs, work_seconds,
                                                              plan_for,
                                                              load_scales(usable, chosen),
                                                              age_floor=True)
        else:
            plan, used, starts = plan_for(chosen, backlogs), chosen, backlogs
        body = plan.to_dict(units)
        index = {h.name: k for k, h in enumerate(used)}
        picked = [index[h.name] for h in plan.hosts]
        rows = host_parameters([used[k] for k in picked],
                               None if starts is None else [starts[k] for k in picked],
                               described)
        body["host_parameters"] = rows if views is None else _with_views(
            rows, [views[k] for k in picked])
        body["provisional"] = provisional
        body["predictor"] = settings.predictor
        body["placement"] = {name: placement[name] for name in
                             (h.name for h in plan.hosts) if name in placement}
        self._track(plan.prediction, "schedule", body)
        return body


def _with_views(rows: list[dict[str, Any]], views: Sequence[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Host parameter rows with what the calibrated predictor used for each host: its
    forecasters, the start and the calibration applied."""
    for row, view in zip(rows, views):
        row["predictor_view"] = view
        calibration = view.get("calibration")
        if calibration is not None:
            row["calibration_factors"] = list(calibration["factors"].values())
            row["calibration_levels"] = list(calibration["levels"])
            if "no_delay" in calibration:
                # a split's: the host's chance of ending on its dedicated time
                row["no_delay_chance"] = calibration["no_delay"]["chance"]
    return rows
