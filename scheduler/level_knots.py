"""Each host's level-map knots: its model quantiles, its reported (calibrated) quantiles, and
its model CDF at them.

A host's calibrated CDF is phi(F(x)): F its model CDF and phi the piecewise-linear map of
[0, 1] through (F(reported quantile), level) (:func:`scheduler.conformal.level_map`). F has an
atom at the host's start s (its latest core group's dedicated time) whenever the share can run
without interruption: P(T = s) = P(no local job takes its core). Read off a grid of times, as
the served law and the selection's criterion had read them, the atom is a ramp from the grid
point before s to the one after it:

- a level inside the atom (P(T = s) >= level) had its model quantile read up to a grid step
  past s (a p50 of 1,208 s for a 1,200 s task with P(T = s) = 0.79);
- F at a reported quantile equal to s was read part way up the ramp.

Here both come from the host's own law at its own points (:func:`scheduler.host_cdf.rows_cdf`):
a level inside the atom has its model quantile at s, and a reported quantile at s has the knot
min(level, P(T <= s)): the level itself where the atom holds it, so that
factors of 1 leave the law as the model's, and all of the atom where it does not (the
calibration then says the level is reached by s).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler import completion
from scheduler.host_cdf import rows_cdf

# a reported quantile this close to the start (relative) is at it: a factor of 1 on a model
# quantile at the start, or a quantile held at the dedicated time
_SAME_TIME = 1e-12


def reported_quantiles(model_quantiles: np.ndarray, factors: np.ndarray,
                       dedicated_seconds: np.ndarray) -> np.ndarray:
    """(hosts, levels) calibrated quantiles, seconds: the model's times the factors, made
    non-decreasing in the level, and never before the host's dedicated time (its share
    cannot finish sooner, whatever a factor below 1 says: where the model's quantile is
    the dedicated time itself, a run without interruption, a factor of 0.98 put it 2%
    before, and the level map then put the level's mass at time 0)."""
    scaled = np.maximum.accumulate(model_quantiles * factors, axis=-1)
    return np.maximum(scaled, np.asarray(dedicated_seconds, dtype=float)[..., None])


def level_knots(rows: Any, model_quantiles: np.ndarray, factors: np.ndarray,
                levels: np.ndarray, dedicated_seconds: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(knots, reported, model quantiles), each (rows, levels), of each row's host: ``rows``
    its servers (rows, groups), ``model_quantiles`` (seconds) as read elsewhere (a grid),
    corrected inside the atom at the host's start; ``factors`` (rows, levels) > 0;
    ``dedicated_seconds`` (rows,). The knots are non-decreasing in [0, 1]."""
    levels = np.asarray(levels, dtype=float)[None, :]
    start = completion.start_point(rows)[:, None]
    at_start = np.clip(rows_cdf(rows, start), 0.0, 1.0)
    model_q = np.where(at_start >= levels, start, model_quantiles)
    reported = reported_quantiles(model_q, factors, dedicated_seconds)
    with np.errstate(invalid="ignore"):
        at_reported = np.clip(rows_cdf(rows, reported), 0.0, 1.0)
    # (a reported quantile before the start, where a factor below 1 put it, keeps F = 0 there)
    at_atom = np.abs(reported - start) <= _SAME_TIME * start
    at_reported = np.where(at_atom, np.minimum(levels, at_start), at_reported)
    return np.maximum.accumulate(at_reported, axis=1), reported, model_q
