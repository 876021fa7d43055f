"""The message base class and what agents and the manager exchange about measurements.

Every message is a msgpack map with ``v`` (protocol version, int) and ``type`` (str) beside its
own fields. Field names on the wire are the dataclass attribute names. Unknown fields are
rejected, never ignored: a field a receiver does not understand could change the meaning of the
ones it does, so extending a message means a new protocol version. Optional fields may be absent
or nil; ``to_dict`` leaves them out when they are None.

Agent -> manager (each carries ``request_id``, echoed by the reply):

- ``hello``: host_id, hostname, os, agent_version (str); cores (int >= 1); tau (float in
  [1e-6, 1e6]); simulated (bool, optional); replay_zero_epoch_seconds (float, optional,
  version 2: the epoch that log time 0 of a replayed host is mapped to).
- ``measurements``: host_id (str); measurements (list of 1..max_batch_measurements maps, see
  ``Measurement``), sequence numbers distinct within the batch.
- ``heartbeat``: host_id (str); sent_epoch_seconds (float >= 0, agent's clock);
  outbox_pending (int >= 0, measurements not yet acknowledged).

Manager -> agent:

- ``ack``: request_id (int), host_id (str), acked (list of [first, last] inclusive sequence
  ranges, ascending, not overlapping; may be empty, as in the answer to a hello or heartbeat);
  stream (optional, version 2: which record stream the ranges belong to; absent means
  measurements).

Version 2 adds the record streams of ``protocol.streams``. Every message type names the
version that introduced it (``MIN_VERSION``); one sent with an older ``v`` is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from protocol.errors import (
    InvalidFieldError,
    MissingFieldError,
    ProtocolError,
    UnknownTypeError,
    UnknownVersionError,
)
from protocol.fields import (
    Bad,
    Field,
    Schema,
    boolean,
    choice,
    identifier,
    invalid,
    quality_flags,
    real,
    relocate,
    seq_ranges,
    sequence,
    text,
    whole,
)
from protocol.limits import (
    DEFAULT_LIMITS,
    MAX_WIRE_INT,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    Limits,
)

HEADER = frozenset({"v", "type"})
MAX_CORES = 1 << 20
# Sum of one interval's finished jobs' CPU seconds; far above any real value, low enough that
# squaring it cannot overflow a float in the consistency check.
MAX_CPU_SECONDS_SUM = 1e15
# A host's speed relative to the reference machine: within a million times either way, as
# the scheduler's hosts take it (a tau of 1e308 stored, every query about the host failed)
TAU_RANGE = (1e-6, 1e6)
# Relative slack for rounding when comparing sums of squares against squared sums.
_ROUNDING = 1e-9

STREAMS = ("capacity", "running", "templates")
"""Record streams besides ``measurements`` (protocol version 2, see ``protocol.streams``)."""

M = TypeVar("M", bound="Message")
_Built = TypeVar("_Built")

REQUEST_ID = Field(whole())


def check_version(data: Mapping[str, Any]) -> int:
    """The message's protocol version, if present, whole and supported."""
    if "v" not in data:
        raise MissingFieldError("v: required field is missing (the protocol version)", field="v")
    version = data["v"]
    if type(version) is not int:
        raise invalid("v", "a whole number (the protocol version)", version)
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in sorted(SUPPORTED_VERSIONS))
        raise UnknownVersionError(f"v: protocol version {version} is not supported "
                                  f"(supported: {supported})", field="v", value=version)
    return version


def check_type_version(cls: type[Message], version: int) -> None:
    """Refuse a message type newer than the version its sender claims to speak."""
    if version < cls.MIN_VERSION:
        raise UnknownTypeError(f"type: {cls.TYPE!r} needs protocol version "
                               f"{cls.MIN_VERSION} or later, the message says {version}",
                               field="type", value=cls.TYPE)


@dataclass(frozen=True)
class Message:
    """Base of every message. ``TYPE`` is the wire ``type``; ``SCHEMA`` its fields.

    Instances are not validated when built in Python; ``encode`` validates them (through
    ``from_dict``) before anything is sent, and ``decode`` validates everything received.
    """

    TYPE: ClassVar[str] = ""
    IS_REPLY: ClassVar[bool] = False
    MIN_VERSION: ClassVar[int] = 1
    SCHEMA: ClassVar[Schema] = Schema({})

    @property
    def wire_version(self) -> int:
        """The protocol version this message was received in (current if built here)."""
        return self.__dict__.get("_wire_version", PROTOCOL_VERSION)

    def in_version(self: M, version: int) -> M:
        """This message to be sent in ``version`` (a reply speaks its request's version)."""
        check_type_version(type(self), version)
        self.__dict__["_wire_version"] = version
        return self

    def to_dict(self) -> dict[str, Any]:
        """The wire map: ``v``, ``type`` and every field that is not None. ``v`` is the
        version a decoded message arrived with, else the current one."""
        out: dict[str, Any] = {"v": self.wire_version, "type": self.TYPE}
        for name in self.SCHEMA.fields:
            value = getattr(self, name)
            if value is not None:
                out[name] = _wire(value)
        return out

    @classmethod
    def from_dict(cls: type[M], data: Mapping[str, Any], *,
                  limits: Limits = DEFAULT_LIMITS) -> M:
        """Validate a wire map of this type and build the message; raises ProtocolError."""
        if not isinstance(data, Mapping):
            raise invalid("message", "a map", data)
        version = check_version(data)
        if data.get("type") != cls.TYPE:
            raise invalid("type", repr(cls.TYPE), data.get("type"))
        check_type_version(cls, version)
        message = cls.from_fields(data, limits)
        message.__dict__["_wire_version"] = version
        return message

    @classmethod
    def from_fields(cls: type[M], data: Mapping[str, Any], limits: Limits) -> M:
        """Build from a map whose ``v`` and ``type`` were already checked."""
        return _build(cls, cls._check_together(cls.SCHEMA.parse(data, limits), limits))

    @classmethod
    def _check_together(cls, values: dict[str, Any], limits: Limits) -> dict[str, Any]:
        """Cross-field rules; the default has none."""
        return values


def _build(cls: type[_Built], values: dict[str, Any]) -> _Built:
    # The values are validated and complete; filling __dict__ directly skips the frozen
    # dataclass __init__'s per-field object.__setattr__, a third of decoding time.
    instance = object.__new__(cls)
    instance.__dict__.update(values)
    return instance


def _wire(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_wire(item) for item in value]
    if isinstance(value, Measurement):
        return value.to_dict()
    return value


def _schema(fields: dict[str, Field]) -> Schema:
    return Schema(fields, also=HEADER)


@dataclass(frozen=True)
class Hello(Message):
    """An agent introducing its host: sent on (re)connect, before measurements."""

    TYPE: ClassVar[str] = "hello"
    SCHEMA: ClassVar[Schema] = _schema({
        "request_id": REQUEST_ID,
        "host_id": Field(text),
        "hostname": Field(text),
        "cores": Field(whole(1, MAX_CORES)),
        "tau": Field(real(*TAU_RANGE)),
        "os": Field(text),
        "agent_version": Field(text),
        "simulated": Field(boolean, required=False),
        "replay_zero_epoch_seconds": Field(real(), required=False),
    })

    request_id: int
    host_id: str
    hostname: str
    cores: int
    tau: float
    os: str
    agent_version: str
    simulated: bool | None = None
    replay_zero_epoch_seconds: float | None = None


@dataclass(frozen=True)
class Measurement:
    """One observation of a host over [start, end] (SPEC section 5); not a message itself.

    seq: per-host sequence number (int >= 0), the manager stores each (host, seq) once.
    start_epoch_seconds, end_epoch_seconds: the interval, seconds since the epoch, end > start.
    lam_per_second: local job arrival rate (jobs / s, >= 0). rho: CPU busy fraction by local
    jobs in [0, 1] (1 is a saturated host; the scheduler excludes it). service_count,
    service_cpu_seconds_sum, service_cpu_seconds_sum_squares: sufficient statistics of
    finished jobs' CPU seconds (consistent: all zero when the count is; sum^2 / count <= sum of
    squares <= sum^2). busy_cpu_seconds: CPU seconds of local load in the interval (>= 0; with
    the arrivals it gives the mean demand by the utilisation law when accounting is off).
    jobs_started, jobs_between, running_processes: process counts (>= 0). Optional: tau,
    speed relative to the reference machine (> 0; absent: the hello's still holds);
    lambda_source and rho_source, identifiers such as ``accounting`` / ``fork_counter`` and
    ``kernel`` / ``processes``; quality, distinct flag identifiers such as ``fork_counter``.
    """

    SCHEMA: ClassVar[Schema] = Schema({
        "seq": Field(whole()),
        "start_epoch_seconds": Field(real()),
        "end_epoch_seconds": Field(real()),
        "lam_per_second": Field(real()),
        "rho": Field(real(0.0, 1.0)),
        "tau": Field(real(*TAU_RANGE), required=False),
        "service_count": Field(whole()),
        "service_cpu_seconds_sum": Field(real(0.0, MAX_CPU_SECONDS_SUM)),
        "service_cpu_seconds_sum_squares": Field(real()),
        "busy_cpu_seconds": Field(real()),
        "jobs_started": Field(whole()),
        "jobs_between": Field(whole()),
        "running_processes": Field(whole()),
        "lambda_source": Field(identifier, required=False),
        "rho_source": Field(identifier, required=False),
        "quality": Field(quality_flags, required=False),
    })

    seq: int
    start_epoch_seconds: float
    end_epoch_seconds: float
    lam_per_second: float
    rho: float
    service_count: int
    service_cpu_seconds_sum: float
    service_cpu_seconds_sum_squares: float
    busy_cpu_seconds: float
    jobs_started: int
    jobs_between: int
    running_processes: int
    tau: float | None = None
    lambda_source: str | None = None
    rho_source: str | None = None
    quality: tuple[str, ...] = ()

    @property
    def interval_seconds(self) -> float:
        return self.end_epoch_seconds - self.start_epoch_seconds

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.SCHEMA.fields}
        for name in ("tau", "lambda_source", "rho_source"):
            if out[name] is None:
                del out[name]
        out["quality"] = list(self.quality)
        return out

    @classmethod
    def from_dict(cls, data: Any, *, limits: Limits = DEFAULT_LIMITS) -> Measurement:
        """Validate one measurement map; raises ProtocolError naming the field."""
        values = cls.SCHEMA.parse(data, limits)
        if values["quality"] is None:
            values["quality"] = ()
        if values["end_epoch_seconds"] <= values["start_epoch_seconds"]:
            raise invalid("end_epoch_seconds",
                          f"after start_epoch_seconds ({values['start_epoch_seconds']!r})",
                          values["end_epoch_seconds"])
        check_service_statistics(values)
        return _build(cls, values)


def check_service_statistics(values: dict[str, Any], count_key: str = "service_count",
                             sum_key: str = "service_cpu_seconds_sum",
                             squares_key: str = "service_cpu_seconds_sum_squares") -> None:
    """Sufficient statistics of CPU seconds that some set of jobs could have produced."""
    count, total, squares = values[count_key], values[sum_key], values[squares_key]
    if count == 0:
        if total != 0.0 or squares != 0.0:
            raise InvalidFieldError(
                f"{sum_key}: {sum_key} and {squares_key} must be 0 when {count_key} is 0, got "
                f"{total!r} and {squares!r}", field=sum_key, value=total)
        return
    # n values >= 0 with this sum have sum^2/n <= sum of squares <= sum^2 (Cauchy-Schwarz).
    low = total * (total / count)
    high = total * total
    slack = _ROUNDING * high + 1e-300
    if not low - slack <= squares <= high + slack:
        raise InvalidFieldError(
            f"{squares_key}: must lie in [sum^2/count, sum^2] = "
            f"[{low:g}, {high:g}] for {count:g} jobs summing to {total:g} CPU seconds, "
            f"got {squares!r}", field=squares_key, value=squares)


def _measurement_list(value: Any, limits: Limits) -> tuple[Measurement, ...]:
    items = sequence(value, limits.max_batch_measurements)
    if not items:
        raise Bad("a non-empty list of measurements", value)
    built = []
    parse = Measurement.from_dict
    for i, item in enumerate(items):
        if isinstance(item, Measurement):
            item = item.to_dict()
        elif not isinstance(item, Mapping):
            raise Bad("a map (one measurement)", item, f"[{i}]")
        try:
            built.append(parse(item, limits=limits))
        except ProtocolError as exc:
            raise relocate(exc, f"measurements[{i}].") from None
    if len({m.seq for m in built}) != len(built):
        raise Bad("measurements with distinct seq numbers", value)
    return tuple(built)


@dataclass(frozen=True)
class MeasurementBatch(Message):
    """Measurements of one host, each with its sequence number; answered by an ``ack``."""

    TYPE: ClassVar[str] = "measurements"
    SCHEMA: ClassVar[Schema] = _schema({
        "request_id": REQUEST_ID,
        "host_id": Field(text),
        "measurements": Field(_measurement_list),
    })

    request_id: int
    host_id: str
    measurements: tuple[Measurement, ...]


@dataclass(frozen=True)
class Heartbeat(Message):
    """An agent saying it is alive while it has nothing to send."""

    TYPE: ClassVar[str] = "heartbeat"
    SCHEMA: ClassVar[Schema] = _schema({
        "request_id": REQUEST_ID,
        "host_id": Field(text),
        "sent_epoch_seconds": Field(real()),
        "outbox_pending": Field(whole()),
    })

    request_id: int
    host_id: str
    sent_epoch_seconds: float
    outbox_pending: int


@dataclass(frozen=True)
class Ack(Message):
    """The manager confirming the sequence numbers it has stored for a host.

    ``acked`` holds inclusive (first, last) ranges; build them with ``seq_ranges_of``.
    """

    TYPE: ClassVar[str] = "ack"
    IS_REPLY: ClassVar[bool] = True
    SCHEMA: ClassVar[Schema] = _schema({
        "request_id": REQUEST_ID,
        "host_id": Field(text),
        "acked": Field(seq_ranges),
        "stream": Field(choice(STREAMS), required=False),
    })

    request_id: int
    host_id: str
    acked: tuple[tuple[int, int], ...] = ()
    stream: str | None = None

    def seqs(self) -> Iterator[int]:
        """Every acknowledged sequence number, ascending."""
        for first, last in self.acked:
            yield from range(first, last + 1)

    def __contains__(self, seq: object) -> bool:
        return any(first <= seq <= last for first, last in self.acked)  # type: ignore[operator]


def seq_ranges_of(seqs: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Sequence numbers as the fewest ascending inclusive ranges, e.g. 1,2,3,7 -> (1,3),(7,7)."""
    ranges: list[tuple[int, int]] = []
    for seq in sorted(set(seqs)):
        if isinstance(seq, bool) or not 0 <= seq <= MAX_WIRE_INT:
            raise invalid("acked", f"sequence numbers in [0, {MAX_WIRE_INT}]", seq)
        if ranges and seq == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], seq)
        else:
            ranges.append((seq, seq))
    return tuple(ranges)
