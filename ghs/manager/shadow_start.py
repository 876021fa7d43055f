"""What the manager knew of one host at a past hour: the inputs of a shadow launch.

Loaded once per catch-up from the store (measurements, capacity series, running snapshots,
demand templates) and then cut at each launch, so a launch at ``at`` sees only the
measurements ended by then, the snapshot taken then, and the 24-hour estimate of the hours
before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ghs.manager.estimates import model_parameters
from ghs.manager.realised import CapacitySeries
from ghs.manager.state import host_backlog
from scheduler import Host, InvalidHostError
from scheduler.backlog import Backlog
from scheduler.hosts import MAX_RATE_PER_SECOND
from sensors.estimates import WindowTotals, estimate_from_totals

DAY_SECONDS = 86400.0
# a saturated hour still gets a prediction (the manager would exclude the host, the shadow
# launch is a record of the model, not a served answer)
RHO_CAP = 0.95

# per-row columns of ``ShadowInputs.totals``
_TOTALS = ("interval_seconds", "arrivals", "rho", "service_count", "service_sum_seconds",
           "service_sum_squares", "busy_cpu_seconds", "fork_counter")


@dataclass(frozen=True, eq=False)
class ShadowInputs:
    """One host's stored records from ``since`` on (epoch seconds, oldest first)."""

    cores: int
    tau: float
    end: np.ndarray
    capacity: CapacitySeries
    snapshots: list[dict[str, Any]]
    snapshot_times: np.ndarray
    templates: list[dict[str, Any]]
    # per row (start, end, lam, rho, tau): what bins and the speed need (a manager keeps a
    # day of these per host)
    spans: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
    # (rows, len(_TOTALS)): what the 24-hour estimate pools, per row (the stored rows
    # themselves are let go once read)
    totals: np.ndarray = field(default_factory=lambda: np.empty((0, len(_TOTALS))),
                               repr=False)

    @classmethod
    def load(cls, store: Any, host_id: str, cores: int, *, since_epoch_seconds: float,
             rows_since_epoch_seconds: float | None = None,
             previous: ShadowInputs | None = None,
             snapshots_since_epoch_seconds: float | None = None) -> ShadowInputs:
        """The records from ``since`` on; ``rows_since`` (later, optional): the measurements
        only from then on (a catch-up that needs fewer of them reads and converts fewer);
        ``snapshots_since`` (optional): the running snapshots only from then on (those the
        launches look at: a host's every snapshot decoded again each hour costs more than
        the launch).
        ``previous``: this host's inputs of an earlier catch-up; only what was stored since
        is read (its rows read once), unless the store holds rows it did not see (a
        measurement stored late), when everything is read again."""
        rows_since = max(since_epoch_seconds, rows_since_epoch_seconds or -math.inf)
        spans: list[tuple[Any, ...]] | None = None
        capacity, end = None, None
        if previous is not None and previous.cores == cores and previous.spans:
            held_before = len(previous.spans)
            keep = int(np.searchsorted(previous.end, rows_since, side="right"))
            newer = store.measurements(host_id, since_end=float(previous.end[-1]))
            held = store.db.execute("SELECT COUNT(*) FROM measurements WHERE host_id = ? AND "
                                    "end_epoch_seconds > ?", [host_id, rows_since]).fetchone()
            if keep < held_before and held[0] == held_before - keep + len(newer):
                spans = previous.spans[keep:] + _spans(newer)
                totals = np.concatenate([previous.totals[keep:], _totals(newer)])
                # the ends held extended (not rebuilt from a day of rows every hour)
                end = np.concatenate([previous.end[keep:], np.array(
                    [span[1] for span in spans[len(spans) - len(newer):]], dtype=float)])
                capacity = previous.capacity.since(since_epoch_seconds).extended(
                    CapacitySeries.from_rows(store.streams.capacity(
                        host_id, since_epoch_seconds=max(previous.capacity.covered_until,
                                                         since_epoch_seconds)), cores))
        if spans is None:
            rows = store.measurements(host_id, since_end=rows_since)
            spans, totals = _spans(rows), _totals(rows)
        if capacity is None:
            capacity = CapacitySeries.from_rows(store.streams.capacity(
                host_id, since_epoch_seconds=since_epoch_seconds), cores)
        # the speed stated last (the newest row that states one)
        stated = next((span[4] for span in reversed(spans) if span[4]), None)
        taus = [] if stated is None else [stated]
        if not taus and rows_since_epoch_seconds is not None:
            # the speed stated last since ``since``, as a load of every row would find
            taus = [row[0] for row in store.db.execute(
                "SELECT tau FROM measurements WHERE host_id = ? AND end_epoch_seconds > ? "
                "AND tau IS NOT NULL AND tau != 0 ORDER BY end_epoch_seconds DESC LIMIT 1",
                [host_id, since_epoch_seconds])]
        if taus:
            tau = taus[-1]
        else:  # the host's hello (read only when no row states a speed)
            facts = store.host(host_id)
            tau = facts.tau if facts is not None and facts.tau else 1.0
        snapshots = sorted(store.streams.running(
            host_id, since_epoch_seconds=snapshots_since_epoch_seconds),
            key=lambda s: s["epoch_seconds"])
        if end is None:
            end = np.array([span[1] for span in spans], dtype=float)
        return cls(cores, float(tau), end, capacity, snapshots,
                   np.array([s["epoch_seconds"] for s in snapshots], dtype=float),
                   store.streams.templates(host_id), spans, totals)

    def trimmed(self, rows_since_epoch_seconds: float, since_epoch_seconds: float
                ) -> ShadowInputs:
        """Only what a later catch-up from these times on reads again (what a track keeps;
        snapshots and templates are read anew each time)."""
        keep = int(np.searchsorted(self.end, rows_since_epoch_seconds, side="right"))
        return replace(self, end=self.end[keep:],
                       capacity=self.capacity.since(since_epoch_seconds), snapshots=[],
                       snapshot_times=np.empty(0), templates=[], spans=self.spans[keep:],
                       totals=self.totals[keep:])

    def window_totals(self, first: int, stop: int) -> WindowTotals:
        """What the sensors' 24-hour estimate pools from rows ``first`` to ``stop``, summed
        as :meth:`sensors.estimates.WindowTotals.of` sums it (the same estimate to the bit):
        exactly rounded sums where it takes ``math.fsum``, running sums in row order where it
        adds as it goes."""
        rows = self.totals[first:stop]
        interval, arrivals, rho, count, total, squares, busy, fork = rows.T
        return WindowTotals(
            measurements=len(rows), observed_seconds=math.fsum(interval),
            arrivals=int(arrivals.sum()), rho_seconds=math.fsum(rho * interval),
            service_count=int(count.sum()),
            service_sum_seconds=float(np.cumsum(total)[-1]) if len(rows) else 0.0,
            service_sum_squares=float(np.cumsum(squares)[-1]) if len(rows) else 0.0,
            busy_cpu_seconds=math.fsum(busy), fork_counter_measurements=int(fork.sum()))

    def bin_means(self, index: int, bin_seconds: float) -> tuple[float, float]:
        """Interval-weighted means of lam (1/s) and rho over the measurements whose midpoint
        falls in bin ``index`` (NaN: none)."""
        if not self.spans:
            return math.nan, math.nan
        lo, hi = index * bin_seconds, (index + 1) * bin_seconds
        first, last = np.searchsorted(self.end, [lo, hi + 2 * bin_seconds])
        lam = rho = weight = 0.0
        for start, end, lam_per_second, row_rho, _ in self.spans[first:last]:
            span = end - start
            middle = end - span / 2
            if lo <= middle < hi and span > 0 and lam_per_second is not None \
                    and row_rho is not None:
                lam += span * max(lam_per_second, 0.0)
                rho += span * max(row_rho, 0.0)
                weight += span
        return (lam / weight, rho / weight) if weight > 0 else (math.nan, math.nan)

    def snapshot_near(self, hour: float, fresh_seconds: float) -> dict[str, Any] | None:
        """The first snapshot taken in [hour, hour + fresh) (the one an hourly launch sees)."""
        k = int(np.searchsorted(self.snapshot_times, hour))
        if k < len(self.snapshots) and self.snapshot_times[k] < hour + fresh_seconds:
            return self.snapshots[k]
        return None

    def backlog_at(self, day: Host, snapshot: dict[str, Any] | None) -> Backlog:
        """The start a launch with ``snapshot`` (None: none fresh) assumes."""
        backlog, _ = host_backlog(day, snapshot, self.templates, fresh=snapshot is not None)
        return backlog


def _totals(rows: list[dict[str, Any]]) -> np.ndarray:
    """(rows, len(_TOTALS)) of stored measurement rows, as ``ghs.record.sensor_measurement``
    reads them (a row without a lambda source counts as accounting)."""
    out = np.empty((len(rows), len(_TOTALS)))
    for k, row in enumerate(rows):
        out[k] = (row["end_epoch_seconds"] - row["start_epoch_seconds"],
                  row["jobs_started"] + row["jobs_between"], row["rho"], row["service_count"],
                  row["service_cpu_seconds_sum"], row["service_cpu_seconds_sum_squares"],
                  row["busy_cpu_seconds"], row.get("lambda_source") == "fork_counter")
    return out


def _spans(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(row["start_epoch_seconds"], row["end_epoch_seconds"], row["lam_per_second"],
             row["rho"], row.get("tau")) for row in rows]


def host_at(host_id: str, inputs: ShadowInputs, at: float) -> Host | None:
    """The 24-hour host the manager would have served at ``at`` (None before any arrival
    was measured)."""
    # the rows ended in (at - 1 day, at], pooled as the sensors pool their measurements
    first, k = np.searchsorted(inputs.end, [at - DAY_SECONDS, at], side="right")
    if k <= first:
        return None
    # no history start: it only says whether the estimate is provisional, which a launch
    # does not use (and finding it scans all the host's measurements every hour)
    estimate = estimate_from_totals(inputs.window_totals(int(first), int(k)), now=at,
                                    window_seconds=DAY_SECONDS)
    if estimate.lam is None or estimate.rho is None:
        return None
    lam, mu, sigma, _ = model_parameters(estimate, inputs.cores)
    try:
        return Host(host_id, lam=lam, mu=mu, sigma=sigma,
                    rho=min(max(estimate.rho, 0.0), RHO_CAP), tau=inputs.tau, cores=inputs.cores)
    except InvalidHostError:
        return None  # out of any workstation's range: no launch, as with no estimate


def starts_of(day: Host, forecast: Any, *, arrivals_only: bool,
              long_run_rho: float = math.nan) -> Host:
    """``day`` with the forecast (lam 1/s, rho) of the run window. ``arrivals_only``: the load
    is the forecast arrival rate times the mean demand (the running jobs are held as the
    backlog), at most ``long_run_rho`` (:func:`arrivals_load`); otherwise the forecast
    measured utilisation, which carries them."""
    lam, rho = float(forecast[0]), float(forecast[1])
    if not (math.isfinite(lam) and math.isfinite(rho)) or lam > MAX_RATE_PER_SECOND:
        return day
    if arrivals_only:
        lam, rho = arrivals_load(lam, day.cores * day.mu, long_run_rho)
    # the host's other fields (speed, cores, processes) stay as they are
    return replace(day, lam=max(lam, 0.0), rho=min(max(rho, 0.0), RHO_CAP))


def arrivals_load(lam_per_second: float, capacity_per_second: float,
                  long_run_rho: float) -> tuple[float, float]:
    """(lam 1/s, rho) of the new arrivals a view that holds the running jobs as a backlog
    expects over its window: the forecast rate, its load lam / capacity (the jobs the host's
    cores finish per second) held to at most the host's long-run utilisation (the mean over
    the forecast's profile span; NaN: not held), the rate with it.

    Why: a queue held as the backlog makes the window tens of hours long, and over such a
    window the forecasters carry on the rate of the burst that built the queue. On RICC's
    queued stations that view served a median 124 times the work where the runs took 15.5,
    the burst at the cap on half of them; the runs met almost no new work (the jobs arriving
    while they ran offered a median 0.02 of the CPU). Held to the long-run level the view's
    mean error on launches with jobs running fell from 6.3 to 0.87 (RICC) and 1.27 to 0.24
    (CTC) (the measurement log, "A long window's arrivals")."""
    if not (capacity_per_second > 0):
        return lam_per_second, 0.0
    rho = lam_per_second / capacity_per_second
    if math.isfinite(long_run_rho) and rho > long_run_rho:
        rho = max(long_run_rho, 0.0)
        lam_per_second = rho * capacity_per_second
    return lam_per_second, rho
