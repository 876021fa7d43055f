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

import zmq
from zmq.utils.monitor import recv_monitor_message

from ghs.agent.outbox import Outbox
from protocol import (
    DEFAULT_LIMITS,
    Ack,
    ErrorReply,
    Heartbeat,
    Hello,
    KeyPair,
    Limits,
    Measurement,
    MeasurementBatch,
    ProtocolError,
    connect_dealer,
    encode,
    recv_message,
)

LOG = logging.getLogger("ghs.agent")


@dataclass(frozen=True)
class HostIdentity:
    """What the agent tells the manager about one measured host."""

    host_id: str
    hostname: str
    cores: int
    tau: float
    os: str
    agent_version: str
    simulated: bool = False


@dataclass
class _HostLink:
    identity: HostIdentity
    greeted: bool = False
    hello_id: int | None = None
    hello_sent: float = -1e300
    batch_id: int | None = None
    batch_sent: float = -1e300
    last_sent: float = -1e300
    timeout: float = 0.0


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
        self.links = {h.host_id: _HostLink(h, timeout=ack_timeout_seconds) for h in hosts}
        self.stats = SenderStats()
        self._ids = itertools.count(1)
        self._requests: dict[int, str] = {}
        self.endpoint = endpoint
        self.reachable: bool | None = None  # unknown until the first answer or timeout
        self._recovered_at: float | None = None  # outbox clock when the manager came back
        self.socket = connect_dealer(context, endpoint, limits=limits, client_keys=client_keys,
                                     server_public_key=server_public_key,
                                     reconnect_ivl_ms=200, reconnect_ivl_max_ms=10_000)
        self._monitor = self.socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)

    def add_host(self, identity: HostIdentity) -> None:
        self.links.setdefault(identity.host_id, _HostLink(identity, timeout=self.ack_timeout))

    def run(self, stop: threading.Event, *, drain_seconds: float = 2.0) -> None:
        """Send until ``stop``; then keep going up to ``drain_seconds`` while acks are due."""
        while not stop.is_set():
            self.step()
        deadline = self.clock() + drain_seconds
        while self.clock() < deadline and self.outbox.count() > 0:
            self.step()

    def step(self, poll_ms: int = 50) -> None:
        """One turn: send what is due, then take the replies that arrive within ``poll_ms``."""
        now = self.clock()
        self._watch_connections()
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
                hello = Hello(request_id=request_id, host_id=identity.host_id,
                              hostname=identity.hostname, cores=identity.cores,
                              tau=identity.tau, os=identity.os,
                              agent_version=identity.agent_version,
                              simulated=identity.simulated)
                if self._send(hello):
                    self._requests[request_id] = identity.host_id
                    link.hello_id, link.hello_sent = request_id, now
            return
        if link.batch_id is not None and now - link.batch_sent < link.timeout:
            return
        if link.batch_id is not None:  # no ack in time: back off and send again
            self._unanswered(now - link.batch_sent)
            self.stats.resent_batches += 1
            link.timeout = min(link.timeout * 2, self.max_backoff)
            self._requests.pop(link.batch_id, None)
            link.batch_id = None
        pending = self.outbox.pending(identity.host_id, self.batch_size)
        if pending:
            message = self._batch(identity.host_id, pending)
            if message is not None and self._send(message):
                self._requests[message.request_id] = identity.host_id
                link.batch_id, link.batch_sent, link.last_sent = message.request_id, now, now
                self.stats.sent_batches += 1
        elif now - link.last_sent >= self.heartbeat:
            beat = Heartbeat(request_id=next(self._ids), host_id=identity.host_id,
                             sent_epoch_seconds=self.wall(), outbox_pending=0)
            if self._send(beat):
                link.last_sent = now

    def _batch(self, host_id: str, pending: list) -> MeasurementBatch | None:
        measurements = []
        for seq, fields in pending:
            try:
                measurement = Measurement.from_dict({"seq": seq, **fields}, limits=self.limits)
            except ProtocolError as exc:
                LOG.error("measurement %s/%d is invalid and was set aside: %s", host_id, seq,
                          exc)
                self.outbox.set_aside(host_id, seq, str(exc))
                self._count("invalid_measurement")
                continue
            measurements.append(measurement)
        if not measurements:
            return None
        return MeasurementBatch(request_id=next(self._ids), host_id=host_id,
                                measurements=tuple(measurements))

    def _take(self, reply: object) -> None:
        self._answered()
        request_id = getattr(reply, "request_id", None)
        host_id = self._requests.pop(request_id, None) if request_id is not None else None
        if isinstance(reply, Ack):
            link = self.links.get(reply.host_id)
            if link is None:
                return
            if request_id is not None and request_id == link.hello_id:
                link.greeted, link.hello_id = True, None
            elif request_id is not None and request_id == link.batch_id:
                self.stats.acked += self.outbox.ack(reply.host_id, reply.acked)
                link.batch_id = None
                link.timeout = self.ack_timeout
            elif reply.acked:  # a late ack of an earlier send still counts
                self.stats.acked += self.outbox.ack(reply.host_id, reply.acked)
        elif isinstance(reply, ErrorReply):
            self._count(reply.code)
            link = self.links.get(host_id) if host_id is not None else None
            if link is None:
                return
            if reply.code == "unknown_host":
                link.greeted = False  # the manager lost us (new database): say hello again
                link.hello_sent = -1e300
            if request_id == link.batch_id:
                link.batch_id = None
            LOG.warning("manager refused a message of %s: %s %s", host_id, reply.code,
                        reply.reason)

    def _count(self, code: str) -> None:
        self.stats.errors[code] = self.stats.errors.get(code, 0) + 1

    def close(self) -> None:
        self.socket.disable_monitor()
        self._monitor.close(linger=0)
        self.socket.close(linger=0)
