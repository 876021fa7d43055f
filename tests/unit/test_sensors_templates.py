"""Demand templates: fixed bins, decay by timestamps, merging, incremental updates, feeding."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensors.accounting import AccountingBatch, AccountingReader, AcctRecord, encode_record
from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError
from sensors.processes import build_filter
from sensors.simulated import SimulatedHost
from sensors.templates import (
    BIN_COUNT,
    DemandHistogram,
    TemplateBook,
    TemplateFeeder,
    bin_edges_seconds,
    bin_index,
)

DAY = 86400.0
T0 = 1_700_000_000.0


def test_edges_are_fixed_log_spaced_with_under_and_overflow():
    edges = bin_edges_seconds()
    assert len(edges) == BIN_COUNT + 1 == 93
    assert edges[0] == 0.0 and edges[1] == 0.01 and edges[-2] == 1e7 and edges[-1] == math.inf
    ratios = [edges[i + 1] / edges[i] for i in range(1, len(edges) - 2)]
    assert all(r == pytest.approx(10 ** 0.1) for r in ratios)
    assert bin_index(0.0) == 0 and bin_index(0.009) == 0 and bin_index(0.01) == 1
    assert bin_index(1.0) == 21 and bin_index(1e7) == bin_index(1e12) == BIN_COUNT - 1


@given(st.floats(min_value=0.0, max_value=1e9, allow_nan=False))
def test_every_demand_lands_in_the_bin_whose_edges_hold_it(cpu_seconds):
    edges = bin_edges_seconds()
    index = bin_index(cpu_seconds)
    assert edges[index] <= cpu_seconds < edges[index + 1]


def test_a_jobs_weight_halves_every_half_life_and_sums_stay_exact():
    histogram = DemandHistogram(DAY)
    histogram.add(2.0, T0)
    histogram.add(4.0, T0 + DAY)
    assert histogram.n == pytest.approx(1.5)
    assert histogram.sum_seconds == pytest.approx(2.0 * 0.5 + 4.0)
    assert histogram.sumsq_seconds == pytest.approx(4.0 * 0.5 + 16.0)
    histogram.decay_to(T0 + 3 * DAY)
    assert histogram.n == pytest.approx(0.375)
    assert histogram.mean_seconds == pytest.approx(5.0 / 1.5)
    assert histogram.variance_seconds2 == pytest.approx(18.0 / 1.5 - (5.0 / 1.5) ** 2)
    histogram.add(1.0, T0)  # a late record weighs what it would have weighed in order
    assert histogram.n == pytest.approx(0.375 + 0.125)
    assert sum(histogram.dense_counts()) == pytest.approx(histogram.n)
    with pytest.raises(InvalidArgumentError):
        histogram.add(-1.0, T0)
    with pytest.raises(InvalidArgumentError):
        DemandHistogram(0.0)


jobs_strategy = st.lists(st.tuples(st.floats(0.0, 1e5), st.floats(0.0, 30 * DAY),
                                   st.sampled_from(["ann", "bob"]),
                                   st.sampled_from(["cc", "sim", "ls"])),
                         min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(jobs_strategy, st.integers(0, 10_000))
def test_shipping_in_pieces_and_merging_equals_one_book_that_saw_everything(jobs, seed):
    jobs = sorted(jobs, key=lambda job: job[1])
    whole = TemplateBook(DAY)
    agent = TemplateBook(DAY)
    manager = TemplateBook(DAY)
    rng = random.Random(seed)
    for cpu, offset, user, command in jobs:
        whole.add(user, command, cpu, T0 + offset)
        agent.add(user, command, cpu, T0 + offset)
        if rng.random() < 0.3:
            for update in agent.take_updates():
                manager.merge_update(tuple(update))  # as a plain tuple, as off the wire
    for update in agent.take_updates():
        manager.merge_update(update)
    assert len(agent) == 0
    for expected in whole.updates():
        got = manager.histogram(expected.scope, expected.user, expected.command)
        got.decay_to(expected.as_of_epoch)
        assert got.as_of_epoch == expected.as_of_epoch
        assert got.n == pytest.approx(expected.n, rel=1e-9)
        assert got.sum_seconds == pytest.approx(expected.sum_seconds, rel=1e-9, abs=1e-9)
        assert got.sumsq_seconds == pytest.approx(expected.sumsq_seconds, rel=1e-9, abs=1e-6)
        for (i, c), (j, d) in zip(got.sparse_counts(), expected.counts, strict=True):
            assert i == j and c == pytest.approx(d, rel=1e-9)


def test_scopes_and_bounded_keys_evict_into_the_wider_templates():
    book = TemplateBook(DAY, max_keys=2)
    book.add("ann", "cc", 1.0, T0)
    book.add("ann", "sim", 10.0, T0 + 1)
    book.add("ann", "cc", 1.0, T0 + 2)  # cc is now the most recently used
    book.add("bob", "ls", 0.1, T0 + 3)  # evicts (ann, sim)
    assert book.histogram("command", "ann", "sim") is None
    assert book.histogram("command", "ann", "cc").n == pytest.approx(2.0, rel=1e-4)
    assert book.histogram("user", "ann").n == pytest.approx(3.0, rel=1e-4)
    assert book.histogram("pooled").n == pytest.approx(4.0, rel=1e-4)
    assert book.evicted == 1
    scopes = [(u.scope, u.user, u.command) for u in book.updates()]
    assert scopes == [("pooled", "", ""), ("user", "ann", ""), ("user", "bob", ""),
                      ("command", "ann", "cc"), ("command", "bob", "ls")]
    with pytest.raises(InvalidArgumentError):
        book.histogram("host")
    with pytest.raises(InvalidArgumentError):
        book.merge_update(("host", "", "", (), 0, 0, 0, T0))
    with pytest.raises(InvalidArgumentError):
        book.merge_update(("pooled", "", "", ((BIN_COUNT, 1.0),), 1, 1, 1, T0))


def test_the_feeder_reads_every_finished_job_independently_of_the_measurements():
    rows = [(T0 + k * 10, 1.0 + k % 3, "ann" if k % 2 else "bob", f"c{k % 3}")
            for k in range(30)] + [(T0 + 400, 3.0, "backup", "tar")]
    clock = VirtualClock(T0)
    host = SimulatedHost(rows, clock=clock, boot_time=T0)
    sensor = host.sensor()
    book = TemplateBook(DAY)
    feeder = host.template_feeder(
        book, build_filter(users_deny=["backup"], resolve_uid=host.uid_of))
    clock.advance(100)
    start = sensor.begin()  # the measurement skips what finished before it
    clock.advance(50)
    sensor.end(start)
    clock.advance(300)
    assert feeder.poll() == 30  # every job, not only those inside the measurement
    assert host.read_new().records  # the main reader still sees its own records
    book.histogram("pooled").decay_to(T0 + 450)
    book.histogram("command", "ann", "c1").decay_to(T0 + 450)
    assert book.histogram("pooled").n == pytest.approx(
        sum(2 ** (-(T0 + 450 - end) / DAY) for end in _ends(rows[:30])), rel=1e-9)
    assert book.histogram("user", "backup") is None
    assert book.histogram("command", "ann", "c1").sum_seconds == pytest.approx(
        sum(2 ** (-(T0 + 450 - (T0 + k * 10 + 1 + k % 3)) / DAY) * (1 + k % 3)
            for k in range(30) if k % 2 and k % 3 == 1), rel=1e-6)
    assert feeder.poll() == 0 and feeder.records_read == 31


def _ends(rows):
    free, ends = T0, []
    for arrival, cpu, *_ in rows:
        free = max(arrival, free) + cpu
        ends.append(free)
    return ends


def test_feeder_skips_the_agent_and_remote_tasks_records():
    book = TemplateBook(DAY)

    def record(pid, ppid):
        return AcctRecord(pid=pid, ppid=ppid, uid=1000, gid=1000, command="x", begin_time=T0,
                          elapsed_seconds=1.0, user_cpu_seconds=1.0, system_cpu_seconds=0.0)

    class Records:
        def read_new(self):
            return AccountingBatch(records=[record(10, 1), record(11, 5), record(12, 7),
                                            record(5, 1)])

        def skip_to_end(self):
            raise AssertionError("the feeder never skips")

    feeder = TemplateFeeder(Records(), book, build_filter(exclude_pids=[5]),
                            name_of_uid=str, excluded_pids=lambda: {7})
    assert feeder.poll() == 1
    assert book.histogram("command", "1000", "x").n == pytest.approx(1.0)


def test_cursors_are_independent_and_records_are_trimmed_once_all_have_read():
    clock = VirtualClock(T0)
    host = SimulatedHost([(T0 + k, 0.5) for k in range(10)], clock=clock, boot_time=T0)
    clock.advance(3)
    late = host.open_accounting_cursor()
    early = host.open_accounting_cursor(from_start=True)
    assert len(early.read_new().records) == 3 and late.read_new().records == []
    clock.advance(10)
    assert len(host.read_new().records) == 10
    assert len(late.read_new().records) == 7
    assert len(host._records) == 7  # early has not read them yet
    early.close()
    assert host._records == []
    late.skip_to_end()
    assert host.skip_to_end().records == []


def test_a_second_accounting_reader_has_its_own_offset(tmp_path):
    def record(pid):
        return encode_record(AcctRecord(pid=pid, ppid=1, uid=1000, gid=1000, command="x",
                                        begin_time=T0, elapsed_seconds=1.0,
                                        user_cpu_seconds=0.5, system_cpu_seconds=0.0))

    path = tmp_path / "pacct"
    path.write_bytes(record(1) + record(2))
    main = AccountingReader(str(path), start_at_end=False)
    assert [r.pid for r in main.read_new().records] == [1, 2]
    with open(path, "rb") as handle:
        copies = [main.independent_reader(),
                  AccountingReader(file=handle, start_at_end=True).independent_reader()]
        with open(path, "ab") as out:
            out.write(record(3))
        assert [r.pid for r in copies[0].read_new().records] == [3]
        assert [r.pid for r in copies[1].read_new().records] == [3]
        assert [r.pid for r in main.read_new().records] == [3]
        assert copies[0].read_new().records == []
        for copy in copies:
            copy.close()
    main.close()


def test_weights_stay_exact_across_hundreds_of_half_lives():
    hour = 3600.0
    histogram = DemandHistogram(hour)
    histogram.add(1.0, T0)
    histogram.add(3.0, T0 + 300 * hour)  # far enough for the internal reference to move
    histogram.add(5.0, T0 + 301 * hour)
    assert histogram.n == pytest.approx(1.5, rel=1e-12)
    assert histogram.sum_seconds == pytest.approx(1.5 + 5.0, rel=1e-12)
    assert histogram.sparse_counts() == (
        (bin_index(1.0), pytest.approx(0.0, abs=1e-80)),
        (bin_index(3.0), pytest.approx(0.5, rel=1e-12)),
        (bin_index(5.0), pytest.approx(1.0, rel=1e-12)))


def test_hashed_identities_key_the_templates():
    from sensors.running import IdentityHasher

    hasher = IdentityHasher(b"0123456789abcdef-site-key")
    clock = VirtualClock(T0)
    host = SimulatedHost([(T0, 1.0, "ann", "render"), (T0 + 5, 2.0, "ann", "render")],
                         clock=clock, boot_time=T0)
    book = TemplateBook(DAY)
    feeder = host.template_feeder(book, hasher=hasher)
    clock.advance(10)
    assert feeder.poll() == 2
    histogram = book.histogram("command", hasher("ann"), hasher("render"))
    assert histogram.sum_seconds == pytest.approx(3.0, rel=1e-4)
    assert book.histogram("user", "ann") is None
