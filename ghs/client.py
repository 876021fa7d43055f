"""``ghs.Client``: ask a manager for status, predictions and schedules from Python.

``predict`` and ``schedule`` return the same objects as the scheduler's own API: the manager
sends the host parameters and shares it used, and the client rebuilds the Prediction from
them (same code, same numbers), so ``cdf(x)`` works on the client too.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from ghs.answers import Answer, answer
from ghs.errors import GhsError
from ghs.eta import Eta, check_progress, plan_shares
from protocol import (
    DEFAULT_LIMITS,
    AccuracyRequest,
    BacktestRequest,
    ErrorReply,
    EtaRequest,
    HistoryRequest,
    KeyPair,
    Limits,
    PingRequest,
    PredictRequest,
    ProtocolError,
    ReportRequest,
    ScheduleRequest,
    StatusRequest,
    connect_dealer,
    request,
)
from scheduler import Backlog, Host, Plan, Prediction, predict
from scheduler.calibrated import calibrated_prediction
from scheduler.conformal import LEVELS
from scheduler.selection import Exclusion


class ManagerError(GhsError):
    """The manager refused a query or did not answer; ``code`` is its error code."""

    def __init__(self, message: str, *, code: str, field: str | None = None,
                 value: Any = None) -> None:
        super().__init__(message, field=field, value=value)
        self.code = code


@dataclass(frozen=True)
class Status:
    """The manager's view: one map per host (name, lam, mu, sigma, rho, tau, cores, stale,
    measurements, last_seen, ...) and its counters."""

    hosts: list[dict[str, Any]]
    counters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "counters": self.counters}

    def usable(self) -> list[Host]:
        """The hosts the manager can schedule on, with the parameters it would use."""
        return [Host(row["name"], **row["parameters"]) for row in self.hosts
                if row.get("parameters")]

    def excluded(self) -> list[Exclusion]:
        """The hosts it cannot use now, each with the manager's reason."""
        return [Exclusion(row["name"], row.get("reason") or "unusable") for row in self.hosts
                if not row.get("parameters")]


class Client:
    """A connection to the manager at ``endpoint``; use as a context manager or ``close()``.

    ``context``: a ZeroMQ context to share (one is made and owned otherwise).
    ``client_keys`` and ``server_public_key`` turn on CurveZMQ.
    """

    def __init__(self, endpoint: str, *, context: zmq.Context | None = None,
                 timeout_seconds: float = 30.0, client_keys: KeyPair | None = None,
                 server_public_key: bytes | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.endpoint = endpoint
        self.timeout_seconds = timeout_seconds
        self.limits = limits
        self._own_context = context is None
        self.context = zmq.Context() if context is None else context
        self._ids = itertools.count(1)
        try:
            self.socket = connect_dealer(self.context, endpoint, limits=limits,
                                         client_keys=client_keys,
                                         server_public_key=server_public_key)
        except ProtocolError as exc:
            self._close_context()
            raise ManagerError(f"cannot connect to {endpoint}: {exc.reason}",
                               code=exc.code, field="manager", value=endpoint) from None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.socket.close(linger=0)
        self._close_context()

    def _close_context(self) -> None:
        if self._own_context:
            self.context.term()

    def _ask(self, message: Any, timeout_seconds: float | None = None) -> dict[str, Any]:
        timeout = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        try:
            reply = request(self.socket, message, timeout_seconds=timeout, limits=self.limits)
        except ProtocolError as exc:
            if exc.code == "timeout":
                raise ManagerError(f"the manager at {self.endpoint} did not answer within "
                                   f"{timeout:g} s", code="timeout",
                                   field="manager", value=self.endpoint) from None
            raise ManagerError(f"bad reply from {self.endpoint}: {exc.reason}",
                               code=exc.code) from None
        if isinstance(reply, ErrorReply):
            raise ManagerError(f"manager: {reply.reason}", code=reply.code)
        return reply.body

    def ping(self, timeout_seconds: float | None = None) -> dict[str, Any]:
        """The manager's readiness answer ({"uptime_seconds", "version"}), once its store is
        open; ManagerError (code ``timeout``) if none comes within ``timeout_seconds``."""
        return self._ask(PingRequest(request_id=next(self._ids)), timeout_seconds)

    def wait_ready(self, timeout_seconds: float, *, check: Callable[[], None] | None = None,
                   clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
        """Ping until the manager answers, for up to ``timeout_seconds``; returns the answer.

        ``check`` runs between tries and may raise to give up early (a daemon that exited).
        """
        if not timeout_seconds > 0:
            raise GhsError(f"timeout must be > 0 seconds, got {timeout_seconds!r}",
                           field="timeout_seconds", value=timeout_seconds)
        deadline = clock() + timeout_seconds
        while True:
            if check is not None:
                check()
            remaining = deadline - clock()
            if remaining <= 0:
                raise ManagerError(f"the manager at {self.endpoint} was not ready within "
                                   f"{timeout_seconds:g} s", code="timeout", field="manager",
                                   value=self.endpoint)
            try:
                return self.ping(timeout_seconds=min(0.5, remaining))
            except ManagerError as exc:
                if exc.code != "timeout":
                    raise

    def status(self) -> Status:
        body = self._ask(StatusRequest(request_id=next(self._ids)))
        return Status(hosts=list(body["hosts"]), counters=dict(body["counters"]))

    def hosts(self) -> list[Host]:
        """The hosts the manager can schedule on now, with the parameters it would use."""
        return self.status().usable()

    def predict(self, work: float, hosts: Sequence[str] | None = None,
                dist: str | None = None, partition: str | None = None, *,
                processes_per_host: int | None = None, pinned: bool = False) -> Prediction:
        """Predicted completion time of ``work`` reference-CPU-seconds on the manager's hosts.

        ``processes_per_host``: how many processes run each host's share (default: one per
        core; more than a host's cores is refused); ``pinned``: they stay on the host's
        least-loaded cores (default: they move, seeing the host's average core)."""
        return self.predict_answer(work, hosts, dist, partition,
                                   processes_per_host=processes_per_host,
                                   pinned=pinned).prediction

    def predict_answer(self, work: float, hosts: Sequence[str] | None = None,
                       dist: str | None = None, partition: str | None = None, *,
                       processes_per_host: int | None = None, pinned: bool = False) -> Answer:
        """``predict`` with the hosts the manager left out, the provisional ones, and the
        model's assumptions."""
        body = self._ask(PredictRequest(
            request_id=next(self._ids), work_seconds=float(work),
            hosts=tuple(hosts) if hosts else None, distribution=dist, partition=partition,
            processes_per_host=processes_per_host, pinned=pinned or None))
        # the hosts' parameters say whether an uncalibrated fit is in its range
        return answer(_rebuild_prediction(body), "manager", excluded=_exclusions(body),
                      provisional=body.get("provisional", ()),
                      prediction_id=body.get("prediction_id"),
                      served_epoch_seconds=body.get("served_epoch_seconds"),
                      placement=body.get("placement"), hosts=_hosts(body),
                      predictor=body.get("predictor"),
                      host_parameters=body.get("host_parameters", ()))

    def schedule(self, work: float, method: str | None = None,
                 hosts: Sequence[str] | None = None, dist: str | None = None,
                 partition: str | None = None, units: int | None = None, *,
                 processes_per_host: int | None = None, pinned: bool = False) -> Plan:
        """The manager's choice of hosts and split for ``work`` reference-CPU-seconds
        (``processes_per_host`` and ``pinned`` as in ``predict``)."""
        plan = self.schedule_answer(work, method, hosts, dist, partition, units,
                                    processes_per_host=processes_per_host,
                                    pinned=pinned).result
        assert isinstance(plan, Plan)
        return plan

    def schedule_answer(self, work: float, method: str | None = None,
                        hosts: Sequence[str] | None = None, dist: str | None = None,
                        partition: str | None = None, units: int | None = None,
                        rho_max: float | None = None, *, processes_per_host: int | None = None,
                        pinned: bool = False) -> Answer:
        """``schedule`` with the provisional hosts and the model's assumptions.
        ``rho_max``: hosts at or above this utilisation are not candidates (default: the
        manager's)."""
        body = self._ask(ScheduleRequest(
            request_id=next(self._ids), work_seconds=float(work),
            hosts=tuple(hosts) if hosts else None, distribution=dist, partition=partition,
            method=method, units=units, rho_max=rho_max,
            processes_per_host=processes_per_host, pinned=pinned or None))
        plan = Plan(hosts=tuple(_hosts(body)), prediction=_rebuild_prediction(body),
                    method=body["method"], evaluations=int(body["evaluations"]),
                    elapsed_seconds=float(body["elapsed_seconds"]),
                    excluded=_exclusions(body))
        return answer(plan, "manager", provisional=body.get("provisional", ()),
                      prediction_id=body.get("prediction_id"),
                      served_epoch_seconds=body.get("served_epoch_seconds"),
                      placement=body.get("placement"), hosts=plan.hosts,
                      predictor=body.get("predictor"),
                      host_parameters=body.get("host_parameters", ()))

    def eta(self, plan: Any, progress: Mapping[str, float], *,
            elapsed_seconds: float | None = None, dist: str | None = None) -> Eta:
        """The law of the remaining time of a running task (seconds from now).

        ``plan``: a Plan, an Answer, a Prediction, the JSON of ``ghs schedule|predict --json``
        or a map host -> share (reference-CPU-seconds); ``progress``: fraction done per host
        (in [0, 1]; hosts left out have done nothing); ``elapsed_seconds``: since the launch.
        The manager answers from each host's current state (latest snapshot, else steady
        state) and its current estimates.
        """
        names, shares = plan_shares(plan)
        fractions = check_progress(names, progress)
        body = self._ask(EtaRequest(
            request_id=next(self._ids), hosts=tuple(names), shares_seconds=tuple(shares),
            fraction_done=tuple(fractions[n] for n in names),
            elapsed_seconds=None if elapsed_seconds is None else float(elapsed_seconds),
            distribution=dist))
        return Eta(_rebuild_prediction(body), fractions, elapsed_seconds, "manager")

    def report(self, prediction_id: int, finished_epoch_seconds: float,
               host: str | None = None) -> dict[str, Any]:
        """Say when ``host``'s share (None: the whole task) of a served prediction finished
        (epoch seconds); returns {"prediction_id", "host", "realised_seconds"}."""
        return self._ask(ReportRequest(request_id=next(self._ids),
                                       prediction_id=int(prediction_id),
                                       finished_epoch_seconds=float(finished_epoch_seconds),
                                       host=host))

    def accuracy(self, since_epoch_seconds: float | None = None) -> dict[str, Any]:
        """Realised coverage of p50/p90 and mean |error| of the served predictions reported
        since then, per host, of whole tasks and overall (the JSON of ``ghs accuracy``)."""
        return self._ask(AccuracyRequest(request_id=next(self._ids),
                                         since_epoch_seconds=since_epoch_seconds))

    def backtest(self, hosts: Sequence[str] | None = None,
                 work_seconds: Sequence[float] | None = None,
                 launch_every_seconds: float | None = None,
                 start_seconds: float | None = None) -> dict[str, Any]:
        """The manager's record of its own predictions, scored on the hosts' capacity series
        (the JSON of ``ghs backtest --manager --json``)."""
        return self._ask(BacktestRequest(
            request_id=next(self._ids), hosts=tuple(hosts) if hosts else None,
            work_seconds=tuple(float(w) for w in work_seconds) if work_seconds else None,
            launch_every_seconds=launch_every_seconds, start_seconds=start_seconds))

    def history(self, host: str, since_seconds: float | None = None) -> dict[str, Any]:
        """A host's measurements, capacity series and latest running-jobs snapshot over the
        ``since_seconds`` before its latest record (the JSON of ``ghs history --json``)."""
        return self._ask(HistoryRequest(request_id=next(self._ids), host_id=host,
                                        since_seconds=since_seconds))


def _exclusions(body: dict[str, Any]) -> tuple[Exclusion, ...]:
    return tuple(Exclusion(e["name"], e["reason"]) for e in body.get("excluded", ()))


def _hosts(body: dict[str, Any]) -> list[Host]:
    return [Host(p["name"], lam=p["lam"], mu=p["mu"], sigma=p["sigma"], rho=p["rho"],
                 tau=p["tau"], cores=p["cores"], core_rho=p.get("core_rho"),
                 pooled=bool(p.get("pooled", False))) for p in body["host_parameters"]]


def _rebuild_prediction(body: dict[str, Any]) -> Prediction:
    hosts = _hosts(body)
    shares = [row["share"] for row in body["hosts"]]
    states = [p.get("backlog") for p in body["host_parameters"]]
    backlog = None if not any(states) else [
        Backlog.idle() if state is None else Backlog.from_dict(state) for state in states]
    # a manager older than --processes-per-host sends no counts: one process per core
    processes = [row.get("processes", host.cores) for row, host in zip(body["hosts"], hosts)]
    prediction = predict(hosts, body["work"], body["distribution"], body["partition"],
                         shares=shares, backlog=backlog, processes_per_host=processes)
    rows = body["host_parameters"]
    factors = [p.get("calibration_factors") for p in rows]
    if any(f is not None for f in factors):
        # the manager's calibrated answer: the same per-host factors, the same combination
        given = next(p for p in rows if p.get("calibration_factors") is not None)
        # a manager before the pooled far tail sends its three levels' factors only
        levels = given.get("calibration_levels", LEVELS[:len(given["calibration_factors"])])
        ones = [1.0] * len(levels)
        # a split's hosts' chances of ending on their dedicated time (scheduler.no_delay)
        chances = [p.get("no_delay_chance") for p in rows]
        # and the floor its one-host mean was held at (scheduler.age_floor), if any
        # and the record view's mean it was combined with (scheduler.combined_mean), if any,
        # or for a split the held view's
        return calibrated_prediction(prediction, [ones if f is None else f for f in factors],
                                     levels, body.get("mean_floor_seconds"),
                                     body.get("record_mean_seconds"),
                                     body.get("held_mean_seconds"),
                                     None if None in chances else chances)
    return prediction
