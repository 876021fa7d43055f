"""Durations as users type them: ``90``, ``90s``, ``30m``, ``8h``, ``2d``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ghs.errors import DurationError

_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([smhd]?)\s*$")


def parse_duration(text: str | float | int, *, what: str = "duration") -> float:
    """Seconds in ``text``; a bare number is seconds. Raises DurationError naming ``what``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _PATTERN.match(str(text).lower())
        if match is None:
            raise DurationError(
                f"{what}: cannot parse {text!r}; use a number of seconds or 90s, 30m, 8h, 2d",
                field=what,
                value=text,
            )
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not math.isfinite(seconds):
        raise DurationError(f"{what}: {text!r} is not finite", field=what, value=text)
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form: ``45.0s``, ``12.5m``, ``3.20h``, ``1.50d``."""
    if not math.isfinite(seconds):
        return str(seconds)
    if abs(seconds) < 120:
        return f"{seconds:.1f}s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f}m"
    if abs(seconds) < 172800:
        return f"{seconds / 3600:.2f}h"
    return f"{seconds / 86400:.2f}d"


def duration_unit(seconds: Iterable[float]) -> tuple[str, float]:
    """One unit for a column of durations: (``s``/``min``/``h``/``d``, seconds per unit).

    Chosen from the median magnitude with format_duration's thresholds, so a column never
    mixes minutes and hours and its typical value reads naturally.
    """
    finite = sorted(abs(value) for value in seconds if math.isfinite(value))
    typical = finite[len(finite) // 2] if finite else 0.0
    if typical < 120:
        return "s", 1.0
    if typical < 7200:
        return "min", 60.0
    if typical < 172800:
        return "h", 3600.0
    return "d", 86400.0
