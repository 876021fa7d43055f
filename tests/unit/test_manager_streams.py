"""The manager's stream tables: compact capacity with hourly sums, running history, templates."""

from __future__ import annotations

import math
import sqlite3

import pytest

from ghs.manager.store import ManagerStore
from ghs.manager.streams import Retention, pack_per_core, unpack_per_core

DAY = 86400.0


def capacity(seq, end, interval=60.0, per_core=(30.0, 15.0)):
    return {"seq": seq, "start_epoch_seconds": end - interval, "end_epoch_seconds": end,
            "available_cpu_seconds": sum(per_core), "per_core_available_cpu_seconds":
            list(per_core)}


def test_capacity_is_stored_once_and_read_back_per_core():
    store = ManagerStore(None)
    streams = store.streams
    records = [capacity(i, 1e9 + 60.0 * (i + 1)) for i in range(120)]
    assert streams.add("a", "capacity", records) == 120
    assert streams.add("a", "capacity", records[100:]) == 0  # a resend
    rows = streams.capacity("a")
    assert len(rows) == 120
    assert rows[0]["per_core_available_cpu_seconds"] == pytest.approx([30.0, 15.0], abs=1e-3)
    hourly = streams.capacity_hourly("a")
    assert sum(h["covered_seconds"] for h in hourly) == pytest.approx(120 * 60.0)
    assert sum(h["available_cpu_seconds"] for h in hourly) == pytest.approx(120 * 45.0)
    intervals = hourly[0]["covered_seconds"] / 60.0
    assert hourly[0]["per_core_available_cpu_seconds"] == pytest.approx(
        [30.0 * intervals, 15.0 * intervals], rel=1e-3)


def test_per_core_fractions_round_trip_within_a_millisecond_a_core():
    blob = pack_per_core([59.9994, 0.0, 12.3456], 60.0)
    assert len(blob) == 6
    back = unpack_per_core(blob, 60_000, 72_345)
    assert back == pytest.approx([59.9994, 0.0, 12.3456], abs=1e-3)
    assert pack_per_core([42.0], 60.0) is None
    assert unpack_per_core(None, 60_000, 42_000) == [42.0]


def test_retention_follows_each_hosts_own_clock():
    store = ManagerStore(None, Retention(capacity_days=2.0, hourly_days=5.0))
    streams = store.streams
    # host a lives in 2001, host b in 2030: each keeps its own last two days in full
    for host, origin in (("a", 1e9), ("b", 1.9e9)):
        ends = [origin + 600.0 * (i + 1) for i in range(int(10 * DAY / 600))]
        for start in range(0, len(ends), 500):
            streams.add(host, "capacity", [capacity(i, end, 600.0) for i, end in
                                           enumerate(ends[start:start + 500], start)])
        rows = streams.capacity(host)
        assert rows[-1]["end_epoch_seconds"] == ends[-1]
        assert ends[-1] - rows[0]["end_epoch_seconds"] == pytest.approx(2 * DAY, abs=600.0)
        hours = streams.capacity_hourly(host)
        span = hours[-1]["hour_start_epoch_seconds"] - hours[0]["hour_start_epoch_seconds"]
        assert span == pytest.approx(5 * DAY, abs=2 * 3600.0)
        # hourly sums older than the full-resolution window survive the pruning
        assert all(h["covered_seconds"] == pytest.approx(3600.0) for h in hours[1:-1])


def running(seq, epoch, jobs=1):
    return {"seq": seq, "epoch_seconds": epoch, "run_queue_length": jobs,
            "jobs": [{"cpu_seconds": 1.0 * j, "wall_seconds": 2.0 * j, "command": "cc",
                      "user": "ann"} for j in range(jobs)]}


def test_running_keeps_the_last_hour_in_full_then_one_an_hour():
    store = ManagerStore(None)
    streams = store.streams
    epochs = [1e9 + 60.0 * i for i in range(6 * 60)]
    streams.add("a", "running", [running(i, t, jobs=i % 3) for i, t in enumerate(epochs)])
    kept = [s["epoch_seconds"] for s in streams.running("a")]
    assert kept[0] == epochs[-1]
    recent = [t for t in kept if t >= epochs[-1] - 3600.0]
    assert len(recent) == 61
    older = [t for t in kept if t < epochs[-1] - 3600.0]
    assert len({math.floor(t / 3600.0) for t in older}) == len(older)
    assert streams.latest_running("a")["jobs"][1]["wall_seconds"] == 2.0


def template(seq, as_of, count=2.0, bins=((5, 2.0),)):
    return {"seq": seq, "as_of_epoch_seconds": as_of, "scope": "command", "user": "ann",
            "command": "cc", "bins": [list(b) for b in bins], "count": count,
            "cpu_seconds_sum": 3.0 * count, "cpu_seconds_sum_squares": 10.0 * count}


def test_template_increments_merge_once_with_decay():
    store = ManagerStore(None, Retention(template_half_life_seconds=3600.0))
    streams = store.streams
    assert streams.add("a", "templates", [template(0, 1000.0), template(1, 1000.0)]) == 2
    assert streams.add("a", "templates", [template(1, 1000.0)]) == 0  # resent, not merged
    assert streams.templates("a")[0]["count"] == pytest.approx(4.0)
    streams.add("a", "templates", [template(2, 4600.0, count=1.0, bins=((7, 1.0),))])
    merged = streams.templates("a")[0]
    # the older four jobs are one half-life older than the new one
    assert merged["count"] == pytest.approx(4.0 * 0.5 + 1.0)
    assert dict(map(tuple, merged["bins"])) == pytest.approx({5: 2.0, 7: 1.0})
    assert merged["as_of_epoch_seconds"] == 4600.0


def test_a_template_increment_is_merged_with_its_number_or_not_at_all():
    """A merge committed without the host's last merged seq would be merged again when the
    agent resends the increment."""
    store = ManagerStore(None)
    store.db.execute("CREATE TRIGGER refuse BEFORE INSERT ON template_seq "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(sqlite3.Error):
        store.streams.add("a", "templates", [template(0, 1000.0)])
    assert store.streams.templates("a") == []
    store.db.execute("DROP TRIGGER refuse")
    assert store.streams.add("a", "templates", [template(0, 1000.0)]) == 1
    assert store.streams.templates("a")[0]["count"] == pytest.approx(2.0)


def test_two_records_ending_at_the_same_moment_are_two_records():
    """A restarted simulated agent replays the same stretch of virtual time: its records may
    end at the very millisecond an earlier run's did, and must still be kept."""
    store = ManagerStore(None)
    streams = store.streams
    first, second = capacity(0, 1e9 + 60.0), capacity(7, 1e9 + 60.0, per_core=(10.0, 5.0))
    assert streams.add("a", "capacity", [first]) == 1
    assert streams.add("a", "capacity", [second, first]) == 1  # the resend is still ignored
    assert sorted(r["available_cpu_seconds"] for r in streams.capacity("a")) == [15.0, 45.0]
    assert streams.add("a", "running", [running(0, 1e9), running(3, 1e9, jobs=2)]) == 2
