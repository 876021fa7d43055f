"""The simulated host: FCFS execution, the three sensor interfaces, exact measurements."""

from __future__ import annotations

import pytest

from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError
from sensors.processes import build_filter
from sensors.simulated import SimulatedHost, read_trace_csv

T0 = 1_000_000.0


def host_with(rows, *, cores=1, speed=1.0, **kwargs):
    clock = VirtualClock(T0)
    return clock, SimulatedHost(rows, clock=clock, cores=cores, speed=speed, **kwargs)


def test_jobs_run_first_come_first_served_and_leave_accounting_records():
    clock, host = host_with([(T0 + 0.0, 1.0, "alice", "make"), (T0 + 0.5, 1.0)])
    clock.advance(1.5)
    snap = host.snapshot()
    jobs = [info for info in snap.values() if info.pid != 1]
    assert len(jobs) == 1
    (second,) = jobs
    assert second.start_time == T0 + 0.5 and second.cpu_seconds == pytest.approx(0.5)
    batch = host.read_new()
    (first,) = batch.records
    assert (first.command, first.uid) == ("make", host.uid_of("alice"))
    assert first.cpu_seconds == 1.0 and first.elapsed_seconds == 1.0
    sample = host.sample()
    assert sample.busy_seconds == pytest.approx(1.5)
    assert sample.total_seconds == pytest.approx(1.5) and sample.forks == 3
    clock.advance(1.0)
    (record,) = host.read_new().records
    assert record.elapsed_seconds == pytest.approx(1.5)  # waited 0.5 s for the core


def test_cores_run_in_parallel_and_speed_shortens_service():
    clock, host = host_with([(T0, 2.0), (T0, 2.0)], cores=2, speed=2.0)
    clock.advance(1.0)
    records = host.read_new().records
    assert len(records) == 2 and all(r.cpu_seconds == 1.0 for r in records)
    assert host.sample().busy_seconds == pytest.approx(2.0)


def test_unsorted_or_bad_rows_are_refused():
    clock, host = host_with([(T0 + 2.0, 1.0), (T0 + 1.0, 1.0)])
    clock.advance(5)
    with pytest.raises(InvalidArgumentError, match="sorted"):
        host.snapshot()
    clock, host = host_with([(T0, -1.0)])
    with pytest.raises(InvalidArgumentError):
        host.sample()
    with pytest.raises(InvalidArgumentError):
        SimulatedHost([], clock=VirtualClock(), cores=0)


def test_reused_pids_are_different_processes():
    rows = [(T0 + i, 3.0) for i in range(60)]  # 20 pids for 60 jobs: each pid is reused
    clock, host = host_with(rows, cores=4, pid_max=320)
    sensor = host.sensor()
    seen = set()
    for _ in range(12):
        start = sensor.begin()
        clock.advance(4.75)
        m = sensor.end(start)
        seen |= set(sensor.processes.snapshot())
        assert m.jobs_started + m.jobs_between == len(
            [t for t, _ in rows if m.start_time < t <= m.end_time])
    assert len({pid for pid, _ in seen}) < len(seen) - 1  # same pid, other start time
    with pytest.raises(InvalidArgumentError, match="pid_max"):
        crowded = host_with([(T0, 5.0)] * 30, pid_max=320)
        crowded[0].advance(1)
        crowded[1].snapshot()


def test_measurement_on_a_simulated_host_is_exact():
    rows = [(T0 + 5.0, 10.0), (T0 + 20.0, 4.0), (T0 + 50.0, 30.0), (T0 + 75.0, 1.0),
            (T0 + 130.0, 1.0, "remote")]
    clock, host = host_with(rows)
    clock.advance(10.0)  # the first job started at 5 and is running
    sensor = host.sensor(build_filter(remote_users=["remote"], resolve_uid=host.uid_of))
    m = sensor.measure(60.0)  # [10, 70]
    assert (m.jobs_started, m.jobs_between) == (1, 1)  # the job at 50 runs; the one at 20 ended
    assert m.lam == pytest.approx(2 / 60)
    assert m.service_count == 2  # the jobs from 5 and 20 exited
    assert m.service_sum_seconds == pytest.approx(14.0)
    assert m.rho == pytest.approx((5 + 4 + 20) / 60)
    fallback = host.sensor(accounting=False).measure(60.0)  # [70, 130]
    assert fallback.lambda_source == "fork_counter"
    # the job at 75 came and went, the remote one arrived at 130: no filter tells them apart
    assert (fallback.jobs_started, fallback.jobs_between) == (1, 1)
    assert fallback.rho == pytest.approx((10 + 1) / 60)


def test_trace_csv_rows(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_seconds,cpu_seconds,user,command\n5,1.5,bob,cc\n1,0.5\n")
    assert read_trace_csv(path) == [(1.0, 0.5), (5.0, 1.5, "bob", "cc")]
    path.write_text("1,2\nx,y\n")
    with pytest.raises(InvalidArgumentError, match=":2"):
        read_trace_csv(path)
    with pytest.raises(InvalidArgumentError):
        read_trace_csv(tmp_path / "missing.csv")


def test_two_threads_can_read_one_simulated_host():
    """The agent's sampler and stream threads read one host at once (was: a generator
    'already executing' error on the shared job stream)."""
    import threading

    from sensors.clock import AcceleratedClock

    clock = AcceleratedClock(36_000.0, start=0.0)
    rows = ((float(t), 5.0) for t in range(1, 10**9, 7))
    host = SimulatedHost(rows, clock=clock, cores=2)
    errors = []

    def hammer(read):
        try:
            for _ in range(2000):
                read()
        except Exception as exc:  # the failure this guards against
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(read,)) for read in
               (host.snapshot, host.capacity_sample, host.sample,
                host.open_accounting_cursor().read_new)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
