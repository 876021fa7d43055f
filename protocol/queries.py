"""Client queries (status, predict, schedule), their replies, and the error reply.

Client -> manager (each carries ``request_id`` (int), echoed by the reply):

- ``ping``: nothing else; answered as soon as the manager's store is open (readiness).
- ``status``: nothing else.
- ``predict``: work_seconds (float > 0, reference-CPU-seconds); hosts (list of distinct names,
  optional: all fresh hosts); distribution (``gamma|weibull|lognormal|auto``, optional);
  partition (``equal-mean|equal-load|speed``, optional). Absent options mean the manager's
  configured defaults.
- ``schedule``: the predict fields plus method (``auto|heuristic|optimal|prefix``, optional) and
  units (int >= 1, optional: split a task of that many indivisible items into whole numbers).
- Both, version 2 only: processes_per_host (int >= 1, optional: how many processes run each
  host's share; absent: one per core) and pinned (bool, optional: those processes are pinned
  to the least-loaded cores; absent: false, they move between cores).

Manager -> client:

- ``ping_reply``: request_id and ``body`` with at least ``uptime_seconds`` (number) and
  ``version`` (string, the manager's software version).
- ``status_reply``, ``predict_reply``, ``schedule_reply``: request_id and ``body``, a map of
  plain data (nil, bool, int, finite float, str, list, str-keyed map) bounded in size and depth,
  shaped like the JSON of ``ghs status|predict|schedule --json``. Only the top-level keys named
  in ``BODY_KEYS`` are required; anything else the manager adds passes.
- ``error``: code (identifier such as ``invalid_field``), reason (str), request_id (int,
  optional: absent when the request's own id could not be read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.errors import UnknownFieldError
from protocol.fields import (
    Bad,
    Field,
    Schema,
    boolean,
    choice,
    each,
    host_names,
    identifier,
    is_identifier,
    plain_data,
    real,
    reason_text,
    sequence,
    text,
    whole,
)
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.messages import HEADER, MAX_CORES, REQUEST_ID, M, Message

# The names a query may carry on the wire. They are the scheduler's choices
# (scheduler.choices), which the protocol may not import; the protocol owns its copy because
# the wire contract must not change with what a manager happens to be built with, and
# tests/unit/test_choices.py proves the two identical.
DISTRIBUTIONS = ("gamma", "weibull", "lognormal", "auto")
PARTITIONS = ("equal-mean", "equal-load", "speed")
METHODS = ("auto", "heuristic", "optimal", "prefix")
MAX_PROCESSES = MAX_CORES
# as the scheduler's (scheduler.partitioning.MAX_UNITS; tests/unit/test_choices.py)
MAX_UNITS = 1 << 53


@dataclass(frozen=True)
class PingRequest(Message):
    """Ask whether the manager is up with its store open (a readiness probe)."""

    TYPE: ClassVar[str] = "ping"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({"request_id": REQUEST_ID}, also=HEADER)

    request_id: int


@dataclass(frozen=True)
class StatusRequest(Message):
    """Ask the manager for every host's current estimates and its counters."""

    TYPE: ClassVar[str] = "status"
    SCHEMA: ClassVar[Schema] = Schema({"request_id": REQUEST_ID}, also=HEADER)

    request_id: int


_PREDICT_FIELDS: dict[str, Field] = {
    "request_id": REQUEST_ID,
    "work_seconds": Field(real(0.0, low_open=True)),
    "hosts": Field(host_names, required=False),
    "distribution": Field(choice(DISTRIBUTIONS), required=False),
    "partition": Field(choice(PARTITIONS), required=False),
    "processes_per_host": Field(whole(1, MAX_PROCESSES), required=False),
    "pinned": Field(boolean, required=False),
}
_VERSION_2_FIELDS = ("processes_per_host", "pinned")


class _TaskShape(Message):
    """Refuses the version-2 fields of a predict or schedule sent as version 1."""

    @classmethod
    def from_fields(cls: type[M], data: Mapping[str, Any], limits: Limits) -> M:
        if data.get("v", 2) < 2:
            for name in _VERSION_2_FIELDS:
                if data.get(name) is not None:
                    raise UnknownFieldError(f"{name}: needs protocol version 2 or later, the "
                                            f"message says {data.get('v')}", field=name)
        return super().from_fields(data, limits)


@dataclass(frozen=True)
class PredictRequest(_TaskShape):
    """Ask for the completion-time distribution of ``work_seconds`` over given (or all) hosts."""

    TYPE: ClassVar[str] = "predict"
    SCHEMA: ClassVar[Schema] = Schema(_PREDICT_FIELDS, also=HEADER)

    request_id: int
    work_seconds: float
    hosts: tuple[str, ...] | None = None
    distribution: str | None = None
    partition: str | None = None
    processes_per_host: int | None = None
    pinned: bool | None = None


@dataclass(frozen=True)
class ScheduleRequest(_TaskShape):
    """Ask for the best machine set and split of ``work_seconds`` (optionally of ``units``)."""

    TYPE: ClassVar[str] = "schedule"
    SCHEMA: ClassVar[Schema] = Schema({
        **_PREDICT_FIELDS,
        "method": Field(choice(METHODS), required=False),
        "units": Field(whole(1, MAX_UNITS), required=False),
        "rho_max": Field(real(0.0, 1.0, low_open=True), required=False),
    }, also=HEADER)

    request_id: int
    work_seconds: float
    hosts: tuple[str, ...] | None = None
    distribution: str | None = None
    partition: str | None = None
    method: str | None = None
    units: int | None = None
    rho_max: float | None = None
    processes_per_host: int | None = None
    pinned: bool | None = None


def _body(required: Mapping[str, str]) -> Field:
    """A reply body checker: plain data, plus the named top-level keys of the given kinds."""

    def check(value: Any, limits: Limits) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise Bad("a map", value)
        body = plain_data(value, limits)
        for key, kind in required.items():
            item = body.get(key)
            if kind == "number":
                good = isinstance(item, (int, float)) and not isinstance(item, bool)
            elif kind == "list of maps":
                good = isinstance(item, list) and all(isinstance(i, dict) for i in item)
            elif kind == "map":
                good = isinstance(item, dict)
            elif kind == "list":
                good = isinstance(item, list)
            else:
                good = isinstance(item, str)
            if not good:
                raise Bad(kind, item, f".{key}")
        return body

    return Field(check)


BODY_KEYS: dict[str, dict[str, str]] = {
    "ping_reply": {"uptime_seconds": "number", "version": "string"},
    "status_reply": {"hosts": "list of maps", "counters": "map"},
    "predict_reply": {"hosts": "list of maps", "mean": "number", "std": "number"},
    "schedule_reply": {"hosts": "list of maps", "mean": "number", "std": "number",
                       "method": "string"},
    "history_reply": {"host": "string", "capacity": "list", "measurements": "list of maps"},
    "backtest_reply": {"launches": "list of maps", "summary": "list of maps"},
}

_POSITIVE = real(0.0, low_open=True)


def _positive_list(value: Any, limits: Limits) -> tuple[float, ...]:
    items = sequence(value, 64)
    if not items:
        raise Bad("a non-empty list of positive numbers", value)
    return each(_POSITIVE, items, limits)


def _reply_schema(type_name: str) -> Schema:
    return Schema({"request_id": REQUEST_ID, "body": _body(BODY_KEYS[type_name])},
                  also=HEADER)


@dataclass(frozen=True)
class _BodyReply(Message):
    """A manager's answer whose ``body`` is plain data with the type's required keys."""

    IS_REPLY: ClassVar[bool] = True

    request_id: int
    body: dict[str, Any]


@dataclass(frozen=True)
class PingReply(_BodyReply):
    """``body``: {"uptime_seconds", "version", ...}: the manager is ready."""

    TYPE: ClassVar[str] = "ping_reply"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = _reply_schema("ping_reply")


@dataclass(frozen=True)
class StatusReply(_BodyReply):
    """``body``: {"hosts": [{"name", "lam", "mu", ...}], "counters": {...}, ...}."""

    TYPE: ClassVar[str] = "status_reply"
    SCHEMA: ClassVar[Schema] = _reply_schema("status_reply")


@dataclass(frozen=True)
class PredictReply(_BodyReply):
    """``body``: the JSON of ``ghs predict --json`` (hosts, mean, std, cov, quantiles, ...)."""

    TYPE: ClassVar[str] = "predict_reply"
    SCHEMA: ClassVar[Schema] = _reply_schema("predict_reply")


@dataclass(frozen=True)
class ScheduleReply(_BodyReply):
    """``body``: the JSON of ``ghs schedule --json`` (predict's plus method, evaluations, ...)."""

    TYPE: ClassVar[str] = "schedule_reply"
    SCHEMA: ClassVar[Schema] = _reply_schema("schedule_reply")


@dataclass(frozen=True)
class HistoryRequest(Message):
    """Ask for one host's measurements, capacity series and latest running-jobs snapshot over
    the ``since_seconds`` before its latest record (absent: 24 hours). Version 2."""

    TYPE: ClassVar[str] = "history"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({
        "request_id": REQUEST_ID,
        "host_id": Field(text),
        "since_seconds": Field(real(0.0, low_open=True), required=False),
    }, also=HEADER)

    request_id: int
    host_id: str
    since_seconds: float | None = None


@dataclass(frozen=True)
class HistoryReply(_BodyReply):
    """``body``: the JSON of ``ghs history --json``. Version 2."""

    TYPE: ClassVar[str] = "history_reply"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = _reply_schema("history_reply")


@dataclass(frozen=True)
class BacktestRequest(Message):
    """Ask for the manager's record of its own predictions: the shadow launches scored on the
    hosts' capacity series, for ``hosts`` (absent: all), task lengths nearest ``work_seconds``
    (dedicated seconds per core; absent: all), launches every ``launch_every_seconds``
    (absent: every hour) from ``start_seconds`` after each host's first one. Version 2."""

    TYPE: ClassVar[str] = "backtest"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({
        "request_id": REQUEST_ID,
        "hosts": Field(host_names, required=False),
        "work_seconds": Field(_positive_list, required=False),
        "launch_every_seconds": Field(real(0.0, low_open=True), required=False),
        "start_seconds": Field(real(0.0), required=False),
    }, also=HEADER)

    request_id: int
    hosts: tuple[str, ...] | None = None
    work_seconds: tuple[float, ...] | None = None
    launch_every_seconds: float | None = None
    start_seconds: float | None = None


@dataclass(frozen=True)
class BacktestReply(_BodyReply):
    """``body``: the JSON of ``ghs backtest --manager --json``. Version 2."""

    TYPE: ClassVar[str] = "backtest_reply"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = _reply_schema("backtest_reply")


@dataclass(frozen=True)
class ErrorReply(Message):
    """A refusal: ``code`` is a stable identifier the sender can count, ``reason`` explains."""

    TYPE: ClassVar[str] = "error"
    IS_REPLY: ClassVar[bool] = True
    SCHEMA: ClassVar[Schema] = Schema({
        "code": Field(identifier),
        "reason": Field(reason_text),
        "request_id": Field(whole(), required=False),
    }, also=HEADER)

    code: str
    reason: str
    request_id: int | None = None

    @classmethod
    def from_exception(cls, error: Exception, *, request_id: int | None = None,
                       limits: Limits = DEFAULT_LIMITS) -> ErrorReply:
        """The reply to send for an error: its ``code`` and message cut to fit (any exception
        with an identifier ``code``, such as ProtocolError or the scheduler's errors), else
        ``internal`` with a generic reason (details belong in the manager's log, not on the
        wire); and the request id ``decode`` recovered when none is given."""
        code = getattr(error, "code", None)
        if isinstance(code, str) and is_identifier(code):
            reason = str(getattr(error, "message", None) or error) or code
        else:
            code, reason = "internal", "internal error while handling the request"
        if request_id is None:
            found = getattr(error, "request_id", None)
            request_id = found if type(found) is int and found >= 0 else None
        if len(reason) > limits.max_reason_chars:
            reason = reason[: limits.max_reason_chars - 3] + "..."
        return cls(code=code, reason=reason, request_id=request_id)
