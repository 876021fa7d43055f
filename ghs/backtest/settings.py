"""The back-test's settings, and what it refuses before it starts (each a one-line
:class:`BacktestError` naming the flag)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ghs.agent.replay import DEFAULT_ZERO_EPOCH_SECONDS, Station
from ghs.backtest.world import HOUR_SECONDS, BacktestError
from ghs.config import SensorConfig


@dataclass(frozen=True)
class BacktestSettings:
    """Launch schedule on the log's clock (whole hours, seconds) and the sampler's settings."""

    start_seconds: float = 48 * HOUR_SECONDS
    every_seconds: float = 3 * HOUR_SECONDS
    parallel: bool = False
    sensor: SensorConfig = field(default_factory=SensorConfig)
    seed: int = 1
    zero_epoch_seconds: float = DEFAULT_ZERO_EPOCH_SECONDS
    end_seconds: float | None = None  # the logs are cut here (None: their own ends)
    shadow_every_seconds: float = HOUR_SECONDS
    shadow_lead_seconds: float = 24 * HOUR_SECONDS
    last_launch_seconds: float | None = None  # no launch, scored or shadow, after it
    # the task lengths the calibrators learn at, as a manager's fixed ones (None: each scored
    # length its own); a scored length between them is served by the manager's rule
    calibration_lengths_seconds: tuple[float, ...] | None = None


# 11 years of hourly shadow launches: a longer span is a bad arrival time or wants --end
_MAX_LAUNCH_MOMENTS = 100_000


def validate(stations: Sequence[Station], keys: Sequence[str], works: Sequence[float],
             settings: BacktestSettings) -> np.ndarray:
    """The task lengths as an array (seconds), once every argument is checked."""
    if not stations or len(keys) != len(stations):
        raise BacktestError("give at least one station, each with a key", field="stations",
                            value=len(stations))
    work = np.asarray(works, dtype=float)
    if work.size == 0 or not (np.isfinite(work).all() and (work > 0).all()):
        raise BacktestError(f"task lengths must be positive seconds, got {list(works)!r}",
                            field="work", value=list(works))
    for name, value in (("start", settings.start_seconds), ("launch_every",
                                                             settings.every_seconds),
                        ("shadow_every", settings.shadow_every_seconds)):
        if not (value > 0 and value % HOUR_SECONDS == 0) and not (name == "start"
                                                                  and value == 0):
            raise BacktestError(f"--{name.replace('_', '-')} must be a whole number of hours, "
                                f"got {value:g} s", field=name, value=value)
    lengths = settings.calibration_lengths_seconds
    if lengths is not None and not (len(lengths) and all(
            math.isfinite(x) and x > 0 for x in lengths)):
        raise BacktestError(f"calibration lengths must be positive seconds, got {lengths!r}",
                            field="calibrate_at", value=list(lengths))
    return work


def check_span(end_seconds: float, settings: BacktestSettings) -> None:
    """Refuse logs whose span asks for over _MAX_LAUNCH_MOMENTS launch moments (scored and
    shadow): an arrival time of 1e300 s made numpy refuse the launch array with a traceback,
    and a span of years runs for days."""
    first = settings.start_seconds - min(settings.start_seconds, settings.shadow_lead_seconds)
    moments = (max(end_seconds - settings.start_seconds, 0.0) / settings.every_seconds
               + max(end_seconds - first, 0.0) / settings.shadow_every_seconds)
    if moments > _MAX_LAUNCH_MOMENTS:
        raise BacktestError(
            f"the logs run to {end_seconds:.3g} s ({end_seconds / 86400:.3g} days): "
            f"{moments:.3g} launch moments, over {_MAX_LAUNCH_MOMENTS:,}; cut them with --end",
            field="end", value=end_seconds)
