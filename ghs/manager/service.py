"""The manager's ROUTER loop: agents' hellos, measurements and heartbeats; clients' queries.

The loop itself only decodes, stores and acknowledges; queries run on worker threads so an
exact selection over 20 hosts never holds up the agents. The measurement batches received in
one turn of the loop are committed together (one fsync) and acknowledged after that commit.
With an allow-list that binds keys to host ids, a message about a host its key may not report
is refused as ``host_not_allowed``. Workers hand finished replies back
through an inproc socket, since only the loop's thread may use the ROUTERs. Every message that
fails validation is answered with an error and counted by its code; an unexpected exception is
answered as ``internal`` and counted, and the loop goes on.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from ghs import __version__
from ghs.manager.counters import Counters
from ghs.manager.identity import HostBindings
from ghs.manager.queries import TRACKING_REQUESTS, QueryService
from ghs.manager.replies import reply_to
from ghs.manager.store import HostFacts, ManagerStore
from ghs.record import HostIdentity, stored_rows
from protocol import (
    DEFAULT_LIMITS,
    PROTOCOL_VERSION,
    Ack,
    Authenticator,
    BacktestRequest,
    ErrorReply,
    Heartbeat,
    Hello,
    HistoryRequest,
    KeyPair,
    Limits,
    MeasurementBatch,
    PingReply,
    PingRequest,
    PredictRequest,
    RecordBatch,
    ScheduleRequest,
    StatusRequest,
    bind_router,
    bound_endpoint,
    encode,
    recv_request,
    send_reply,
    seq_ranges_of,
)

LOG = logging.getLogger("ghs.manager")
CLIENT_TYPES = frozenset({"status", "predict", "schedule", "history", "ping", "backtest", "eta",
                          "report", "accuracy"})
AGENT_TYPES = frozenset({"hello", "measurements", "records", "heartbeat"}) | CLIENT_TYPES
_HOUR = 3600.0
_WAKE = "inproc://ghs-manager-replies-{}"


class Manager:
    """One manager: bind, then ``run(stop)`` until ``stop`` is set; ``close`` afterwards.

    ``agent_endpoint`` takes agents (and queries); ``client_endpoint``, if given, takes only
    queries. With ``server_keys`` both are CurveZMQ servers and, with ``allowed_keys``, accept
    only those clients. ``clock`` gives real epoch seconds.
    """

    def __init__(self, *, context: zmq.Context, store: ManagerStore, queries: QueryService,
                 agent_endpoint: str, client_endpoint: str | None = None,
                 limits: Limits = DEFAULT_LIMITS, server_keys: KeyPair | None = None,
                 allowed_keys: frozenset[bytes] | None = None, insecure: bool = False,
                 workers: int = 2, max_pending_queries: int = 256,
                 retention_seconds: float = 8 * 86400.0,
                 clock: Callable[[], float] = time.time,
                 host_bindings: HostBindings | None = None) -> None:
        self.context = context
        self.host_bindings = host_bindings
        self.started = clock()
        # (query type, seconds): a metrics hook, called on the worker thread that answered
        self.on_query: Callable[[str, float], None] | None = None
        self._due: list[tuple[zmq.Socket, tuple, MeasurementBatch]] = []
        self.store = store
        self.retention_seconds = retention_seconds
        self._pruned_hour: dict[str, float] = {}
        self.queries = queries
        self.limits = limits
        self.clock = clock
        self.counters = Counters()
        self.workers = workers
        self._pending: queue.Queue = queue.Queue(maxsize=max_pending_queries)
        self._authenticator: Authenticator | None = None
        self._sockets: list[tuple[zmq.Socket, frozenset[str]]] = []
        self._reply_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.endpoints: list[str] = []
        try:
            if server_keys is not None and allowed_keys is not None:
                self._authenticator = Authenticator(context, allowed_keys)
                self._authenticator.start()
            for endpoint, types in ((agent_endpoint, AGENT_TYPES),
                                    (client_endpoint, CLIENT_TYPES)):
                if endpoint is None:
                    continue
                socket = bind_router(context, endpoint, limits=limits, server_keys=server_keys,
                                     authenticator=self._authenticator, insecure=insecure)
                self._sockets.append((socket, types))
                self.endpoints.append(bound_endpoint(socket))
            wake = _WAKE.format(id(self))
            self._wake_pull = context.socket(zmq.PULL)
            self._wake_pull.linger = 0
            self._wake_pull.bind(wake)
            self._wake_push = context.socket(zmq.PUSH)
            self._wake_push.linger = 0
            self._wake_push.connect(wake)
        except BaseException:
            self.close()
            raise

    # -- the loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event, poll_ms: int = 100) -> None:
        """Serve until ``stop`` is set. Never raises on bad input."""
        for index in range(self.workers):
            thread = threading.Thread(target=self._work, args=(stop,), daemon=True,
                                      name=f"ghs-query-{index}")
            thread.start()
            self._threads.append(thread)
        poller = zmq.Poller()
        for socket, _ in self._sockets:
            poller.register(socket, zmq.POLLIN)
        poller.register(self._wake_pull, zmq.POLLIN)
        while not stop.is_set():
            ready = dict(poller.poll(poll_ms))
            for socket, types in self._sockets:
                # drain up to a batch per socket per turn so no endpoint starves the other
                for _ in range(256):
                    if socket not in ready:
                        break
                    try:
                        incoming = recv_request(socket, limits=self.limits, flags=zmq.NOBLOCK,
                                                expect=types,
                                                with_user_id=self.host_bindings is not None)
                    except zmq.Again:
                        break
                    self._handle(socket, incoming)
            self._commit_due()
            if self._wake_pull in ready:
                self._forward_replies()
        for _ in self._threads:
            try:
                self._pending.put_nowait(None)
            except queue.Full:
                break

    def _handle(self, socket: zmq.Socket, incoming: Any) -> None:
        if incoming.error is not None:
            error = incoming.error
            with self.counters.lock:
                self.counters.rejected[error.code] += 1
            self._reply(socket, incoming.routing, ErrorReply.from_exception(error))
            return
        message = incoming.message
        with self.counters.lock:
            self.counters.received[message.TYPE] += 1
        version = message.wire_version
        try:
            host_id = getattr(message, "host_id", None)
            if host_id is not None and self.host_bindings is not None and \
                    not self.host_bindings.allows(incoming.user_id, host_id):
                self._refuse(socket, incoming.routing, "host_not_allowed",
                             f"this client's key may not report host {host_id!r}",
                             message.request_id, version)
            elif isinstance(message, PingRequest):
                self._reply(socket, incoming.routing, PingReply(
                    request_id=message.request_id,
                    body={"uptime_seconds": self.clock() - self.started,
                          "version": __version__}), version)
            elif isinstance(message, (StatusRequest, PredictRequest, ScheduleRequest,
                                      HistoryRequest, BacktestRequest, *TRACKING_REQUESTS)):
                self._enqueue(socket, incoming.routing, message)
            elif isinstance(message, (MeasurementBatch, Hello, Heartbeat, RecordBatch)):
                # in arrival order, after this turn's hellos are committed
                self._due.append((socket, incoming.routing, message))
        except Exception as exc:  # never let one message take the manager down
            LOG.exception("internal error handling %s", message.TYPE)
            with self.counters.lock:
                self.counters.internal_errors += 1
            self._reply(socket, incoming.routing, ErrorReply.from_exception(
                exc, request_id=getattr(message, "request_id", None)), version)

    def _commit_due(self) -> None:
        """Store this turn's hellos, heartbeats and batches in one commit, then acknowledge
        each (never before)."""
        if not self._due:
            return
        due, self._due = self._due, []
        records = [item for item in due if isinstance(item[2], RecordBatch)]
        due = [item for item in due if not isinstance(item[2], RecordBatch)]
        self._commit_reports(due)
        # the record streams after the hellos they may follow (one transaction a batch)
        for socket, routing, message in records:
            try:
                reply = self._store_records(message)
            except Exception as exc:  # nothing committed: the agent resends
                LOG.exception("cannot store %s records of %s", message.stream,
                              message.host_id)
                with self.counters.lock:
                    self.counters.internal_errors += 1
                reply = ErrorReply.from_exception(exc, request_id=message.request_id)
            self._reply(socket, routing, reply, message.wire_version)

    def _commit_reports(self, due: list[tuple[zmq.Socket, tuple, Any]]) -> None:
        if not due:
            return
        now = self.clock()
        hosts = [HostFacts(**HostIdentity.from_hello(m).__dict__, first_seen=now,
                           last_seen=now) for _, _, m in due if isinstance(m, Hello)]
        reports = [(socket, routing, m) for socket, routing, m in due
                   if not isinstance(m, Hello)]
        batches = [(m.host_id, now, stored_rows(m.host_id, m.measurements, now)
                    if isinstance(m, MeasurementBatch) else []) for _, _, m in reports]
        try:
            results = self.store.add_batches(batches, hosts=hosts)
        except Exception as exc:  # nothing committed: agents resend after their timeout
            LOG.exception("cannot store %d messages", len(due))
            with self.counters.lock:
                self.counters.internal_errors += len(due)
            for socket, routing, message in due:
                self._reply(socket, routing, ErrorReply.from_exception(
                    exc, request_id=message.request_id), message.wire_version)
            return
        for socket, routing, message in due:
            if isinstance(message, Hello):
                self._reply(socket, routing, Ack(request_id=message.request_id,
                                                 host_id=message.host_id),
                            message.wire_version)
        for (socket, routing, message), (_, _, rows), new in zip(reports, batches, results,
                                                                 strict=True):
            if new is None:
                self._refuse(socket, routing, "unknown_host",
                             f"host {message.host_id!r} has not said hello",
                             message.request_id, message.wire_version)
                continue
            acked: tuple = ()
            if isinstance(message, MeasurementBatch):
                acked = seq_ranges_of(m.seq for m in message.measurements)
                with self.counters.lock:
                    self.counters.stored += new
                    self.counters.stored_by_host[message.host_id] += new
                    self.counters.duplicates += len(rows) - new
                self._prune(message.host_id,
                            max(m.end_epoch_seconds for m in message.measurements))
            self._reply(socket, routing, Ack(request_id=message.request_id,
                                             host_id=message.host_id, acked=acked),
                        message.wire_version)

    def _store_records(self, batch: RecordBatch) -> Ack | ErrorReply:
        if not self.store.touch(batch.host_id, self.clock()):
            with self.counters.lock:
                self.counters.rejected["unknown_host"] += 1
            return ErrorReply(code="unknown_host", reason=f"host {batch.host_id!r} has not "
                              "said hello", request_id=batch.request_id)
        new = self.store.streams.add(batch.host_id, batch.stream, batch.records)
        with self.counters.lock:
            self.counters.records_stored[batch.stream] += new
            self.counters.duplicates += len(batch.records) - new
        return Ack(request_id=batch.request_id, host_id=batch.host_id, stream=batch.stream,
                   acked=seq_ranges_of(record["seq"] for record in batch.records))

    def _prune(self, host_id: str, latest_epoch_seconds: float) -> None:
        """Keep a host's measurements to the retention window of its own clock, once an hour
        of that clock (hosts replayed at high speed level off as live ones do)."""
        hour = latest_epoch_seconds // _HOUR
        if self._pruned_hour.get(host_id) != hour:
            try:
                self.store.prune(self.retention_seconds, host_id)
            except Exception:  # the batch is committed and due its ack: try again next batch
                LOG.exception("cannot prune the measurements of %s", host_id)
                with self.counters.lock:
                    self.counters.internal_errors += 1
                return
            self._pruned_hour[host_id] = hour

    def _refuse(self, socket: zmq.Socket, routing: tuple, code: str, reason: str,
                request_id: int | None, version: int = PROTOCOL_VERSION) -> None:
        with self.counters.lock:
            self.counters.rejected[code] += 1
        self._reply(socket, routing, ErrorReply(code=code, reason=reason,
                                                request_id=request_id), version)

    def _reply(self, socket: zmq.Socket, routing: tuple, message: Any,
               version: int = PROTOCOL_VERSION) -> None:
        # a reply speaks the version of its request, so older agents keep working
        message.in_version(min(version, PROTOCOL_VERSION))
        if not send_reply(socket, routing, message, limits=self.limits):
            with self.counters.lock:
                self.counters.dropped_replies += 1

    # -- queries on worker threads --------------------------------------------------------

    def _enqueue(self, socket: zmq.Socket, routing: tuple, message: Any) -> None:
        try:
            self._pending.put_nowait((socket, routing, message))
        except queue.Full:
            with self.counters.lock:
                self.counters.busy += 1
            self._reply(socket, routing, ErrorReply(
                code="busy", reason="too many queries waiting; try again shortly",
                request_id=message.request_id))

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set():
            item = self._pending.get()
            if item is None:
                return
            socket, routing, message = item
            started = time.perf_counter()
            try:
                reply = reply_to(message, self.queries, self.store, self.counters)
            except Exception as exc:
                if getattr(exc, "code", None) is None:
                    LOG.exception("internal error answering %s", message.TYPE)
                    with self.counters.lock:
                        self.counters.internal_errors += 1
                reply = ErrorReply.from_exception(exc, request_id=message.request_id)
            reply.in_version(message.wire_version)
            if self.on_query is not None:
                self.on_query(message.TYPE, time.perf_counter() - started)
            try:
                data = encode(reply, limits=self.limits)
            except Exception as exc:  # an unencodable body is our bug: say so, keep going
                LOG.exception("cannot encode %s", reply.TYPE)
                data = encode(ErrorReply.from_exception(exc, request_id=message.request_id))
            index = next(i for i, (s, _) in enumerate(self._sockets) if s is socket)
            with self._reply_lock:
                self._wake_push.send_multipart([b"%d" % index, *routing, data])

    def _forward_replies(self) -> None:
        while True:
            try:
                index, *frames = self._wake_pull.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                self._sockets[int(index)][0].send_multipart(frames, zmq.NOBLOCK)
            except zmq.Again:
                with self.counters.lock:
                    self.counters.dropped_replies += 1

    def handshakes(self) -> tuple[int, int] | None:
        """CurveZMQ handshakes (accepted, denied) by the allow-list; None without one."""
        auth = self._authenticator
        return None if auth is None else (auth.accepted, auth.denied)

    def close(self) -> None:
        for socket, _ in self._sockets:
            socket.close(linger=0)
        self._sockets = []
        for name in ("_wake_pull", "_wake_push"):
            socket = getattr(self, name, None)
            if socket is not None:
                socket.close(linger=0)
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None
