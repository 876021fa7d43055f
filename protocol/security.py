"""CurveZMQ on sockets, a ZAP handler enforcing an allow-list, and the loopback bind rule.

How the pieces fit (the manager):

    auth = Authenticator(context, allowed_keys)     # allowed_keys from keys.load_allowed_keys
    auth.start()                                     # before any secured socket binds
    router = bind_router(context, endpoint, server_keys=pair, authenticator=auth)
    ...
    router.close(); auth.stop()                      # sockets first, then the authenticator

libzmq asks the ZAP handler of the socket's context about every CurveZMQ handshake; the handler
accepts a client only if its public key is on the allow-list. A refused client's connection is
dropped before any of its messages reach the socket.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit

import zmq

from protocol.errors import InsecureBindError, KeyFileError, SecurityConfigError
from protocol.keys import KeyPair, normalise_key

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = "ghs"
_ZAP_VERSION = b"1.0"


def is_loopback_endpoint(endpoint: str) -> bool:
    """Whether only this machine can reach ``endpoint``: ipc://, inproc://, or tcp:// on a
    loopback address (127.0.0.0/8, ::1, localhost). ``*``, 0.0.0.0 and interface names are not.
    """
    scheme, _, rest = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp" or not rest:
        return False
    try:
        host = urlsplit(f"//{rest}").hostname
    except ValueError:
        return False
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind_security(endpoint: str, *, secure: bool, insecure: bool) -> None:
    """Refuse to bind beyond loopback without CurveZMQ keys unless ``insecure`` is set."""
    if secure or insecure or is_loopback_endpoint(endpoint):
        return
    raise InsecureBindError(
        f"refusing to bind {endpoint} without CurveZMQ keys: anyone who can reach it could "
        "read and forge measurements; give the manager a key pair and an allow-list, bind "
        "to loopback, or pass insecure=True (--insecure) to accept the risk",
        field="endpoint", value=endpoint)


def configure_curve_server(socket: zmq.Socket, server_keys: KeyPair, *,
                           authenticate: bool) -> None:
    """Make ``socket`` a CurveZMQ server.

    With ``authenticate`` every handshake goes to the ZAP handler (an ``Authenticator``) of
    domain ``ZAP_DOMAIN`` and fails when none is running; without it any client that knows the
    server's public key gets in (traffic is still encrypted).
    """
    if server_keys.secret is None:
        raise SecurityConfigError("a CurveZMQ server needs its secret key", field="server_keys")
    socket.curve_secretkey = server_keys.secret
    socket.curve_publickey = server_keys.public
    socket.curve_server = True
    if authenticate:
        socket.zap_domain = ZAP_DOMAIN.encode()
        # Without this libzmq lets handshakes through when no ZAP handler is bound; with it a
        # missing handler fails closed. Builds lacking the option still get the handler, as
        # long as it is started before the bind and stopped after the close.
        with contextlib.suppress(AttributeError, zmq.ZMQError):
            socket.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)


def configure_curve_client(socket: zmq.Socket, client_keys: KeyPair,
                           server_public_key: bytes | str) -> None:
    """Make ``socket`` a CurveZMQ client of the server with ``server_public_key``."""
    if client_keys.secret is None:
        raise SecurityConfigError("a CurveZMQ client needs its secret key", field="client_keys")
    socket.curve_secretkey = client_keys.secret
    socket.curve_publickey = client_keys.public
    socket.curve_serverkey = normalise_key(server_public_key, what="server public key")


class Authenticator:
    """A ZAP handler on its own thread accepting CurveZMQ clients whose public key is listed.

    Bound to the caller's context; ``start`` binds the ZAP endpoint before returning (so no
    handshake can slip past it) and ``stop`` ends the thread. ``accepted`` and ``denied`` count
    handshakes. The allow-list may be replaced while running with ``set_allowed``.
    """

    def __init__(self, context: zmq.Context, allowed_public_keys: Iterable[bytes | str]) -> None:
        self.context = context
        self._allowed = frozenset(normalise_key(key, what="allowed public key")
                                  for key in allowed_public_keys)
        self._lock = threading.Lock()
        self._accepted = 0
        self._denied = 0
        self._thread: threading.Thread | None = None
        self._control: zmq.Socket | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def accepted(self) -> int:
        with self._lock:
            return self._accepted

    @property
    def denied(self) -> int:
        with self._lock:
            return self._denied

    @property
    def allowed(self) -> frozenset[bytes]:
        """The Z85 public keys currently allowed."""
        return self._allowed

    def set_allowed(self, allowed_public_keys: Iterable[bytes | str]) -> None:
        """Replace the allow-list; handshakes already accepted stay connected."""
        keys = frozenset(normalise_key(key, what="allowed public key")
                         for key in allowed_public_keys)
        self._allowed = keys  # one reference swap: the handler thread sees old or new, whole

    def start(self) -> None:
        if self._thread is not None:
            raise SecurityConfigError("the authenticator is already started")
        handler = self.context.socket(zmq.REP)
        handler.linger = 0
        try:
            handler.bind(ZAP_ENDPOINT)
        except zmq.ZMQError as exc:
            handler.close()
            raise SecurityConfigError(
                f"cannot bind the ZAP handler ({exc}); is another authenticator running on "
                "this context?") from None
        address = f"inproc://ghs-zap-control-{secrets.token_hex(8)}"
        control = self.context.socket(zmq.PAIR)
        control.linger = 0
        control.bind(address)
        listener = self.context.socket(zmq.PAIR)
        listener.linger = 0
        listener.connect(address)
        self._control = control
        self._thread = threading.Thread(target=self._serve, args=(handler, listener),
                                        name="ghs-zap", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """End the handler thread; call after closing the sockets it guards."""
        if self._thread is None or self._control is None:
            return
        # a ZMQError here means the context is gone and the thread has already left
        with contextlib.suppress(zmq.ZMQError):
            self._control.send(b"stop", zmq.NOBLOCK)
        self._thread.join(timeout_seconds)
        self._control.close()
        self._control = None
        self._thread = None

    def __enter__(self) -> Authenticator:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self, handler: zmq.Socket, listener: zmq.Socket) -> None:
        poller = zmq.Poller()
        poller.register(handler, zmq.POLLIN)
        poller.register(listener, zmq.POLLIN)
        try:
            while True:
                events = dict(poller.poll())
                if listener in events:
                    return
                if handler in events:
                    frames = handler.recv_multipart()
                    handler.send_multipart(self._answer(frames))
        except zmq.ContextTerminated:
            return
        finally:
            handler.close()
            listener.close()

    def _answer(self, frames: list[bytes]) -> list[bytes]:
        """The ZAP reply (RFC 27) to one request; anything unexpected is refused."""
        request_id = frames[1] if len(frames) > 1 else b""
        if len(frames) < 6 or frames[0] != _ZAP_VERSION:
            return [_ZAP_VERSION, request_id, b"500", b"malformed ZAP request", b"", b""]
        domain, mechanism, credentials = frames[2], frames[5], frames[6:]
        allowed = False
        user_id = b""
        if domain == ZAP_DOMAIN.encode() and mechanism == b"CURVE" and len(credentials) == 1:
            try:
                user_id = normalise_key(credentials[0], what="client key")
            except KeyFileError:
                user_id = b""
            allowed = bool(user_id) and user_id in self._allowed
        with self._lock:
            if allowed:
                self._accepted += 1
            else:
                self._denied += 1
        if allowed:
            return [_ZAP_VERSION, request_id, b"200", b"OK", user_id, b""]
        return [_ZAP_VERSION, request_id, b"400", b"public key not on the allow-list", b"", b""]
