"""The scheduler's exceptions: one base, structured fields, a protocol error code each."""

from __future__ import annotations

from typing import Any


class SchedulerError(Exception):
    """Base of every error the scheduler raises on bad input.

    ``code`` is the stable protocol error code; ``field`` and ``value`` name what was wrong
    when a single input is to blame.
    """

    code = "scheduler_error"

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.value = value


class InvalidHostError(SchedulerError):
    """A host's parameters are out of range (negative rate, NaN, rho outside [0, 1), ...)."""

    code = "invalid_host"


class InvalidArgumentError(SchedulerError):
    """An argument other than a host is bad: non-positive work, unknown method, ..."""

    code = "invalid_argument"


class NoUsableHostsError(SchedulerError):
    """Every candidate host was excluded (saturated, over rho_max, ...)."""

    code = "no_usable_hosts"

    def __init__(self, message: str, *, excluded: tuple = ()) -> None:
        super().__init__(message)
        self.excluded = excluded


class TooManyHostsError(SchedulerError):
    """Exact selection was asked for over more hosts than the configured limit."""

    code = "too_many_hosts"


class BudgetExceededError(SchedulerError):
    """Exact selection passed its time budget before it had ruled out every set."""

    code = "budget_exceeded"
