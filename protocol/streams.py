"""Protocol version 2: the agents' record streams and the history query.

Besides measurements (version 1), a version-2 agent ships three more numbered streams per host,
each exactly once like measurements (kept in the agent's outbox, acknowledged after the
manager's commit, the ``ack`` naming the stream):

- ``capacity``: harvestable CPU over fixed intervals. seq; start_epoch_seconds <
  end_epoch_seconds; available_cpu_seconds (>= 0: idle time plus remote tasks' CPU, summed
  over cores); per_core_available_cpu_seconds (list of >= 0, one per core, summing to the
  total).
- ``running``: the owners' jobs running at one moment. seq; epoch_seconds;
  run_queue_length (>= 0); jobs (list of {cpu_seconds, wall_seconds, command, user}, CPU and
  wall seconds >= 0 since the job started); jobs_omitted (>= 0, optional: jobs left out of a
  capped snapshot).
- ``templates``: an increment of a demand histogram of finished local jobs. seq;
  as_of_epoch_seconds; scope (``command``, ``user`` or ``pooled``); user and command (text,
  present as the scope needs); bins (list of [bin index >= 0, count > 0]); count (jobs,
  equal to the bins' total), cpu_seconds_sum, cpu_seconds_sum_squares (consistent like a
  measurement's service statistics).

A message of a version-2 type sent with ``v`` 1 is refused (``unknown_type``): a version-1
peer cannot know it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.errors import ProtocolError
from protocol.fields import (
    Bad,
    Field,
    Schema,
    choice,
    each,
    invalid,
    real,
    relocate,
    sequence,
    text,
    whole,
)
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.messages import (
    HEADER,
    MAX_CPU_SECONDS_SUM,
    REQUEST_ID,
    STREAMS,
    Message,
    check_service_statistics,
)

TEMPLATE_SCOPES = ("command", "user", "pooled")
MAX_JOBS_PER_SNAPSHOT = 4096
MAX_TEMPLATE_BINS = 1024
_SUM_SLACK = 1e-6


def _per_core(value: Any, limits: Limits) -> list[float]:
    items = sequence(value, limits.max_container_items)
    if not items:
        raise Bad("a non-empty list (one value per core)", value)
    return list(each(real(), items, limits))


def _check_capacity(values: dict[str, Any]) -> None:
    if values["end_epoch_seconds"] <= values["start_epoch_seconds"]:
        raise invalid("end_epoch_seconds",
                      f"after start_epoch_seconds ({values['start_epoch_seconds']!r})",
                      values["end_epoch_seconds"])
    total = values["available_cpu_seconds"]
    summed = sum(values["per_core_available_cpu_seconds"])
    if abs(summed - total) > _SUM_SLACK * max(1.0, total):
        raise invalid("per_core_available_cpu_seconds",
                      f"values summing to available_cpu_seconds ({total!r})", summed)


def _job(value: Any, limits: Limits) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise Bad("a map (one job)", value)
    return _JOB.parse(value, limits)


def _jobs(value: Any, limits: Limits) -> list[dict[str, Any]]:
    items = sequence(value, min(MAX_JOBS_PER_SNAPSHOT, limits.max_container_items))
    out = []
    for i, item in enumerate(items):
        try:
            out.append(_job(item, limits))
        except ProtocolError as exc:
            raise relocate(exc, f"jobs[{i}].") from None
    return out


def _bins(value: Any, limits: Limits) -> list[list[float]]:
    items = sequence(value, min(MAX_TEMPLATE_BINS, limits.max_container_items))
    index_check, count_check = whole(0, MAX_TEMPLATE_BINS - 1), real(0.0, low_open=True)
    out, seen = [], set()
    for i, item in enumerate(items):
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise Bad("[bin index, count] pairs", item, f"[{i}]")
        try:
            pair = (index_check(item[0], limits), count_check(item[1], limits))
        except Bad as bad:
            bad.suffix = f"[{i}]{bad.suffix}"
            raise
        if pair[0] in seen:
            raise Bad("distinct bin indices", item, f"[{i}]")
        seen.add(pair[0])
        out.append(list(pair))
    return out


def _check_template(values: dict[str, Any]) -> None:
    scope = values["scope"]
    if scope in ("command", "user") and values.get("user") is None:
        raise invalid("user", f"present for scope {scope!r}", None)
    if scope == "command" and values.get("command") is None:
        raise invalid("command", "present for scope 'command'", None)
    binned = sum(count for _, count in values["bins"])
    if abs(binned - values["count"]) > _SUM_SLACK * max(1.0, binned):
        raise invalid("count", f"the bins' total ({binned!r})", values["count"])
    check_service_statistics(values, "count", "cpu_seconds_sum", "cpu_seconds_sum_squares")


_JOB = Schema({
    "cpu_seconds": Field(real()),
    "wall_seconds": Field(real()),
    "command": Field(text),
    "user": Field(text),
})

_RECORD_SCHEMAS: dict[str, Schema] = {
    "capacity": Schema({
        "seq": Field(whole()),
        "start_epoch_seconds": Field(real()),
        "end_epoch_seconds": Field(real()),
        "available_cpu_seconds": Field(real()),
        "per_core_available_cpu_seconds": Field(_per_core),
    }),
    "running": Schema({
        "seq": Field(whole()),
        "epoch_seconds": Field(real()),
        "run_queue_length": Field(whole()),
        "jobs": Field(_jobs),
        "jobs_omitted": Field(whole(), required=False),
    }),
    "templates": Schema({
        "seq": Field(whole()),
        "as_of_epoch_seconds": Field(real()),
        "scope": Field(choice(TEMPLATE_SCOPES)),
        "user": Field(text, required=False),
        "command": Field(text, required=False),
        "bins": Field(_bins),
        "count": Field(real(0.0, low_open=True)),
        "cpu_seconds_sum": Field(real(0.0, MAX_CPU_SECONDS_SUM)),
        "cpu_seconds_sum_squares": Field(real()),
    }),
}
_RECORD_CHECKS = {"capacity": _check_capacity, "templates": _check_template}


def record_fields(stream: str) -> tuple[str, ...]:
    """The wire field names of one record of ``stream`` (``seq`` first)."""
    return tuple(_RECORD_SCHEMAS[stream].fields)


def parse_record(stream: str, data: Any, *, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Validate one record of ``stream``; returns its normalised fields (absent optional
    fields as None). Raises ProtocolError naming the field."""
    if stream not in _RECORD_SCHEMAS:
        raise invalid("stream", f"one of {', '.join(STREAMS)}", stream)
    if not isinstance(data, Mapping):
        raise invalid("record", "a map", data)
    values = _RECORD_SCHEMAS[stream].parse(data, limits)
    check = _RECORD_CHECKS.get(stream)
    if check is not None:
        check(values)
    return values


@dataclass(frozen=True)
class RecordBatch(Message):
    """Records of one stream of one host, each with its per-(host, stream) ``seq``;
    answered by an ``ack`` carrying the same ``stream``."""

    TYPE: ClassVar[str] = "records"
    MIN_VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[Schema] = Schema({
        "request_id": REQUEST_ID,
        "host_id": Field(text),
        "stream": Field(choice(STREAMS)),
        "records": Field(lambda value, limits: sequence(value, limits.max_batch_measurements)),
    }, also=HEADER)

    request_id: int
    host_id: str
    stream: str
    records: tuple[dict[str, Any], ...]

    @classmethod
    def _check_together(cls, values: dict[str, Any], limits: Limits) -> dict[str, Any]:
        stream, items = values["stream"], values["records"]
        if not items:
            raise invalid("records", "a non-empty list of records", items)
        built = []
        for i, item in enumerate(items):
            try:
                record = parse_record(stream, item, limits=limits)
            except ProtocolError as exc:
                raise relocate(exc, f"records[{i}].") from None
            built.append({k: v for k, v in record.items() if v is not None})
        if len({record["seq"] for record in built}) != len(built):
            raise invalid("records", "records with distinct seq numbers", items)
        values["records"] = tuple(built)
        return values


def stream_record(stream: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """A record built in Python, validated and normalised as the receiver will see it."""
    return {k: v for k, v in parse_record(stream, dict(values)).items() if v is not None}


__all__ = ["STREAMS", "TEMPLATE_SCOPES", "RecordBatch", "parse_record", "record_fields",
           "stream_record"]
