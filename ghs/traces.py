"""Trace-driven workstations: real workload logs replayed as the local jobs of simulated hosts.

The mapping (also in the README, "Trace-driven workstations"):

- Standard Workload Format (SWF): ';' header lines, then 18 whitespace-separated numbers per job,
  -1 for unknown. Field 2 (submit time) becomes the job's arrival, unchanged, so the log's daily
  and weekly cycles and its bursts stay real. Field 4 (run time) becomes its CPU demand: a
  workstation's local job is one process, and the run time is what each of a parallel job's
  processes needed; field 5 (allocated processors) says how many machines the job held, which is
  not a property of one process, so it is ignored. When the run time is unknown, field 6 (average
  CPU time per processor) stands in; a job with neither, or without a submit time, is unusable.
  Field 12 (user id) decides the workstation; -1 (unknown) is treated as one more user.
- CSV: ``arrival_seconds,cpu_seconds[,user]`` rows (an optional header row, '#' comments), for
  replaying one's own accounting logs.
- Workstations: users, busiest (most jobs) first and ties by id, are dealt round-robin to the
  workstations, so every workstation's jobs come from its own users (disjoint shares) and the
  heaviest submitters are spread out.
- Utilisation: over a window [start, end] (seconds of the log's clock; default: first to last
  submit), each workstation's demands are multiplied by one factor so their sum over the window
  is exactly utilisation x (end - start). Arrival times are never scaled. With a cap, demands are
  scaled then capped, and the factor is solved so the capped sum still hits the utilisation.

Malformed lines (wrong field count, non-numbers) are skipped and counted; a file that cannot be
read or holds no usable job raises :class:`~ghs.errors.TraceError`.
"""

from __future__ import annotations

import gzip
import io
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ghs.errors import TraceError
from scheduler import Host
from scheduler.workload import Trace

SWF_FIELD_COUNT = 18
_SUBMIT, _RUN, _AVG_CPU, _USER, _EXECUTABLE = 1, 3, 5, 11, 13
UNKNOWN_USER = -1
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, eq=False)
class JobLog:
    """The usable jobs of a workload log, sorted by arrival (stable).

    submit_seconds: arrival times on the log's clock (seconds); cpu_seconds: CPU demand of each
    job (seconds, unscaled); user_ids: submitting user (-1 unknown). data_lines counts the
    non-header lines read; malformed_lines those skipped as unparsable; unusable_jobs the
    parsable ones lacking a submit time or a demand. header: the SWF '; Key: value' lines.
    """

    source: str
    submit_seconds: np.ndarray
    cpu_seconds: np.ndarray
    user_ids: np.ndarray
    data_lines: int
    malformed_lines: int
    unusable_jobs: int
    first_malformed_line: int | None = None
    header: dict[str, str] = field(default_factory=dict)
    executables: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    """SWF executable (application) number of each job, -1 unknown; empty for CSV logs."""

    def __len__(self) -> int:
        return int(self.submit_seconds.size)

    def summary(self) -> dict[str, float | int | str]:
        """Counts and demand statistics (seconds) of the log, JSON-ready."""
        span = float(self.submit_seconds[-1] - self.submit_seconds[0])
        mean = float(self.cpu_seconds.mean())
        return {"source": self.source, "jobs": len(self), "users": int(np.unique(
            self.user_ids).size), "span_days": span / 86400.0, "mean_cpu_seconds": mean,
            "cpu_cov": float(self.cpu_seconds.std() / mean) if mean > 0 else 0.0,
            "malformed_lines": self.malformed_lines, "unusable_jobs": self.unusable_jobs}


@dataclass(frozen=True, eq=False)
class Workstations:
    """Local job streams of simulated workstations cut from one log.

    traces: one :class:`scheduler.workload.Trace` per workstation (arrivals on the log's clock,
    scaled demands); users: the log's users behind each; scale: the factor applied to each
    workstation's raw demands; utilisation: each one's offered load over the window (scaled
    CPU seconds / window seconds); capped_jobs: demands cut to the cap, per workstation.
    """

    traces: tuple[Trace, ...]
    users: tuple[tuple[int, ...], ...]
    scale: np.ndarray
    utilisation: np.ndarray
    capped_jobs: np.ndarray
    start_seconds: float
    end_seconds: float
    job_indices: tuple[np.ndarray, ...] = ()
    """Each workstation's jobs as indices into the log (in arrival order)."""

    @property
    def duration_seconds(self) -> float:
        return self.end_seconds - self.start_seconds

    def hosts(self, tau: Sequence[float] | float = 1.0, prefix: str = "ws") -> list[Host]:
        """The model's view of each workstation over the window (see :func:`trace_host`)."""
        speeds = np.broadcast_to(np.asarray(tau, dtype=float), (len(self.traces),))
        return [trace_host(f"{prefix}{k:02d}", trace, self.duration_seconds, float(speed))
                for k, (trace, speed) in enumerate(zip(self.traces, speeds))]


def read_log(path: str | Path) -> JobLog:
    """Read an SWF log, or a CSV when the name ends in .csv or .csv.gz (either may be gzipped)."""
    name = Path(path).name.lower()
    return read_csv(path) if name.endswith((".csv", ".csv.gz")) else read_swf(path)


def read_swf(path: str | Path) -> JobLog:
    """Read a Standard Workload Format log (plain or gzip), skipping and counting bad lines."""
    source, text = _read_text(path)
    header: dict[str, str] = {}
    numbers, data = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            key, colon, value = stripped[1:].partition(":")
            if colon and key.strip() and " " not in key.strip():
                header[key.strip()] = value.strip()
            continue
        numbers.append(number)
        data.append(stripped)
    table, bad = _parse_rows(data, numbers)
    if table.shape[0] == 0:
        raise TraceError(_empty_message(source, "SWF", len(data), bad), field="path",
                         value=source)
    submit, run, average, users, executables = (
        table[:, i] for i in (_SUBMIT, _RUN, _AVG_CPU, _USER, _EXECUTABLE))
    cpu = np.where(run >= 0, run, average)
    usable = (submit >= 0) & (cpu >= 0)
    return _job_log(source, submit[usable], cpu[usable], users[usable], len(data), bad,
                    int((~usable).sum()), header, executables[usable])


def read_csv(path: str | Path) -> JobLog:
    """Read ``arrival_seconds,cpu_seconds[,user]`` rows (plain or gzip); one header row allowed.

    A row with another cell count, a non-number or a negative demand is malformed.
    """
    source, text = _read_text(path)
    rows, bad_lines, data_lines, seen = [], [], 0, False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        data_lines += 1
        cells = [cell.strip() for cell in stripped.split(",")]
        try:
            if len(cells) not in (2, 3):
                raise ValueError
            arrival, cpu = float(cells[0]), float(cells[1])
            user = int(cells[2]) if len(cells) == 3 and cells[2] else UNKNOWN_USER
            if not (math.isfinite(arrival) and math.isfinite(cpu)) or cpu < 0:
                raise ValueError
        except ValueError:
            if not seen and not rows and not bad_lines:  # a header row names the columns
                seen = True
                data_lines -= 1
                continue
            bad_lines.append(number)
            continue
        seen = True
        rows.append((arrival, cpu, user))
    if not rows:
        raise TraceError(_empty_message(source, "CSV", data_lines, bad_lines), field="path",
                         value=source)
    table = np.array(rows, dtype=float)
    return _job_log(source, table[:, 0], table[:, 1], table[:, 2], data_lines, bad_lines, 0, {})


def _read_text(path: str | Path) -> tuple[str, str]:
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw.startswith(_GZIP_MAGIC):
            raw = gzip.decompress(raw)
    except FileNotFoundError:
        raise TraceError(f"trace file {str(path)!r} does not exist", field="path",
                         value=str(path)) from None
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"cannot read trace file {str(path)!r}: {exc}", field="path",
                         value=str(path)) from None
    return path.name, raw.decode("utf-8", errors="replace")


def _parse_rows(data: list[str], numbers: list[int]) -> tuple[np.ndarray, list[int]]:
    """(rows x 18 table, line numbers of malformed lines); numpy's parser when all are good."""
    if not data:
        return np.empty((0, SWF_FIELD_COUNT)), []
    try:
        table = np.loadtxt(io.StringIO("\n".join(data)), dtype=float, ndmin=2)
        if table.shape[1] == SWF_FIELD_COUNT and np.isfinite(table).all():
            return table, []
    except ValueError:
        pass
    rows, bad = [], []
    for number, line in zip(numbers, data):
        cells = line.split()
        try:
            if len(cells) != SWF_FIELD_COUNT:
                raise ValueError
            row = [float(cell) for cell in cells]
            if not all(math.isfinite(value) for value in row):
                raise ValueError
        except ValueError:
            bad.append(number)
            continue
        rows.append(row)
    return np.array(rows, dtype=float).reshape(-1, SWF_FIELD_COUNT), bad


def _empty_message(source: str, kind: str, lines: int, bad: list[int]) -> str:
    if not lines:
        return f"trace file {source!r} holds no {kind} job lines"
    return (f"trace file {source!r}: none of its {lines} {kind} job lines is usable "
            f"({len(bad)} malformed, first at line {bad[0]})" if bad else
            f"trace file {source!r}: none of its {lines} {kind} jobs has a submit time and a "
            "run time")


def _job_log(source, submit, cpu, users, data_lines, bad, unusable, header,
             executables=None) -> JobLog:
    if submit.size == 0:
        raise TraceError(_empty_message(source, "SWF", data_lines, []), field="path",
                         value=source)
    order = np.argsort(submit, kind="stable")
    user_ids = np.where(users >= 0, users, UNKNOWN_USER).astype(np.int64)
    if executables is None:
        executables = np.full(submit.size, UNKNOWN_USER)
    executables = np.where(executables >= 0, executables, UNKNOWN_USER).astype(np.int64)
    return JobLog(source=source, submit_seconds=submit[order], cpu_seconds=cpu[order],
                  user_ids=user_ids[order], data_lines=data_lines, malformed_lines=len(bad),
                  unusable_jobs=unusable, first_malformed_line=bad[0] if bad else None,
                  header=header, executables=executables[order])


def assign_users(user_ids: np.ndarray, workstations: int) -> dict[int, int]:
    """Workstation of each user: busiest first (ties by id), dealt round-robin."""
    if isinstance(workstations, bool) or not isinstance(workstations, (int, np.integer)) \
            or workstations < 1:
        raise TraceError(f"workstations must be a whole number >= 1, got {workstations!r}",
                         field="workstations", value=workstations)
    users, counts = np.unique(np.asarray(user_ids, dtype=np.int64), return_counts=True)
    if workstations > users.size:
        raise TraceError(f"the log has {users.size} users, too few to give {workstations} "
                         "workstations disjoint shares; ask for fewer workstations",
                         field="workstations", value=workstations)
    order = np.lexsort((users, -counts))
    return {int(users[i]): rank % workstations for rank, i in enumerate(order)}


def workstation_traces(log: JobLog, workstations: int, utilisation: float | Sequence[float], *,
                       start_seconds: float | None = None, end_seconds: float | None = None,
                       cap_cpu_seconds: float | None = None) -> Workstations:
    """Cut ``log`` into ``workstations`` disjoint local job streams at the given utilisation.

    The window [start, end] (log clock, seconds) defaults to the first to the last submit.
    ``utilisation`` (one value, or one per workstation, each in (0, 1)) is the offered load
    over the window; ``cap_cpu_seconds`` bounds any one scaled demand.
    """
    if not isinstance(log, JobLog):
        raise TraceError(f"expected a JobLog, got {log!r}", field="log", value=log)
    if isinstance(workstations, bool) or not isinstance(workstations, (int, np.integer)) \
            or workstations < 1:
        raise TraceError(f"workstations must be a whole number >= 1, got {workstations!r}",
                         field="workstations", value=workstations)
    targets = _utilisations(utilisation, int(workstations))
    start = float(log.submit_seconds[0]) if start_seconds is None else float(start_seconds)
    end = float(log.submit_seconds[-1]) if end_seconds is None else float(end_seconds)
    if not (math.isfinite(start) and math.isfinite(end) and end > start):
        raise TraceError(f"the window [{start:g}, {end:g}] s must be finite and not empty",
                         field="end_seconds", value=end)
    if cap_cpu_seconds is not None and not (math.isfinite(cap_cpu_seconds)
                                            and cap_cpu_seconds > 0):
        raise TraceError(f"cap_cpu_seconds must be positive, got {cap_cpu_seconds!r}",
                         field="cap_cpu_seconds", value=cap_cpu_seconds)
    inside = (log.submit_seconds >= start) & (log.submit_seconds <= end)
    user_ids = log.user_ids[inside]
    if not inside.any():
        raise TraceError(f"{log.source}: no job arrives in the window [{start:g}, {end:g}] s",
                         field="start_seconds", value=start)
    owner_of = assign_users(user_ids, int(workstations))
    owner = np.array([owner_of[int(u)] for u in user_ids], dtype=np.int64)
    arrivals, demands = log.submit_seconds[inside], log.cpu_seconds[inside]
    positions = np.flatnonzero(inside)
    duration = end - start
    traces, users, scales, capped, indices = [], [], [], [], []
    for k, target in enumerate(targets):
        mine = owner == k
        indices.append(positions[mine])
        scale, scaled = _scale(demands[mine], target * duration, cap_cpu_seconds, k, log.source)
        traces.append(Trace(arrivals[mine], scaled))
        users.append(tuple(sorted(u for u, w in owner_of.items() if w == k)))
        scales.append(scale)
        capped.append(int(np.sum(scaled < demands[mine] * scale)))
    achieved = np.array([trace.cpu_seconds.sum() / duration for trace in traces])
    return Workstations(traces=tuple(traces), users=tuple(users), scale=np.array(scales),
                        utilisation=achieved, capped_jobs=np.array(capped),
                        start_seconds=start, end_seconds=end, job_indices=tuple(indices))


def _utilisations(utilisation: float | Sequence[float], count: int) -> np.ndarray:
    try:
        values = np.broadcast_to(np.asarray(utilisation, dtype=float), (count,)).copy()
    except (TypeError, ValueError):
        raise TraceError(f"utilisation must be one number or {count} numbers, got "
                         f"{utilisation!r}", field="utilisation", value=utilisation) from None
    if not (np.isfinite(values).all() and (values > 0).all() and (values < 1).all()):
        raise TraceError(f"every utilisation must be in (0, 1), got {utilisation!r}",
                         field="utilisation", value=utilisation)
    return values


def _scale(demands: np.ndarray, target_seconds: float, cap: float | None, k: int,
           source: str) -> tuple[float, np.ndarray]:
    """(s, min(s x demands, cap)) with the result summing to ``target_seconds``."""
    total = float(demands.sum())
    if total <= 0:
        raise TraceError(f"{source}: workstation {k} has no CPU demand in the window; use a "
                         "longer window or fewer workstations", field="workstations", value=k)
    if cap is None:
        scale = target_seconds / total
        return scale, demands * scale
    positive = np.sort(demands[demands > 0])[::-1]
    if target_seconds >= cap * positive.size:
        raise TraceError(f"{source}: workstation {k} cannot reach its utilisation with demands "
                         f"capped at {cap:g} s ({positive.size} jobs); raise the cap",
                         field="cap_cpu_seconds", value=cap)
    # With the k largest capped, the sum is k cap + s (sum of the rest); the capped set at the
    # solution is the first k whose s leaves job k uncapped.
    rest = np.cumsum(positive[::-1])[::-1]
    capped = np.arange(positive.size)
    scales = (target_seconds - capped * cap) / rest
    fits = scales * positive <= cap * (1 + 1e-12)
    scale = float(scales[int(np.argmax(fits))])
    return scale, np.minimum(demands * scale, cap)


def trace_host(name: str, trace: Trace, duration_seconds: float, tau: float = 1.0) -> Host:
    """Model parameters of one workstation's trace over a window of ``duration_seconds``.

    lam = jobs / duration (1/s), 1/mu = mean demand (s), sigma = demand std (s), rho = total
    demand / duration; one core.
    """
    if len(trace) == 0:
        raise TraceError(f"workstation {name!r} has no jobs to estimate parameters from",
                         field="trace", value=name)
    if not duration_seconds > 0:
        raise TraceError(f"duration_seconds must be positive, got {duration_seconds!r}",
                         field="duration_seconds", value=duration_seconds)
    cpu = trace.cpu_seconds
    mean = float(cpu.mean())
    if mean <= 0:
        raise TraceError(f"workstation {name!r}: every job has zero demand",
                         field="trace", value=name)
    return Host(name, lam=len(trace) / duration_seconds, mu=1.0 / mean, sigma=float(cpu.std()),
                rho=float(cpu.sum() / duration_seconds), tau=tau)


def busy_fraction(trace: Trace, end_seconds: object, window_seconds: float) -> np.ndarray:
    """Fraction of [end - window, end) a single core fed by ``trace`` spent on local jobs.

    What a utilisation measurement over that interval reads: unfinished work at the start,
    plus work arriving inside, minus unfinished work at the end, over the window.
    """
    if not isinstance(trace, Trace):
        raise TraceError(f"expected a Trace, got {trace!r}", field="trace", value=trace)
    if not (isinstance(window_seconds, (int, float)) and window_seconds > 0):
        raise TraceError(f"window_seconds must be positive, got {window_seconds!r}",
                         field="window_seconds", value=window_seconds)
    ends = np.asarray(end_seconds, dtype=float)
    starts = ends - window_seconds
    cumulative = np.concatenate([[0.0], np.cumsum(trace.cpu_seconds)])
    arrived = (cumulative[np.searchsorted(trace.arrival_seconds, ends, side="left")]
               - cumulative[np.searchsorted(trace.arrival_seconds, starts, side="left")])
    busy = trace.backlog_seconds(starts) + arrived - trace.backlog_seconds(ends)
    return np.clip(busy / window_seconds, 0.0, 1.0)
