"""Clocks: every sensor reads time and sleeps through one of these, never through ``time``.

``now()`` is wall-clock seconds since the epoch (timestamps of measurements); ``monotonic()``
never goes back (interval lengths); ``sleep(seconds)`` waits. The real clock can be woken by a
``threading.Event`` so a daemon stops promptly; the virtual clock jumps instead of waiting, so a
simulated host runs days in seconds; the accelerated clock runs real time ``factor`` times faster.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

from sensors.errors import InvalidArgumentError


class Clock(Protocol):
    """What the sensors need from time."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never decreases."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (returns at once for seconds <= 0)."""
        ...


def _seconds(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}", field=name,
                                   value=value) from None
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{name} must be finite, got {value!r}", field=name,
                                   value=value)
    return number


class SystemClock:
    """Real time. A set ``stop`` event cuts sleeps short (for daemons shutting down)."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        seconds = _seconds("seconds", seconds)
        if seconds <= 0:
            return
        if self.stop is None:
            time.sleep(seconds)
        else:
            self.stop.wait(seconds)


class VirtualClock:
    """Simulated time that only moves when someone sleeps or calls :meth:`advance`."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = _seconds("start", start)

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        seconds = _seconds("seconds", seconds)
        if seconds > 0:
            self._now += seconds

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0)."""
        seconds = _seconds("seconds", seconds)
        if seconds < 0:
            raise InvalidArgumentError(f"cannot move a clock back ({seconds!r} s)",
                                       field="seconds", value=seconds)
        self._now += seconds


class AcceleratedClock:
    """Real time running ``factor`` times faster, starting at ``start`` (epoch seconds)."""

    def __init__(self, factor: float, start: float | None = None) -> None:
        factor = _seconds("factor", factor)
        if factor <= 0:
            raise InvalidArgumentError(f"factor must be > 0, got {factor!r}", field="factor",
                                       value=factor)
        self.factor = factor
        self._origin = time.time() if start is None else _seconds("start", start)
        self._real_origin = time.monotonic()

    def now(self) -> float:
        return self._origin + (time.monotonic() - self._real_origin) * self.factor

    def monotonic(self) -> float:
        return self.now()

    def sleep(self, seconds: float) -> None:
        seconds = _seconds("seconds", seconds)
        if seconds > 0:
            time.sleep(seconds / self.factor)


def sleep_until(clock: Clock, when: float) -> None:
    """Sleep on ``clock`` until its ``now()`` reaches ``when`` (no-op if already past)."""
    remaining = when - clock.now()
    if remaining > 0:
        clock.sleep(remaining)


def every(clock: Clock, stop: threading.Event, interval_seconds: float,
          action: Callable[[], None], *, max_slice_seconds: float = 1.0) -> None:
    """Call ``action`` every ``interval_seconds`` of ``clock`` until ``stop`` is set, on a
    fixed grid from now (a loop that fell behind, e.g. after a suspend, resumes on the grid).

    Sleeps are cut into slices of at most ``max_slice_seconds`` of the clock, so a set
    ``stop`` ends the loop promptly on any clock.
    """
    due = clock.now() + interval_seconds
    while not stop.is_set():
        now = clock.now()
        if now < due:
            sleep_until(clock, min(due, now + max_slice_seconds))
            continue
        action()
        now = clock.now()
        due += interval_seconds * max(1, math.floor((now - due) / interval_seconds) + 1)


class CappedClock:
    """Another clock that stops at ``until`` (epoch seconds): a replay's --until moment.

    ``now()`` never passes ``until``. A sleep that would pass it waits until the inner clock
    gets there and then blocks until ``released`` is set, so every thread reading this clock
    sees the world stand still at that moment until the owner has taken its last readings.
    """

    def __init__(self, inner: Clock, until: float, released: threading.Event) -> None:
        self.inner = inner
        self.until = _seconds("until", until)
        self.released = released

    def now(self) -> float:
        return min(self.inner.now(), self.until)

    def monotonic(self) -> float:
        return self.now()

    def reached(self) -> bool:
        return self.inner.now() >= self.until

    def sleep(self, seconds: float) -> None:
        seconds = _seconds("seconds", seconds)
        if seconds <= 0 or self.released.is_set():
            return
        remaining = self.until - self.inner.now()
        if seconds < remaining:
            self.inner.sleep(seconds)
            return
        if remaining > 0:
            self.inner.sleep(remaining)
        self.released.wait()
