"""The protocol's exceptions: one base, structured fields, a stable error code each.

The manager counts rejected messages by ``code`` and sends ``code`` and ``reason`` back in an
``error`` reply, so the codes are part of the wire contract: never rename one.
"""

from __future__ import annotations

from typing import Any


class ProtocolError(Exception):
    """Base of every error the protocol package raises.

    ``code`` is the stable protocol error code; ``reason`` (also ``message``) says what was
    wrong, naming the field and what is allowed; ``field`` and ``value`` name the single input
    to blame when there is one. ``request_id`` and ``message_type`` are filled in by ``decode``
    when they could be read from the rejected message, so an error reply can still be matched
    to its request.
    """

    code = "protocol_error"

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.value = value
        self.request_id: int | None = None
        self.message_type: str | None = None

    @property
    def reason(self) -> str:
        """The human-readable explanation (the same text as ``message``)."""
        return self.message


class MalformedMessageError(ProtocolError):
    """The bytes are not one well-formed msgpack map (truncated, garbage, a list, bad framing)."""

    code = "malformed"


class MessageTooLargeError(ProtocolError):
    """The message is larger than the configured byte limit."""

    code = "too_large"


class UnknownVersionError(ProtocolError):
    """The message's protocol version ``v`` is not one this side speaks."""

    code = "unknown_version"


class UnknownTypeError(ProtocolError):
    """The message's ``type`` names no known message."""

    code = "unknown_type"


class MissingFieldError(ProtocolError):
    """A required field is absent."""

    code = "missing_field"


class UnknownFieldError(ProtocolError):
    """A field the message type does not define is present (fields are never ignored)."""

    code = "unknown_field"


class InvalidFieldError(ProtocolError):
    """A field has the wrong type, is out of range, not finite, too long, or inconsistent."""

    code = "invalid_field"


class RequestTimeoutError(ProtocolError):
    """No matching reply arrived within the caller's timeout."""

    code = "timeout"


class InsecureBindError(ProtocolError):
    """Binding beyond loopback without CurveZMQ keys was refused (pass ``insecure=True``)."""

    code = "insecure_bind"


class KeyFileError(ProtocolError):
    """A CurveZMQ key file is missing, unreadable, malformed, or readable by others."""

    code = "invalid_key"


class SecurityConfigError(ProtocolError):
    """Security settings are inconsistent (an authenticator not running, a half key pair, ...)."""

    code = "security_config"


class EndpointError(ProtocolError):
    """An endpoint could not be bound or connected (malformed, address in use, ...)."""

    code = "bad_endpoint"
