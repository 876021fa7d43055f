"""This machine as a sensor: procfs sources, the accounting session and the process filter.

``open_local_sensor`` takes every setting explicitly; the names match the fields of the
application's sensor config section, so a caller can pass ``**options_from(section)``.
User lists may be given as sequences or as comma-separated text.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from sensors.accounting import AccountingReader
from sensors.accounting_control import AccountingSession
from sensors.capacity import ProcCapacitySource
from sensors.clock import Clock
from sensors.cpu import ProcStatSource
from sensors.measurement import HostSensor, Measurement
from sensors.processes import ProcfsProcessSource, RecentSnapshot, build_filter
from sensors.running import MIN_CORE_SHARE, RunningSampler, read_run_queue_length, user_name
from sensors.templates import TemplateBook, TemplateFeeder

LOCAL_SENSOR_OPTIONS = (
    "accounting", "accounting_path", "accounting_existing", "accounting_candidates",
    "accounting_max_bytes", "users_allow", "users_deny", "remote_users", "remote_cgroup",
    "remote_marker",
)


def options_from(settings: object) -> dict[str, Any]:
    """The :data:`LOCAL_SENSOR_OPTIONS` attributes of a settings object, as keywords."""
    return {name: getattr(settings, name) for name in LOCAL_SENSOR_OPTIONS}


def split_list(value: str | Iterable[str | int]) -> tuple[str, ...]:
    """``"a, b"`` or ``["a", "b"]`` -> ("a", "b"); empty entries dropped."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(text for item in items if (text := str(item).strip()))


class LocalSensor:
    """A HostSensor of this machine plus the accounting session it reads; a context manager.

    Leaving the context switches accounting off again if (and only if) this sensor switched
    it on and it still writes to the sensor's file.
    """

    def __init__(self, *, clock: Clock, exclude_pids: Iterable[int], proc_root: str,
                 accounting: str, accounting_path: str, accounting_existing: str,
                 accounting_candidates: str | Sequence[str], accounting_max_bytes: int,
                 users_allow: str | Sequence[str | int], users_deny: str | Sequence[str | int],
                 remote_users: str | Sequence[str | int], remote_cgroup: str,
                 remote_marker: str, remove_accounting_file: bool = False) -> None:
        self.process_filter = build_filter(
            users_allow=split_list(users_allow), users_deny=split_list(users_deny),
            remote_users=split_list(remote_users), remote_cgroup=remote_cgroup,
            remote_marker=remote_marker, exclude_pids=exclude_pids)
        self.processes = ProcfsProcessSource(proc_root)
        # the capacity series and the running-jobs snapshot, taken together, share one scan
        self._stream_processes = RecentSnapshot(self.processes, 1.0, clock.monotonic)
        self.cpu = ProcStatSource(proc_root)
        self.clock = clock
        self.session = AccountingSession(
            accounting, own_path=accounting_path, candidates=split_list(accounting_candidates),
            existing=accounting_existing, max_bytes=accounting_max_bytes,
            remove_own_file=remove_accounting_file, proc_root=proc_root)
        self.sensor: HostSensor | None = None
        self._readers: list[AccountingReader] = []

    def __enter__(self) -> LocalSensor:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> HostSensor:
        try:
            self.session.open()
        except BaseException:
            self.session.close()  # never leave accounting switched on behind a failure
            raise
        flags = self.session.flags
        if self.session.reader is None and self.session.mode != "off":
            flags += ("accounting_unavailable",)
        self.sensor = HostSensor(processes=self.processes, cpu=self.cpu,
                                 accounting=self.session.reader, clock=self.clock,
                                 process_filter=self.process_filter, accounting_flags=flags)
        return self.sensor

    def capacity_source(self) -> ProcCapacitySource:
        """The capacity source of this machine, with the sensor's filter (remote tasks) and,
        when accounting is on (open the sensor first), a reader of its own of the accounting
        file: remote tasks that exit between samples are credited from their records."""
        reader = self.session.reader
        own = None if reader is None else reader.independent_reader()
        if own is not None:
            self._readers.append(own)
        return ProcCapacitySource(self._stream_processes, self.process_filter, self.clock,
                                  self.processes.proc_root,
                                  ticks_per_second=self.processes.ticks_per_second,
                                  accounting=own)

    def running_sampler(self, *, max_jobs: int, min_core_share: float = MIN_CORE_SHARE,
                        hasher: Callable[[str], str] | None = None) -> RunningSampler:
        """Running-jobs snapshots of this machine, with the sensor's filter."""
        proc_root = self.processes.proc_root
        return RunningSampler(self._stream_processes, self.process_filter, self.clock,
                              lambda: read_run_queue_length(proc_root), max_jobs=max_jobs,
                              min_core_share=min_core_share, hasher=hasher)

    def template_feeder(self, book: TemplateBook, *,
                        hasher: Callable[[str], str] | None = None,
                        excluded_pids: Callable[[], Collection[int]] = frozenset
                        ) -> TemplateFeeder | None:
        """A feeder reading accounting independently of the measurements (None without
        accounting; open the sensor first). ``excluded_pids``: e.g. a capacity source's."""
        reader = self.session.reader
        if reader is None:
            return None
        return TemplateFeeder(reader.independent_reader(), book, self.process_filter,
                              name_of_uid=user_name, hasher=hasher, excluded_pids=excluded_pids)

    def measure(self, interval_seconds: float) -> Measurement:
        if self.sensor is None:
            self.open()
        assert self.sensor is not None
        return self.sensor.measure(interval_seconds)

    def close(self) -> None:
        for reader in self._readers:
            reader.close()
        self._readers.clear()
        self.session.close()
        self.sensor = None
