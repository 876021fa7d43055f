"""The performance data protocol: messages, codec, validation and ZeroMQ helpers.

Depends only on msgpack, pyzmq and the standard library. Message schemas are documented in
``protocol.messages`` (agent <-> manager) and ``protocol.queries`` (client <-> manager); limits
in ``protocol.limits``; error codes in ``protocol.errors``.
"""

from protocol.codec import MESSAGE_TYPES, REPLY_TYPES, REQUEST_TYPES, decode, encode
from protocol.errors import (
    EndpointError,
    InsecureBindError,
    InvalidFieldError,
    KeyFileError,
    MalformedMessageError,
    MessageTooLargeError,
    MissingFieldError,
    ProtocolError,
    RequestTimeoutError,
    SecurityConfigError,
    UnknownFieldError,
    UnknownTypeError,
    UnknownVersionError,
)
from protocol.keys import (
    KeyPair,
    generate_keypair,
    key_file_paths,
    load_allow_list,
    load_allowed_keys,
    read_keypair,
    read_public_key,
    write_keypair,
)
from protocol.limits import DEFAULT_LIMITS, PROTOCOL_VERSION, SUPPORTED_VERSIONS, Limits
from protocol.messages import (
    Ack,
    Heartbeat,
    Hello,
    Measurement,
    MeasurementBatch,
    Message,
    seq_ranges_of,
)
from protocol.queries import (
    DISTRIBUTIONS,
    METHODS,
    PARTITIONS,
    ErrorReply,
    PingReply,
    PingRequest,
    PredictReply,
    PredictRequest,
    ScheduleReply,
    ScheduleRequest,
    StatusReply,
    StatusRequest,
)
from protocol.security import (
    ZAP_DOMAIN,
    Authenticator,
    check_bind_security,
    configure_curve_client,
    configure_curve_server,
    is_loopback_endpoint,
)
from protocol.sockets import (
    Incoming,
    bind_router,
    bound_endpoint,
    connect_dealer,
    recv_message,
    recv_request,
    request,
    request_once,
    send_message,
    send_reply,
)

__all__ = [
    "DEFAULT_LIMITS", "DISTRIBUTIONS", "MESSAGE_TYPES", "METHODS", "PARTITIONS",
    "PROTOCOL_VERSION", "REPLY_TYPES", "REQUEST_TYPES", "SUPPORTED_VERSIONS", "ZAP_DOMAIN",
    "Ack", "Authenticator", "EndpointError", "ErrorReply", "Heartbeat", "Hello", "Incoming",
    "InsecureBindError", "InvalidFieldError", "KeyFileError", "KeyPair", "Limits",
    "MalformedMessageError", "Measurement", "MeasurementBatch", "Message",
    "MessageTooLargeError", "MissingFieldError", "PingReply", "PingRequest", "PredictReply",
    "PredictRequest",
    "ProtocolError", "RequestTimeoutError", "ScheduleReply", "ScheduleRequest",
    "SecurityConfigError", "StatusReply", "StatusRequest", "UnknownFieldError",
    "UnknownTypeError", "UnknownVersionError", "bind_router", "bound_endpoint",
    "check_bind_security", "configure_curve_client", "configure_curve_server",
    "connect_dealer", "decode", "encode", "generate_keypair", "is_loopback_endpoint",
    "key_file_paths", "load_allow_list", "load_allowed_keys", "read_keypair",
    "read_public_key", "recv_message", "recv_request", "request", "request_once",
    "send_message", "send_reply", "seq_ranges_of",
    "write_keypair",
]
