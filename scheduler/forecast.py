"""A battery of load forecasters per host, scored continuously, chosen by the NWS rule.

Series are kept as regular bins (``bin_seconds``, default one hour) of a quantity such as rho,
lam or the available fraction; an empty bin is NaN. Bins are numbered on the epoch clock
(bin b covers [b, b + 1) x bin_seconds, shifted by ``utc_offset_seconds`` so hour-of-day means
the owners' hour), and each host keeps its own position, so hosts on different (simulated)
clocks and with gaps share one bank.

Forecasters of the mean over a run window of L bins starting at the host's next bin:

- ``day_average``: mean of the last 24 hours' bins (the paper's estimate);
- ``last_hour``: the latest observed bin;
- ``hour_of_day``: for each bin of the window, the mean of the bins at the same hour of day over
  the last ``profile_days`` days (empty: the 24-hour average);
- ``hour_of_week``: the same at the same hour of the week within those days (empty: hour of day);
- ``kalman``: the filtered level of a local-level model (Chapman et al.): y_t = x_t + w_t,
  w ~ N(0, R) the noise of one bin's mean; x_{t+1} = x_t + v_t, v ~ N(0, Q) the drift of the
  owners' load. The variances are set from the data by moments of the first differences
  d_t = y_t - y_{t-1}: Var d = Q + 2R and Cov(d_t, d_{t-1}) = -R, each an exponentially
  forgetting average, so they follow the host. The forecast is flat at the level;
- ``tendency`` (Yang, Foster & Schopf 2003): the next bin continues the last direction by a
  step adapted towards the observed size of rises (or of falls); held for the window, kept
  within [0, the largest bin seen].

Scoring (the Network Weather Service rule): after each bin, every forecast made L bins earlier
for the window just completed is compared with the window's realised mean, for window lengths
``WINDOW_CLASSES_BINS``; the recent error of each (host, length, forecaster) is an exponentially
weighted mean absolute error. A query of length L uses the nearest length class and answers
with the forecaster of lowest recent error (the 24-hour average before any score exists).

Every forecaster's answer is held within the range of the means this host's series has shown
over windows of the same length class in its history (``profile_days``, the latest bins
included): a forecaster that extrapolates one saturated hour over a whole day (``last_hour``,
``tendency``) otherwise predicts a load the host has never sustained, and the completion time
w / (1 - rho) of such a window is off by tens of times. A host whose load really rises for
longer widens its own range within one window length.
Every answer also gives each row's ``long_run`` level, the mean of its bins over the profile
span (up to ``profile_days`` days, to its latest bin): what the host has sustained, which a
caller may hold a long window's forecast to (``ghs.manager.shadow_start.starts_of`` says when).
Every forecast uses only bins completed before the moment it is made.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scheduler.errors import InvalidArgumentError
from scheduler.folded_windows import folded_window_means
from scheduler.forecasters import (
    DEFAULT_FORECASTER,
    FORECASTERS,
    WINDOW_CLASSES_BINS,
    ForecastSettings,
    WindowForecast,
)
from scheduler.ring_means import day_mean, profile, profile_tables, window_range
from scheduler.row_state import RowState, check_hosts

# Forecasts wait to be scored until their window ends: the longest class plus one boundary.
_PENDING_SLOTS = WINDOW_CLASSES_BINS[-1] + 1
# a window longer than the newest bin's lead and this many weeks is folded onto one week
# (scheduler.folded_windows); shorter ones are summed bin by bin, as they always were
_FOLD_PAST_PERIODS = 3
_DAY_AVG, _LAST, _HOD, _HOW, _KALMAN, _TENDENCY = range(len(FORECASTERS))
_STATE_FIELDS = ("next_bin", "ring", "last_value", "max_value", "level", "level_var",
                 "diff_sq", "diff_lag", "last_diff", "diff_count", "step_up", "step_down",
                 "direction", "pending", "error_sum", "error_weight", "scored", "window_low",
                 "window_high")
# what the day-average and profile forecasters read, as of each row's next bin: derived from
# the ring when it changes (not saved; rebuilt by from_state)
_PROFILE_FIELDS = ("day_now", "hour_of_day_now", "hour_of_week_now", "span_now")


class ForecastBank(RowState):
    """Forecaster state for ``hosts`` rows; all state is numpy arrays (see :meth:`to_state`)."""

    FIELDS = _STATE_FIELDS
    ROW_FIELDS = _STATE_FIELDS + _PROFILE_FIELDS
    SETTINGS = ForecastSettings

    def __init__(self, hosts: int, settings: ForecastSettings | None = None) -> None:
        self.settings = settings or ForecastSettings()
        n, h = check_hosts(hosts), self.settings.history_bins
        classes, forecasters = len(WINDOW_CLASSES_BINS), len(FORECASTERS)
        nan = np.full(n, np.nan)
        self.next_bin = np.full(n, -1, dtype=np.int64)
        self.ring = np.full((n, h), np.nan)
        self.last_value, self.max_value = nan.copy(), nan.copy()
        self.level, self.level_var = nan.copy(), np.zeros(n)
        self.diff_sq, self.diff_lag, self.last_diff = np.zeros(n), np.zeros(n), nan.copy()
        self.diff_count = np.zeros(n)
        self.step_up, self.step_down, self.direction = np.zeros(n), np.zeros(n), np.zeros(n)
        # float32: scoring needs no more, and this is the bulk of a bank's state.
        self.pending = np.full((n, classes, forecasters, _PENDING_SLOTS), np.nan, np.float32)
        self.error_sum = np.zeros((n, classes, forecasters))
        self.error_weight = np.zeros((n, classes, forecasters))
        self.scored = np.zeros((n, classes), dtype=np.int64)
        # per length class, the lowest and highest window mean in the history (NaN: none)
        self.window_low = np.full((n, classes), np.nan)
        self.window_high = np.full((n, classes), np.nan)
        per_day = self.settings.bins_per_day
        self.day_now = nan.copy()
        self.hour_of_day_now = np.full((n, per_day), np.nan)
        self.hour_of_week_now = np.full((n, 7 * per_day), np.nan)
        self.span_now = nan.copy()

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ForecastBank:
        """Rebuild from :meth:`to_state`'s dict (arrays or nested lists)."""
        made = super().from_state(state)
        pushed = np.flatnonzero(made.next_bin >= 0)
        if pushed.size:
            made._refresh_profiles(pushed)
        return made

    def bin_of(self, epoch_seconds: Any) -> np.ndarray:
        """The bin index holding each time (epoch seconds)."""
        shifted = np.asarray(epoch_seconds, dtype=float) + self.settings.utc_offset_seconds
        return np.floor(shifted / self.settings.bin_seconds).astype(np.int64)

    def push(self, host_indices: Any, bin_indices: Any, values: Any) -> None:
        """Record one completed bin per listed host (distinct hosts; NaN: no data in it).

        A bin index must not precede the host's next bin; skipped bins count as empty.
        """
        idx = self.rows(host_indices)
        bins = np.broadcast_to(np.asarray(bin_indices, dtype=np.int64), idx.shape)
        y = np.broadcast_to(np.asarray(values, dtype=float), idx.shape)
        if np.unique(idx).size != idx.size:
            raise InvalidArgumentError("push takes each host at most once per call",
                                       field="host_indices", value=None)
        if (y[np.isfinite(y)] < 0).any() or np.isinf(y).any():
            raise InvalidArgumentError("values must be finite and >= 0 (NaN for no data)",
                                       field="values", value=None)
        fresh = self.next_bin[idx] < 0
        start = np.where(fresh, bins, self.next_bin[idx])
        if (bins < start).any():
            raise InvalidArgumentError("a bin was pushed out of order for some host",
                                       field="bin_indices", value=None)
        self._clear_gap(idx, start, bins - start)
        self._kalman_tendency(idx, y, bins - start + 1)
        h = self.settings.history_bins
        self.ring[idx, bins % h] = y
        self.next_bin[idx] = bins + 1
        self.max_value[idx] = np.fmax(self.max_value[idx], y)
        self._window_range(idx, bins)
        self._refresh_profiles(idx)
        self._score(idx, bins)
        self._store_forecasts(idx, bins + 1)

    def forecast(self, host_indices: Any, launch_seconds: Any, duration_seconds: float
                 ) -> WindowForecast:
        """Forecast mean of the series over [launch, launch + duration] (epoch seconds).

        Uses the bins completed so far; a launch past the next bin is allowed (profiles follow
        its hour). Rows without any data give NaN and the default forecaster.
        """
        return self.forecast_windows(host_indices, launch_seconds, [duration_seconds])[0]

    def forecast_windows(self, host_indices: Any, launch_seconds: Any,
                         durations_seconds: Any) -> list[WindowForecast]:
        """:meth:`forecast` for each of several window lengths (seconds) from the same
        launches: the forecasters' paths are worked out once, for the longest window. A
        length may be an array, one per row (each row gets what a call for it alone gives,
        but for the order of the sums over bins; ``window_bins`` is the first row's class)."""
        idx = self.rows(host_indices)
        durations = list(durations_seconds)
        for k, duration in enumerate(durations):
            if isinstance(duration, np.ndarray) and duration.size in (1, idx.size) and \
                    (np.isfinite(duration) & (duration > 0)).all():
                durations[k] = np.broadcast_to(duration.astype(float), idx.shape)
            elif not (isinstance(duration, (int, float)) and 0 < duration < math.inf):
                raise InvalidArgumentError(f"duration_seconds must be positive and finite, got "
                                           f"{duration!r}", field="duration_seconds",
                                           value=None)
        launch = np.broadcast_to(np.asarray(launch_seconds, dtype=float), idx.shape)
        if not np.isfinite(launch).all():
            raise InvalidArgumentError("launch_seconds must be finite", field="launch_seconds",
                                       value=None)
        bs = self.settings.bin_seconds
        shifted = launch + self.settings.utc_offset_seconds
        first = np.floor(shifted / bs).astype(np.int64)
        horizons = [math.floor(float(np.max((shifted + d) / bs - first))) + 1 for d in durations]
        # past the newest bin every path repeats with the week: a window much longer is read
        # from its first bins and one week (scheduler.folded_windows)
        period = 7 * self.settings.bins_per_day
        newest = np.where(self.next_bin[idx] >= 0, self.next_bin[idx], first)
        lead = int(max(np.max(newest - first, initial=0), 0))
        folded = max(horizons, default=1) > lead + _FOLD_PAST_PERIODS * period
        # a shorter window's paths are the first bins of the longest one's
        paths = self._paths(idx, first, lead + period if folded else max(horizons, default=1))
        return [self._folded_forecast(idx, shifted, first, paths, lead, period, duration)
                if folded and horizon > lead + period else
                self._window_forecast(idx, shifted, first, paths, horizon, float(duration))
                if np.ndim(duration) == 0 else
                self._rows_window_forecast(idx, shifted, first, paths, duration)
                for horizon, duration in zip(horizons, durations)]

    def _folded_forecast(self, idx: np.ndarray, shifted: np.ndarray, first: np.ndarray,
                         paths: np.ndarray, lead: int, period: int, duration: Any
                         ) -> WindowForecast:
        """A window past the paths' first ``lead`` bins and a period, read as whole periods
        of them (one length, or one per row)."""
        bs = self.settings.bin_seconds
        lengths = np.broadcast_to(np.asarray(duration, dtype=float), idx.shape)
        values = folded_window_means(paths, shifted / bs - first, lengths / bs, lead, period)
        unique, which = np.unique(lengths, return_inverse=True)
        c = np.array([self._window_class(float(length)) for length in unique])[which.ravel()]
        return self._chosen(idx, values, c if np.ndim(duration) else int(c[0]))

    def _rows_window_forecast(self, idx: np.ndarray, shifted: np.ndarray, first: np.ndarray,
                              paths: np.ndarray, durations: np.ndarray) -> WindowForecast:
        """Each row's own window length, every row at once (the figures of a call for each
        row alone, but for the order of the sums over bins: the bins past a row's window
        are summed in with weight 0)."""
        bs = self.settings.bin_seconds
        horizon = int(np.max(np.floor((shifted + durations) / bs - first))) + 1
        edges = first[:, None] + np.arange(horizon + 1)[None, :]
        start, end = shifted[:, None], (shifted + durations)[:, None]
        weights = (np.clip(edges[:, 1:] * bs, start, end)
                   - np.clip(edges[:, :-1] * bs, start, end)) / durations[:, None]
        paths = paths[:, :, :horizon]
        # an unknown forecast past a row's window must not reach its sum
        values = np.einsum("nfl,nl->nf", np.where(weights[:, None, :] > 0, paths, 0.0), weights)
        lengths, which = np.unique(durations, return_inverse=True)
        c = np.array([self._window_class(float(length)) for length in lengths])[which.ravel()]
        return self._chosen(idx, values, c)

    def _window_forecast(self, idx: np.ndarray, shifted: np.ndarray, first: np.ndarray,
                         paths: np.ndarray, horizon: int, duration_seconds: float
                         ) -> WindowForecast:
        bs = self.settings.bin_seconds
        # every row launched alike (one launch for all): one row's weights serve all
        own = slice(0, 1) if shifted.size and (shifted == shifted[0]).all() else slice(None)
        edges = first[own, None] + np.arange(horizon + 1)[None, :]
        start, end = shifted[own, None], (shifted[own] + duration_seconds)[:, None]
        lo = np.clip(edges[:, :-1] * bs, start, end)
        hi = np.clip(edges[:, 1:] * bs, start, end)
        weights = np.broadcast_to((hi - lo) / duration_seconds, (idx.size, horizon))
        if horizon < paths.shape[2]:
            paths = np.ascontiguousarray(paths[:, :, :horizon])
        values = np.einsum("nfl,nl->nf", paths, weights)
        return self._chosen(idx, values, self._window_class(duration_seconds))

    def _window_class(self, duration_seconds: float) -> int:
        """The length class (index into WINDOW_CLASSES_BINS) nearest a window's length."""
        length = duration_seconds / self.settings.bin_seconds
        return int(np.argmin(np.abs(np.log(np.asarray(WINDOW_CLASSES_BINS)) - math.log(
            max(length, 1.0)))))

    def _chosen(self, idx: np.ndarray, values: np.ndarray, c: int | np.ndarray
                ) -> WindowForecast:
        """Each row's forecasts of its window clipped to the window means it has shown, and
        the one of lowest recent error in its length class ``c`` (one, or one per row)."""
        low, high = self.window_low[idx, c], self.window_high[idx, c]
        values = np.clip(values, np.where(np.isfinite(low), low, -np.inf)[:, None],
                         np.where(np.isfinite(high), high, np.inf)[:, None])
        weight = self.error_weight[idx, c]
        errors = np.divide(self.error_sum[idx, c], weight, out=np.full(weight.shape, np.nan),
                           where=weight > 0)
        chosen = _choose(errors)
        rows = np.arange(idx.size)
        first_class = int(np.ravel(c)[0]) if np.size(c) else 0
        return WindowForecast(value=values[rows, chosen],
                              forecaster=tuple(map(FORECASTERS.__getitem__, chosen.tolist())),
                              recent_error=errors[rows, chosen], values=values, errors=errors,
                              window_bins=WINDOW_CLASSES_BINS[first_class],
                              long_run=self.span_now[idx])

    def recent_errors(self, host_indices: Any) -> np.ndarray:
        """(hosts, classes, forecasters) recent mean absolute errors (NaN: never scored)."""
        return self._recent_errors(self.rows(host_indices))

    # -- private ------------------------------------------------------------------------------

    def _recent_errors(self, idx: np.ndarray) -> np.ndarray:
        weight = self.error_weight[idx]
        return np.divide(self.error_sum[idx], weight, out=np.full(weight.shape, np.nan),
                         where=weight > 0)

    def _clear_gap(self, idx: np.ndarray, start: np.ndarray, gap: np.ndarray) -> None:
        for size, first, target in ((self.settings.history_bins, start, "ring"),
                                    (_PENDING_SLOTS, start + 1, "pending")):
            # Bins start .. start + gap - 1 had no data; boundaries start + 1 .. start + gap
            # were never reached, so no forecast made there may be scored.
            inside = (np.arange(size)[None, :] - first[:, None]) % size < np.minimum(
                gap, size)[:, None]
            if inside.any():
                rows, cols = np.nonzero(inside)
                getattr(self, target)[idx[rows], ..., cols] = np.nan

    def _kalman_tendency(self, idx: np.ndarray, y: np.ndarray, steps: np.ndarray) -> None:
        seen = np.isfinite(y)
        first = seen & ~np.isfinite(self.last_value[idx])
        again = seen & ~first
        # Moments of the first differences, a running mean that turns into exponential
        # forgetting after ``variance_memory_points`` differences.
        d = y - self.last_value[idx]
        count = self.diff_count[idx] + again
        rate = np.where(again, 1.0 / np.minimum(np.maximum(count, 1.0),
                                                self.settings.variance_memory_points), 0.0)
        lag = np.where(np.isfinite(self.last_diff[idx]) & again,
                       d * np.nan_to_num(self.last_diff[idx]), 0.0)
        d0 = np.where(again, d, 0.0)
        self.diff_sq[idx] += rate * (d0 * d0 - self.diff_sq[idx])
        self.diff_lag[idx] += rate * (lag - self.diff_lag[idx])
        self.diff_count[idx] = count
        noise_var = np.clip(-self.diff_lag[idx], 0.0, self.diff_sq[idx] / 2)
        drift_var = np.maximum(self.diff_sq[idx] - 2 * noise_var, 1e-3 * self.diff_sq[idx])
        # Predict over every step since the last bin, then update with the new one.
        omega = self.level_var[idx] + steps * drift_var
        gain = np.divide(omega, omega + noise_var, out=np.ones_like(omega),
                         where=omega + noise_var > 0)
        level = self.level[idx]
        new_level = np.where(first, y, np.where(again, level + gain * (y - level), level))
        new_var = np.where(first, 0.0, np.where(again, (1 - gain) * omega, omega))
        self.level[idx], self.level_var[idx] = new_level, new_var
        # Tendency: adapt the step of the direction just taken.
        a = self.settings.tendency_adapt
        up, down = again & (d > 0), again & (d < 0)
        self.step_up[idx] = np.where(up, self.step_up[idx] + a * (d0 - self.step_up[idx]),
                                     self.step_up[idx])
        self.step_down[idx] = np.where(down, self.step_down[idx] + a * (-d0 - self.step_down[
            idx]), self.step_down[idx])
        self.direction[idx] = np.where(again, np.sign(d0), self.direction[idx])
        self.last_diff[idx] = np.where(again, d, np.where(seen, np.nan, self.last_diff[idx]))
        self.last_value[idx] = np.where(seen, y, self.last_value[idx])

    def _paths(self, idx: np.ndarray, first: np.ndarray, horizon: int) -> np.ndarray:
        """(hosts, forecasters, horizon) forecasts of bins first .. first + horizon - 1."""
        s = self.settings
        per_day = s.bins_per_day
        pushed = self.next_bin[idx] >= 0
        boundary = np.where(pushed, self.next_bin[idx], first)
        targets = first[:, None] + np.arange(horizon)[None, :]
        if (pushed & (first >= boundary)).all():
            # the tables kept since each row's last bin give every target at or past it
            day = self.day_now[idx]
            back = boundary[:, None] - 1 - targets
            # gathered in place: copying each row's week table first moved 168 values a row
            # to read a few (half the cost of a 1,024-host forecast)
            hod = self.hour_of_day_now[idx[:, None], back % per_day]
            how = self.hour_of_week_now[idx[:, None], back % (7 * per_day)]
        else:
            # the rows' bins are read where needed, never the whole ring copied
            span = s.profile_days * per_day
            day = day_mean(self.ring, idx, boundary, per_day)
            hod = profile(self.ring, idx, targets, boundary, per_day, span)
            how = profile(self.ring, idx, targets, boundary, 7 * per_day, span)
        day = np.where(np.isfinite(day), day, self.last_value[idx])
        hod = np.where(np.isfinite(hod), hod, day[:, None])
        how = np.where(np.isfinite(how), how, hod)
        step = np.where(self.direction[idx] > 0, self.step_up[idx],
                        np.where(self.direction[idx] < 0, -self.step_down[idx], 0.0))
        tendency = np.clip(self.last_value[idx] + step, 0.0, self.max_value[idx])
        flat = np.stack([day, self.last_value[idx], self.level[idx], tendency], axis=1)
        out = np.empty((idx.size, len(FORECASTERS), horizon))
        out[:, [_DAY_AVG, _LAST, _KALMAN, _TENDENCY], :] = flat[:, :, None]
        out[:, _HOD, :], out[:, _HOW, :] = hod, how
        return out

    def _refresh_profiles(self, idx: np.ndarray) -> None:
        per_day = self.settings.bins_per_day
        (self.day_now[idx], self.hour_of_day_now[idx], self.hour_of_week_now[idx],
         self.span_now[idx]) = profile_tables(self.ring, idx, self.next_bin[idx], per_day,
                                              self.settings.profile_days * per_day)

    def _score(self, idx: np.ndarray, pushed: np.ndarray) -> None:
        h = self.settings.history_bins
        lengths = np.asarray(WINDOW_CLASSES_BINS)
        decay = 0.5 ** (1.0 / self.settings.error_half_life_points)
        # Realised mean of the last L bins for every class at once, newest bin first.
        back = pushed[:, None] - np.arange(lengths[-1])[None, :]
        recent = self.ring[idx[:, None], back % h]
        seen = np.isfinite(recent)
        total = np.cumsum(np.where(seen, recent, 0.0), axis=1)[:, lengths - 1]
        count = np.cumsum(seen, axis=1)[:, lengths - 1]
        realised = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
        made_at = pushed[:, None] - lengths[None, :] + 1
        forecast = self.pending[idx[:, None], np.arange(lengths.size)[None, :], :,
                                made_at % _PENDING_SLOTS].astype(float)
        error = np.abs(forecast - realised[:, :, None])
        ok = np.isfinite(error)
        self.error_sum[idx] = np.where(ok, decay * self.error_sum[idx] + np.where(ok, error, 0),
                                       self.error_sum[idx])
        self.error_weight[idx] = np.where(ok, decay * self.error_weight[idx] + 1.0,
                                          self.error_weight[idx])
        self.scored[idx] += ok.any(axis=2)

    def _window_range(self, idx: np.ndarray, pushed: np.ndarray) -> None:
        self.window_low[idx], self.window_high[idx] = window_range(
            self.ring, idx, pushed, WINDOW_CLASSES_BINS)

    def _store_forecasts(self, idx: np.ndarray, boundary: np.ndarray) -> None:
        lengths = np.asarray(WINDOW_CLASSES_BINS)
        paths = self._paths(idx, boundary, int(lengths[-1]))
        means = np.cumsum(paths, axis=2)[:, :, lengths - 1] / lengths
        self.pending[idx, :, :, boundary % _PENDING_SLOTS] = means.transpose(0, 2, 1)


def _choose(errors: np.ndarray) -> np.ndarray:
    """Index of the lowest recent error per row; the default where nothing is scored."""
    finite = np.isfinite(errors)
    best = np.argmin(np.where(finite, errors, np.inf), axis=1)
    return np.where(finite.any(axis=1), best, DEFAULT_FORECASTER)
