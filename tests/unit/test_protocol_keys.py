"""CurveZMQ key files, allow-lists, and the rule against binding beyond loopback unprotected."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import zmq
import zmq.auth

from protocol import (
    Authenticator,
    InsecureBindError,
    KeyFileError,
    KeyPair,
    SecurityConfigError,
    bind_router,
    check_bind_security,
    connect_dealer,
    generate_keypair,
    is_loopback_endpoint,
    load_allowed_keys,
    read_keypair,
    read_public_key,
    write_keypair,
)


@pytest.fixture
def context():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def test_generated_pairs_are_distinct_z85_keys() -> None:
    first, second = generate_keypair(), generate_keypair()
    assert len(first.public) == len(first.secret) == 40
    assert first.public != second.public
    assert "<hidden>" in repr(first) and first.secret.decode() not in repr(first)


def test_write_and_read_back_with_safe_permissions(tmp_path: Path) -> None:
    pair = generate_keypair()
    public_path, secret_path = write_keypair(pair, tmp_path, "manager")
    assert (public_path.name, secret_path.name) == ("manager.key", "manager.key_secret")
    assert stat.S_IMODE(secret_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(public_path.stat().st_mode) == 0o644
    assert read_keypair(secret_path) == pair
    assert read_public_key(public_path) == pair.public
    assert read_public_key(secret_path) == pair.public
    # the files are ZeroMQ certificates: pyzmq's own reader agrees
    assert zmq.auth.load_certificate(str(secret_path)) == (pair.public, pair.secret)
    assert zmq.auth.load_certificate(str(public_path)) == (pair.public, None)


def test_existing_keys_are_not_overwritten_unless_asked(tmp_path: Path) -> None:
    write_keypair(generate_keypair(), tmp_path, "agent")
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        write_keypair(generate_keypair(), tmp_path, "agent")
    newer = generate_keypair()
    _, secret_path = write_keypair(newer, tmp_path, "agent", overwrite=True)
    assert read_keypair(secret_path) == newer


def test_secret_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    _, secret_path = write_keypair(generate_keypair(), tmp_path, "agent")
    secret_path.chmod(0o640)
    with pytest.raises(KeyFileError, match="chmod 600"):
        read_keypair(secret_path)


def test_bad_key_files(tmp_path: Path) -> None:
    public_path, _ = write_keypair(generate_keypair(), tmp_path, "a")
    with pytest.raises(KeyFileError, match="no secret-key"):
        public_path.chmod(0o600)
        read_keypair(public_path)
    with pytest.raises(KeyFileError, match="does not exist"):
        read_keypair(tmp_path / "missing.key_secret")
    garbage = tmp_path / "garbage.key"
    garbage.write_text("hello\n")
    with pytest.raises(KeyFileError, match="not a ZeroMQ certificate"):
        read_public_key(garbage)
    broken = tmp_path / "broken.key"
    broken.write_text('curve\n    public-key = "tooshort"\n')
    with pytest.raises(KeyFileError, match="40 Z85 characters"):
        read_public_key(broken)
    with pytest.raises(KeyFileError, match="plain file name"):
        write_keypair(generate_keypair(), tmp_path, "../escape")
    with pytest.raises(KeyFileError):
        KeyPair(public=b"~" * 40)


def test_allow_list_from_a_directory_or_a_text_file(tmp_path: Path) -> None:
    pairs = [generate_keypair() for _ in range(3)]
    keys_dir = tmp_path / "allowed"
    keys_dir.mkdir()
    for number, pair in enumerate(pairs):
        write_keypair(pair, keys_dir, f"agent{number}")
    assert load_allowed_keys(keys_dir) == {pair.public for pair in pairs}
    listing = tmp_path / "allowed.txt"
    listing.write_text("# lab agents\n" + "\n".join(p.public.decode() for p in pairs[:2])
                       + "\n\n")
    assert load_allowed_keys(listing) == {pairs[0].public, pairs[1].public}
    listing.write_text("not-a-key\n")
    with pytest.raises(KeyFileError, match="line 1"):
        load_allowed_keys(listing)


@pytest.mark.parametrize(("endpoint", "loopback"), [
    ("tcp://127.0.0.1:5555", True),
    ("tcp://127.3.2.1:5555", True),
    ("tcp://localhost:5555", True),
    ("tcp://[::1]:5555", True),
    ("ipc:///run/ghs/manager.sock", True),
    ("inproc://manager", True),
    ("tcp://*:5555", False),
    ("tcp://0.0.0.0:5555", False),
    ("tcp://192.168.1.10:5555", False),
    ("tcp://[::]:5555", False),
    ("tcp://eth0:5555", False),
    ("tcp://pcm.lab.example:5555", False),
    ("udp://127.0.0.1:5555", False),
    ("nonsense", False),
])
def test_loopback_endpoints(endpoint: str, loopback: bool) -> None:
    assert is_loopback_endpoint(endpoint) is loopback


def test_binding_beyond_loopback_needs_keys_or_insecure() -> None:
    with pytest.raises(InsecureBindError, match="insecure=True") as caught:
        check_bind_security("tcp://*:5555", secure=False, insecure=False)
    assert caught.value.code == "insecure_bind"
    check_bind_security("tcp://*:5555", secure=True, insecure=False)
    check_bind_security("tcp://*:5555", secure=False, insecure=True)
    check_bind_security("tcp://127.0.0.1:5555", secure=False, insecure=False)


def test_bind_router_refuses_before_opening_anything(context: zmq.Context) -> None:
    with pytest.raises(InsecureBindError):
        bind_router(context, "tcp://0.0.0.0:*")
    with pytest.raises(InsecureBindError):
        bind_router(context, "tcp://*:*")


def test_inconsistent_security_settings(context: zmq.Context) -> None:
    pair = generate_keypair()
    authenticator = Authenticator(context, [])
    with pytest.raises(SecurityConfigError, match="started"):
        bind_router(context, "tcp://127.0.0.1:*", server_keys=pair,
                    authenticator=authenticator)
    with pytest.raises(SecurityConfigError, match="needs CurveZMQ"):
        bind_router(context, "tcp://127.0.0.1:*", authenticator=authenticator)
    with pytest.raises(SecurityConfigError, match="both"):
        connect_dealer(context, "tcp://127.0.0.1:5555", client_keys=pair)
    with pytest.raises(SecurityConfigError, match="secret"):
        bind_router(context, "tcp://127.0.0.1:*", server_keys=KeyPair(public=pair.public))
    with Authenticator(context, [pair.public]), \
            pytest.raises(SecurityConfigError, match="another authenticator"):
        Authenticator(context, []).start()
