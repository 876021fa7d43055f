"""A split's chance of ending on its dedicated time, from each host's record, against the
simulator."""

import numpy as np
import pytest

from scheduler import Backlog, Host, InvalidArgumentError, predict, simulate
from scheduler.calibrated import SERVED_LEVELS, calibrated_prediction
from scheduler.no_delay import NoDelayRecord, ended_on_dedicated

SHARE_SECONDS = 3600.0
# a local job every 20 hours on average: a share of an hour runs undisturbed with chance
# e^-0.05 = 0.951, and twelve of them together with about 0.55
QUIET = [Host(f"q{k}", lam=1 / 72000, mu=1 / 600, sigma=600, rho=600 / 72000)
         for k in range(12)]


def _recorded(hosts, rng, runs=400):
    """A record of ``runs`` simulated one-hour launches on each host (idle at launch, as
    the split below), as a manager's shadow launches give it."""
    record = NoDelayRecord(len(hosts), [SHARE_SECONDS])
    for row, host in enumerate(hosts):
        done = simulate([host], [SHARE_SECONDS], runs=runs, rng=rng).completion_seconds
        for on_time in ended_on_dedicated(done, SHARE_SECONDS):
            record.record(row, 0, False, bool(on_time))
    return record


def test_the_floor_is_the_chance_the_simulator_gives_every_share_no_delay():
    """Twelve quiet hosts whose (shared) factors lift every quantile by 30%: without the
    record's chance the served p50 is well past the dedicated time, though more than half
    the simulated splits end on it; with it the p50 is the dedicated time (within the
    slack), and the floor is the simulated chance that every share ends there."""
    rng = np.random.default_rng(5)
    record = _recorded(QUIET, rng)
    prediction = predict(QUIET, len(QUIET) * SHARE_SECONDS)
    assert prediction.dedicated_seconds == pytest.approx([SHARE_SECONDS] * len(QUIET))
    factors = np.full((len(QUIET), len(SERVED_LEVELS)), 1.3)
    chances = record.chances(range(len(QUIET)), [False] * len(QUIET),
                             prediction.dedicated_seconds)
    served = calibrated_prediction(prediction, factors, SERVED_LEVELS, no_delay=chances)
    plain = calibrated_prediction(prediction, factors, SERVED_LEVELS)
    split = simulate(QUIET, prediction.shares, runs=6000, rng=rng).completion_seconds
    law = served.law
    assert law is not None and plain.law is not None
    on_time = float(np.mean(split <= law.floor_seconds))
    assert law.floor == pytest.approx(on_time, abs=0.03)
    assert law.floor_seconds == pytest.approx(SHARE_SECONDS * 1.01)
    assert on_time > 0.5
    # (read on the served grid: up to a step before the floor's start, never before the
    # dedicated time)
    assert SHARE_SECONDS <= served.quantiles["p50"] <= law.floor_seconds
    assert np.mean(split <= served.quantiles["p50"]) > 0.5
    assert plain.quantiles["p50"] > 1.05 * SHARE_SECONDS
    # the floor leaves the levels above it where they were, and the cdf holds it
    for name in ("p90", "p95"):
        assert served.quantiles[name] == plain.quantiles[name]
    assert served.cdf([law.floor_seconds])[0] == pytest.approx(law.floor)
    assert served.cdf([0.99 * SHARE_SECONDS])[0] == 0.0
    body = served.to_dict()
    assert body["calibrated_law"]["no_delay"] == {"chance": law.floor,
                                                  "from_seconds": law.floor_seconds}
    assert "no_delay" not in plain.to_dict()["calibrated_law"]


def test_the_floor_waits_for_a_member_whose_running_jobs_must_end_first():
    """A member with a job of 1,800 CPU seconds still to run cannot finish its hour's share
    before 5,400 s, whatever its record of launches that found jobs running says: the
    split's law holds the floor only from then, and no quantile comes before it."""
    hosts = QUIET[:4]
    starts = [Backlog.exact([1800.0])] + [Backlog.idle()] * 3
    prediction = predict(hosts, 4 * SHARE_SECONDS, shares=[SHARE_SECONDS] * 4,
                         backlog=starts)
    served = calibrated_prediction(prediction, np.ones((4, len(SERVED_LEVELS))),
                                   SERVED_LEVELS, no_delay=[0.99] * 4)
    law = served.law
    assert law is not None and law.floor == pytest.approx(0.99**4)
    assert law.floor_seconds >= SHARE_SECONDS + 1800.0
    assert served.cdf([1.01 * SHARE_SECONDS, 1.4 * SHARE_SECONDS]) == pytest.approx([0, 0])
    assert served.quantiles["p50"] >= SHARE_SECONDS + 1800.0
    idle = calibrated_prediction(predict(hosts, 4 * SHARE_SECONDS, shares=[SHARE_SECONDS] * 4),
                                 np.ones((4, len(SERVED_LEVELS))), SERVED_LEVELS,
                                 no_delay=[0.99] * 4)
    assert idle.law is not None and idle.law.floor_seconds == pytest.approx(1.01 * SHARE_SECONDS)
    assert idle.quantiles["p50"] <= 1.01 * SHARE_SECONDS


def test_one_host_alone_has_no_floor():
    prediction = predict(QUIET[:1], SHARE_SECONDS)
    served = calibrated_prediction(prediction, np.full((1, len(SERVED_LEVELS)), 1.3),
                                   SERVED_LEVELS, no_delay=[0.99])
    assert served.law is not None and served.law.floor == 0.0
    assert served.quantiles["p50"] > 1.05 * SHARE_SECONDS


def test_a_hosts_chance_is_its_own_share_shrunk_towards_every_hosts():
    record = NoDelayRecord(3, [900.0, 3600.0, 14400.0])
    for k in range(40):
        record.record(0, 1, False, k % 10 != 0)  # 36 of 40 on time
        record.record(1, 1, False, k % 2 == 0)  # 20 of 40
    record.record(2, 1, True, False)
    pooled = (56 + 1) / (80 + 2)
    table = record.length_table([0, 1, 2], [False, False, False])
    assert table[0, 1] == pytest.approx((36 + 10 * pooled) / 50)
    assert table[1, 1] == pytest.approx((20 + 10 * pooled) / 50)
    # a host without a record of that state has the pool's (here, of the one busy launch)
    assert table[2, 1] == pytest.approx(pooled)
    assert record.length_table([2], [True])[0, 1] == pytest.approx(
        (0 + 10 * (1 / 3)) / 11)
    # a length no launch was scored at: an even chance
    assert table[:, 0] == pytest.approx(0.5)
    # at a calibrated length its own; between two, geometric in log length
    at = record.chances([0, 0], [False, False], [3600.0, 1800.0])
    assert at[0] == table[0, 1]
    assert at[1] == pytest.approx(np.sqrt(table[0, 0] * table[0, 1]))
    # below the shortest, the shortest's; past the longest, undisturbed through each
    # stretch of it in turn
    assert record.chances([0], [False], [60.0])[0] == table[0, 0]
    record.record(0, 2, False, True)
    longest = record.length_table([0], [False])[0, 2]
    assert record.chances([0], [False], [3 * 14400.0])[0] == pytest.approx(longest**3)


def test_a_record_grows_and_refuses_bad_lengths():
    record = NoDelayRecord(1, [3600.0])
    record.grow(4)
    assert record.hosts == 4 and record.scored.sum() == 0
    with pytest.raises(InvalidArgumentError):
        NoDelayRecord(1, [3600.0, 900.0])
    with pytest.raises(InvalidArgumentError):
        calibrated_prediction(predict(QUIET[:2], 2 * SHARE_SECONDS),
                              np.ones((2, len(SERVED_LEVELS))), SERVED_LEVELS,
                              no_delay=[0.5, 1.5])


def test_a_selection_calibration_names_a_bad_chance():
    from scheduler.calibrated_selection import SelectionCalibration

    with pytest.raises(InvalidArgumentError, match="'ws2'") as found:
        SelectionCalibration((900.0, 3600.0), {}, no_delay={"ws1": [0.9, 0.8],
                                                            "ws2": [0.9, 1.2]})
    assert found.value.field == "no_delay"
    with pytest.raises(InvalidArgumentError, match="one per length"):
        SelectionCalibration((900.0, 3600.0), {}, no_delay={"ws1": [0.9]})
