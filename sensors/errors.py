"""The sensors' exceptions: one base, structured fields, a protocol error code each."""

from __future__ import annotations

from typing import Any


class SensorError(Exception):
    """Base of every error the sensors raise.

    ``code`` is the stable protocol error code; ``field`` and ``value`` name what was wrong
    when a single input is to blame.
    """

    code = "sensor_error"

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.value = value


class InvalidArgumentError(SensorError):
    """A parameter is out of range: negative interval, unknown user, bad trace row, ..."""

    code = "invalid_argument"


class ProcUnavailableError(SensorError):
    """The kernel's process information (``/proc``) cannot be read."""

    code = "proc_unavailable"


class AccountingError(SensorError):
    """Process accounting cannot be used as asked (no permission, not supported, ...)."""

    code = "accounting_unavailable"


class AccountingInUseError(AccountingError):
    """Another accounting file is active and the sensor will not take it over.

    ``path`` is the active file when it could be identified, else None.
    """

    code = "accounting_in_use"

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message, field="accounting", value=path)
        self.path = path


class BenchmarkError(SensorError):
    """The speed benchmark or the user's timing command failed."""

    code = "benchmark_failed"


class StoreError(SensorError):
    """The local measurement store cannot be opened or written."""

    code = "store_error"
