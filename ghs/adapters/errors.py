"""The adapters' error: a bad argument, an unknown host, or an engine that cannot be used."""

from __future__ import annotations

from ghs.errors import GhsError


class AdapterError(GhsError):
    """An adapter cannot do what was asked; ``field`` and ``value`` name the culprit."""

    code = "adapter_error"
