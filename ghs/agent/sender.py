"""The agent's link to the manager: hello, measurement batches from the outbox, heartbeats.

One DEALER socket serves every host the agent measures. A batch stays in flight until its
ack arrives; without one it is sent again after a timeout that doubles up to a cap, while
ZeroMQ reconnects underneath. A measurement that cannot even be encoded (a sensor bug) is
moved aside with its reason, loudly, instead of blocking its host's stream.

The log says when the manager stops answering (a request unanswered past its timeout), when
it answers again, and when the measurements queued meanwhile have all been delivered. A
socket monitor counts the connections ZeroMQ makes, so reconnects can be counted too.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from ghs.agent.outbox import MEASUREMENTS, Outbox
from ghs.record import HostIdentity
from protocol import (
    DEFAULT_LIMITS,
    STREAMS,
    Ack,
    ErrorReply,
    Heartbeat,
    KeyPair,
    Limits,
    Measurement,
    MeasurementBatch,
    ProtocolError,
    RecordBatch,
    connect_dealer,
    encode,
    recv_message,
    stream_record,
)

LOG = logging.getLogger("ghs.agent")


@dataclass
class _Flight:
    """One (host, stream)'s batch in flight, and its resend timeout."""

    timeout: float
    batch_id: int | None = None
    batch_sent: float = -1e300


@dataclass
class _HostLink:
    identity: HostIdentity
    flights: dict[str, _Flight]
    greeted: bool = False
    hello_id: int | None = None
    hello_sent: float = -1e300
    last_sent: float = -1e300
    timeout: float = 0.0
    # the manager's last word on this host was host_not_allowed: no ack is coming
    refused: bool = False


@dataclass
class SenderStats:
    sent_batches: int = 0
    resent_batches: int = 0
    acked: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    connections: int = 0  # handshakes completed with the manager; reconnects = this - 1
    outages: int = 0  # times the manager stopped answering

    @property
    def reconnects(self) -> int:
        return max(0, self.connections - 1)


class Sender:
    """Ships ``outbox`` to the manager at ``endpoint`` until stopped; see the module doc."""

    def __init__(self, *, context: zmq.Context, endpoint: str, outbox: Outbox,
                 hosts: Sequence[HostIdentity], limits: Limits = DEFAULT_LIMITS,
                 client_keys: KeyPair | None = None, server_public_key: bytes | None = None,
                 batch_size: int = 256, ack_timeout_seconds: float = 5.0,
                 max_backoff_seconds: float = 60.0, heartbeat_seconds: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.outbox = outbox
        self.limits = limits
        self.batch_size = batch_size
        self.ack_timeout = ack_timeout_seconds
        self.max_backoff = max_backoff_seconds
        self.heartbeat = heartbeat_seconds
        self.clock = clock
        self.wall = wall
        self.links = {h.host_id: self._link(h) for h in hosts}
        self.stats = SenderStats()
        self._ids = itertools.count(1)
        self._requests: dict[int, tuple[str, str]] = {}
        self.endpoint = endpoint
        self.reachable: bool | None = None  # unknown until the first answer or timeout
        self._recovered_at: float | None = None  # outbox clock when the manager came back
        self.socket = connect_dealer(context, endpoint, limits=limits, client_keys=client_keys,
                                     server_public_key=server_public_key,
                                     reconnect_ivl_ms=200, reconnect_ivl_max_ms=10_000)
        self._monitor = self.socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)

    def _link(self, identity: HostIdentity) -> _HostLink:
        return _HostLink(identity, {stream: _Flight(self.ack_timeout) for stream in
                                    (MEASUREMENTS, *STREAMS)}, timeout=self.ack_timeout)

    def add_host(self, identity: HostIdentity) -> None:
        self.links.setdefault(identity.host_id, self._link(identity))

    def run(self, stop: threading.Event, *, drain_seconds: float = 2.0) -> None:
        """Send until ``stop``; then keep going up to ``drain_seconds`` while acks are due."""
        while not stop.is_set():
            self.step()
        deadline = self.clock() + drain_seconds
        while self.clock() < deadline and self._awaiting_acks():
            self.step()
        left = self.outbox.count()
        if left:
            refused = sorted(host_id for host_id, link in self.links.items() if link.refused)
            LOG.warning("stopping with %d records in the outbox, kept for the next start%s",
                        left, f" (the manager refuses host {', '.join(refused)})"
                        if refused else "")

    def _awaiting_acks(self) -> bool:
        """Whether a host the manager has not refused still has records in the outbox."""
        return any(not link.refused and self.outbox.count(host_id) > 0
                   for host_id, link in self.links.items())

    def step(self, poll_ms: int = 50) -> None:
        """One turn: send what is due, then take the replies that arrive within ``poll_ms``."""
        now = self.clock()
        self._watch_connections()
        # records held while the outbox could not be written go in as soon as it can be
        self.outbox.flush_held()
        for link in self.links.values():
            self._send_due(link, now)
        if self._recovered_at is not None and self._backlog_delivered(self._recovered_at):
            self._recovered_at = None
            LOG.warning("queue drained: every measurement queued while the manager at %s was "
                        "unreachable is delivered", self.endpoint)
        if self.socket.poll(poll_ms, zmq.POLLIN):
            for _ in range(1000):
                try:
                    reply = recv_message(self.socket, limits=self.limits, flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                except ProtocolError as exc:
                    self._count(exc.code)
                    continue
                self._take(reply)

    def _watch_connections(self) -> None:
        while True:
            try:
                recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            self.stats.connections += 1

    def _unanswered(self, waited_seconds: float) -> None:
        """A request went unanswered for ``waited_seconds``: say so once per outage."""
        if self.reachable is False:
            return
        self.reachable = False
        self.stats.outages += 1
        LOG.warning("manager at %s unreachable: no answer for %.1f s; measurements wait in "
                    "the outbox (%d now)", self.endpoint, waited_seconds, self.outbox.count())

    def _answered(self) -> None:
        if self.reachable is False:
            LOG.warning("manager at %s answers again; sending %d queued measurements",
                        self.endpoint, self.outbox.count())
            self._recovered_at = self.outbox.clock()
        self.reachable = True

    def _backlog_delivered(self, since: float) -> bool:
        """Whether nothing queued before ``since`` (outbox clock) waits any more."""
        oldest = self.outbox.oldest_queued()
        return oldest is None or oldest >= since

    def _send(self, message: object) -> bool:
        try:
            self.socket.send(encode(message, limits=self.limits), zmq.NOBLOCK)
        except zmq.Again:
            return False  # not connected and the queue is full: try again next turn
        return True

    def _send_due(self, link: _HostLink, now: float) -> None:
        identity = link.identity
        if not link.greeted:
            if now - link.hello_sent >= link.timeout:
                if link.hello_id is not None:
                    self._unanswered(now - link.hello_sent)
                request_id = next(self._ids)
                hello = identity.hello(request_id)
                if self._send(hello):
                    self._requests[request_id] = (identity.host_id, "hello")
                    link.hello_id, link.hello_sent = request_id, now
            return
        for stream, flight in link.flights.items():
            self._send_stream(link, stream, flight, now)
        if now - link.last_sent >= self.heartbeat:
            beat = Heartbeat(request_id=next(self._ids), host_id=identity.host_id,
                             sent_epoch_seconds=self.wall(), outbox_pending=0)
            if self._send(beat):
                link.last_sent = now

    def _send_stream(self, link: _HostLink, stream: str, flight: _Flight, now: float) -> None:
        if flight.batch_id is not None and now - flight.batch_sent < flight.timeout:
            return
        if flight.batch_id is not None:  # no ack in time: back off and send again
            self._unanswered(now - flight.batch_sent)
            self.stats.resent_batches += 1
            flight.timeout = min(flight.timeout * 2, self.max_backoff)
            self._requests.pop(flight.batch_id, None)
            flight.batch_id = None
        host_id = link.identity.host_id
        pending = self.outbox.pending(host_id, self.batch_size, stream)
        if not pending:
            return
        message = self._batch(host_id, stream, pending)
        if message is not None and self._send(message):
            self._requests[message.request_id] = (host_id, stream)
            flight.batch_id, flight.batch_sent = message.request_id, now
            link.last_sent = now
            self.stats.sent_batches += 1

    def _batch(self, host_id: str, stream: str, pending: list
               ) -> MeasurementBatch | RecordBatch | None:
        records = []
        for seq, fields in pending:
            try:
                if stream == MEASUREMENTS:
                    record: Any = Measurement.from_dict({"seq": seq, **fields},
                                                        limits=self.limits)
                else:
                    record = stream_record(stream, {"seq": seq, **fields})
            except ProtocolError as exc:
                LOG.error("%s record %s/%d is invalid and was set aside: %s", stream, host_id,
                          seq, exc)
                self.outbox.set_aside(host_id, seq, str(exc), stream)
                self._count(f"invalid_{stream}" if stream != MEASUREMENTS
                            else "invalid_measurement")
                continue
            records.append(record)
        if not records:
            return None
        if stream == MEASUREMENTS:
            return MeasurementBatch(request_id=next(self._ids), host_id=host_id,
                                    measurements=tuple(records))
        return RecordBatch(request_id=next(self._ids), host_id=host_id, stream=stream,
                           records=tuple(records))

    def _take(self, reply: object) -> None:
        self._answered()
        request_id = getattr(reply, "request_id", None)
        host_id, _ = (self._requests.pop(request_id, (None, None)) if request_id is not None
                      else (None, None))
        if isinstance(reply, Ack):
            link = self.links.get(reply.host_id)
            if link is None:
                return
            link.refused = False
            stream = reply.stream or MEASUREMENTS
            flight = link.flights.get(stream)
            if request_id is not None and request_id == link.hello_id:
                link.greeted, link.hello_id = True, None
            elif flight is not None and request_id is not None and request_id == flight.batch_id:
                self.stats.acked += self.outbox.ack(reply.host_id, reply.acked, stream)
                flight.batch_id = None
                flight.timeout = self.ack_timeout
            elif reply.acked:  # a late ack of an earlier send still counts
                self.stats.acked += self.outbox.ack(reply.host_id, reply.acked, stream)
        elif isinstance(reply, ErrorReply):
            self._count(reply.code)
            link = self.links.get(host_id) if host_id is not None else None
            if link is None:
                return
            if reply.code == "unknown_host":
                link.greeted = False  # the manager lost us (new database): say hello again
                link.hello_sent = -1e300
            link.refused = reply.code == "host_not_allowed"
            for flight in link.flights.values():
                if request_id == flight.batch_id:
                    flight.batch_id = None
            LOG.warning("manager refused a message of %s: %s %s", host_id, reply.code,
                        reply.reason)

    def _count(self, code: str) -> None:
        self.stats.errors[code] = self.stats.errors.get(code, 0) + 1

    def close(self) -> None:
        self.socket.disable_monitor()
        self._monitor.close(linger=0)
        self.socket.close(linger=0)
