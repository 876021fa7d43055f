"""Trace-driven workstations: SWF and CSV reading, the per-user split, exact utilisation."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from ghs.errors import GhsError, TraceError
from ghs.traces import (
    assign_users,
    busy_fraction,
    read_csv,
    read_log,
    read_swf,
    trace_host,
    workstation_traces,
)
from scheduler.workload import Trace

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"

HEADER = """; Version: 2.2
; Computer: test rig
; UnixStartTime: 843480031
;
"""


def swf_line(job, submit, run, user, average=-1):
    fields = [job, submit, 0, run, 4, average, -1, 4, 3600, -1, 1, user, 1, -1, -1, -1, -1, -1]
    return " ".join(str(value) for value in fields)


JOBS = [  # job, submit, run, user; listed out of submit order on purpose
    (1, 100, 50, 7),
    (2, 10, 20, 3),
    (3, 400, 30, 7),
    (4, 250, 60, 3),
    (5, 300, 10, 9),
    (6, 50, 40, 7),
]


def write_swf(tmp_path, lines, name="log.swf", compress=False):
    text = HEADER + "\n".join(lines) + "\n"
    path = tmp_path / name
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_swf_fields_become_arrivals_demands_and_users_sorted_by_submit(tmp_path):
    log = read_swf(write_swf(tmp_path, [swf_line(*job) for job in JOBS]))
    assert log.submit_seconds.tolist() == [10, 50, 100, 250, 300, 400]
    assert log.cpu_seconds.tolist() == [20, 40, 50, 60, 10, 30]
    assert log.user_ids.tolist() == [3, 7, 7, 3, 9, 7]
    assert (log.data_lines, log.malformed_lines, log.unusable_jobs) == (6, 0, 0)
    assert log.header["Computer"] == "test rig" and log.header["UnixStartTime"] == "843480031"
    assert log.source == "log.swf"


def test_gzip_is_detected_by_content_and_reads_the_same(tmp_path):
    lines = [swf_line(*job) for job in JOBS]
    plain = read_swf(write_swf(tmp_path, lines))
    packed = read_log(write_swf(tmp_path, lines, name="log.swf.gz", compress=True))
    hidden = read_log(write_swf(tmp_path, lines, name="no-suffix", compress=True))
    for log in (packed, hidden):
        np.testing.assert_array_equal(log.submit_seconds, plain.submit_seconds)
        np.testing.assert_array_equal(log.cpu_seconds, plain.cpu_seconds)
        np.testing.assert_array_equal(log.user_ids, plain.user_ids)


def test_malformed_lines_are_skipped_and_counted_unknown_fields_fall_back(tmp_path):
    lines = [swf_line(*job) for job in JOBS]
    lines.insert(2, "12 34 56")  # too few fields (header is 4 lines: this is line 7)
    lines.insert(4, swf_line(7, 500, 25, 3).replace("25", "x5", 1))  # not a number
    lines.append(swf_line(8, 600, -1, 3, average=35))  # run unknown: average CPU stands in
    lines.append(swf_line(9, 700, -1, 3))  # no demand at all: unusable
    lines.append(swf_line(10, -1, 5, 3))  # no submit time: unusable
    lines.append("")
    log = read_swf(write_swf(tmp_path, lines))
    assert log.malformed_lines == 2 and log.first_malformed_line == 7
    assert log.unusable_jobs == 2
    assert log.data_lines == 11
    assert len(log) == 7 and log.submit_seconds[-1] == 600 and log.cpu_seconds[-1] == 35


def test_users_are_dealt_round_robin_busiest_first():
    users = np.array([5, 5, 5, 2, 2, 9, 9, 1, 4, 4, 4, 4])
    # activity: 4 (4 jobs), 5 (3), 2 and 9 (2 each, id breaks the tie), 1 (1)
    assert assign_users(users, 2) == {4: 0, 5: 1, 2: 0, 9: 1, 1: 0}
    assert assign_users(users, 5) == {4: 0, 5: 1, 2: 2, 9: 3, 1: 4}
    with pytest.raises(TraceError, match="5 users, too few to give 6 workstations"):
        assign_users(users, 6)


def test_split_is_disjoint_by_user_and_keeps_real_arrival_times(tmp_path):
    log = read_swf(write_swf(tmp_path, [swf_line(*job) for job in JOBS]))
    stations = workstation_traces(log, 2, 0.25)
    assert stations.users == ((7, 9), (3,))
    first, second = stations.traces
    assert first.arrival_seconds.tolist() == [50, 100, 300, 400]
    assert second.arrival_seconds.tolist() == [10, 250]
    # one factor per workstation: the demands keep their proportions
    np.testing.assert_allclose(first.cpu_seconds / stations.scale[0], [40, 50, 10, 30])
    np.testing.assert_allclose(second.cpu_seconds / stations.scale[1], [20, 60])


def test_utilisation_is_exact_per_workstation_with_and_without_a_cap():
    rng = np.random.default_rng(4)
    arrivals = np.sort(rng.uniform(0, 7 * 86400, 3000))
    from ghs.traces import JobLog

    log = JobLog("synthetic", arrivals, rng.lognormal(5, 2, 3000), rng.integers(0, 40, 3000),
                 3000, 0, 0)
    targets = [0.1, 0.35, 0.6, 0.05]
    window = (86400.0, 5 * 86400.0)
    for cap in (None, 600.0):
        stations = workstation_traces(log, 4, targets, start_seconds=window[0],
                                      end_seconds=window[1], cap_cpu_seconds=cap)
        for trace, target in zip(stations.traces, targets):
            assert trace.cpu_seconds.sum() / (window[1] - window[0]) == pytest.approx(
                target, rel=1e-12)
            assert window[0] <= trace.arrival_seconds.min()
            assert trace.arrival_seconds.max() <= window[1]
        np.testing.assert_allclose(stations.utilisation, targets, rtol=1e-12)
        total = sum(len(trace) for trace in stations.traces)
        assert total == np.sum((arrivals >= window[0]) & (arrivals <= window[1]))
        if cap is not None:
            assert max(trace.cpu_seconds.max() for trace in stations.traces) <= cap * (1 + 1e-12)
            assert stations.capped_jobs.sum() > 0
        else:
            assert stations.capped_jobs.sum() == 0


def test_csv_rows_with_header_comments_users_and_gzip(tmp_path):
    text = ("arrival_seconds,cpu_seconds,user\n# my accounting log\n30,5,1\n10,2.5,2\n"
            "oops,3\n20,1,\n40,-1,1\n")
    path = tmp_path / "acct.csv"
    path.write_text(text)
    log = read_log(path)
    assert log.submit_seconds.tolist() == [10, 20, 30]
    assert log.cpu_seconds.tolist() == [2.5, 1, 5]
    assert log.user_ids.tolist() == [2, -1, 1]
    assert log.malformed_lines == 2 and log.data_lines == 5  # the header row is no data
    packed = tmp_path / "acct.csv.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    np.testing.assert_array_equal(read_log(packed).cpu_seconds, log.cpu_seconds)
    bare = tmp_path / "bare.csv"
    bare.write_text("0,10\n60,20\n")
    stations = workstation_traces(read_csv(bare), 1, 0.5)
    assert stations.traces[0].cpu_seconds.tolist() == pytest.approx([10, 20])


@pytest.mark.parametrize(("content", "message"), [
    (None, "does not exist"),
    (b"", "holds no SWF job lines"),
    (HEADER.encode(), "holds no SWF job lines"),
    (b"\x00\x01\x02 garbage\nmore garbage\n", "none of its 2 SWF job lines is usable"),
    (b"\x1f\x8b\x08\x00broken", "cannot read trace file"),
    ((HEADER + swf_line(1, -1, 5, 1) + "\n").encode(), "has a submit time and a run time"),
])
def test_bad_files_raise_one_clear_trace_error(tmp_path, content, message):
    path = tmp_path / "bad.swf"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceError, match=message) as caught:
        read_log(path)
    assert isinstance(caught.value, GhsError) and caught.value.code == "invalid_trace"
    assert "\n" not in caught.value.message


def test_bad_split_requests_are_refused(tmp_path):
    log = read_swf(write_swf(tmp_path, [swf_line(*job) for job in JOBS]))
    for kwargs, message in [
        ({"workstations": 4, "utilisation": 0.2}, "too few to give 4"),
        ({"workstations": 2, "utilisation": 1.0}, r"in \(0, 1\)"),
        ({"workstations": 2, "utilisation": [0.2, 0.3, 0.4]}, "one number or 2 numbers"),
        ({"workstations": 0, "utilisation": 0.2}, "whole number >= 1"),
        ({"workstations": 2, "utilisation": 0.2, "start_seconds": 900,
          "end_seconds": 1000}, "no job arrives"),
        ({"workstations": 2, "utilisation": 0.9, "cap_cpu_seconds": 1.0}, "raise the cap"),
    ]:
        with pytest.raises(TraceError, match=message):
            workstation_traces(log, **kwargs)


def test_busy_fraction_and_host_parameters_of_a_trace():
    trace = Trace([10.0, 12.0, 100.0], [5.0, 5.0, 20.0])
    # busy from 10 to 20 (two jobs back to back), then 100 to 120
    assert busy_fraction(trace, 20.0, 10.0) == pytest.approx(1.0)
    assert busy_fraction(trace, 30.0, 20.0) == pytest.approx(0.5)
    np.testing.assert_allclose(busy_fraction(trace, [15.0, 110.0, 200.0], 10.0), [0.5, 1.0, 0.0])
    host = trace_host("ws", trace, 200.0, tau=2.0)
    assert host.lam == pytest.approx(3 / 200) and host.mu == pytest.approx(3 / 30)
    assert host.rho == pytest.approx(30 / 200) and host.tau == 2.0
    assert host.sigma == pytest.approx(np.std([5.0, 5.0, 20.0]))


def test_busy_fraction_matches_a_fine_time_grid():
    rng = np.random.default_rng(8)
    arrivals = np.sort(rng.uniform(0, 2000, 40))
    trace = Trace(arrivals, rng.exponential(30, 40))
    grid = np.arange(0, 2500, 0.01)
    busy_grid = trace.backlog_seconds(grid + 0.005) > 0
    for end in (300.0, 1000.0, 1700.0):
        inside = (grid >= end - 200) & (grid < end)
        assert busy_fraction(trace, end, 200.0) == pytest.approx(busy_grid[inside].mean(),
                                                                 abs=2e-3)


@pytest.mark.skipif(not (SHARED_TRACES / "hpc2n.swf").exists(),
                    reason="the shared trace folder (../shared/data/traces) is not beside this "
                           "checkout")
def test_a_real_swf_log_splits_into_workstations():
    log = read_log(SHARED_TRACES / "hpc2n.swf")
    assert log.header["Installation"].startswith("HPC2N")
    assert len(log) == 3170 and log.malformed_lines == 0 and log.unusable_jobs == 0
    assert np.all(np.diff(log.submit_seconds) >= 0)
    stations = workstation_traces(log, 4, 0.3)
    users = [set(group) for group in stations.users]
    assert set().union(*users) == set(np.unique(log.user_ids).tolist())
    assert sum(len(group) for group in users) == len(set().union(*users))  # disjoint
    arrivals = np.sort(np.concatenate([t.arrival_seconds for t in stations.traces]))
    np.testing.assert_array_equal(arrivals, log.submit_seconds)
    np.testing.assert_allclose(stations.utilisation, 0.3, rtol=1e-12)
    hosts = stations.hosts()
    assert [h.rho for h in hosts] == pytest.approx([0.3] * 4)
    assert all(h.sigma * h.mu > 1 for h in hosts)  # real demands are far from exponential
