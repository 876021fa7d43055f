"""The acct v3 format and the incremental reader: partial, truncated, rotated, corrupt files."""

from __future__ import annotations

import dataclasses
import os
import random
import struct

import pytest

from sensors.accounting import (
    RECORD_BYTES,
    AccountingReader,
    AcctRecord,
    decode_comp_t,
    decode_record,
    encode_comp_t,
    encode_record,
)
from sensors.accounting_control import _OwnedFile
from sensors.errors import AccountingError


def record(pid: int, *, command: str = "job", cpu: float = 0.5, uid: int = 1000) -> AcctRecord:
    return AcctRecord(pid=pid, ppid=1, uid=uid, gid=uid, command=command,
                      begin_time=1_700_000_000.0 + pid, elapsed_seconds=2.5,
                      user_cpu_seconds=cpu, system_cpu_seconds=0.25, exit_status=3 << 8)


def blob(*pids: int) -> bytes:
    return b"".join(encode_record(record(pid)) for pid in pids)


def pids(batch) -> list[int]:
    return [r.pid for r in batch.records]


def test_comp_t_round_trips_small_values_exactly_and_rounds_large_ones_like_the_kernel():
    for value in (0, 1, 99, 8191):
        assert decode_comp_t(encode_comp_t(value)) == value
    # 8196 > 8191: shifted by 3 (-> 1024) with the shifted-out bit 2 set, so rounded up.
    assert encode_comp_t(8196) == (1 << 13) | 1025
    assert decode_comp_t(encode_comp_t(8196)) == 8200
    for value in (10_000, 123_456, 9_999_999):
        assert abs(decode_comp_t(encode_comp_t(value)) - value) / value < 1 / 1024
    assert decode_comp_t(0x2001) == 8


def test_record_round_trip_keeps_every_field_at_tick_resolution():
    original = AcctRecord(pid=4242, ppid=17, uid=65534, gid=65534, command="python3",
                          begin_time=1_700_000_123.0, elapsed_seconds=12.34,
                          user_cpu_seconds=1.23, system_cpu_seconds=0.07,
                          exit_status=7 << 8, flags=0x02, memory_kib=5120)
    data = encode_record(original)
    assert len(data) == RECORD_BYTES
    decoded = decode_record(data)
    assert decoded == original
    assert decoded.exit_code == 7
    assert decoded.cpu_seconds == pytest.approx(1.30)
    assert decoded.end_time == pytest.approx(1_700_000_135.34)


def test_a_record_with_rescaled_cpu_keeps_every_other_field():
    original = AcctRecord(pid=4242, ppid=17, uid=65534, gid=65534, command="python3",
                          begin_time=1.7e9, elapsed_seconds=12.5, user_cpu_seconds=3.0,
                          system_cpu_seconds=1.0, exit_status=256, flags=2, memory_kib=9000)
    assert original.with_cpu_seconds(2.5) == dataclasses.replace(
        original, user_cpu_seconds=2.5, system_cpu_seconds=0.0)


def test_big_endian_records_decode():
    original = record(77)
    assert decode_record(encode_record(original, big_endian=True)) == original


def test_signal_exit_has_no_exit_code():
    assert AcctRecord(1, 0, 0, 0, "x", 1.0, 0.0, 0.0, 0.0, exit_status=9).exit_code is None


@pytest.mark.parametrize("damage", ["version", "flags", "comm_tail", "etime_nan", "zero"])
def test_implausible_records_are_rejected(damage):
    data = bytearray(encode_record(record(5)))
    if damage == "version":
        data[1] = 2
    elif damage == "flags":
        data[0] = 0x40
    elif damage == "comm_tail":
        data[63] = ord("x")
    elif damage == "etime_nan":
        data[28:32] = struct.pack("<f", float("nan"))
    else:
        data[:] = bytes(RECORD_BYTES)
    assert decode_record(bytes(data)) is None


def test_reader_needs_exactly_one_source(tmp_path):
    with pytest.raises(AccountingError):
        AccountingReader()
    with pytest.raises(AccountingError, match="cannot read"):
        AccountingReader(tmp_path / "missing")


def test_reads_incrementally_from_the_remembered_offset(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1, 2, 3))
    reader = AccountingReader(path, start_at_end=False)
    assert pids(reader.read_new()) == [1, 2, 3]
    assert pids(reader.read_new()) == []
    with open(path, "ab") as handle:
        handle.write(blob(4, 5))
    assert pids(reader.read_new()) == [4, 5]
    assert reader.offset == 5 * RECORD_BYTES


def test_skip_to_end_forgets_earlier_records(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1, 2))
    reader = AccountingReader(path)  # starts at the end
    with open(path, "ab") as handle:
        handle.write(blob(3))
    reader.skip_to_end()
    with open(path, "ab") as handle:
        handle.write(blob(4))
    assert pids(reader.read_new()) == [4]


def test_partial_record_waits_for_the_rest(tmp_path):
    path = tmp_path / "pacct"
    data = blob(1, 2)
    path.write_bytes(data[:100])
    reader = AccountingReader(path, start_at_end=False)
    batch = reader.read_new()
    assert pids(batch) == [1] and batch.corrupt_records == 0
    assert reader.offset == RECORD_BYTES
    with open(path, "ab") as handle:
        handle.write(data[100:])
    batch = reader.read_new()
    assert pids(batch) == [2] and batch.corrupt_records == 0


def test_abandoned_partial_record_is_skipped_and_counted_once_more_data_arrives(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1) + encode_record(record(2))[:30])  # writer died mid-record
    reader = AccountingReader(path, start_at_end=False)
    assert pids(reader.read_new()) == [1]
    with open(path, "ab") as handle:
        handle.write(blob(3, 4))
    batch = reader.read_new()
    assert pids(batch) == [3, 4]
    assert batch.corrupt_records == 1


def test_truncation_restarts_from_the_beginning(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1, 2, 3))
    reader = AccountingReader(path, start_at_end=False)
    reader.read_new()
    path.write_bytes(blob(9))  # truncated and rewritten
    batch = reader.read_new()
    assert batch.truncated and pids(batch) == [9]


def test_rotation_reads_the_rest_of_the_old_file_then_the_new_one(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1, 2))
    reader = AccountingReader(path, start_at_end=False)
    assert pids(reader.read_new()) == [1, 2]
    with open(path, "ab") as handle:  # written before the rotation
        handle.write(blob(3))
    os.rename(path, tmp_path / "pacct.1")
    path.write_bytes(blob(10, 11))
    batch = reader.read_new()
    assert batch.rotated
    assert pids(batch) == [3, 10, 11]
    assert pids(reader.read_new()) == []


def test_rotated_away_without_a_new_file_keeps_reading_the_old_one(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1))
    reader = AccountingReader(path, start_at_end=False)
    reader.read_new()
    os.rename(path, tmp_path / "pacct.1")
    with open(tmp_path / "pacct.1", "ab") as handle:
        handle.write(blob(2))
    batch = reader.read_new()
    assert pids(batch) == [2] and not batch.rotated


@pytest.mark.parametrize("garbage", [b"\x07" * 10, bytes(64), random.Random(7).randbytes(200)])
def test_corruption_in_the_middle_is_skipped_counted_and_resynchronised(tmp_path, garbage):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1, 2) + garbage + blob(3, 4, 5))
    batch = AccountingReader(path, start_at_end=False).read_new()
    assert pids(batch) == [1, 2, 3, 4, 5]
    assert batch.corrupt_records == -(-len(garbage) // RECORD_BYTES)


def test_long_corrupt_tail_is_consumed_and_counted(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1) + b"\xff" * 300)
    reader = AccountingReader(path, start_at_end=False)
    batch = reader.read_new()
    assert pids(batch) == [1] and batch.corrupt_records == 4
    with open(path, "ab") as handle:
        handle.write(blob(2))
    batch = reader.read_new()
    assert pids(batch) == [2]


def test_an_open_file_can_be_read_without_a_path(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(1, 2))
    with open(path, "rb") as handle:
        reader = AccountingReader(file=handle, start_at_end=False)
        assert pids(reader.read_new()) == [1, 2]


def test_the_sensors_own_file_is_emptied_between_intervals_beyond_its_limit(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(blob(*range(1, 1030)))  # just over 64 KiB
    owned = _OwnedFile(str(path), max_bytes=64 * 1024)
    assert path.stat().st_size == 0 and owned.offset == 0
    with open(path, "ab") as handle:
        handle.write(blob(7))
    assert pids(owned.read_new()) == [7]
    owned.close()
