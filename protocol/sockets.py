"""ZeroMQ sockets for the protocol: the manager's ROUTER, agents' and clients' DEALERs.

Every function takes the caller's ``zmq.Context``; nothing here creates one. Receiving sockets
get ZMQ_MAXMSGSIZE from the limits, so libzmq drops an oversized message (and the connection
that sent it) before it is ever read into memory. Linger is 0 so closing never hangs: unsent
measurements are the agent outbox's business, not the socket's.

The manager's loop is meant to look like this, and never to raise on what a peer sends:

    incoming = recv_request(router)                  # never raises ProtocolError
    if incoming.error is not None:
        count(incoming.error.code)
        send_reply(router, incoming.routing, ErrorReply.from_exception(incoming.error))
    else:
        send_reply(router, incoming.routing, handle(incoming.message))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import zmq

from protocol.codec import REPLY_TYPES, REQUEST_TYPES, decode, encode
from protocol.errors import (
    EndpointError,
    InvalidFieldError,
    MalformedMessageError,
    ProtocolError,
    RequestTimeoutError,
    SecurityConfigError,
)
from protocol.keys import KeyPair
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.messages import Message
from protocol.security import (
    Authenticator,
    check_bind_security,
    configure_curve_client,
    configure_curve_server,
)

LINGER_MS = 0


@dataclass(frozen=True)
class Incoming:
    """One request as the ROUTER received it.

    routing: the frames to put before a reply (the peer's identity, plus the empty delimiter
    when the peer is a REQ socket). Exactly one of ``message`` and ``error`` is set.
    size_bytes: the payload's size. user_id: the client's Z85 public key under CurveZMQ.
    """

    routing: tuple[bytes, ...]
    message: Message | None
    error: ProtocolError | None
    size_bytes: int
    user_id: str | None = None


def _close_on_error(socket: zmq.Socket, action: Callable[[], object], what: str) -> None:
    try:
        action()
    except zmq.ZMQError as exc:
        socket.close(linger=0)
        raise EndpointError(f"cannot {what}: {exc.strerror}", field="endpoint") from None
    except BaseException:
        socket.close(linger=0)
        raise


def bind_router(context: zmq.Context, endpoint: str, *, limits: Limits = DEFAULT_LIMITS,
                server_keys: KeyPair | None = None,
                authenticator: Authenticator | None = None,
                insecure: bool = False) -> zmq.Socket:
    """The manager's ROUTER bound to ``endpoint`` (``tcp://127.0.0.1:*`` picks a free port;
    read it back with ``bound_endpoint``).

    With ``server_keys`` it is a CurveZMQ server: with ``authenticator`` (started, on the same
    context) only allow-listed clients get through, and none if the authenticator is stopped;
    without it any client that knows the server's public key does. Beyond loopback it refuses
    to bind without keys unless ``insecure`` (InsecureBindError).
    """
    check_bind_security(endpoint, secure=server_keys is not None, insecure=insecure)
    if authenticator is not None:
        if server_keys is None:
            raise SecurityConfigError("an allow-list needs CurveZMQ: give the server keys too",
                                      field="authenticator")
        if authenticator.context is not context or not authenticator.running:
            raise SecurityConfigError("the authenticator must be started on the same context "
                                      "before the socket binds", field="authenticator")
    socket = context.socket(zmq.ROUTER)

    def setup() -> None:
        socket.linger = LINGER_MS
        socket.setsockopt(zmq.MAXMSGSIZE, limits.max_request_bytes)
        if server_keys is not None:
            configure_curve_server(socket, server_keys, authenticate=authenticator is not None)
        socket.bind(endpoint)

    _close_on_error(socket, setup, f"bind {endpoint}")
    return socket


def connect_dealer(context: zmq.Context, endpoint: str, *, limits: Limits = DEFAULT_LIMITS,
                   client_keys: KeyPair | None = None,
                   server_public_key: bytes | str | None = None,
                   reconnect_ivl_ms: int | None = None,
                   reconnect_ivl_max_ms: int | None = None) -> zmq.Socket:
    """An agent's or client's DEALER connected to the manager at ``endpoint``.

    Give both ``client_keys`` and ``server_public_key`` for CurveZMQ. libzmq reconnects by
    itself, waiting ``reconnect_ivl_ms`` and doubling up to ``reconnect_ivl_max_ms`` (its own
    defaults when None).
    """
    if (client_keys is None) != (server_public_key is None):
        raise SecurityConfigError("CurveZMQ needs both the client's key pair and the server's "
                                  "public key", field="client_keys")
    socket = context.socket(zmq.DEALER)

    def setup() -> None:
        socket.linger = LINGER_MS
        socket.setsockopt(zmq.MAXMSGSIZE, limits.max_reply_bytes)
        if reconnect_ivl_ms is not None:
            socket.setsockopt(zmq.RECONNECT_IVL, reconnect_ivl_ms)
        if reconnect_ivl_max_ms is not None:
            socket.setsockopt(zmq.RECONNECT_IVL_MAX, reconnect_ivl_max_ms)
        if client_keys is not None and server_public_key is not None:
            configure_curve_client(socket, client_keys, server_public_key)
        socket.connect(endpoint)

    _close_on_error(socket, setup, f"connect to {endpoint}")
    return socket


def bound_endpoint(socket: zmq.Socket) -> str:
    """The endpoint a socket last bound, with the port libzmq picked for ``*``."""
    return socket.getsockopt_string(zmq.LAST_ENDPOINT)


def recv_request(socket: zmq.Socket, *, limits: Limits = DEFAULT_LIMITS, flags: int = 0,
                 expect: Collection[str] = REQUEST_TYPES,
                 with_user_id: bool = False) -> Incoming:
    """Receive one request on a ROUTER and decode it; a bad one comes back as ``error``.

    Raises only what ZeroMQ raises (``zmq.Again`` with ``zmq.NOBLOCK`` and nothing waiting).
    Accepts DEALER framing (identity, payload) and REQ framing (identity, empty, payload).
    ``with_user_id`` fills ``Incoming.user_id`` with the client's CurveZMQ public key (it
    costs a few microseconds a message, so it is off unless asked for).
    """
    if with_user_id:
        parts = socket.recv_multipart(flags, copy=False)
        user_id = _user_id(parts[-1])
        frames = [part.bytes for part in parts]
    else:
        frames = socket.recv_multipart(flags)
        user_id = None
    identity = frames[0]
    rest = frames[1:]
    routing: tuple[bytes, ...]
    if len(rest) == 1:
        routing, payload = (identity,), rest[0]
    elif len(rest) == 2 and not rest[0]:
        routing, payload = (identity, b""), rest[1]
    else:
        error = MalformedMessageError(
            f"expected one payload frame (after an empty delimiter from REQ sockets), got "
            f"{len(rest)} frames")
        return Incoming((identity,), None, error, sum(map(len, rest)), user_id)
    try:
        message = decode(payload, limits=limits, expect=expect)
    except ProtocolError as exc:
        return Incoming(routing, None, exc, len(payload), user_id)
    return Incoming(routing, message, None, len(payload), user_id)


def _user_id(frame: zmq.Frame) -> str | None:
    try:
        value = frame.get("User-Id")
        return value if isinstance(value, str) and value else None
    except zmq.ZMQError:  # no User-Id without a ZAP handler
        return None


def send_reply(socket: zmq.Socket, routing: Sequence[bytes], message: Message, *,
               limits: Limits = DEFAULT_LIMITS) -> bool:
    """Send ``message`` back through a ROUTER without ever blocking.

    Returns False when it was dropped because the peer's queue is full; a peer that has gone
    away is dropped silently by ZeroMQ. Raises ProtocolError if ``message`` is invalid.
    """
    data = encode(message, limits=limits)
    try:
        socket.send_multipart([*routing, data], zmq.NOBLOCK)
    except zmq.Again:
        return False
    return True


def send_message(socket: zmq.Socket, message: Message, *, limits: Limits = DEFAULT_LIMITS,
                 flags: int = zmq.NOBLOCK) -> None:
    """Encode and send one message on a DEALER (``zmq.Again`` when its queue is full)."""
    socket.send(encode(message, limits=limits), flags)


def recv_message(socket: zmq.Socket, *, limits: Limits = DEFAULT_LIMITS, flags: int = 0,
                 expect: Collection[str] = REPLY_TYPES) -> Message:
    """Receive and decode one message on a DEALER; raises ProtocolError for a bad one."""
    frames = socket.recv_multipart(flags)
    if len(frames) != 1:
        raise MalformedMessageError(f"expected one frame, got {len(frames)}")
    return decode(frames[0], limits=limits, expect=expect)


def request(socket: zmq.Socket, message: Message, *, timeout_seconds: float,
            limits: Limits = DEFAULT_LIMITS,
            clock: Callable[[], float] = time.monotonic) -> Message:
    """Send a request on a DEALER and return the reply with the same ``request_id``.

    Replies to earlier requests (answered after their caller gave up) are skipped, so one
    socket serves any number of requests. An ``error`` reply is returned like any other;
    a malformed reply to this request raises its ProtocolError; RequestTimeoutError when
    nothing matching arrives in ``timeout_seconds``.
    """
    request_id = getattr(message, "request_id", None)
    if type(request_id) is not int:
        raise InvalidFieldError(f"{message.TYPE} is not a request: it has no request_id",
                                field="request_id")
    if not timeout_seconds > 0:
        raise InvalidFieldError(f"timeout_seconds must be > 0, got {timeout_seconds!r}",
                                field="timeout_seconds", value=timeout_seconds)
    data = encode(message, limits=limits)
    deadline = clock() + timeout_seconds
    while True:
        try:
            socket.send(data, zmq.NOBLOCK)
            break
        except zmq.Again:
            _wait(socket, zmq.POLLOUT, deadline, clock, message, timeout_seconds)
    while True:
        _wait(socket, zmq.POLLIN, deadline, clock, message, timeout_seconds)
        frames = socket.recv_multipart(zmq.NOBLOCK)
        if len(frames) != 1:
            continue
        try:
            reply = decode(frames[0], limits=limits, expect=REPLY_TYPES)
        except ProtocolError as exc:
            if exc.request_id == request_id:
                raise
            continue
        if getattr(reply, "request_id", None) == request_id:
            return reply


def _wait(socket: zmq.Socket, event: int, deadline: float, clock: Callable[[], float],
          message: Message, timeout_seconds: float) -> None:
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            raise RequestTimeoutError(
                f"no reply to {message.TYPE} request {getattr(message, 'request_id', '?')} "
                f"within {timeout_seconds:g} s; is the manager running and reachable?")
        if socket.poll(max(1, int(remaining * 1000)), event):
            return


def request_once(context: zmq.Context, endpoint: str, message: Message, *,
                 timeout_seconds: float, limits: Limits = DEFAULT_LIMITS,
                 client_keys: KeyPair | None = None,
                 server_public_key: bytes | str | None = None) -> Message:
    """Connect a DEALER, make one ``request``, close it: what a one-shot CLI call needs."""
    socket = connect_dealer(context, endpoint, limits=limits, client_keys=client_keys,
                            server_public_key=server_public_key)
    try:
        return request(socket, message, timeout_seconds=timeout_seconds, limits=limits)
    finally:
        socket.close(linger=0)
