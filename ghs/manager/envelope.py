"""The calibrated answer for a host that has local jobs running at launch.

The default for a task on one host starts it idle under the forecast of the host's measured
load, which carries the jobs running now (``carried``), calibrated for such a host on its
launches that found jobs running (``BUSY_VIEW``): a fifth to a third of its record, too few
for their p90 and p95 to learn in days (alone they covered .63-.83 at p90 on the
back-tests). For such a host the answer's p90 and p95 are the upper envelope of the
carried view's calibrated quantiles and those of the view that holds the running jobs as a
backlog under the forecast of new arrivals (``state``, calibrated on its own): each is
calibrated on the host's record, and the envelope covers at least what either does. The mean
and the median stay the carried view's (the envelope widens the interval, not the estimate;
with the envelope's median, .86 of the RICC launches with jobs running finished by it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.manager.shadow_laws import copies_of
from ghs.placement import scaled
from scheduler import Host
from scheduler.backlog import Backlog
from scheduler.conformal import level_name
from scheduler.host_quantiles import host_quantiles
from scheduler.level_knots import reported_quantiles
from scheduler.prediction import predict_hosts


def running_jobs(backlog: Backlog | None) -> bool:
    """Whether a start state holds local jobs running at launch (a fresh snapshot's)."""
    return backlog is not None and backlog.kind == "jobs" and bool(backlog.job_means)


def envelope_of(own: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Served quantiles (rows, levels p50/p90/p95 and any above, seconds): ``own`` with
    every level above the median raised to ``held``'s where higher (the median stays its
    own)."""
    out = np.array(own, dtype=float, copy=True)
    out[..., 1:] = np.maximum(out[..., 1:], np.asarray(held, dtype=float)[..., 1:])
    return out


def held_envelope(calibration: Any, tracks: Sequence[Any], chosen: Sequence[Host],
                  starts: Sequence[Backlog], at: np.ndarray, duration_seconds: float,
                  prediction: Any, kept: Sequence[int], factors: np.ndarray, dist: str,
                  scales: Sequence[float] | None = None
                  ) -> tuple[np.ndarray, list[dict[str, Any] | None]]:
    """``factors`` (hosts of ``prediction``, levels) with every host whose start has running
    jobs moved to the envelope (see the module doc), and per host what the envelope applied
    (None where it did not). ``kept``: for each host of ``prediction``, its index in
    ``chosen``/``tracks``/``starts``/``at``; ``calibration``: the manager's
    :class:`ghs.manager.calibration.Calibration`."""
    rows = [k for k, c in enumerate(kept) if running_jobs(starts[c])
            and prediction.dedicated_seconds[k] > 0]
    applied: list[dict[str, Any] | None] = [None] * len(kept)
    if not rows:
        return factors, applied
    picked = [kept[k] for k in rows]
    held_hosts, held_starts, _ = calibration.view_hosts(
        [tracks[c] for c in picked], [chosen[c] for c in picked], [starts[c] for c in picked],
        np.asarray(at)[picked], duration_seconds, "state")
    held_hosts = scaled(held_hosts, None if scales is None else [scales[c] for c in picked])
    shares = np.asarray(prediction.shares, dtype=float)[rows]
    held = predict_hosts(copies_of(held_hosts), shares, dist, backlog=held_starts)
    held_factors, held_described = calibration.factors(
        [tracks[c] for c in picked], list(held.dedicated_seconds), "state")
    levels = calibration.levels
    held_reported = reported_quantiles(host_quantiles(held, levels), held_factors,
                                       held.dedicated_seconds)
    own_model = host_quantiles(prediction, levels)[rows]
    own_reported = reported_quantiles(own_model, factors[rows],
                                      np.asarray(prediction.dedicated_seconds)[rows])
    out = factors.copy()
    out[rows] = envelope_of(own_reported, held_reported) / own_model
    for k, detail, reported in zip(rows, held_described, held_reported):
        applied[k] = {"held_backlog_view": detail,
                      "held_quantiles": dict(zip(map(level_name, levels), map(float, reported)))}
    return out, applied
