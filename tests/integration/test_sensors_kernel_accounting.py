"""Kernel process accounting for real (root): records, rotation, damage, never taking over.

Every test first checks that no accounting file is active on this machine and skips if one
is: the kernel keeps only one, and a test must never replace the system's.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sensors import accounting_control
from sensors.accounting import RECORD_BYTES, AccountingReader
from sensors.accounting_control import AccountingSession, probe_accounting, switch_accounting
from sensors.errors import AccountingError, AccountingInUseError

pytestmark = pytest.mark.root
NOBODY = 65534
TRUE = shutil.which("true") or "/bin/true"
BURN = ("import time\nt = time.process_time()\n"
        "while time.process_time() - t < {seconds}: pass\nraise SystemExit({code})\n")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_known_commands(directory: Path) -> dict[str, float]:
    """Run the test's commands; returns their CPU seconds as the kernel reported to us."""
    burner = directory / "ghsburn"
    burner.symlink_to(sys.executable)  # the command name accounting will record
    before = children_cpu_seconds()
    subprocess.run([str(burner), "-c", BURN.format(seconds=0.3, code=7)], check=False)
    burn_cpu = children_cpu_seconds() - before
    subprocess.run(["/bin/sh", "-c", "exit 3"], check=False)
    subprocess.run([TRUE], user=NOBODY, group=NOBODY, check=True)
    return {"ghsburn": burn_cpu}


def test_kernel_records_parse_to_the_commands_and_cpu_times_that_ran(free_accounting):
    own = free_accounting / "pacct"
    started = time.time()
    with AccountingSession("on", own_path=str(own)) as session:
        assert session.source == "own" and session.flags == ()
        cpu = run_known_commands(free_accounting)
    assert probe_accounting((str(own),)).active is None  # switched off again
    records = AccountingReader(own, start_at_end=False).read_new()
    assert records.corrupt_records == 0
    by_command = {}
    for record in records.records:
        by_command.setdefault(record.command, []).append(record)
    (burn,) = by_command["ghsburn"]
    assert burn.exit_code == 7 and burn.uid == 0 and burn.ppid == os.getpid()
    assert burn.cpu_seconds == pytest.approx(cpu["ghsburn"], abs=0.04)
    assert burn.cpu_seconds + 0.02 >= 0.3
    assert started - 2 <= burn.begin_time <= time.time()
    assert burn.elapsed_seconds >= burn.cpu_seconds - 0.02
    (shell,) = by_command["sh"]
    assert shell.exit_code == 3
    assert any(r.uid == NOBODY and r.exit_code == 0 for r in by_command["true"])


def test_kernel_file_damaged_afterwards_is_read_around_the_damage(free_accounting):
    own = free_accounting / "pacct"
    with AccountingSession("on", own_path=str(own)):
        for _ in range(6):
            subprocess.run([TRUE], check=True)
    data = own.read_bytes()
    full = len(data) // RECORD_BYTES
    assert full >= 6 and len(data) % RECORD_BYTES == 0
    expected = [r.pid for r in AccountingReader(own, start_at_end=False).read_new().records]

    truncated = free_accounting / "truncated"
    truncated.write_bytes(data[:3 * RECORD_BYTES + 30])
    reader = AccountingReader(truncated, start_at_end=False)
    assert [r.pid for r in reader.read_new().records] == expected[:3]

    damaged = bytearray(data)
    damaged[RECORD_BYTES + 1] = 0x55  # record 2 loses its version byte
    damaged[3 * RECORD_BYTES:3 * RECORD_BYTES] = b"garbage"  # misaligns everything after
    corrupt = free_accounting / "corrupt"
    corrupt.write_bytes(bytes(damaged))
    batch = AccountingReader(corrupt, start_at_end=False).read_new()
    assert [r.pid for r in batch.records] == expected[:1] + expected[2:]
    assert batch.corrupt_records == 2


def test_reader_follows_the_kernel_across_a_rotation(free_accounting):
    path = free_accounting / "pacct"
    path.touch()
    switch_accounting(str(path))
    try:
        reader = AccountingReader(path)
        subprocess.run([TRUE], check=True)
        os.rename(path, free_accounting / "pacct.1")  # what logrotate + accton do
        path.touch()
        switch_accounting(str(path))
        subprocess.run(["/bin/sh", "-c", "exit 0"], check=True)
        batch = reader.read_new()
    finally:
        switch_accounting(None)
    commands = [r.command for r in batch.records]
    assert batch.rotated
    assert "true" in commands and "sh" in commands
    assert commands.index("true") < commands.index("sh")


def test_on_never_takes_over_an_accounting_file_already_in_use(free_accounting):
    system = free_accounting / "system-pacct"
    system.touch()
    own = free_accounting / "own" / "pacct"
    switch_accounting(str(system))  # plays the system's accounting
    try:
        with AccountingSession("on", own_path=str(own), candidates=[str(system)]) as session:
            assert session.source == "shared" and "accounting_shared" in session.flags
            subprocess.run([TRUE], check=True)
            assert "true" in [r.command for r in session.reader.read_new().records]
        assert not own.exists()
        # not at any listed path: still found, and read through the kernel's own handle
        with AccountingSession("on", own_path=str(own)) as session:
            assert session.source == "shared" and "accounting_unlisted_file" in session.flags
        with pytest.raises(AccountingInUseError, match=r"already active.*system-pacct"):
            AccountingSession("on", own_path=str(own), candidates=[str(system)],
                              existing="refuse").open()
        with AccountingSession("auto", own_path=str(own), candidates=[str(system)]) as session:
            assert session.source == "shared"
        probe = probe_accounting([str(system)])
        assert probe.active is not None and probe.active.path == str(system)
        probe.active.file.close()
        assert not own.exists()
    finally:
        switch_accounting(None)


def test_auto_without_accounting_falls_back_and_on_needs_root(free_accounting, monkeypatch):
    with AccountingSession("auto", own_path=str(free_accounting / "x")) as session:
        assert session.reader is None and "no active accounting" in session.reason
    with AccountingSession("off", own_path=str(free_accounting / "x")) as session:
        assert session.reader is None
    monkeypatch.setattr(accounting_control.os, "geteuid", lambda: 1000)
    with pytest.raises(AccountingError, match="needs root"):
        AccountingSession("on", own_path=str(free_accounting / "x")).open()
    assert not (free_accounting / "x").exists()


def test_a_second_sensor_on_the_same_file_reads_it_and_a_dead_runs_file_is_adopted(
        free_accounting):
    own = free_accounting / "pacct"
    first = AccountingSession("on", own_path=str(own))
    first.open()
    try:
        with AccountingSession("on", own_path=str(own), remove_own_file=True) as second:
            assert second.source == "shared" and "accounting_shared" in second.flags
        probe = probe_accounting((str(own),))  # the second left it alone
        assert probe.active is not None and probe.active.path == str(own)
        probe.active.file.close()
    finally:
        first.close()
    assert probe_accounting((str(own),)).active is None

    switch_accounting(str(own))  # as if a sensor had died with accounting on
    with AccountingSession("on", own_path=str(own)) as session:
        assert session.source == "own" and "accounting_adopted" in session.flags
    assert probe_accounting((str(own),)).active is None


def test_without_fanotify_only_listed_files_are_seen_and_on_refuses(free_accounting):
    system = free_accounting / "system-pacct"
    system.touch()
    switch_accounting(str(system))
    try:
        seen = probe_accounting([str(system)], use_fanotify=False)
        assert seen.active is not None and seen.active.path == str(system)
        assert not seen.complete
        seen.active.file.close()
        assert probe_accounting([], use_fanotify=False).active is None
    finally:
        switch_accounting(None)
    with pytest.raises(AccountingInUseError, match="cannot verify"):
        AccountingSession("on", own_path=str(free_accounting / "own"),
                          use_fanotify=False).open()
    assert probe_accounting(()).active is None
