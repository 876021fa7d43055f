"""The protocol version and the size limits both ends of a connection must agree on.

These are part of the wire contract, not tuning knobs: an agent that batches more measurements
than the manager accepts would be rejected forever. A deployment that needs other values builds
its own ``Limits`` and passes it explicitly to ``decode`` and the socket helpers.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import InvalidFieldError

PROTOCOL_VERSION = 2
"""The version ``encode`` writes into every message's ``v``."""

SUPPORTED_VERSIONS = frozenset({1, 2})
"""The versions ``decode`` accepts."""

MAX_WIRE_INT = 2**63 - 1
"""Largest integer any field accepts: what SQLite's INTEGER column holds."""


@dataclass(frozen=True)
class Limits:
    """Caps on one message; ``decode`` enforces every one of them before building anything.

    max_request_bytes: a whole encoded request (hello, measurements, heartbeat, status,
        predict, schedule); the manager's ZMQ_MAXMSGSIZE.
    max_reply_bytes: a whole encoded reply (ack, the query replies, error); larger, since a
        status or prediction over thousands of hosts is; agents' and clients' ZMQ_MAXMSGSIZE.
    max_text_chars: identifiers, names, versions and other short strings.
    max_reason_chars: an error reply's reason.
    max_batch_measurements: measurements in one batch.
    max_query_hosts: host names in one predict / schedule query.
    max_ack_ranges: sequence ranges in one acknowledgement.
    max_quality_flags: quality flags on one measurement.
    max_container_items: any list or map, including those inside reply bodies.
    max_depth: nesting of lists and maps inside a reply body.
    """

    max_request_bytes: int = 1_048_576
    max_reply_bytes: int = 16 * 1_048_576
    max_text_chars: int = 256
    max_reason_chars: int = 1024
    max_batch_measurements: int = 1000
    max_query_hosts: int = 10_000
    max_ack_ranges: int = 1000
    max_quality_flags: int = 16
    max_container_items: int = 100_000
    max_depth: int = 16

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidFieldError(
                    f"limits.{name} must be a whole number >= 1, got {value!r}",
                    field=name, value=value)

    @property
    def max_string_bytes(self) -> int:
        """Largest msgpack str accepted while unpacking (UTF-8 takes up to 4 bytes a char)."""
        return 4 * max(self.max_text_chars, self.max_reason_chars)


DEFAULT_LIMITS = Limits()
"""The protocol's limits; every function that takes ``limits`` defaults to these."""
