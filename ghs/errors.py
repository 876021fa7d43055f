"""The application's exceptions. Every error a user can cause maps to exit code 2."""

from __future__ import annotations

from typing import Any


class GhsError(Exception):
    """Base of the application's errors; ``code`` is the protocol error code."""

    code = "ghs_error"

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.value = value


class ConfigError(GhsError):
    """A configuration value (file, environment or flag) is missing or out of range."""

    code = "invalid_config"


class HostFileError(GhsError):
    """A host file is missing, unreadable or malformed."""

    code = "invalid_host_file"


class DurationError(GhsError):
    """A duration string could not be parsed."""

    code = "invalid_duration"


class TraceError(GhsError):
    """A workload log (SWF or CSV) is missing, unreadable, empty, or cannot be split as asked."""

    code = "invalid_trace"
