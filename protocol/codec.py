"""msgpack encoding and strictly validated decoding of messages.

``decode`` is what the manager runs on every byte string a stranger sends, so it is written to
fail only by raising a ProtocolError subclass, whatever the input: the size is checked before
unpacking, msgpack's own limits bound every string, list and map, binary and extension types
are refused, duplicate map keys are refused (two parsers must never read one message two ways),
and then every field is checked against its message's table.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import msgpack

from protocol.errors import (
    MalformedMessageError,
    MessageTooLargeError,
    MissingFieldError,
    ProtocolError,
    UnknownTypeError,
)
from protocol.fields import invalid, show
from protocol.limits import DEFAULT_LIMITS, MAX_WIRE_INT, Limits
from protocol.messages import (
    Ack,
    Heartbeat,
    Hello,
    MeasurementBatch,
    Message,
    check_type_version,
    check_version,
)
from protocol.queries import (
    BacktestReply,
    BacktestRequest,
    ErrorReply,
    HistoryReply,
    HistoryRequest,
    PingReply,
    PingRequest,
    PredictReply,
    PredictRequest,
    ScheduleReply,
    ScheduleRequest,
    StatusReply,
    StatusRequest,
)
from protocol.streams import RecordBatch
from protocol.tracking import (
    AccuracyReply,
    AccuracyRequest,
    EtaReply,
    EtaRequest,
    ReportReply,
    ReportRequest,
)

MESSAGE_TYPES: Mapping[str, type[Message]] = {
    cls.TYPE: cls for cls in (
        Hello, MeasurementBatch, Heartbeat, StatusRequest, PredictRequest, ScheduleRequest,
        RecordBatch, HistoryRequest, PingRequest, Ack, StatusReply, PredictReply,
        ScheduleReply, HistoryReply, PingReply, ErrorReply, BacktestRequest, BacktestReply,
        EtaRequest, ReportRequest, AccuracyRequest, EtaReply, ReportReply, AccuracyReply)
}
REQUEST_TYPES = frozenset(name for name, cls in MESSAGE_TYPES.items() if not cls.IS_REPLY)
"""What the manager accepts."""
REPLY_TYPES = frozenset(name for name, cls in MESSAGE_TYPES.items() if cls.IS_REPLY)
"""What agents and clients accept."""

_MAX_REASON_DETAIL = 120


def max_bytes(cls: type[Message], limits: Limits) -> int:
    """The byte cap for messages of this class: replies may be larger than requests."""
    return limits.max_reply_bytes if cls.IS_REPLY else limits.max_request_bytes


def encode(message: Message, *, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Validate ``message`` exactly as ``decode`` would on receipt, then pack it.

    Raises the same ProtocolError subclasses ``decode`` does, so nothing invalid is ever sent.
    """
    cls = type(message)
    if not isinstance(message, Message) or MESSAGE_TYPES.get(cls.TYPE) is not cls:
        raise UnknownTypeError(f"cannot encode {show(message)}: not a protocol message",
                               field="type")
    wire = message.to_dict()
    check_type_version(cls, wire["v"])
    validated = cls.from_fields(wire, limits)
    wire = validated.to_dict()
    wire["v"] = message.wire_version
    data = msgpack.packb(wire, use_bin_type=True)
    cap = max_bytes(cls, limits)
    if len(data) > cap:
        raise MessageTooLargeError(
            f"{cls.TYPE} message is {len(data)} bytes; at most {cap} are allowed",
            value=len(data))
    return data


def _unique_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        raise ValueError("a map repeats a key")
    return mapping


def _refuse_extension(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not allowed")


def _byte_count(data: Any) -> int:
    if isinstance(data, (bytes, bytearray)):
        return len(data)
    if isinstance(data, memoryview):
        return data.nbytes
    raise MalformedMessageError(f"a message must be bytes, got {type(data).__name__}")


def unpack(data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The msgpack value in ``data`` under the limits, or MalformedMessageError/TooLarge."""
    size = _byte_count(data)
    cap = max(limits.max_request_bytes, limits.max_reply_bytes)
    if size > cap:
        raise MessageTooLargeError(f"message is {size} bytes; at most {cap} are allowed",
                                   value=size)
    if size == 0:
        raise MalformedMessageError("message is empty")
    try:
        return msgpack.unpackb(
            data, raw=False, strict_map_key=True, use_list=True,
            object_pairs_hook=_unique_keys, ext_hook=_refuse_extension,
            max_str_len=limits.max_string_bytes, max_bin_len=0, max_ext_len=0,
            max_array_len=limits.max_container_items,
            max_map_len=limits.max_container_items)
    # msgpack documents ValueError and its own exceptions but warns that "other exceptions can
    # be raised during unpacking"; any of them means the same thing here: not a valid message.
    except Exception as exc:
        detail = str(exc)[:_MAX_REASON_DETAIL] or type(exc).__name__
        raise MalformedMessageError(f"not one valid msgpack value ({detail})") from None


def decode(data: bytes | bytearray | memoryview, *, limits: Limits = DEFAULT_LIMITS,
           expect: Collection[str] | None = None) -> Message:
    """Unpack and validate one message; raises only ProtocolError subclasses.

    ``expect`` restricts the accepted types (``REQUEST_TYPES`` on the manager, ``REPLY_TYPES``
    on agents and clients); others fail with ``unknown_type``. The raised error carries the
    message's ``request_id`` and ``message_type`` when those could be read.
    """
    size = _byte_count(data)
    value = unpack(data, limits)
    if type(value) is not dict:
        raise MalformedMessageError(
            f"a message must be a msgpack map, got {type(value).__name__}")
    request_id = value.get("request_id")
    message_type = value.get("type")
    try:
        version = check_version(value)
        cls = _message_class(message_type, expect)
        check_type_version(cls, version)
        cap = max_bytes(cls, limits)
        if size > cap:
            raise MessageTooLargeError(
                f"{cls.TYPE} message is {size} bytes; at most {cap} are allowed", value=size)
        message = cls.from_fields(value, limits)
        message.__dict__["_wire_version"] = version
        return message
    except ProtocolError as exc:
        if type(request_id) is int and 0 <= request_id <= MAX_WIRE_INT:
            exc.request_id = request_id
        if type(message_type) is str and message_type in MESSAGE_TYPES:
            exc.message_type = message_type
        raise


def _message_class(message_type: Any, expect: Collection[str] | None) -> type[Message]:
    if message_type is None:
        raise MissingFieldError("type: required field is missing", field="type")
    if type(message_type) is not str:
        raise invalid("type", "a string naming the message type", message_type)
    allowed = MESSAGE_TYPES.keys() if expect is None else expect
    cls = MESSAGE_TYPES.get(message_type)
    if cls is None or message_type not in allowed:
        raise UnknownTypeError(
            f"type: {show(message_type)} is not accepted here; expected one of "
            f"{', '.join(sorted(allowed))}", field="type", value=message_type)
    return cls
