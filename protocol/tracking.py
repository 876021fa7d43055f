"""Protocol version 2: a running task's ETA, completion reports and the track record.

Client -> manager (each carries ``request_id``, echoed by the reply):

- ``eta``: hosts (distinct names, the plan's hosts), shares_seconds (one per host,
  reference-CPU-seconds >= 0, not all zero), fraction_done (one per host, each in [0, 1]);
  elapsed_seconds (>= 0, optional: time since the launch); distribution (optional).
- ``report``: prediction_id (int >= 1, from a predict or schedule reply),
  finished_epoch_seconds (> 0, when the share or task finished); host (optional: the host
  whose share finished; absent means the whole task).
- ``accuracy``: since_epoch_seconds (optional, >= 0: only predictions served since then).

Manager -> client: ``eta_reply`` (body: the remaining-time prediction's JSON: hosts, mean,
quantiles, ...), ``report_reply`` (body: prediction_id, host, realised_seconds) and
``accuracy_reply`` (body: overall and hosts rows). Refusals are ``error`` replies with the
codes ``unknown_prediction``, ``host_not_in_prediction``, ``duplicate_report`` and
``invalid_report``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.fields import (
    Bad,
    Field,
    Schema,
    choice,
    each,
    host_names,
    real,
    sequence,
    text,
    whole,
)
from protocol.limits import Limits
from protocol.messages import HEADER, REQUEST_ID, Message
from protocol.queries import DISTRIBUTIONS, _body, _BodyReply

_SHARE = real(0.0)
_FRACTION = real(0.0, 1.0)


def _numbers(check: Any) -> Any:
    def numbers(value: Any, limits: Limits) -> tuple[float, ...]:
        return each(check, sequence(value, limits.max_query_hosts), limits)

    return numbers


@dataclass(frozen=True)
class EtaRequest(Message):
    """Ask for the law of the remaining time of a running task, from each share's progress."""

    TYPE: ClassVar[str] = "eta"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({
        "request_id": REQUEST_ID,
        "hosts": Field(host_names),
        "shares_seconds": Field(_numbers(_SHARE)),
        "fraction_done": Field(_numbers(_FRACTION)),
        "elapsed_seconds": Field(real(0.0), required=False),
        "distribution": Field(choice(DISTRIBUTIONS), required=False),
    }, also=HEADER)

    request_id: int
    hosts: tuple[str, ...]
    shares_seconds: tuple[float, ...]
    fraction_done: tuple[float, ...]
    elapsed_seconds: float | None = None
    distribution: str | None = None

    @classmethod
    def _check_together(cls, values: dict[str, Any], limits: Limits) -> dict[str, Any]:
        count = len(values["hosts"])
        for name in ("shares_seconds", "fraction_done"):
            if len(values[name]) != count:
                raise Bad(f"one number per host ({count})", values[name]).at(name)
        if not any(share > 0 for share in values["shares_seconds"]):
            raise Bad("shares with at least one above 0", values["shares_seconds"]).at(
                "shares_seconds")
        return values


@dataclass(frozen=True)
class ReportRequest(Message):
    """Say when a host's share (or, without ``host``, the whole task) of a served prediction
    finished."""

    TYPE: ClassVar[str] = "report"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({
        "request_id": REQUEST_ID,
        "prediction_id": Field(whole(1)),
        "finished_epoch_seconds": Field(real(0.0, low_open=True)),
        "host": Field(text, required=False),
    }, also=HEADER)

    request_id: int
    prediction_id: int
    finished_epoch_seconds: float
    host: str | None = None


@dataclass(frozen=True)
class AccuracyRequest(Message):
    """Ask for the realised coverage and errors of the served predictions reported on."""

    TYPE: ClassVar[str] = "accuracy"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({
        "request_id": REQUEST_ID,
        "since_epoch_seconds": Field(real(0.0), required=False),
    }, also=HEADER)

    request_id: int
    since_epoch_seconds: float | None = None


def _reply(required: dict[str, str]) -> Schema:
    return Schema({"request_id": REQUEST_ID, "body": _body(required)}, also=HEADER)


@dataclass(frozen=True)
class EtaReply(_BodyReply):
    """``body``: the JSON of ``ghs eta --json`` (hosts, mean, std, quantiles, ...)."""

    TYPE: ClassVar[str] = "eta_reply"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = _reply({"hosts": "list of maps", "mean": "number",
                                       "quantiles": "map"})


@dataclass(frozen=True)
class ReportReply(_BodyReply):
    """``body``: {"prediction_id", "host" (nil for the task), "realised_seconds"}."""

    TYPE: ClassVar[str] = "report_reply"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = _reply({"prediction_id": "number",
                                       "realised_seconds": "number"})


@dataclass(frozen=True)
class AccuracyReply(_BodyReply):
    """``body``: the JSON of ``ghs accuracy --json`` (overall, hosts, task, since)."""

    TYPE: ClassVar[str] = "accuracy_reply"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = _reply({"overall": "map", "hosts": "list of maps"})
