"""Demand templates: decayed, mergeable histograms of local jobs' CPU demand.

After Smith, Taylor and Foster's run-time templates: jobs are grouped by (user, command), by
user and pooled, and each group keeps a histogram of CPU demand in CPU seconds. Bins are
fixed and log-spaced (:data:`BINS_PER_DECADE` per decade from :data:`LOW_SECONDS` to
:data:`HIGH_SECONDS`, plus an underflow bin from 0 and an overflow bin to infinity), so
histograms from any host or time merge by adding counts; :func:`bin_edges_seconds` gives the
edges the scheduler receives with the counts.

Old behaviour fades: a job seen at time t weighs 2 ** (-(T - t) / half_life) at time T.
Every histogram carries the time ``as_of_epoch`` its weights refer to, and decay is computed
from timestamps only, so the agent and the manager, applying it separately, agree. The
weighted sum and sum of squares of the demands are kept exactly beside the bins.

A :class:`TemplateBook` fed by :class:`TemplateFeeder` from an accounting source of its own
hands out incremental updates (:meth:`TemplateBook.take_updates`) that a manager-side book
folds in with :meth:`TemplateBook.merge_update`. The number of (user, command) templates and
of user templates is bounded (``max_keys`` each): the least recently updated is dropped;
its jobs stay counted in the wider user and pooled templates.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from typing import NamedTuple

from sensors.accounting import AccountingSource, AcctRecord
from sensors.errors import InvalidArgumentError
from sensors.processes import ProcessFilter

BINS_PER_DECADE = 10
LOW_SECONDS = 0.01
HIGH_SECONDS = 1e7
_DECADES = round(math.log10(HIGH_SECONDS / LOW_SECONDS))
FINITE_BINS = BINS_PER_DECADE * _DECADES
BIN_COUNT = FINITE_BINS + 2  # underflow [0, LOW) first, overflow [HIGH, inf) last
SCOPES = ("command", "user", "pooled")
_EDGES = (0.0, LOW_SECONDS,
          *(LOW_SECONDS * 10 ** (i / BINS_PER_DECADE) for i in range(1, FINITE_BINS)),
          HIGH_SECONDS, math.inf)


_N, _SUM, _SUMSQ = -1, -2, -3
_NAME_CACHE_SIZE = 4096
_REBASE_HALF_LIVES = 256.0  # 2 ** 256 is far from a double's limit, and rebasing is rare


def bin_edges_seconds() -> tuple[float, ...]:
    """The ``BIN_COUNT + 1`` bin edges in CPU seconds: 0, LOW, ..., HIGH, inf."""
    return _EDGES


def bin_index(cpu_seconds: float) -> int:
    """The bin holding ``cpu_seconds`` (>= 0): bin i is [edges[i], edges[i+1])."""
    return min(bisect.bisect_right(_EDGES, cpu_seconds) - 1, BIN_COUNT - 1)


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"{name} must be a positive number, got {value!r}",
                                   field=name, value=value)
    return float(value)


class DemandHistogram:
    """Decayed counts per bin, with weighted n, sum and sum of squares, as of a time.

    Internally weights are kept forward-decayed against a reference time (a job at t weighs
    2 ** ((t - ref) / half_life)), so adding a job is O(1) and reading converts to
    ``as_of_epoch``; the reference moves forward before the weights could overflow.
    """

    __slots__ = ("_raw", "_ref", "as_of_epoch", "half_life_seconds")

    def __init__(self, half_life_seconds: float) -> None:
        self.half_life_seconds = _positive("half_life_seconds", half_life_seconds)
        self.as_of_epoch = -math.inf
        self._ref: float | None = None
        # bin -> weight, plus "n", "sum" and "sumsq" under negative keys
        self._raw: dict[int, float] = {}

    def _frame(self, epoch: float) -> float:
        """The weight, in the current frame, of something with weight 1 at ``epoch``."""
        if self._ref is None:
            self._ref = epoch
        elif (epoch - self._ref) / self.half_life_seconds > _REBASE_HALF_LIVES:
            factor = 2.0 ** ((self._ref - epoch) / self.half_life_seconds)
            self._raw = {key: value * factor for key, value in self._raw.items()}
            self._ref = epoch
        return 2.0 ** ((epoch - self._ref) / self.half_life_seconds)

    def _now(self) -> float:
        """Multiplier from the frame to weights as of ``as_of_epoch``."""
        if self._ref is None:
            return 0.0
        return 2.0 ** ((self._ref - self.as_of_epoch) / self.half_life_seconds)

    def decay_to(self, epoch: float) -> None:
        """Move the weights' reference time forward to ``epoch`` (never back)."""
        self.as_of_epoch = max(self.as_of_epoch, epoch)

    def add(self, cpu_seconds: float, epoch: float) -> None:
        """One job of ``cpu_seconds`` demand that ended at ``epoch``."""
        if not (math.isfinite(cpu_seconds) and cpu_seconds >= 0 and math.isfinite(epoch)):
            raise InvalidArgumentError(f"a job needs finite cpu_seconds >= 0 and a finite "
                                       f"time, got {cpu_seconds!r} at {epoch!r}",
                                       field="cpu_seconds", value=cpu_seconds)
        weight = self._frame(epoch)
        raw = self._raw
        index = bin_index(cpu_seconds)
        raw[index] = raw.get(index, 0.0) + weight
        raw[_N] = raw.get(_N, 0.0) + weight
        raw[_SUM] = raw.get(_SUM, 0.0) + weight * cpu_seconds
        raw[_SUMSQ] = raw.get(_SUMSQ, 0.0) + weight * cpu_seconds * cpu_seconds
        self.as_of_epoch = max(self.as_of_epoch, epoch)

    def merge(self, counts: Iterable[tuple[int, float]], n: float, sum_seconds: float,
              sumsq_seconds: float, as_of_epoch: float) -> None:
        """Add another histogram's content (same bins and half-life), given as of its time."""
        if not math.isfinite(as_of_epoch):
            raise InvalidArgumentError(f"as_of_epoch must be finite, got {as_of_epoch!r}",
                                       field="as_of_epoch", value=as_of_epoch)
        checked = []
        for index, count in counts:
            if not (isinstance(index, int) and 0 <= index < BIN_COUNT and count >= 0):
                raise InvalidArgumentError(f"bad histogram bin ({index!r}, {count!r})",
                                           field="counts", value=(index, count))
            checked.append((index, count))
        weight = self._frame(as_of_epoch)
        raw = self._raw
        for index, count in [*checked, (_N, n), (_SUM, sum_seconds), (_SUMSQ, sumsq_seconds)]:
            raw[index] = raw.get(index, 0.0) + count * weight
        self.as_of_epoch = max(self.as_of_epoch, as_of_epoch)

    @property
    def n(self) -> float:
        """Weighted number of jobs as of ``as_of_epoch``."""
        return self._raw.get(_N, 0.0) * self._now()

    @property
    def sum_seconds(self) -> float:
        return self._raw.get(_SUM, 0.0) * self._now()

    @property
    def sumsq_seconds(self) -> float:
        return self._raw.get(_SUMSQ, 0.0) * self._now()

    def sparse_counts(self) -> tuple[tuple[int, float], ...]:
        """(bin, weight as of ``as_of_epoch``) for the bins holding any job, in bin order."""
        factor = self._now()
        return tuple((i, c * factor) for i, c in sorted(self._raw.items()) if i >= 0)

    def dense_counts(self) -> list[float]:
        """All ``BIN_COUNT`` counts in bin order (pairs with :func:`bin_edges_seconds`)."""
        dense = [0.0] * BIN_COUNT
        for index, count in self.sparse_counts():
            dense[index] = count
        return dense

    @property
    def mean_seconds(self) -> float | None:
        n = self._raw.get(_N, 0.0)
        return self._raw.get(_SUM, 0.0) / n if n > 0 else None

    @property
    def variance_seconds2(self) -> float | None:
        n = self._raw.get(_N, 0.0)
        if not n > 0:
            return None
        mean = self._raw.get(_SUM, 0.0) / n
        return max(self._raw.get(_SUMSQ, 0.0) / n - mean * mean, 0.0)


class TemplateUpdate(NamedTuple):
    """One template's content since the last shipment (weights as of ``as_of_epoch``).

    ``scope``: "command" (user and command), "user" (command ""), "pooled" (both "").
    """

    scope: str
    user: str
    command: str
    counts: tuple[tuple[int, float], ...]
    n: float
    sum_seconds: float
    sumsq_seconds: float
    as_of_epoch: float


class TemplateBook:
    """Histograms per (user, command), per user and pooled, with bounded keys (see module)."""

    def __init__(self, half_life_seconds: float, *, max_keys: int = 2000) -> None:
        self.half_life_seconds = _positive("half_life_seconds", half_life_seconds)
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise InvalidArgumentError(f"max_keys must be a positive integer, got {max_keys!r}",
                                       field="max_keys", value=max_keys)
        self.max_keys = max_keys
        self.evicted = 0
        self._commands: OrderedDict[tuple[str, str], DemandHistogram] = OrderedDict()
        self._users: OrderedDict[str, DemandHistogram] = OrderedDict()
        self._pooled: DemandHistogram | None = None

    def __len__(self) -> int:
        return len(self._commands) + len(self._users) + (self._pooled is not None)

    def _get(self, scope: str, user: str, command: str) -> DemandHistogram:
        if scope == "pooled":
            if self._pooled is None:
                self._pooled = DemandHistogram(self.half_life_seconds)
            return self._pooled
        table, key = ((self._commands, (user, command)) if scope == "command"
                      else (self._users, user))
        histogram = table.get(key)
        if histogram is None:
            histogram = table[key] = DemandHistogram(self.half_life_seconds)
            if len(table) > self.max_keys:
                table.popitem(last=False)
                self.evicted += 1
        else:
            table.move_to_end(key)
        return histogram

    def add(self, user: str, command: str, cpu_seconds: float, epoch: float) -> None:
        """A finished job: counted in its command, user and pooled templates."""
        for scope in SCOPES:
            self._get(scope, user, command).add(cpu_seconds, epoch)

    def histogram(self, scope: str, user: str = "", command: str = "") -> DemandHistogram | None:
        """A template, or None if the book does not hold it."""
        if scope == "pooled":
            return self._pooled
        if scope == "command":
            return self._commands.get((user, command))
        if scope == "user":
            return self._users.get(user)
        raise InvalidArgumentError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}",
                                   field="scope", value=scope)

    def updates(self) -> list[TemplateUpdate]:
        """Every template in the book as updates (pooled, users, then commands)."""
        entries: list[tuple[str, str, str, DemandHistogram]] = []
        if self._pooled is not None:
            entries.append(("pooled", "", "", self._pooled))
        entries += [("user", user, "", h) for user, h in self._users.items()]
        entries += [("command", user, command, h)
                    for (user, command), h in self._commands.items()]
        return [TemplateUpdate(scope, user, command, h.sparse_counts(), h.n, h.sum_seconds,
                               h.sumsq_seconds, h.as_of_epoch)
                for scope, user, command, h in entries]

    def take_updates(self) -> list[TemplateUpdate]:
        """What was added since the last call, and forget it (the agent side)."""
        taken = self.updates()
        self._commands.clear()
        self._users.clear()
        self._pooled = None
        return taken

    def merge_update(self, update: TemplateUpdate | Iterable) -> None:
        """Fold an update (from :meth:`take_updates`, possibly via the wire) into the book."""
        scope, user, command, counts, n, total, squares, as_of = tuple(update)
        if scope not in SCOPES:
            raise InvalidArgumentError(f"scope must be one of {', '.join(SCOPES)}, got "
                                       f"{scope!r}", field="scope", value=scope)
        self._get(scope, str(user), str(command)).merge(
            [(int(i), float(c)) for i, c in counts], float(n), float(total), float(squares),
            float(as_of))


class TemplateFeeder:
    """Feeds a TemplateBook from an accounting source of its own (every finished job).

    Give it a source no one else reads (a second AccountingReader on the same file, or
    ``SimulatedHost.open_accounting_cursor()``). Records are kept if their user counts as
    local load and neither they nor their parent are among ``excluded_pids()`` (the agent,
    remote tasks and their children alive at the last classification; a remote task's
    child that outlived its parent cannot be recognised).
    """

    def __init__(self, source: AccountingSource, book: TemplateBook,
                 process_filter: ProcessFilter, *,
                 name_of_uid: Callable[[int], str],
                 hasher: Callable[[str], str] | None = None,
                 excluded_pids: Callable[[], Collection[int]] = frozenset) -> None:
        self.source = source
        self.book = book
        self.filter = process_filter
        self.name_of_uid = name_of_uid
        self.hasher = hasher
        self.excluded_pids = excluded_pids
        self.records_read = 0
        self.records_lost = False
        # uid -> name and (user, command) -> hashed names: password lookups and HMACs cost
        # more than the histogram update, and a host has few distinct ones.
        self._names: dict[tuple[int, str], tuple[str, str]] = {}

    def poll(self) -> int:
        """Read the new records into the book; returns how many were added."""
        batch = self.source.read_new()
        self.records_lost = self.records_lost or batch.truncated or batch.rotated
        self.records_read += len(batch.records)
        excluded = self.excluded_pids()
        added = 0
        for record in batch.records:
            if self._counts(record, excluded):
                user, command = self._identity(record.uid, record.command)
                self.book.add(user, command, record.cpu_seconds, record.end_time)
                added += 1
        return added

    def _identity(self, uid: int, command: str) -> tuple[str, str]:
        key = (uid, command)
        found = self._names.get(key)
        if found is None:
            if len(self._names) >= _NAME_CACHE_SIZE:
                self._names.clear()
            user = self.name_of_uid(uid)
            found = ((user, command) if self.hasher is None
                     else (self.hasher(user), self.hasher(command)))
            self._names[key] = found
        return found

    def _counts(self, record: AcctRecord, excluded: Collection[int]) -> bool:
        if record.pid in self.filter.exclude_pids or record.ppid in self.filter.exclude_pids:
            return False
        if record.pid in excluded or record.ppid in excluded:
            return False
        return self.filter.user_counts(record.uid)
