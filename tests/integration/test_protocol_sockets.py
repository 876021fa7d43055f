"""The protocol over real ZeroMQ sockets on free loopback ports: a ROUTER serving DEALER and REQ
peers, error replies to bad input, stale replies skipped, oversized messages dropped by
ZMQ_MAXMSGSIZE without harming the ROUTER."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import msgpack
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from protocol import (
    Ack,
    EndpointError,
    ErrorReply,
    Incoming,
    Limits,
    Measurement,
    MeasurementBatch,
    Message,
    ProtocolError,
    RequestTimeoutError,
    StatusReply,
    StatusRequest,
    bind_router,
    bound_endpoint,
    connect_dealer,
    decode,
    encode,
    recv_message,
    request,
    request_once,
    send_message,
    seq_ranges_of,
)
from protocol.sockets import recv_request, send_reply

TIMEOUT_SECONDS = 5.0


def answer(message: Message) -> Message:
    if isinstance(message, MeasurementBatch):
        return Ack(request_id=message.request_id, host_id=message.host_id,
                   acked=seq_ranges_of(m.seq for m in message.measurements))
    return StatusReply(request_id=message.request_id,
                       body={"hosts": [], "counters": {"type": message.TYPE}})


class Server:
    """A minimal manager loop on its own thread, shaped like the real one will be."""

    def __init__(self, context: zmq.Context, limits: Limits, monitor_events: int = 0) -> None:
        self.router = bind_router(context, "tcp://127.0.0.1:*", limits=limits)
        self.endpoint = bound_endpoint(self.router)
        # sockets are not thread-safe: attach any monitor before the loop thread owns the router
        self.monitor = self.router.get_monitor_socket(monitor_events) if monitor_events else None
        self.limits = limits
        self.received: list[Incoming] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            if not self.router.poll(50):
                continue
            incoming = recv_request(self.router, limits=self.limits)
            self.received.append(incoming)
            if incoming.error is not None:
                reply: Message = ErrorReply.from_exception(incoming.error)
            else:
                reply = answer(incoming.message)
            send_reply(self.router, incoming.routing, reply)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(TIMEOUT_SECONDS)
        if self.monitor is not None:
            self.router.disable_monitor()
            self.monitor.close()
        self.router.close()


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def server(context: zmq.Context) -> Iterator[Server]:
    server = Server(context, Limits(max_request_bytes=64 * 1024))
    yield server
    server.stop()


def batch(request_id: int, seqs: range) -> MeasurementBatch:
    return MeasurementBatch(request_id=request_id, host_id="ws1", measurements=tuple(
        Measurement(seq=seq, start_epoch_seconds=60.0 * seq, end_epoch_seconds=60.0 * seq + 60,
                    lam_per_second=0.1, rho=0.3, tau=1.0, service_count=0,
                    service_cpu_seconds_sum=0.0, service_cpu_seconds_sum_squares=0.0,
                    busy_cpu_seconds=18.0, jobs_started=1, jobs_between=5,
                    running_processes=90) for seq in seqs))


def test_dealer_request_gets_its_reply(context: zmq.Context, server: Server) -> None:
    dealer = connect_dealer(context, server.endpoint)
    reply = request(dealer, batch(41, range(10, 20)), timeout_seconds=TIMEOUT_SECONDS)
    assert reply == Ack(request_id=41, host_id="ws1", acked=((10, 19),))
    status = request(dealer, StatusRequest(request_id=42), timeout_seconds=TIMEOUT_SECONDS)
    assert isinstance(status, StatusReply) and status.request_id == 42
    assert status.body["counters"] == {"type": "status"}
    dealer.close()


def test_replies_to_abandoned_requests_are_skipped(context: zmq.Context,
                                                   server: Server) -> None:
    dealer = connect_dealer(context, server.endpoint)
    # two requests whose callers gave up: their replies arrive first and must be skipped
    send_message(dealer, StatusRequest(request_id=1))
    send_message(dealer, StatusRequest(request_id=2))
    reply = request(dealer, StatusRequest(request_id=3), timeout_seconds=TIMEOUT_SECONDS)
    assert reply.request_id == 3
    dealer.close()


def test_req_socket_framing_is_answered(context: zmq.Context, server: Server) -> None:
    req = context.socket(zmq.REQ)
    req.linger = 0
    req.connect(server.endpoint)
    req.send(encode(StatusRequest(request_id=77)))
    assert req.poll(TIMEOUT_SECONDS * 1000)
    assert decode(req.recv()).request_id == 77
    req.close()


def test_bad_input_gets_an_error_reply_and_the_loop_goes_on(context: zmq.Context,
                                                           server: Server) -> None:
    dealer = connect_dealer(context, server.endpoint)
    bad = [
        b"\xc1garbage",
        msgpack.packb({"v": 1, "type": "status", "request_id": 5, "extra": 1}),
        msgpack.packb({"v": 99, "type": "status", "request_id": 6}),
        encode(Ack(request_id=7, host_id="ws1")),  # a reply is not a request
    ]
    for payload in bad:
        dealer.send(payload)
    dealer.send_multipart([b"two", b"frames"])
    codes = []
    for _ in range(len(bad) + 1):
        assert dealer.poll(TIMEOUT_SECONDS * 1000)
        reply = recv_message(dealer)
        assert isinstance(reply, ErrorReply)
        codes.append((reply.code, reply.request_id))
    assert codes == [("malformed", None), ("unknown_field", 5), ("unknown_version", 6),
                     ("unknown_type", 7), ("malformed", None)]
    assert request(dealer, StatusRequest(request_id=8),
                   timeout_seconds=TIMEOUT_SECONDS).request_id == 8
    dealer.close()


def test_oversized_message_is_dropped_and_the_router_keeps_serving(
        context: zmq.Context) -> None:
    server = Server(context, Limits(max_request_bytes=64 * 1024), zmq.EVENT_DISCONNECTED)
    big = connect_dealer(context, server.endpoint)
    big.send(b"\x00" * (server.limits.max_request_bytes + 1))
    # libzmq drops the connection that sent it, before the payload is read into memory
    assert server.monitor.poll(TIMEOUT_SECONDS * 1000)
    assert recv_monitor_message(server.monitor)["event"] == zmq.EVENT_DISCONNECTED
    reply = request_once(context, server.endpoint, StatusRequest(request_id=9),
                         timeout_seconds=TIMEOUT_SECONDS)
    assert reply.request_id == 9
    assert all(incoming.size_bytes <= server.limits.max_request_bytes
               for incoming in server.received)
    assert [incoming.message for incoming in server.received] == [StatusRequest(request_id=9)]
    server.stop()
    big.close()


def test_request_times_out_when_nobody_answers(context: zmq.Context) -> None:
    silent = bind_router(context, "tcp://127.0.0.1:*")
    with pytest.raises(RequestTimeoutError, match="no reply to status request 1") as caught:
        request_once(context, bound_endpoint(silent), StatusRequest(request_id=1),
                     timeout_seconds=0.2)
    assert caught.value.code == "timeout"
    silent.close()


def test_a_broken_reply_to_this_request_raises(context: zmq.Context) -> None:
    router = bind_router(context, "tcp://127.0.0.1:*")

    def reply_badly() -> None:
        if router.poll(TIMEOUT_SECONDS * 1000):
            identity, _ = router.recv_multipart()
            router.send_multipart([identity, msgpack.packb(
                {"v": 1, "type": "error", "code": "Not An Identifier", "reason": "x",
                 "request_id": 5})])

    thread = threading.Thread(target=reply_badly)
    thread.start()
    with pytest.raises(ProtocolError) as caught:
        request_once(context, bound_endpoint(router), StatusRequest(request_id=5),
                     timeout_seconds=TIMEOUT_SECONDS)
    thread.join()
    assert (caught.value.code, caught.value.field) == ("invalid_field", "code")
    router.close()


def test_bad_endpoints_raise_endpoint_errors(context: zmq.Context) -> None:
    taken = bind_router(context, "tcp://127.0.0.1:*")
    with pytest.raises(EndpointError, match="cannot bind") as caught:
        bind_router(context, bound_endpoint(taken))
    assert caught.value.code == "bad_endpoint"
    with pytest.raises(EndpointError, match="cannot connect"):
        connect_dealer(context, "tcp://no-port-here")
    taken.close()
