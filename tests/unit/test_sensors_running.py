"""The running-jobs snapshot on recorded /proc files and a simulated host; identity hashing."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat

import pytest
from procfs_cores import BOOT, HZ, CoreProc

from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError, ProcUnavailableError
from sensors.host import LocalSensor
from sensors.processes import ProcfsProcessSource, build_filter
from sensors.running import (
    HASH_HEX_CHARS,
    IdentityHasher,
    RunningSampler,
    identity_hasher,
    read_run_queue_length,
    write_identity_key,
)
from sensors.simulated import SimulatedHost
from sensors.templates import TemplateBook

T0 = float(BOOT + 1000)
KEY = b"0123456789abcdef-site-key"


def sampler_on(tmp_path, clock, *, max_jobs=64, hasher=None, min_core_share=0.05, **rules):
    processes = ProcfsProcessSource(str(tmp_path), ticks_per_second=HZ, boot_time=BOOT)
    rules.setdefault("remote_marker", "GHS_REMOTE_TASK")
    return RunningSampler(processes, build_filter(**rules), clock,
                          lambda: read_run_queue_length(str(tmp_path)), max_jobs=max_jobs,
                          min_core_share=min_core_share, hasher=hasher,
                          name_of_uid=lambda uid: f"u{uid}")


def test_only_local_jobs_that_run_or_used_a_share_of_a_core_are_listed(tmp_path):
    clock = VirtualClock(T0)
    proc = CoreProc(tmp_path, cores={0: [0] * 8}, procs_running=4)
    proc.add(1, uid=0, name="init", ppid=0, start=0, utime=40)
    shell = proc.add(100, name="bash", utime=20, start=1000)
    proc.add(101, name="sim", state="R", utime=9000, start=50_000)
    proc.add(102, name="kworker", state="R", kernel=True, uid=0, ppid=2)
    proc.add(103, name="agent", state="R", uid=0, utime=30)
    proc.add(104, name="grid", state="R", uid=1001, environ=("GHS_REMOTE_TASK=1",))
    proc.add(105, name="grid-child", state="R", uid=1001, ppid=104)
    proc.add(106, name="backup", state="R", uid=1002, utime=100)
    proc.write()
    sampler = sampler_on(tmp_path, clock, exclude_pids=[103], users_deny=[1002])
    first = sampler.snapshot()
    assert first.run_queue_length == 3  # procs_running less the reader
    assert [(j.command, j.user) for j in first.jobs] == [("sim", "u1000")]
    (job,) = first.jobs
    assert job.cpu_seconds == 90.0 and job.wall_seconds == pytest.approx(T0 - (BOOT + 500))
    clock.advance(60)
    shell.utime += 3  # the owner typed something: 0.03 s of CPU in 60 s is no job
    proc.add(107, name="cc", state="S", utime=50, start=round((T0 + 30 - BOOT) * HZ))
    proc.add(108, name="sleepy", state="S", utime=0, start=round((T0 + 30 - BOOT) * HZ))
    proc.write()
    second = sampler.snapshot()
    assert [j.command for j in second.jobs] == ["sim", "cc"]
    assert second.to_dict()["jobs"][1] == {"cpu_seconds": 0.5, "wall_seconds": 30.0,
                                           "command": "cc", "user": "u1000"}
    clock.advance(60)
    shell.utime += 300  # a build in the shell, 3 s of 60 (5% of a core): a job while asleep
    proc.write()
    assert [j.command for j in sampler.snapshot().jobs] == ["sim", "bash"]
    clock.advance(60)
    shell.utime += 299  # just short of 5%
    proc.write()
    assert [j.command for j in sampler.snapshot().jobs] == ["sim"]


def test_a_share_of_zero_lists_every_process_that_used_any_cpu(tmp_path):
    clock = VirtualClock(T0)
    proc = CoreProc(tmp_path, cores={0: [0] * 8}, procs_running=1)
    shell = proc.add(100, name="bash", utime=20, start=1000)
    proc.write()
    sampler = sampler_on(tmp_path, clock, min_core_share=0.0)
    assert sampler.snapshot().jobs == ()
    clock.advance(60)
    shell.utime += 1
    proc.write()
    assert [j.command for j in sampler.snapshot().jobs] == ["bash"]
    clock.advance(60)
    proc.write()
    assert sampler.snapshot().jobs == ()


@pytest.mark.parametrize("share", [-0.1, 1.5, True, "0.1"])
def test_a_share_outside_zero_to_one_is_refused_by_name(tmp_path, share):
    with pytest.raises(InvalidArgumentError, match="min_core_share"):
        sampler_on(tmp_path, VirtualClock(T0), min_core_share=share)


def test_the_cap_keeps_the_largest_jobs_and_says_how_many_were_left_out(tmp_path):
    clock = VirtualClock(T0)
    proc = CoreProc(tmp_path, cores={0: [0] * 8})
    for pid in range(200, 210):
        proc.add(pid, name=f"j{pid}", state="R", utime=(pid - 199) * 10)
    proc.write()
    snapshot = sampler_on(tmp_path, clock, max_jobs=3).snapshot()
    assert [j.command for j in snapshot.jobs] == ["j209", "j208", "j207"]
    assert snapshot.omitted_jobs == 7 and snapshot.to_dict()["omitted_jobs"] == 7
    with pytest.raises(InvalidArgumentError):
        sampler_on(tmp_path, clock, max_jobs=0)


def test_hashed_identities_are_keyed_stable_and_truncated(tmp_path):
    clock = VirtualClock(T0)
    proc = CoreProc(tmp_path, cores={0: [0] * 8})
    proc.add(100, name="sim", state="R", utime=10)
    proc.write()
    job = sampler_on(tmp_path, clock, hasher=IdentityHasher(KEY)).snapshot().jobs[0]
    expected = hmac.new(KEY, b"sim", hashlib.sha256).hexdigest()[:HASH_HEX_CHARS]
    assert job.command == expected and len(job.user) == HASH_HEX_CHARS
    assert job.user == IdentityHasher(KEY)("u1000") != IdentityHasher(KEY + b"x")("u1000")


def test_identity_key_files(tmp_path):
    path = str(tmp_path / "identity.key")
    write_identity_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    hasher = identity_hasher(True, path)
    assert hasher("alice") == identity_hasher(True, path)("alice")
    assert identity_hasher(False, "") is None
    with pytest.raises(InvalidArgumentError, match="identity_key_path is empty"):
        identity_hasher(True, "")
    with pytest.raises(InvalidArgumentError, match="cannot read identity key") as missing:
        identity_hasher(True, str(tmp_path / "absent"))
    assert missing.value.field == "identity_key_path"
    with pytest.raises(InvalidArgumentError):
        write_identity_key(path)  # never overwrites a site's key
    (tmp_path / "short").write_text("abc\n")
    with pytest.raises(InvalidArgumentError, match="shorter"):
        identity_hasher(True, str(tmp_path / "short"))
    (tmp_path / "stat").write_text("cpu 0\n")
    with pytest.raises(ProcUnavailableError):
        read_run_queue_length(str(tmp_path))


def test_simulated_host_snapshot_is_every_job_in_the_system_with_its_cpu_so_far():
    rows = [(T0 + 0, 100.0, "ann", "render"), (T0 + 10, 50.0, "bob", "cc"),
            (T0 + 20, 5.0, "ann", "ls"), (T0 + 30, 400.0, "bob", "sim")]
    clock = VirtualClock(T0)
    host = SimulatedHost(rows, clock=clock, cores=2, boot_time=T0)
    sampler = host.running_sampler()
    clock.advance(40)
    snapshot = sampler.snapshot()
    # core 0: render 0-100; core 1: cc 10-60; ls waits for a core until 60; sim after it
    got = {(j.user, j.command): (j.cpu_seconds, j.wall_seconds) for j in snapshot.jobs}
    assert got == {("ann", "render"): (40.0, 40.0), ("bob", "cc"): (30.0, 30.0),
                   ("ann", "ls"): (0.0, 20.0), ("bob", "sim"): (0.0, 10.0)}
    assert snapshot.run_queue_length == 4 and snapshot.epoch_seconds == T0 + 40


def test_the_local_sensor_hands_out_capacity_running_and_template_pieces(tmp_path):
    proc = CoreProc(tmp_path, cores={0: [0, 0, 0, 500, 0, 0, 0, 0]}, procs_running=2)
    proc.add(1, uid=0, name="init", ppid=0, start=0)
    proc.add(100, name="sim", state="R", utime=700, start=5000)
    proc.write()
    clock = VirtualClock(T0)
    local = LocalSensor(clock=clock, exclude_pids=[], proc_root=str(tmp_path),
                        accounting="off", accounting_path=str(tmp_path / "pacct"),
                        accounting_existing="share", accounting_candidates="",
                        accounting_max_bytes=1 << 20, users_allow="", users_deny="",
                        remote_users="", remote_cgroup="", remote_marker="GHS_REMOTE_TASK")
    with local:
        assert local.capacity_source().capacity_sample().available_cpu_seconds == 5.0
        snapshot = local.running_sampler(max_jobs=4).snapshot()
        assert [j.command for j in snapshot.jobs] == ["sim"] and snapshot.run_queue_length == 1
        assert local.template_feeder(TemplateBook(3600.0)) is None  # accounting is off
