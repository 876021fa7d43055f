"""The manager's record of its own predictions: shadow launches scored on the capacity series."""

from __future__ import annotations

import numpy as np
import pytest

from ghs.manager.calibration import BUSY_VIEW, Calibration
from ghs.manager.realised import CapacitySeries, overran, realised_seconds
from ghs.manager.simulated_feed import ZERO_EPOCH_SECONDS, ManagerFeed, poisson_jobs
from ghs.manager.store import ManagerStore


def series(free_per_minute, start=0.0, cores=1):
    rows = [{"end_epoch_seconds": start + 60.0 * (k + 1), "interval_seconds": 60.0,
             "available_cpu_seconds": float(np.sum(f)),
             "per_core_available_cpu_seconds": list(np.atleast_1d(f))}
            for k, f in enumerate(free_per_minute)]
    return CapacitySeries.from_rows(rows, cores)


def test_a_task_finishes_when_the_free_cpu_since_launch_adds_up():
    s = series([60.0, 0.0, 30.0, 60.0])
    assert realised_seconds(s, 0.0, 60.0) == pytest.approx(60.0)
    # 30 s from the first minute after a launch at 30 s, none in the second, 30 in the third
    assert realised_seconds(s, 30.0, 60.0) == pytest.approx(150.0)
    assert realised_seconds(s, 0.0, 500.0) is None  # the series does not reach that far
    assert overran(s, 0.0, 500.0, 200.0) and not overran(s, 0.0, 100.0, 200.0)


def test_the_last_core_ends_the_task_and_a_gap_leaves_it_unknown():
    two = series([[60.0, 30.0], [60.0, 30.0], [60.0, 60.0]], cores=2)
    assert realised_seconds(two, 0.0, 60.0) == pytest.approx(120.0)
    broken = CapacitySeries(np.array([0.0, 300.0]), np.array([60.0, 360.0]),
                            np.array([[30.0], [60.0]]))
    assert realised_seconds(broken, 0.0, 60.0) is None


def walk_free(jobs, launch, dedicated):
    """Seconds until a lowest-priority task has had ``dedicated`` s of an FCFS core's idle
    time, by walking the jobs themselves."""
    free_at, got, at = ZERO_EPOCH_SECONDS, 0.0, launch
    for arrival, cpu, _, _ in jobs:
        start = max(arrival, free_at)
        free_at = start + cpu
        if free_at <= at:
            continue
        gap = max(start - at, 0.0)
        if got + gap >= dedicated:
            return at + dedicated - got - launch
        got += gap
        at = max(at, free_at)
    return at + dedicated - got - launch


@pytest.fixture(scope="module")
def fed():
    jobs = poisson_jobs(2.5, utilisation=0.3, mean_cpu_seconds=300.0, cov=2.0, seed=4)
    store = ManagerStore(None)
    feed = ManagerFeed(store, "ws1", jobs)
    feed.run_until(ZERO_EPOCH_SECONDS + 2 * 86400.0)
    calibration = Calibration(store, lengths_seconds=(900.0, 3600.0))
    made = calibration.advance("ws1", 1)
    yield jobs, store, calibration, made
    feed.close()
    store.close()


def test_every_hour_of_the_record_is_a_launch_scored_on_what_the_jobs_left(fed):
    jobs, _, calibration, made = fed
    assert made == 2 * 48  # two lengths every hour the host had reported
    ledger = calibration.ledger()
    scored = [row for row in ledger if row["predictor"] == "calibrated"]
    assert len(scored) > 80
    for row in scored:
        exact = walk_free(jobs, row["launch_epoch_seconds"], row["length_seconds"])
        assert row["realised_seconds"] == pytest.approx(exact, abs=61.0)
    # each outcome fed the calibrator of its length once
    track = calibration.tracks["ws1"]
    for j, length in enumerate(calibration.lengths):
        n = sum(1 for row in scored if row["length_seconds"] == length)
        assert calibration.calibrators["state"][j].scored[track.row, 0] == n
        # the carried view's launches that found jobs running teach calibrators of their own
        apart = calibration.calibrators[BUSY_VIEW][j].scored[track.row, 0]
        assert 0 < apart < n
        assert calibration.calibrators["carried"][j].scored[track.row, 0] + apart == n
    # the start candidates are scored on every launch that found jobs running: a one-host
    # answer's mean reads the start the record chooses (scheduler.combined_mean)
    assert 0 < calibration.weights.scored[track.row] < n
    # advancing again makes nothing new: the record is incremental
    assert calibration.advance("ws1", 1) == 0


def test_a_query_view_names_forecasters_start_and_calibration(fed):
    _, store, calibration, _ = fed
    track = calibration.tracks["ws1"]
    day = calibration_day(store)
    hosts, _, described = calibration.view_hosts([track], [day], [starts_idle()],
                                                      ZERO_EPOCH_SECONDS + 2 * 86400.0, 3600.0)
    assert described[0]["forecast"]["rho"]["forecaster"]
    assert 0.0 < hosts[0].rho < 1.0
    factors, applied = calibration.factors([track], [3600.0])
    assert applied[0]["length_seconds"] == 3600.0 and applied[0]["scored_launches"] > 20
    assert factors.shape == (1, len(calibration.levels)) and (factors > 0).all()
    assert applied[0]["between"] == [{"length_seconds": 3600.0, "weight": 1.0,
                                      "factors": applied[0]["factors"]}]
    # between two calibrated lengths: each one's factors, weighted geometrically in log
    # length, and no jump where the nearest length changes (30 min, between 15 min and 1 h)
    assert list(calibration.lengths) == [900.0, 3600.0]
    one, four = (calibration.factors([track], [length])[0][0] for length in (900.0, 3600.0))
    near, applied = calibration.factors([track] * 3, [1800.0 * 0.999, 1800.0, 1800.0 * 1.001])
    assert near[1] == pytest.approx(np.sqrt(one * four), rel=1e-12)
    assert near[0] == pytest.approx(near[1], rel=1e-3) and near[2] == pytest.approx(
        near[1], rel=1e-3)
    assert [e["length_seconds"] for e in applied[1]["between"]] == [900.0, 3600.0]
    assert [e["weight"] for e in applied[1]["between"]] == pytest.approx([0.5, 0.5])
    # beyond the last length, its own
    beyond, applied = calibration.factors([track], [8 * 3600.0])
    assert (beyond[0] == four).all() and len(applied[0]["between"]) == 1


def test_every_outcome_teaches_the_far_tail_pooled_over_hosts(fed):
    _, _, calibration, _ = fed
    scored = [row for row in calibration.ledger() if row["predictor"] == "calibrated"]
    track = calibration.tracks["ws1"]
    for view in calibration.views:
        for j, length in enumerate(calibration.lengths):
            n = sum(1 for row in scored if row["length_seconds"] == length)
            tail = calibration.tails[view][j]
            # every finished launch, and those known to have overrun it before they ended
            # (the carried view's host levels are scored in two sets, by jobs running)
            own = sum(calibration.calibrators[kept][j].scored[track.row, 0] for kept in (
                (view, BUSY_VIEW) if view == "carried" else (view,)))
            # (every step the far tail runs scores the same launches)
            assert (n <= tail.scored).all() and (tail.scored <= own + 2).all()
    factors, applied = calibration.factors([track], [3600.0], "state")
    tail = calibration.tails["state"][1]
    assert calibration.levels == (0.5, 0.9, 0.95, *tail.levels)
    served = tail.served
    assert factors[0, 3:] == pytest.approx(np.exp(tail.theta[served]))
    assert applied[0]["factors"]["p99.6"] == factors[0, 3]
    assert applied[0]["pooled_tail"]["p99.6"] == {
        "scored_launches": int(tail.scored[served, 0]),
        "coverage": pytest.approx(tail.covered[served, 0] / tail.scored[served, 0]),
        "step": tail.steps[served]}


def test_a_host_with_jobs_running_reads_the_calibrators_of_such_launches(fed):
    """A one-host answer for a host with jobs running at launch is served the factors
    learnt on the carried launches that found jobs running (BUSY_VIEW), and says so; the
    far tail stays the view's, and a split's state view has one set."""
    _, _, calibration, _ = fed
    track = calibration.tracks["ws1"]
    j = list(calibration.lengths).index(3600.0)
    idle, idle_applied = calibration.factors([track], [3600.0], "carried")
    busy, busy_applied = calibration.factors([track], [3600.0], "carried",
                                             jobs_running=[True])
    for factors, applied, view in ((idle, idle_applied, "carried"),
                                   (busy, busy_applied, BUSY_VIEW)):
        kept = calibration.calibrators[view][j]
        assert factors[0, :3] == pytest.approx(kept.factors([track.row])[0], rel=1e-12)
        assert applied[0]["view"] == view
        assert applied[0]["scored_launches"] == kept.scored[track.row, 0]
    assert not np.allclose(busy[0, :3], idle[0, :3])
    assert busy[0, 3:] == pytest.approx(idle[0, 3:])
    # hosts of one query each read their own set
    both, _ = calibration.factors([track, track], [3600.0, 3600.0], "carried",
                                  jobs_running=[True, False])
    assert both == pytest.approx(np.concatenate([busy, idle]))
    state, _ = calibration.factors([track], [3600.0], "state", jobs_running=[True])
    assert state == pytest.approx(calibration.factors([track], [3600.0], "state")[0])


def test_a_launch_past_the_far_tail_is_a_miss_before_it_ends():
    from ghs.manager.realised import Outcomes
    from ghs.manager.shadow_plans import ShadowLaunch
    from scheduler.tail_battery import TailBattery

    store = ManagerStore(None)
    calibration = Calibration(store, lengths_seconds=(900.0, 3600.0))
    # several pooled levels, each decided when the task has run past its own quantile
    calibration.tails = {view: [TailBattery((0.99, 0.996, 0.999)) for _ in range(2)]
                         for view in calibration.views}
    track = calibration.track("ws", 1)
    # two hours without a free second: a 15-minute task launched at 0 has not ended
    stalled = series([0.0] * 120)
    track.pending = [ShadowLaunch(0.0, 0, 900.0, np.array([1000.0, 1500.0, 2000.0]), None,
                             "carried", tail=np.array([2400.0, 3000.0, 4000.0]))]
    own, battery = calibration.calibrators["carried"][0], calibration.tails["carried"][0]
    calibration._settle("ws", track, Outcomes(stalled), 2500.0)
    # no task has finished: no loss tells the steps apart, and every step has the same
    # factors and is scored alike (the first step served)
    assert (battery.loss == 0).all() and battery.served == 0
    assert (battery.scored == battery.scored[0]).all()
    # past its p95: a miss of the host's own levels and of the tail's first; the others
    # are not reached yet
    assert (own.scored[track.row] == 1).all() and battery.scored[0].tolist() == [1, 0, 0]
    assert len(track.pending) == 1
    calibration._settle("ws", track, Outcomes(stalled), 7200.0)
    assert (battery.scored == 1).all() and (battery.covered == 0).all()
    # a miss moves each step's correction by its step x the level
    assert battery.theta == pytest.approx(np.array(battery.steps)[:, None] * battery.levels)
    # each level is scored once
    calibration._settle("ws", track, Outcomes(stalled), 7200.0)
    assert (own.scored[track.row] == 1).all() and (battery.scored == 1).all()
    store.close()


def test_the_far_tail_is_scored_at_its_factor_as_it_stands_when_the_outcome_is_known():
    """Launches made before any outcome is known all carry the factor of then; at 0.996 a
    miss moves it 250 times as far as a cover. 200 launches of 15 min (base p99.6 1,000 s)
    that each take 3,000 s, their outcomes arriving together: scored at the launch's factor,
    all 200 would miss and the factor would run to e^20; scored at the factor as it moves,
    it stops near the factor that covers them (3)."""
    from ghs.manager.realised import Outcomes
    from ghs.manager.shadow_plans import ShadowLaunch

    store = ManagerStore(None)
    calibration = Calibration(store, lengths_seconds=(900.0, 3600.0))
    track = calibration.track("ws", 1)
    # a minute in four free from the start: each 15 min task takes 3,000 s (to its start)
    busy = series([15.0] * 24 * 60)
    track.pending = [ShadowLaunch(60.0 * k, 0, 900.0, np.array([1000.0, 1000.0, 1000.0]), None,
                             "carried", tail=np.array([1000.0])) for k in range(200)]
    outcomes = Outcomes(busy)
    calibration._settle("ws", track, outcomes, 86400.0)
    battery = calibration.tails["carried"][0]
    assert (battery.scored == 200).all()
    # (a miss moves it by a step: each step's ends within two of the factor that covers
    # them all)
    covering = max(outcomes.realised_seconds(60.0 * k, 900.0) for k in range(200)) / 1000.0
    factors = battery.expert_factors()[:, 0]
    assert ((factors > 2.9) & (factors < covering * np.exp(2 * np.array(battery.steps)))).all()
    assert battery.factors([0])[0, 0] == factors[battery.served]
    store.close()


@pytest.mark.parametrize("view", ["state", "carried"])
def test_a_split_views_own_levels_are_scored_at_their_factors_as_they_stand(view):
    """The same for the host's own p50, p90 and p95 in the view a split reads (state): 200
    launches of 15 min (base quantiles 1,000 s) that each take 3,000 s, known together.
    Scored at the launch's factors all 200 would miss, and the p95 factor would run to
    e^19 (p90 e^18, p50 e^10); scored at the factors as they move, each stops near the one
    that covers them (3). The carried view, what a one-host answer serves, is scored
    against the quantiles served at launch: all 200 miss."""
    from ghs.manager.realised import Outcomes
    from ghs.manager.shadow_plans import ShadowLaunch

    store = ManagerStore(None)
    calibration = Calibration(store, lengths_seconds=(900.0, 3600.0))
    track = calibration.track("ws", 1)
    busy = series([15.0] * 24 * 60)
    base = np.array([1000.0, 1000.0, 1000.0])
    served = None if view == "state" else (base, base)
    track.pending = [ShadowLaunch(60.0 * k, 0, 900.0, base, None, view, tail=np.array([1000.0]),
                             at_launch=served) for k in range(200)]
    calibration._settle("ws", track, Outcomes(busy), 86400.0)
    own = calibration.calibrators[view][0]
    assert (own.scored[track.row] == 200).all()
    factors = own.factors([track.row])[0]
    if view == "state":
        assert ((factors > 2.9) & (factors < 4.0)).all(), factors
    else:
        assert (own.covered[track.row] == 0).all()
        # 200 misses at the young-record steps (ghs.manager.calibrated_views.YOUNG_LAUNCHES),
        # leaning on the pool's plain-step correction (10 launches' worth)
        steps = own._steps(np.arange(200)).sum()
        lean = (200 * steps + 10 * 200 * 0.1) / 210
        assert steps > 20.5  # larger than the plain step's 200 x 0.1
        assert np.log(factors) == pytest.approx(lean * np.array([0.5, 0.9, 0.95]))
    store.close()


def calibration_day(store):
    from ghs.manager.shadow_start import ShadowInputs, host_at

    inputs = ShadowInputs.load(store, "ws1", 1, since_epoch_seconds=0.0)
    return host_at("ws1", inputs, ZERO_EPOCH_SECONDS + 2 * 86400.0)


def starts_idle():
    from scheduler.backlog import Backlog

    return Backlog.idle()


def test_a_reported_overrun_moves_its_hosts_calibration(fed):
    from scheduler import predict

    _, store, calibration, _ = fed
    track = calibration.tracks["ws1"]
    day = calibration_day(store)
    before = calibration.calibrators["carried"][1].factors([track.row])[0].copy()
    scored = calibration.calibrators["carried"][1].scored[track.row].copy()
    prediction = predict([day], 3600.0)
    served = ZERO_EPOCH_SECONDS + 2 * 86400.0
    pid = store.track.record(prediction, served, "predict")
    # far past every quantile it was served: a miss at every level
    store.track.report(pid, "ws1", served + 50 * prediction.quantiles["p95"], served + 1e5)
    assert calibration.absorb_reports(0.0) == 1
    assert calibration.absorb_reports(0.0) == 0  # each report is taken once
    after = calibration.calibrators["carried"][1].factors([track.row])[0]
    assert (calibration.calibrators["carried"][1].scored[track.row] == scored + 1).all()
    assert (after > before).all()


def test_a_report_teaches_the_calibrators_its_factors_were_read_from(fed):
    """A share between two calibrated lengths was served factors interpolated between
    them: its outcome moves both, each by its weight. A prediction stored without the
    dedicated time (recorded before it was) teaches the length nearest its mean."""
    import json

    from scheduler import predict

    _, store, calibration, _ = fed
    track = calibration.tracks["ws1"]
    day = calibration_day(store)
    # a quarter of the way from 900 s to 3600 s in log length: weights 0.75 and 0.25
    dedicated = 900.0 * 4.0**0.25
    prediction = predict([day], dedicated * day.tau)
    assert prediction.dedicated_seconds[0] == pytest.approx(dedicated)
    served = ZERO_EPOCH_SECONDS + 2 * 86400.0

    def state():
        return [(c.theta[track.row].copy(), c.scored[track.row].copy(), c.pool_theta.copy())
                for kept in calibration.calibrators.values() for c in kept]

    def steps():  # each calibrator's step for this host now (larger on a young record)
        return [c._steps(c.scored[track.row]) for kept in calibration.calibrators.values()
                for c in kept]

    before, own_steps = state(), steps()
    pid = store.track.record(prediction, served, "predict")
    store.track.report(pid, "ws1", served + 50 * prediction.quantiles["p95"], served + 1e5)
    assert calibration.absorb_reports(0.0) == 1
    step, target = 0.1, 1.0 - np.array([0.5, 0.9, 0.95])
    for k, ((theta, scored, pool), (theta_now, scored_now, pool_now), own) in enumerate(
            zip(before, state(), own_steps)):
        weight = (0.75, 0.25)[k % 2]  # each view's calibrators: 900 s, then 3600 s
        np.testing.assert_allclose(theta_now - theta, weight * own * (1.0 - target),
                                   atol=1e-12)
        np.testing.assert_allclose(pool_now - pool, weight * step * (1.0 - target),
                                   atol=1e-12)
        assert (scored_now - scored == (1 if weight >= 0.5 else 0)).all()
    # a row stored before the dedicated time was: the nearest length to its mean, in full
    before, own_steps = state(), steps()
    pid = store.track.record(prediction, served + 10.0, "predict")
    with store.track._db().conn as connection:
        laws = json.loads(connection.execute("SELECT host_laws FROM predictions WHERE id = ?",
                                             [pid]).fetchone()[0])
        del laws["ws1"]["dedicated_seconds"]
        connection.execute("UPDATE predictions SET host_laws = ? WHERE id = ?",
                           [json.dumps(laws), pid])
    store.track.report(pid, "ws1", served + 50 * prediction.quantiles["p95"], served + 2e5)
    assert calibration.absorb_reports(0.0) == 1
    nearest = int(np.argmin(np.abs(np.log([900.0, 3600.0]) - np.log(prediction.mean))))
    for k, ((theta, _, _), (theta_now, _, _), own) in enumerate(zip(before, state(),
                                                                   own_steps)):
        moved = own * (1.0 - target) if k % 2 == nearest else 0.0
        np.testing.assert_allclose(theta_now - theta, moved, atol=1e-12)


def test_a_near_miss_report_moves_a_young_record_about_as_far_as_would_have_covered_it(fed):
    """A report just past its p90 raises each calibrator's young correction by the plain
    step's raise plus how far it overran, not by the young step's (a real kernel's 60 s
    tasks ending 1% past the p90 had taken its factor to 1.4)."""
    from scheduler import predict

    _, store, calibration, _ = fed
    track = calibration.tracks["ws1"]
    day = calibration_day(store)
    dedicated = 900.0 * 4.0**0.25
    prediction = predict([day], dedicated * day.tau)
    served = ZERO_EPOCH_SECONDS + 2 * 86400.0 + 500.0
    quantiles = np.array([prediction.quantiles[k] for k in ("p50", "p90", "p95")])
    realised = quantiles[1] * 1.0005
    assert quantiles[1] < realised < quantiles[2]
    kept = [c for views in calibration.calibrators.values() for c in views]
    before = [c.theta[track.row].copy() for c in kept]
    own = [c._steps(c.scored[track.row]) for c in kept]
    pid = store.track.record(prediction, served, "predict")
    store.track.report(pid, "ws1", served + realised, served + 3e5)
    assert calibration.absorb_reports(0.0) == 1
    levels = np.array([0.5, 0.9, 0.95])
    missed = realised > quantiles
    overrun = np.log(realised / quantiles)
    young = 0
    for k, (c, theta, step) in enumerate(zip(kept, before, own)):
        weight = (0.75, 0.25)[k % 2]
        raise_ = np.minimum(step * levels, 0.1 * levels + overrun)
        expected = np.where(missed, raise_, -step * (1.0 - levels))
        # (a report is scored against the host's own quantiles, read from its law, which
        # agree with the one-host task's to about 1e-6)
        np.testing.assert_allclose(c.theta[track.row] - theta, weight * expected, atol=1e-5)
        young += step[1] > 0.1
    assert young  # some calibrators here are young: their raise was bounded


def test_the_record_chooses_the_start_only_when_asked(fed):
    from scheduler.backlog import Backlog

    _, store, calibration, _ = fed
    day = calibration_day(store)
    jobs = Backlog.exact([900.0])
    at = ZERO_EPOCH_SECONDS + 2 * 86400.0
    track = calibration.tracks["ws1"]
    _, starts, described = calibration.view_hosts([track], [day], [jobs], at, 3600.0)
    assert described[0]["start"] == {"start": "carried"} and starts[0].kind == "idle"
    assert described[0]["forecast"]["load"] == "measured"
    _, starts, described = calibration.view_hosts([track], [day], [jobs], at, 3600.0, "state")
    assert described[0]["start"] == {"start": "state"} and starts[0].job_means == (900.0,)
    assert described[0]["forecast"]["load"] == "arrivals"
    chooser = Calibration(store, lengths_seconds=(900.0, 3600.0), start_by_record=True)
    chooser.advance("ws1", 1)
    mine = chooser.tracks["ws1"]
    assert chooser.weights.scored[mine.row] > 0
    _, starts, described = chooser.view_hosts([mine], [day], [jobs], at, 3600.0, "record")
    picked = described[0]["start"]
    assert picked["start"] in {"backlog", "carried"}
    if picked["start"] == "backlog":
        assert starts[0].weight == picked["weight"]
        assert described[0]["forecast"]["load"] == "arrivals"


def test_the_record_view_of_a_host_with_no_job_running_is_the_arrivals_load(fed):
    """After a fresh snapshot that shows no job, the record's view (what a one-core host's
    one-host mean is combined with, scheduler.combined_mean) starts idle under the new
    arrivals' load, as the state view does, where the carried view reads the measured
    utilisation: two estimates of the run window's load."""
    from scheduler.backlog import Backlog

    _, store, calibration, _ = fed
    day = calibration_day(store)
    at = ZERO_EPOCH_SECONDS + 2 * 86400.0
    track = calibration.tracks["ws1"]
    seen = {mode: calibration.view_hosts([track], [day], [Backlog.exact([])], at, 3600.0,
                                         mode) for mode in ("carried", "state", "record")}
    hosts, starts, described = seen["record"]
    assert described[0]["start"] == {"start": "state"}
    assert described[0]["forecast"]["load"] == "arrivals" and not starts[0].job_means
    assert hosts[0] == seen["state"][0][0]
    carried = seen["carried"][0][0]
    assert seen["carried"][2][0]["forecast"]["load"] == "measured"
    assert (hosts[0].lam, hosts[0].rho) != (carried.lam, carried.rho)


def test_a_split_serves_its_hosts_the_geometric_mean_of_their_factors(fed):
    _, store, _, _ = fed
    calibration = Calibration(store, lengths_seconds=(900.0, 3600.0))
    calibration.advance("ws1", 1)
    scored = calibration.tracks["ws1"]
    # a host with no record yet stands on the pool's factors, unlike ws1's own
    fresh = calibration.track("ws-new", 1)
    dedicated = [3600.0, 1800.0]
    alone = [calibration.factors([track], [d], "state")[0][0]
             for track, d in zip((scored, fresh), dedicated)]
    assert not np.allclose(alone[0], alone[1])
    shared, applied = calibration.factors([scored, fresh], dedicated, "state", shared=True)
    # each host's table is the two hosts' geometric mean, read at its own dedicated time
    # (at 3600 s the 1 h calibrator's; at 1800 s half way in log length to the 15 min one)
    tables = np.array([[calibration.factors([track], [length], "state")[0][0]
                        for length in (900.0, 3600.0)] for track in (scored, fresh)])
    mean = np.sqrt(tables[0] * tables[1])
    assert shared[0] == pytest.approx(mean[1], rel=1e-12)
    assert shared[1] == pytest.approx(np.sqrt(mean[0] * mean[1]), rel=1e-12)
    names = list(applied[0]["factors"])
    for k in range(2):
        assert applied[k]["shared"]["hosts"] == 2
        assert list(applied[k]["shared"]["own_factors"].values()) == pytest.approx(alone[k])
        assert list(applied[k]["factors"].values()) == pytest.approx(shared[k])
    assert names[-1] == "p99.6"
    # a host given no work keeps its own and stays out of the mean; alone, nothing is shared
    part, applied = calibration.factors([scored, fresh], [3600.0, 0.0], "state", shared=True)
    assert (part[0] == alone[0]).all() and "shared" not in applied[0]
    one, applied = calibration.factors([scored], [3600.0], "state", shared=True)
    assert (one[0] == alone[0]).all() and "shared" not in applied[0]


def test_a_split_answer_leaves_the_new_arrivals_unheld_where_one_host_holds_them():
    """A host a day and a half quiet, then half a day's burst: a split's own view (its jobs
    held as backlog) expects new arrivals at the forecast, where the one-host answer's record
    view holds them to the long-run level (ghs.backtest.split: LCG's 8-station splits). The
    split's mean is combined with that of its shares in the held view
    (scheduler.combined_mean), and a client rebuilds the same."""
    from ghs.answers import model_assumptions
    from ghs.client import _rebuild_prediction
    from ghs.config import SchedulerConfig
    from ghs.manager.estimates import EstimateCache
    from ghs.manager.queries import QueryService

    def bursting(seed):
        quiet = poisson_jobs(1.5, utilisation=0.1, mean_cpu_seconds=300.0, cov=2.0, seed=seed)
        return quiet + [(arrival + 1.5 * 86400.0, cpu, user, command) for arrival, cpu, user,
                        command in poisson_jobs(0.5, utilisation=0.9, mean_cpu_seconds=300.0,
                                                cov=2.0, seed=seed + 1)]

    end = ZERO_EPOCH_SECONDS + 2 * 86400.0
    store = ManagerStore(None)
    feeds = [ManagerFeed(store, "ws1", bursting(4)), ManagerFeed(store, "ws2", bursting(6))]
    try:
        for feed in feeds:
            feed.run_until(end)
        queries = QueryService(EstimateCache(store), SchedulerConfig(),
                               stale_after_seconds=600.0, clock=lambda: end)
        while queries.refresh() > 0:
            pass
        alone = queries.predict(3600.0, hosts=["ws1"])["host_parameters"][0]["predictor_view"]
        record = alone["record_start"]["forecast"]
        assert record["load"] == "arrivals" and record["held_to_long_run"]
        body = queries.predict(3600.0, hosts=["ws1", "ws2"])
        view = {row["name"]: row for row in body["host_parameters"]}["ws1"]
        forecast = view["predictor_view"]["forecast"]
        assert forecast["load"] == "arrivals" and not forecast["held_to_long_run"]
        assert view["rho"] > forecast["long_run_rho"] + 0.2
        held = body["held_mean_seconds"]
        assert held < 0.9 * body["model"]["mean"]  # less new work where the burst is held
        assert body["mean"] == pytest.approx(np.sqrt(held * body["model"]["mean"]), rel=1e-12)
        rebuilt = _rebuild_prediction(body)
        assert rebuilt.mean == pytest.approx(body["mean"], rel=1e-9)
        assert "long-run utilisation" in model_assumptions(
            rebuilt, "manager forecast").start_state
        # the quantiles stay the view's, calibrated: the mean alone is combined
        assert body["quantiles"]["p90"] == pytest.approx(rebuilt.quantiles["p90"], rel=1e-9)
        # each host's chance of ending on its dedicated time, from its record in its state at
        # launch (scheduler.no_delay); one host given work alone has no floor
        for row in body["host_parameters"]:
            seen = row["predictor_view"]["calibration"]["no_delay"]
            assert 0 < seen["chance"] < 1 and seen["scored_launches"] > 0
            assert row["no_delay_chance"] == seen["chance"]
        assert sum(row["share"] > 0 for row in body["hosts"]) == 1
        assert "no_delay" not in body["calibrated_law"]
    finally:
        for feed in feeds:
            feed.close()
        store.close()


def test_a_split_over_quiet_hosts_serves_their_records_chance_of_no_delay():
    """Two hosts whose owners seldom run anything: most of their hourly shadow launches end
    on their dedicated time, and a split's p50 is the dedicated time (the floor), which a
    client rebuilds from the answer."""
    from ghs.answers import model_assumptions
    from ghs.client import _rebuild_prediction
    from ghs.config import SchedulerConfig
    from ghs.manager.estimates import EstimateCache
    from ghs.manager.queries import QueryService

    end = ZERO_EPOCH_SECONDS + 2 * 86400.0
    store = ManagerStore(None)
    feeds = [ManagerFeed(store, f"ws{k}", poisson_jobs(2.0, utilisation=0.01,
                                                       mean_cpu_seconds=120.0, cov=1.0,
                                                       seed=20 + k)) for k in (1, 2)]
    try:
        for feed in feeds:
            feed.run_until(end)
        queries = QueryService(EstimateCache(store), SchedulerConfig(),
                               stale_after_seconds=7200.0, clock=lambda: end)
        while queries.refresh() > 0:
            pass
        body = queries.predict(1800.0, hosts=["ws1", "ws2"])
        chances = [row["no_delay_chance"] for row in body["host_parameters"]]
        assert min(chances) > 0.8
        floor = body["calibrated_law"]["no_delay"]
        assert floor["chance"] == pytest.approx(np.prod(chances), rel=1e-12)
        longest = max(row["dedicated_seconds"] for row in body["hosts"])
        assert floor["from_seconds"] == pytest.approx(1.01 * longest)
        assert longest <= body["quantiles"]["p50"] <= floor["from_seconds"]
        rebuilt = _rebuild_prediction(body)
        for name in ("p50", "p90", "p95"):
            assert rebuilt.quantiles[name] == pytest.approx(body["quantiles"][name], rel=1e-9)
        assert "ends on its dedicated time" in model_assumptions(
            rebuilt, "manager forecast").calibration
        # half-way through, the rest of the split has the same floor at its own length
        shares = [row["dedicated_seconds"] for row in body["hosts"]]
        eta = queries.eta(["ws1", "ws2"], shares, [0.5, 0.5], 0.5 * longest)
        rest = eta["calibrated_law"]["no_delay"]
        assert rest["from_seconds"] == pytest.approx(1.01 * 0.5 * longest)
        assert 0.5 * longest <= eta["quantiles"]["p50"] <= rest["from_seconds"]
    finally:
        for feed in feeds:
            feed.close()
        store.close()
