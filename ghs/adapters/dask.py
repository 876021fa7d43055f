"""Run a divisible job on a Dask cluster as ghs plans it, and follow it.

``run_divisible(client, func, items, work_per_item=..., manager=... | hosts_file=...)`` maps the
Dask workers to ghs hosts, asks for a plan over them, gives each chosen host a block of whole
items (``Plan.units``), and feeds each host's items only to that host's workers. Items are
handed to a host only as its worker threads free up, so an item is either running (or done)
or still held here, and re-planning never risks running one twice. When a host falls behind
its own predicted p90 (paced by the fraction of its items done) while another keeps pace, its
speed is corrected by the pace observed and every item not yet started is re-planned (the
slow host keeps only the share its observed speed earns); a host that loses its workers
leaves the plan, and its items go to the others. Results come back in item order.

Needs the ``dask`` extra (``pip install ghs[dask]``).
"""

from __future__ import annotations

import asyncio
import math
import queue
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from typing import Any

try:
    from distributed.scheduler import KilledWorker
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the Dask adapter needs dask.distributed: pip install 'ghs[dask]'"
                      ) from exc

from ghs.adapters.dask_workers import HostWorkers, map_workers
from ghs.adapters.errors import AdapterError
from ghs.adapters.planner import PlanSource, host_p90_seconds
from ghs.adapters.progress import LOG, HostProgress, Reporter, RunProgress, reporter_for
from ghs.adapters.tracking import RunTracker
from ghs.config import Config, load_config
from scheduler import Plan

# why an item that finished runs again: Dask keeps a result in its worker's memory until
# collected, so a worker killed in between takes it along (the item's side effects happen twice)
RESULT_LOST = "result lost with its worker"

RESULT_TIMEOUT_SECONDS = 30.0
"""Longest wait for a finished item's result to reach the client."""
# times a single item may be lost with its worker before the run gives up on it
MAX_ATTEMPTS = 4


@dataclass
class _Host:
    workers: HostWorkers
    queue: deque = field(default_factory=deque)
    in_flight: set = field(default_factory=set)
    done: int = 0
    state: str = "running"
    segment_start: float = 0.0
    segment_done: int = 0
    segment_total: int = 0
    p90_seconds: float = math.inf


@dataclass(frozen=True)
class RunEvent:
    """Something the run did: "plan", "slow" (host behind its p90 pace: its speed is
    corrected and the items not started are re-planned), "lost" (no workers left),
    "requeued" (items of a vanished worker put back); ``items`` is how many were waiting."""

    elapsed_seconds: float
    kind: str
    host: str | None
    items: int
    detail: str = ""


class DivisibleRun:
    """One run of ``func`` over ``items`` on a Dask ``client``; ``run()`` returns the results.

    ``work_per_item``: reference-CPU-seconds one item needs (seconds on a dedicated tau=1
    core). Plans come from ``manager`` (endpoint or ``ghs.Client``) or ``hosts_file`` (path or
    ``HostList``); ``method`` is the machine-set selection. ``worker_hosts`` maps worker
    addresses or names to ghs hosts (default: the ``ghs_host:NAME`` resource, else the
    worker's host name). ``progress``: a callable receiving ``RunProgress`` snapshots, False
    for none, None for a rich bar on a terminal or log lines otherwise.

    After ``run()``: ``plan`` (the first plan), ``plans`` (every plan made), ``events``,
    ``host_of_item`` (the host each item finished on), ``speed_factors`` (observed over
    predicted pace of the hosts found behind), ``elapsed_seconds`` and ``tracker`` (its
    completion ``reports`` to the manager and ``last_eta``).
    """

    def __init__(self, client: Any, func: Callable[[Any], Any], items: Iterable[Any], *,
                 work_per_item: float, manager: Any = None, hosts_file: Any = None,
                 method: str | None = None, worker_hosts: Mapping[str, str] | None = None,
                 progress: Reporter | bool | None = None, config: Config | None = None,
                 check_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not callable(func):
            raise AdapterError(f"func must be callable, got {type(func).__name__}",
                               field="func", value=func)
        if (isinstance(work_per_item, bool) or not isinstance(work_per_item, (int, float))
                or not math.isfinite(work_per_item) or work_per_item <= 0):
            raise AdapterError(f"work_per_item must be a finite number of reference-CPU-"
                               f"seconds > 0, got {work_per_item!r}", field="work_per_item",
                               value=work_per_item)
        self.config = config or load_config()
        check = self.config.adapters.check_seconds if check_seconds is None else check_seconds
        if not (isinstance(check, (int, float)) and 0 < check < math.inf):
            raise AdapterError(f"check_seconds must be > 0, got {check!r}",
                               field="check_seconds", value=check)
        self.client = client
        self.func = func
        self.items = list(items)
        self.work_per_item = float(work_per_item)
        self.check_seconds = float(check)
        self.clock = clock
        self._source_args = {"manager": manager, "hosts_file": hosts_file, "method": method}
        if (manager is None) == (hosts_file is None):
            raise AdapterError("give exactly one of manager= (endpoint or ghs.Client) and "
                               "hosts_file= (path or HostList)", field="manager",
                               value=manager)
        self._worker_hosts = worker_hosts
        self._progress = progress
        self.plan: Plan | None = None
        self.plans: list[Plan] = []
        self.events: list[RunEvent] = []
        self.host_of_item: list[str | None] = [None] * len(self.items)
        self.elapsed_seconds = 0.0
        self._results: list[Any] = [None] * len(self.items)
        self._finished = [False] * len(self.items)
        self._attempts = [0] * len(self.items)
        self._done_count = 0
        self._hostnames: dict[str, str] = {}
        self._reporter: Reporter | None = None
        self._hosts: dict[str, _Host] = {}
        self._plan_hosts: dict[str, Any] = {}
        self.speed_factors: dict[str, float] = {}
        self._futures: dict[str, tuple[Any, int, str, tuple[str, ...]]] = {}
        self._done_queue: queue.Queue = queue.Queue()
        self._run_id = uuid.uuid4().hex[:12]
        self._start = 0.0

    # -- the run -------------------------------------------------------------------------
    def run(self) -> list[Any]:
        """Run every item once; the results in item order (an item's exception is raised)."""
        if not self.items:
            return []
        self._source = PlanSource(self.config, **self._source_args)
        self.tracker = RunTracker(self._source, work_per_item=self.work_per_item,
                                  eta_seconds=self.config.adapters.eta_seconds,
                                  report=self.config.adapters.report_completions,
                                  clock=self.clock)
        close_reporter = _nothing
        try:
            self._reporter, close_reporter = reporter_for(self._progress)
            self._start = self.clock()
            self._hosts = {name: _Host(workers) for name, workers in
                           self._usable(self._map_workers()).items()}
            self._assign(list(range(len(self.items))), "start")
            last_check = self.clock()
            while self._done_count < len(self.items):
                self._fill()
                self._wait_and_collect()
                if self.clock() - last_check >= self.check_seconds:
                    last_check = self.clock()
                    self._check_workers()
                    self._check_stragglers()
            self.elapsed_seconds = self.clock() - self._start
            self._report("end")
            return list(self._results)
        finally:
            leftover = [entry[0] for entry in self._futures.values()]
            self._futures.clear()
            if leftover:
                self.client.cancel(leftover)
            self._source.close()
            close_reporter()

    def _map_workers(self) -> dict[str, HostWorkers]:
        return map_workers(self.client, self._worker_hosts, self._hostnames)

    def _usable(self, hosts: dict[str, HostWorkers]) -> dict[str, HostWorkers]:
        known = self._source.known_hosts()
        unknown = sorted(set(hosts) - known)
        if unknown:
            LOG.warning("ghs: no usable estimates for host(s) %s: their workers get no items",
                        ", ".join(unknown))
        usable = {name: workers for name, workers in hosts.items() if name in known}
        if not usable:
            raise AdapterError(f"none of the workers' hosts ({', '.join(sorted(hosts))}) is "
                               "known to ghs with usable estimates", field="hosts",
                               value=sorted(hosts))
        return usable

    def _now(self) -> float:
        return self.clock() - self._start

    def _assign(self, indices: list[int], reason: str) -> None:
        """Plan ``indices`` (items not started) over the running hosts and queue them."""
        names = [name for name, host in self._hosts.items() if host.state == "running"]
        plan = self._source.plan(len(indices) * self.work_per_item, names,
                                 self.speed_factors)
        units = plan.units(len(indices))
        self._plan_hosts.update({host.name: host for host in plan.hosts})
        self.plan = self.plan or plan
        self.plans.append(plan)
        ordered = sorted(indices)
        position = 0
        for host in self._hosts.values():
            host.queue.clear()
        for name, count in units.items():
            self._hosts[name].queue.extend(ordered[position:position + count])
            position += count
        totals = {name: len(host.queue) + len(host.in_flight)
                  for name, host in self._hosts.items()}
        self.tracker.planned(self._source.last_prediction_id, totals)
        p90 = host_p90_seconds(plan, totals, self.work_per_item)
        now = self._now()
        for name, host in self._hosts.items():
            host.segment_start, host.segment_done = now, 0
            host.segment_total, host.p90_seconds = totals[name], p90.get(name, math.inf)
        detail = ", ".join(f"{name}={count}" for name, count in units.items())
        self.events.append(RunEvent(now, "plan", None, len(indices), f"{reason}: {detail}"))
        self._report("start" if reason == "start" else "replan")

    def _fill(self) -> None:
        for name, host in self._hosts.items():
            if host.state == "lost":
                continue
            while host.queue and len(host.in_flight) < host.workers.threads:
                self._submit(name, host, host.queue.popleft())

    def _submit(self, name: str, host: _Host, index: int) -> None:
        self._attempts[index] += 1
        key = f"ghs-{self._run_id}-{index}-{self._attempts[index]}"
        addresses = host.workers.addresses
        future = self.client.submit(self.func, self.items[index], key=key,
                                    workers=list(addresses), allow_other_workers=False,
                                    pure=False)
        self._futures[key] = (future, index, name, addresses)
        host.in_flight.add(key)
        future.add_done_callback(self._done_queue.put)

    def _wait_and_collect(self) -> None:
        try:
            future = self._done_queue.get(timeout=self.check_seconds)
        except queue.Empty:
            return
        while True:
            self._collect(future)
            try:
                future = self._done_queue.get_nowait()
            except queue.Empty:
                return

    def _collect(self, future: Any) -> None:
        entry = self._futures.pop(future.key, None)
        if entry is None:  # cancelled by this run
            return
        _, index, name, _ = entry
        host = self._hosts[name]
        host.in_flight.discard(future.key)
        if future.status == "finished":
            if self._finished[index]:
                raise AdapterError(f"item {index} finished twice", field="items", value=index)
            try:
                # a worker killed between finishing and handing over its result takes the
                # result with it, and a future pinned to that worker never completes again
                value = future.result(timeout=RESULT_TIMEOUT_SECONDS)
            except (TimeoutError, asyncio.TimeoutError, CancelledError):
                self._requeue(name, [index], RESULT_LOST)
                return
            self._results[index] = value
            self._finished[index] = True
            self._done_count += 1
            self.host_of_item[index] = name
            host.done += 1
            host.segment_done += 1
            if not (host.queue or host.in_flight):
                self.tracker.host_finished(name)
            self._report("item")
            return
        error = future.exception() if future.status == "error" else None
        if error is not None and not isinstance(error, KilledWorker):
            raise error
        # its worker died (or the scheduler dropped it): the item never finished
        self._requeue(name, [index], f"future {future.status}")

    def _requeue(self, name: str, indices: list[int], detail: str) -> None:
        for index in indices:
            if self._attempts[index] >= MAX_ATTEMPTS:
                raise AdapterError(f"item {index} was lost with its worker "
                                   f"{self._attempts[index]} times", field="items",
                                   value=index)
        host = self._hosts[name]
        self.events.append(RunEvent(self._now(), "requeued", name, len(indices), detail))
        if host.state == "lost":
            self._replan(indices, f"{name} lost")
        else:
            host.queue.extendleft(sorted(indices, reverse=True))

    # -- following the run ---------------------------------------------------------------
    def _check_workers(self) -> None:
        current = self._map_workers()
        for name, host in self._hosts.items():
            if host.state == "lost":
                continue
            now_workers = current.get(name)
            if now_workers is None:
                host.state = "lost"
                self.events.append(RunEvent(self._now(), "lost", name, len(host.queue),
                                            "no workers left"))
                host.workers = HostWorkers(name, (), 0)
            elif now_workers.addresses != host.workers.addresses:
                host.workers = now_workers
            else:
                continue
            live = set(host.workers.addresses)
            orphans = [key for key in host.in_flight
                       if not live.intersection(self._futures[key][3])]
            stranded = [self._futures[key][1] for key in orphans]
            if orphans:
                self.client.cancel([self._futures.pop(key)[0] for key in orphans])
                host.in_flight.difference_update(orphans)
            if host.state == "lost":
                waiting = list(host.queue)
                host.queue.clear()
                if stranded or waiting:
                    self._replan(stranded + waiting, f"{name} lost")
            elif stranded:
                self._requeue(name, stranded, "worker vanished")

    def _check_stragglers(self) -> None:
        now = self._now()
        behind = {name: self._behind(host, now) for name, host in self._hosts.items()
                  if host.state == "running"}
        for name, allowed in behind.items():
            host = self._hosts[name]
            # when every host lags, the plan's model is off for all of them and moving items
            # would only idle the one that loses them
            if allowed is None or not host.queue or all(
                    other is not None for n, other in behind.items() if n != name):
                continue
            factor = self._observed_speed(name, host, now)
            self.speed_factors[name] = self.speed_factors.get(name, 1.0) * factor
            self.events.append(RunEvent(now, "slow", name, len(host.queue),
                                        f"{host.segment_done}/{host.segment_total} done after "
                                        f"{now - host.segment_start:.1f} s, p90 pace allows "
                                        f"{allowed:.1f} s; speed x{factor:.2f}"))
            self._replan([], f"{name} behind its p90")
            return

    def _observed_speed(self, name: str, host: _Host, now: float) -> float:
        """Observed over predicted item pace of a host in its current segment (<= 1)."""
        model = self._plan_hosts[name]
        predicted = self.work_per_item / (model.tau * (1.0 - model.rho))
        elapsed = now - host.segment_start
        # no item done yet: each running one has taken at least the elapsed time
        observed = elapsed * host.workers.threads / max(host.segment_done, 1)
        return min(1.0, predicted / observed) if observed > 0 else 1.0

    @staticmethod
    def _behind(host: _Host, now: float) -> float | None:
        """The time the host's p90 pace allowed for its progress, if it has overrun it."""
        if host.segment_total == 0 or not (host.queue or host.in_flight):
            return None
        # one item per thread may be running, and one more absorbs the items' own spread
        # (ghs models the owners' load, not how the items' sizes vary)
        grace = host.workers.threads + 1
        paced = min(1.0, (host.segment_done + grace) / host.segment_total)
        allowed = host.p90_seconds * paced
        return allowed if now - host.segment_start > allowed else None

    def _replan(self, indices: list[int], reason: str) -> None:
        """Pool ``indices`` with every host's not-started items and plan them again."""
        pooled = list(indices)
        for host in self._hosts.values():
            pooled.extend(host.queue)
            host.queue.clear()
        if not pooled:
            return
        if not any(host.state == "running" for host in self._hosts.values()):
            raise AdapterError(f"no hosts left to run {len(pooled)} item(s) ({reason})",
                               field="hosts", value=sorted(self._hosts))
        self._assign(pooled, reason)

    def _report(self, event: str) -> None:
        if self._reporter is None or self.plan is None:
            return
        hosts = tuple(HostProgress(name, host.done,
                                   host.done + len(host.in_flight) + len(host.queue),
                                   len(host.in_flight), host.state)
                      for name, host in self._hosts.items())
        eta = self.tracker.eta({name: (host.segment_done, host.segment_total)
                                for name, host in self._hosts.items()},
                               force=event in ("start", "replan"))
        self._reporter(RunProgress(event, self._now(), hosts, self.plans[-1],
                                   len(self.plans) - 1, self._done_count, len(self.items), eta))


def _nothing() -> None:
    pass


def run_divisible(client: Any, func: Callable[[Any], Any], items: Iterable[Any], *,
                  work_per_item: float, manager: Any = None, hosts_file: Any = None,
                  method: str | None = None, worker_hosts: Mapping[str, str] | None = None,
                  progress: Reporter | bool | None = None, config: Config | None = None,
                  check_seconds: float | None = None) -> list[Any]:
    """``func(item)`` for every item on the Dask ``client``'s workers, split as ghs plans it.

    ``work_per_item``: reference-CPU-seconds per item. See ``DivisibleRun`` for the rest;
    use that class directly to keep the plan, the events and where each item ran.
    """
    return DivisibleRun(client, func, items, work_per_item=work_per_item, manager=manager,
                        hosts_file=hosts_file, method=method, worker_hosts=worker_hosts,
                        progress=progress, config=config, check_seconds=check_seconds).run()
