"""The forecast battery's vocabulary: the forecasters' names, the window length classes they
are scored on, a bank's fixed settings and its answer per host (``scheduler.forecast``
describes the forecasters and the NWS rule)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError

FORECASTERS = ("day_average", "last_hour", "hour_of_day", "hour_of_week", "kalman", "tendency")
WINDOW_CLASSES_BINS = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_FORECASTER = 0


@dataclass(frozen=True)
class ForecastSettings:
    """Fixed parameters of a bank (seconds, counts, rates per scoring point)."""

    bin_seconds: float = 3600.0
    profile_days: int = 8
    error_half_life_points: float = 72.0
    variance_memory_points: float = 168.0
    tendency_adapt: float = 0.5
    utc_offset_seconds: float = 0.0

    def __post_init__(self) -> None:
        per_day = 86400.0 / self.bin_seconds if self.bin_seconds > 0 else 0.0
        if not (math.isfinite(per_day) and per_day >= 1 and per_day == round(per_day)):
            raise InvalidArgumentError(
                f"bin_seconds must divide a day (e.g. 3600), got {self.bin_seconds!r}",
                field="bin_seconds", value=self.bin_seconds)
        checks = (("profile_days", self.profile_days, 1, 60),
                  ("error_half_life_points", self.error_half_life_points, 1, 1e6),
                  ("variance_memory_points", self.variance_memory_points, 2, 1e6),
                  ("tendency_adapt", self.tendency_adapt, 1e-6, 1))
        for name, value, low, high in checks:
            if not (isinstance(value, (int, float)) and low <= value <= high):
                raise InvalidArgumentError(f"{name} must be in [{low:g}, {high:g}], got "
                                           f"{value!r}", field=name, value=value)

    @property
    def bins_per_day(self) -> int:
        return round(86400.0 / self.bin_seconds)

    @property
    def history_bins(self) -> int:
        """Bins kept per host: the profile span, and at least the longest scored window."""
        return max(self.profile_days * self.bins_per_day, WINDOW_CLASSES_BINS[-1]) + 1


@dataclass(frozen=True, eq=False)
class WindowForecast:
    """The NWS answer per host: ``value`` (units of the series), the chosen forecaster's name
    and its recent mean absolute error; ``values`` and ``errors`` give every forecaster's
    (columns in ``FORECASTERS`` order; error NaN until scored); ``window_bins`` the length class
    whose scores were used; ``long_run`` each host's mean over the profile span (units of the
    series; NaN before any bin), the level it has sustained."""

    value: np.ndarray
    forecaster: tuple[str, ...]
    recent_error: np.ndarray
    values: np.ndarray
    errors: np.ndarray
    window_bins: int
    long_run: np.ndarray

    def to_dict(self, row: int) -> dict[str, Any]:
        """One host's answer, JSON-ready (None for unknown numbers)."""
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None
        return {"value": num(self.value[row]), "forecaster": self.forecaster[row],
                "recent_error": num(self.recent_error[row]), "window_bins": self.window_bins,
                "long_run": num(self.long_run[row]),
                "forecasters": {name: {"value": num(self.values[row, f]),
                                       "recent_error": num(self.errors[row, f])}
                                for f, name in enumerate(FORECASTERS)}}
