"""A host with local jobs running at launch is answered with the envelope of the carried and
the held-backlog views' calibrated quantiles (ghs.manager.envelope)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_manager_calibration import fed  # noqa: F401 (the shared fixture: two days of a host)

from ghs.manager.envelope import held_envelope, running_jobs
from ghs.manager.shadow_start import ShadowInputs, host_at
from ghs.manager.simulated_feed import ZERO_EPOCH_SECONDS
from scheduler import Host, predict
from scheduler.backlog import Backlog
from scheduler.calibrated import SERVED_LEVELS
from scheduler.host_quantiles import host_quantiles


def test_running_jobs_are_what_a_fresh_snapshot_holds():
    assert running_jobs(Backlog.exact([120.0, 30.0]))
    assert not running_jobs(Backlog.idle())
    assert not running_jobs(Backlog.steady_state())
    assert not running_jobs(None)


def test_a_busy_host_gets_the_envelope_and_an_idle_one_its_own_factors(fed):  # noqa: F811
    calibrated = fed[2]
    track = calibrated.track("ws1", 1)
    day = Host("ws1", lam=0.3 / 300.0, mu=1 / 300.0, sigma=600.0, rho=0.3)
    at = np.array([ZERO_EPOCH_SECONDS + 2 * 86400.0])
    work = 3600.0
    own = predict([day], work)  # the carried view: idle start under the measured load
    factors = np.array([[1.0, 1.1, 1.2, 1.3]])
    busy = Backlog.exact([1800.0])
    out, applied = held_envelope(calibrated, [track], [day], [busy], at, own.mean, own, [0],
                                 factors, "lognormal")
    # what the held view reports on its own: the running job as a backlog under the forecast
    # of new arrivals, times the state calibrator's factors
    held_hosts, held_starts, _ = calibrated.view_hosts([track], [day], [busy], at, own.mean,
                                                       "state")
    held = predict(held_hosts, work, backlog=held_starts)
    held_factors, _ = calibrated.factors([track], list(held.dedicated_seconds), "state")
    held_reported = np.maximum.accumulate(host_quantiles(held, SERVED_LEVELS) * held_factors,
                                          axis=1)
    own_reported = host_quantiles(own, SERVED_LEVELS) * factors
    expected = np.concatenate([own_reported[:, :1], np.maximum(own_reported[:, 1:],
                                                               held_reported[:, 1:])], axis=1)
    assert out * host_quantiles(own, SERVED_LEVELS) == pytest.approx(expected, rel=1e-9)
    # a job of 30 min still to run pushes the upper quantiles past the idle start's; the
    # median stays the carried view's
    assert (out[:, 1:] > factors[:, 1:]).all() and out[0, 0] == factors[0, 0]
    assert applied[0]["held_quantiles"]["p90"] == pytest.approx(held_reported[0, 1])
    assert applied[0]["held_quantiles"]["p99.6"] == pytest.approx(held_reported[0, 3])
    idle_out, idle_applied = held_envelope(calibrated, [track], [day], [Backlog.idle()], at,
                                           own.mean, own, [0], factors, "lognormal")
    assert idle_out is factors and idle_applied == [None]


def test_the_ledger_keeps_the_envelope_the_queries_serve(fed):  # noqa: F811
    """A shadow launch that found jobs running is written to the ledger as a query at that
    moment would have been answered: p90 and p95 at least the held view's."""
    calibrated = fed[2]
    store = calibrated.store
    inputs = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=ZERO_EPOCH_SECONDS)
    rows = {}
    for row in calibrated.ledger(["ws1"]):
        rows[row["launch_epoch_seconds"], row["length_seconds"], row["predictor"]] = row
    busy_launches = 0
    for (at, length, predictor), row in rows.items():
        if predictor != "calibrated":
            continue
        snapshot = inputs.snapshot_near(at, calibrated.snapshot_fresh_seconds)
        day = host_at("ws1", inputs, at)
        if day is None or not running_jobs(inputs.backlog_at(day, snapshot)):
            continue
        busy_launches += 1
        held = rows[at, length, "calibrated-state"]
        assert row["p90"] >= held["p90"] and row["p95"] >= held["p95"]
    assert busy_launches > 10


def test_the_ledger_keeps_the_mean_a_one_host_query_is_served(fed):  # noqa: F811
    """A shadow launch is written with the mean a one-host query is served then
    (scheduler.combined_mean). With jobs running: the carried view's, held at the work plus
    half the running jobs' ages, combined (geometric mean) with the mean of the start the
    host's record chose, one of the candidates from the backlog at weight 0 (at least the
    work) to the whole of it (the state view's mean) and the carried start (the carried
    view's). After a fresh snapshot with none: the carried view's combined with the state
    view's (idle under the new arrivals' load). With no fresh snapshot: the carried view's."""
    calibrated = fed[2]
    inputs = ShadowInputs.load(calibrated.store, "ws1", 1,
                               since_epoch_seconds=ZERO_EPOCH_SECONDS)
    rows = {(row["launch_epoch_seconds"], row["length_seconds"], row["predictor"]): row
            for row in calibrated.ledger(["ws1"])}
    busy = moved = idle = stale = 0
    for (at, length, predictor), row in rows.items():
        if predictor != "calibrated":
            continue
        carried = rows[at, length, "uncalibrated"]["mean"]
        snapshot = inputs.snapshot_near(at, calibrated.snapshot_fresh_seconds)
        day = host_at("ws1", inputs, at)
        backlog = None if day is None else inputs.backlog_at(day, snapshot)
        if backlog is None or backlog.kind != "jobs":
            assert row["mean"] == carried
            stale += 1
            continue
        if not running_jobs(backlog):
            state = rows[at, length, "uncalibrated-state"]["mean"]
            assert row["mean"] == pytest.approx(math.sqrt(carried * state), rel=1e-12)
            idle += 1
            continue
        held = max(carried, length + 0.5 * sum(backlog.job_ages))
        record = row["mean"] ** 2 / held
        state = rows[at, length, "uncalibrated-state"]["mean"]
        # (the candidates exact, the views integrated to the quadrature's tolerance)
        assert length * (1 - 1e-9) <= record <= max(state, carried) * (1 + 1e-4)
        busy += 1
        moved += not math.isclose(row["mean"], held, rel_tol=1e-9)
    # the record chose a start other than the carried one on some of them
    assert busy > 10 and moved >= 1 and idle > 10
