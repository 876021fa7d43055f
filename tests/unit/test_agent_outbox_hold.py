"""The outbox holds what it cannot write (a full disk) and writes it, in order, once it can.

The database is really full: SQLite's max_page_count caps the file at its current size, so
an insert fails with SQLITE_FULL ("database or disk is full") as on a full disk.
"""

import logging
import random
import sqlite3

import pytest

from ghs.agent.outbox import Outbox
from ghs.record import wire_fields
from sensors.clock import VirtualClock
from sensors.measurement import Measurement
from sensors.sampler import AdaptiveSampler
from sensors.store import SensorStore


def _fill(outbox: Outbox) -> None:
    """Let the outbox's file grow no further (space taken by earlier rows stays usable)."""
    pages = outbox.db.execute("PRAGMA page_count").fetchone()[0]
    outbox.db.execute(f"PRAGMA max_page_count = {pages}")


def _free(outbox: Outbox) -> None:
    outbox.db.execute("PRAGMA max_page_count = 1073741823")


def _big(i: int) -> dict:
    return {"i": i, "pad": "x" * 2000}  # a page or more each, so a full file refuses it


def test_records_refused_by_a_full_disk_are_held_then_written_in_order(tmp_path):
    outbox = Outbox(tmp_path / "o.sqlite", retry_seconds=0.0)
    assert [outbox.add("a", _big(i)) for i in range(3)] == [0, 1, 2]
    _fill(outbox)
    assert [outbox.add("a", _big(i)) for i in range(3, 8)] == [None] * 5
    assert outbox.count() == 3 and outbox.held_count() == 5
    assert outbox.write_failures == 5 and outbox.dropped_records == 0
    assert outbox.flush_held() == 0 and outbox.held_count() == 5  # still full
    _free(outbox)
    # the next record lands behind the held ones, numbered in the order they were measured
    assert outbox.add("a", _big(8)) == 8
    assert outbox.held_count() == 0
    pending = outbox.pending("a", 20)
    assert [seq for seq, _ in pending] == list(range(9))
    assert [fields["i"] for _, fields in pending] == list(range(9))


def test_held_records_go_in_when_the_sender_asks_and_keep_their_queue_time(tmp_path):
    now = [100.0]
    outbox = Outbox(tmp_path / "o.sqlite", clock=lambda: now[0], retry_seconds=0.0)
    outbox.add("a", _big(0))
    _fill(outbox)
    assert outbox.add("a", _big(1)) is None
    now[0] = 500.0
    _free(outbox)
    assert outbox.flush_held() == 1 and outbox.held_count() == 0
    assert outbox.oldest_queued() == 100.0
    assert outbox.pending("a", 5)[1][1]["i"] == 1
    outbox.ack("a", [(0, 0)])
    assert outbox.oldest_queued() == 100.0  # queued while the disk was full, not when written


def test_after_a_failure_the_next_try_waits(tmp_path):
    """A full disk is not retried on every record (each try rewrites the whole hold): records
    added within retry_seconds of a failure join the hold, in order."""
    now = [0.0]
    outbox = Outbox(tmp_path / "o.sqlite", retry_seconds=5.0, monotonic=lambda: now[0])
    outbox.add("a", _big(0))
    _fill(outbox)
    outbox.add("a", _big(1))
    _free(outbox)
    now[0] = 4.0
    assert outbox.flush_held() == 0 and outbox.add("a", _big(2)) is None
    assert outbox.write_failures == 1 and outbox.held_count() == 2  # not tried yet
    now[0] = 5.0
    assert outbox.add("a", _big(3)) == 3  # tried again: the held ones first
    assert [fields["i"] for _, fields in outbox.pending("a", 5)] == [0, 1, 2, 3]


def test_the_hold_is_bounded_and_says_what_it_dropped(tmp_path, caplog):
    outbox = Outbox(tmp_path / "o.sqlite", hold_max_records=3, retry_seconds=0.0)
    outbox.add("a", _big(0))
    _fill(outbox)
    with caplog.at_level(logging.ERROR, logger="ghs.agent"):
        for i in range(1, 6):
            outbox.add("a", _big(i))
    assert outbox.held_count() == 3 and outbox.dropped_records == 2
    assert "1 oldest records dropped (2 in all)" in caplog.text
    _free(outbox)
    assert outbox.flush_held() == 3
    assert [fields["i"] for _, fields in outbox.pending("a", 9)] == [0, 3, 4, 5]


def test_close_writes_what_it_can_and_logs_what_is_lost(tmp_path, caplog):
    outbox = Outbox(tmp_path / "o.sqlite")
    outbox.add("a", _big(0))
    _fill(outbox)
    outbox.add("a", _big(1))
    _free(outbox)
    outbox.close()  # the disk has room again: the held record is written on the way out
    again = Outbox(tmp_path / "o.sqlite")
    assert again.count("a") == 2
    _fill(again)
    again.add("a", _big(2))
    with caplog.at_level(logging.ERROR, logger="ghs.agent"):
        again.close()
    assert "1 records it measured could not be written" in caplog.text


class _Sensor:
    """Measures instantly on the virtual clock (the outbox, not the sensor, is under test)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def measure(self, interval_seconds: float) -> Measurement:
        self.clock.sleep(interval_seconds)
        end = self.clock.now()
        return Measurement(
            start_time=end - interval_seconds, end_time=end, interval_seconds=interval_seconds,
            lam=0.01, rho=0.2, jobs_started=1, jobs_between=0, service_count=1,
            service_sum_seconds=12.0, service_sum_squares=144.0,
            busy_cpu_seconds=0.2 * interval_seconds, running=0, cores=1,
            lambda_source="accounting", rho_source="kernel", quality=())


def test_a_sampler_keeps_measuring_while_its_outbox_is_full(tmp_path):
    """The sampler does not fail (and restart, losing the measurement in hand) on a full
    outbox: every measurement taken meanwhile reaches the outbox once it has room."""
    outbox = Outbox(tmp_path / "o.sqlite", retry_seconds=0.0)
    outbox.add("a", _big(-1))
    _fill(outbox)
    clock = VirtualClock(3600.0 * 400_000)
    sampler = AdaptiveSampler(_Sensor(clock), SensorStore(None), clock, random.Random(4),
                              interval_seconds=60.0, min_per_hour=6, max_per_hour=12,
                              on_measurement=lambda m: outbox.add("a", {**wire_fields(m, 1.0),
                                                                         "pad": "x" * 2000}))
    reports = sampler.run(hours=3)
    taken = sum(r.completed for r in reports)
    assert taken >= 18 and sum(r.failed for r in reports) == 0
    assert outbox.held_count() == taken and outbox.count() == 1
    _free(outbox)
    assert outbox.flush_held() == taken
    assert outbox.count("a") == 1 + taken


def test_a_record_the_database_refuses_raises_and_does_not_block_the_held_ones(tmp_path):
    outbox = Outbox(tmp_path / "o.sqlite", retry_seconds=0.0)
    outbox.add("a", _big(0))
    _fill(outbox)
    outbox.add("a", _big(1))
    _free(outbox)
    outbox.db.execute("CREATE TRIGGER refuse BEFORE INSERT ON outbox WHEN NEW.payload "
                      "LIKE '%poison%' BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(sqlite3.IntegrityError):
        outbox.add("a", {"poison": 1})
    assert outbox.held_count() == 1
    assert outbox.add("a", _big(2)) == 2
    assert [fields["i"] for _, fields in outbox.pending("a", 5)] == [0, 1, 2]
