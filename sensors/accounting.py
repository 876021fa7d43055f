"""BSD process accounting: the Linux acct v3 record format and an incremental file reader.

The kernel appends one 64-byte ``struct acct_v3`` to the accounting file when a process exits
(what ``lastcomm`` reads)::

    offset size field
    0      1    ac_flag      AFORK 0x01, ASU 0x02, ACOMPAT 0x04, ACORE 0x08, AXSIG 0x10
    1      1    ac_version   3; bit 0x80 set means big-endian fields
    2      2    ac_tty
    4      4    ac_exitcode  wait status: exit code << 8, or the terminating signal
    8      4    ac_uid       real user id
    12     4    ac_gid
    16     4    ac_pid
    20     4    ac_ppid
    24     4    ac_btime     start time, whole seconds since the epoch
    28     4    ac_etime     elapsed time, IEEE float, in AHZ ticks
    32     2x8  comp_t       utime, stime, mem (KiB), io, rw, minflt, majflt, swaps
    48     16   ac_comm      command name, NUL-padded (at most 15 bytes)

``comp_t`` is a 13-bit mantissa with a 3-bit base-8 exponent; times are in AHZ = 100 ticks
per second, truncated by the kernel, so demands much shorter than 10 ms are not measurable.
User and system times are the scheduler's tick samples, not its precise clock (see
:mod:`sensors.measurement` for what that does on a busy CPU and how it is corrected).
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from sensors.errors import AccountingError

RECORD_BYTES = 64
AHZ = 100  # accounting ticks per second (fixed by the record format)
ACCT_VERSION = 3
ACCT_BYTEORDER = 0x80
KNOWN_FLAGS = 0x1F
_FIELDS = "BBHIIIIIIfHHHHHHHH16s"
_LITTLE = struct.Struct("<" + _FIELDS)
_BIG = struct.Struct(">" + _FIELDS)
_MANTISSA_BITS = 13
_MANTISSA_MAX = (1 << _MANTISSA_BITS) - 1
_READ_CHUNK = 1 << 20


def decode_comp_t(value: int) -> int:
    """The integer a ``comp_t`` encodes: mantissa << (3 * exponent)."""
    return (value & _MANTISSA_MAX) << (3 * ((value >> _MANTISSA_BITS) & 0x7))


def encode_comp_t(value: int) -> int:
    """``comp_t`` encoding of a non-negative integer, rounded as the kernel rounds it."""
    value = int(value)
    exponent = 0
    round_up = 0
    while value > _MANTISSA_MAX:
        round_up = value & 0x4
        value >>= 3
        exponent += 1
    if round_up:
        value += 1
        if value > _MANTISSA_MAX:
            value >>= 3
            exponent += 1
    if exponent > 0x7:
        return 0xFFFF
    return (exponent << _MANTISSA_BITS) | value


@dataclass(frozen=True, slots=True)
class AcctRecord:
    """One exited process. Times in seconds; ``begin_time`` is epoch seconds.

    ``exit_status`` is the raw wait status the kernel stores (see :attr:`exit_code`).
    """

    pid: int
    ppid: int
    uid: int
    gid: int
    command: str
    begin_time: float
    elapsed_seconds: float
    user_cpu_seconds: float
    system_cpu_seconds: float
    exit_status: int = 0
    flags: int = 0
    memory_kib: int = 0

    @property
    def cpu_seconds(self) -> float:
        """User plus system CPU seconds: the job's service time."""
        return self.user_cpu_seconds + self.system_cpu_seconds

    def with_cpu_seconds(self, cpu_seconds: float) -> AcctRecord:
        """This record with its CPU time (seconds) all user time: what a measurement keeps
        after rescaling the kernel's figure. dataclasses.replace would do, at ten times the
        cost, on the tens of thousands of records a busy simulated day ends."""
        return AcctRecord(self.pid, self.ppid, self.uid, self.gid, self.command,
                          self.begin_time, self.elapsed_seconds, cpu_seconds, 0.0,
                          self.exit_status, self.flags, self.memory_kib)

    @property
    def end_time(self) -> float:
        """Exit time, epoch seconds (to within a second: the kernel stores whole seconds)."""
        return self.begin_time + self.elapsed_seconds

    @property
    def exit_code(self) -> int | None:
        """The exit code, or None if a signal ended the process."""
        if self.exit_status & 0x7F:
            return None
        return (self.exit_status >> 8) & 0xFF

    @property
    def forked_only(self) -> bool:
        """True when the process forked but never called exec (AFORK)."""
        return bool(self.flags & 0x01)


def encode_record(record: AcctRecord, *, big_endian: bool = False) -> bytes:
    """The 64-byte acct v3 form of ``record`` (for tests and simulated accounting files)."""
    layout = _BIG if big_endian else _LITTLE
    version = ACCT_VERSION | (ACCT_BYTEORDER if big_endian else 0)
    command = record.command.encode("utf-8", "replace")[:15]
    return layout.pack(
        record.flags, version, 0, record.exit_status, record.uid, record.gid, record.pid,
        record.ppid, int(record.begin_time), float(round(record.elapsed_seconds * AHZ)),
        encode_comp_t(int(record.user_cpu_seconds * AHZ)),
        encode_comp_t(int(record.system_cpu_seconds * AHZ)),
        encode_comp_t(record.memory_kib), 0, 0, 0, 0, 0, command)


def decode_record(data: bytes | memoryview, offset: int = 0) -> AcctRecord | None:
    """The record at ``offset``, or None if those 64 bytes are not a plausible v3 record.

    Plausible: version 3, only known flags, a NUL-terminated command with zero padding, a
    finite non-negative elapsed time and a start time after 1970.
    """
    if len(data) - offset < RECORD_BYTES:
        return None
    version = data[offset + 1]
    if version & 0x7F != ACCT_VERSION or data[offset] & ~KNOWN_FLAGS:
        return None
    layout = _BIG if version & ACCT_BYTEORDER else _LITTLE
    (flag, _, _, exit_status, uid, gid, pid, ppid, btime, etime, utime, stime, mem,
     _, _, _, _, _, comm) = layout.unpack_from(data, offset)
    end = comm.find(b"\0")
    if end < 0 or comm[end:].strip(b"\0"):
        return None
    if not math.isfinite(etime) or etime < 0 or btime == 0 or pid == 0:
        return None
    return AcctRecord(
        pid=pid, ppid=ppid, uid=uid, gid=gid,
        command=comm[:end].decode("utf-8", "replace"), begin_time=float(btime),
        elapsed_seconds=etime / AHZ, user_cpu_seconds=decode_comp_t(utime) / AHZ,
        system_cpu_seconds=decode_comp_t(stime) / AHZ, exit_status=exit_status, flags=flag,
        memory_kib=decode_comp_t(mem))


@dataclass
class AccountingBatch:
    """What one read of an accounting source returned.

    ``corrupt_records``: 64-byte stretches skipped as unreadable (a partial record that was
    later overwritten counts as one); ``truncated``/``rotated``: the file shrank or was
    replaced since the last read, so records may have been missed.
    """

    records: list[AcctRecord] = field(default_factory=list)
    corrupt_records: int = 0
    truncated: bool = False
    rotated: bool = False


class AccountingSource(Protocol):
    """Where the measurement reads exited processes from."""

    def skip_to_end(self) -> AccountingBatch:
        """Forget everything written so far (start of an interval); records stay empty."""
        ...

    def read_new(self) -> AccountingBatch:
        """Records written since the last call."""
        ...


class AccountingReader:
    """Reads an accounting file incrementally from a remembered offset.

    Give ``path`` (followed across rotation: when the path names a new file, the rest of the
    old one is read first) or an already open binary ``file`` (read-only; no rotation).
    The file is opened read-only and never written.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 file: BinaryIO | None = None, start_at_end: bool = True) -> None:
        if (path is None) == (file is None):
            raise AccountingError("give exactly one of an accounting file path or open file")
        self.path = None if path is None else os.fspath(path)
        self._file = file if file is not None else self._open(self.path)
        self.offset = 0
        if start_at_end:
            self.skip_to_end()

    @staticmethod
    def _open(path: str | None) -> BinaryIO:
        try:
            return open(path, "rb")
        except OSError as exc:
            raise AccountingError(f"cannot read accounting file {path!r}: {exc.strerror}",
                                  field="accounting_path", value=path) from None

    def close(self) -> None:
        self._file.close()

    def independent_reader(self) -> AccountingReader:
        """A second reader of the same file with its own offset, starting where this one is.

        For a reader given an open file, the copy reopens it through ``/proc/self/fd`` (a
        new open file description, so the two never share a file position). When the file
        is truncated (the sensor's own file past its size bound) records this reader had
        not read yet are lost to it, and its next batch says ``truncated``.
        """
        if self.path is not None:
            copy = AccountingReader(self.path, start_at_end=False)
        else:
            copy = AccountingReader(file=self._open(f"/proc/self/fd/{self._file.fileno()}"),
                                    start_at_end=False)
        copy.offset = self.offset
        return copy

    def _size(self) -> int:
        return os.fstat(self._file.fileno()).st_size

    def _replaced(self) -> bool:
        if self.path is None:
            return False
        try:
            named = os.stat(self.path)
        except OSError:
            return False  # rotated away and not recreated yet: keep the old file
        mine = os.fstat(self._file.fileno())
        return (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino)

    def _check_truncated(self, batch: AccountingBatch) -> None:
        if self._size() < self.offset:
            batch.truncated = True
            self.offset = 0

    def skip_to_end(self) -> AccountingBatch:
        batch = AccountingBatch()
        self._check_truncated(batch)
        if self._replaced():
            self._file.close()
            self._file = self._open(self.path)
            batch.rotated = True
            self.offset = 0
        size = self._size()
        # Stay aligned with the current record grid so a partial tail is not split.
        self.offset += (size - self.offset) // RECORD_BYTES * RECORD_BYTES
        return batch

    def read_new(self) -> AccountingBatch:
        batch = AccountingBatch()
        self._check_truncated(batch)
        self._read_to_end(batch)
        if self._replaced():
            self._file.close()
            self._file = self._open(self.path)
            batch.rotated = True
            self.offset = 0
            self._read_to_end(batch)
        return batch

    def _read_to_end(self, batch: AccountingBatch) -> None:
        while True:
            self._file.seek(self.offset)
            data = self._file.read(_READ_CHUNK)
            if len(data) < RECORD_BYTES:
                return
            consumed = _parse(data, batch)
            self.offset += consumed
            if consumed == 0 or len(data) < _READ_CHUNK:
                return


def _parse(data: bytes, batch: AccountingBatch) -> int:
    """Decode whole records from ``data``; returns the bytes consumed (a partial tail stays)."""
    view = memoryview(data)
    position = 0
    limit = len(data) - RECORD_BYTES
    while position <= limit:
        record = decode_record(view, position)
        if record is not None:
            batch.records.append(record)
            position += RECORD_BYTES
            continue
        start = position
        position += 1
        while position <= limit and decode_record(view, position) is None:
            position += 1
        if position > limit:
            # Nothing readable follows: wait for the writer unless the damage already spans
            # a whole record (then it cannot be a record still being written).
            if len(data) - start < 2 * RECORD_BYTES:
                return start
            position = len(data) - (len(data) - start) % RECORD_BYTES
            batch.corrupt_records += max(1, (position - start) // RECORD_BYTES)
            return position
        batch.corrupt_records += max(1, -(-(position - start) // RECORD_BYTES))
    return position
