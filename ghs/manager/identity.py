"""Which host ids each CurveZMQ client key may report measurements for.

Without this, any allow-listed key could send measurements under any host's name: one
compromised workstation could poison every other host's estimates. The allow-list names each
key's hosts (``protocol.load_allow_list``); a key listed without hosts may only query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase


class HostBindings:
    """Host-id patterns (shell style: ``lab-sim*``) per Z85 public key."""

    def __init__(self, patterns_by_key: Mapping[bytes, Sequence[str]]) -> None:
        self._patterns = {key.decode("ascii"): tuple(patterns)
                          for key, patterns in patterns_by_key.items()}

    def allows(self, user_id: str | None, host_id: str) -> bool:
        """Whether the client with public key ``user_id`` (Z85) may report ``host_id``."""
        if user_id is None:
            return False
        return any(fnmatchcase(host_id, pattern) for pattern in self._patterns.get(user_id, ()))

    def hosts_of(self, user_id: str) -> tuple[str, ...]:
        return self._patterns.get(user_id, ())
