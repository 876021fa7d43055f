"""CurveZMQ with an allow-list over real sockets on free loopback ports: a listed client's
messages arrive, an unlisted client's never do, and a stopped authenticator fails closed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from protocol import (
    Authenticator,
    KeyPair,
    StatusReply,
    StatusRequest,
    bind_router,
    bound_endpoint,
    connect_dealer,
    generate_keypair,
    recv_message,
    send_message,
)
from protocol.sockets import recv_request, send_reply

TIMEOUT_MS = 5000


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


HANDSHAKE_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


def next_handshake(monitor: zmq.Socket) -> int:
    """The next handshake outcome the router's monitor reports (fails on timeout).

    The monitor is attached right after binding, before any client connects, so no event
    can slip by unseen.
    """
    assert monitor.poll(TIMEOUT_MS), "no handshake outcome within the timeout"
    return recv_monitor_message(monitor)["event"]


def close_all(router: zmq.Socket, monitor: zmq.Socket, *sockets: zmq.Socket) -> None:
    router.disable_monitor()
    for socket in (monitor, *sockets, router):
        socket.close()


def client(context: zmq.Context, endpoint: str, keys: KeyPair, server: KeyPair) -> zmq.Socket:
    return connect_dealer(context, endpoint, client_keys=keys, server_public_key=server.public)


def test_only_listed_clients_get_through(context: zmq.Context) -> None:
    server_keys, listed, unlisted = generate_keypair(), generate_keypair(), generate_keypair()
    authenticator = Authenticator(context, [listed.public])
    authenticator.start()
    router = bind_router(context, "tcp://127.0.0.1:*", server_keys=server_keys,
                         authenticator=authenticator)
    monitor = router.get_monitor_socket(HANDSHAKE_EVENTS)
    endpoint = bound_endpoint(router)

    intruder = client(context, endpoint, unlisted, server_keys)
    send_message(intruder, StatusRequest(request_id=666))
    assert next_handshake(monitor) == zmq.EVENT_HANDSHAKE_FAILED_AUTH
    friend = client(context, endpoint, listed, server_keys)
    send_message(friend, StatusRequest(request_id=1))

    assert router.poll(TIMEOUT_MS)
    incoming = recv_request(router, with_user_id=True)
    assert incoming.message == StatusRequest(request_id=1)
    assert incoming.user_id == listed.public.decode()
    send_reply(router, incoming.routing, StatusReply(request_id=1, body={
        "hosts": [], "counters": {}}))
    assert friend.poll(TIMEOUT_MS)
    assert recv_message(friend).request_id == 1
    # the intruder's request was queued before the refusal; it must never surface
    assert not router.poll(100)
    assert authenticator.accepted == 1 and authenticator.denied >= 1

    close_all(router, monitor, intruder, friend)
    authenticator.stop()
    assert not authenticator.running


def test_wrong_server_key_never_connects(context: zmq.Context) -> None:
    server_keys, listed = generate_keypair(), generate_keypair()
    with Authenticator(context, [listed.public]) as authenticator:
        router = bind_router(context, "tcp://127.0.0.1:*", server_keys=server_keys,
                             authenticator=authenticator)
        monitor = router.get_monitor_socket(HANDSHAKE_EVENTS)
        confused = client(context, bound_endpoint(router), listed, generate_keypair())
        send_message(confused, StatusRequest(request_id=2))
        assert next_handshake(monitor) != zmq.EVENT_HANDSHAKE_SUCCEEDED
        assert not router.poll(100)
        close_all(router, monitor, confused)


def test_allow_list_can_change_while_running(context: zmq.Context) -> None:
    server_keys, late = generate_keypair(), generate_keypair()
    with Authenticator(context, []) as authenticator:
        router = bind_router(context, "tcp://127.0.0.1:*", server_keys=server_keys,
                             authenticator=authenticator)
        monitor = router.get_monitor_socket(HANDSHAKE_EVENTS)
        endpoint = bound_endpoint(router)
        early = client(context, endpoint, late, server_keys)
        send_message(early, StatusRequest(request_id=3))
        assert next_handshake(monitor) == zmq.EVENT_HANDSHAKE_FAILED_AUTH
        early.close()
        authenticator.set_allowed([late.public])
        admitted = client(context, endpoint, late, server_keys)
        send_message(admitted, StatusRequest(request_id=4))
        assert router.poll(TIMEOUT_MS)
        assert recv_request(router).message == StatusRequest(request_id=4)
        close_all(router, monitor, admitted)


def test_secured_router_without_a_running_authenticator_fails_closed(
        context: zmq.Context) -> None:
    server_keys, listed = generate_keypair(), generate_keypair()
    authenticator = Authenticator(context, [listed.public])
    authenticator.start()
    router = bind_router(context, "tcp://127.0.0.1:*", server_keys=server_keys,
                         authenticator=authenticator)
    monitor = router.get_monitor_socket(HANDSHAKE_EVENTS)
    authenticator.stop()  # the wrong order: libzmq must now refuse everyone, not admit them
    friend = client(context, bound_endpoint(router), listed, server_keys)
    send_message(friend, StatusRequest(request_id=5))
    # closed either way: a failed handshake reported, or none at all (the ZAP request that
    # nobody answers); what must never happen is a success or the message getting through
    if monitor.poll(TIMEOUT_MS):
        assert recv_monitor_message(monitor)["event"] != zmq.EVENT_HANDSHAKE_SUCCEEDED
    assert not router.poll(500)
    close_all(router, monitor, friend)
