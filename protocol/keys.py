"""CurveZMQ key pairs and key files.

Keys travel as Z85 text (40 characters for 32 bytes). Files use ZeroMQ's certificate format,
so ``zmq.auth.load_certificate`` and czmq tools read them too: ``NAME.key`` holds the public key
(mode 0644) and ``NAME.key_secret`` both keys (mode 0600, created with that mode so it is never
readable by others, not even for a moment). An allow-list is a directory of ``*.key`` files or a
text file of Z85 public keys, one a line (lines starting with ``#`` are comments).

An allow-list entry may also name the host ids its key may report measurements for (shell
patterns such as ``lab-sim*`` allowed): in a text file after the key on the same line
(``KEY ws1 ws2``), in a certificate as ``hosts = "ws1 ws2"`` in its ``metadata`` section. A key
without hosts may only query.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.utils.z85

from protocol.errors import KeyFileError

Z85_KEY_CHARS = 40
_KEY_LINE = re.compile(r'^\s*(public|secret)-key\s*=\s*"([^"]*)"\s*$')
_HOSTS_LINE = re.compile(r'^\s*hosts\s*=\s*"([^"]*)"\s*$')
_PUBLIC_SUFFIX = ".key"
_SECRET_SUFFIX = ".key_secret"


@dataclass(frozen=True)
class KeyPair:
    """A CurveZMQ key pair as Z85 bytes; ``secret`` is None for a public-only certificate."""

    public: bytes
    secret: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "public", normalise_key(self.public, what="public key"))
        if self.secret is not None:
            object.__setattr__(self, "secret", normalise_key(self.secret, what="secret key"))

    def __repr__(self) -> str:  # never print a secret into a log
        hidden = "None" if self.secret is None else "'<hidden>'"
        return f"KeyPair(public={self.public.decode()!r}, secret={hidden})"


def normalise_key(key: bytes | str, *, what: str = "key") -> bytes:
    """A key as 40 Z85 bytes, from Z85 text (str or bytes) or the 32 raw bytes."""
    if isinstance(key, str):
        key = key.strip().encode("ascii", "replace")
    if not isinstance(key, (bytes, bytearray)):
        raise KeyFileError(f"{what} must be 40 Z85 characters, got {type(key).__name__}",
                           field=what)
    key = bytes(key)
    if len(key) == 32:
        return zmq.utils.z85.encode(key)
    if len(key) != Z85_KEY_CHARS:
        raise KeyFileError(f"{what} must be 40 Z85 characters, got {len(key)}", field=what)
    try:
        raw = zmq.utils.z85.decode(key)
    except Exception:  # pyzmq's z85 raises KeyError, struct.error, ...: none documented
        raise KeyFileError(f"{what} is not valid Z85 text", field=what) from None
    if len(raw) != 32:
        raise KeyFileError(f"{what} does not decode to 32 bytes", field=what)
    return key


def generate_keypair() -> KeyPair:
    """A fresh CurveZMQ key pair (libzmq's own generator)."""
    public, secret = zmq.curve_keypair()
    return KeyPair(public=public, secret=secret)


def key_file_paths(directory: str | Path, name: str) -> tuple[Path, Path]:
    """(public, secret) file paths for a key pair called ``name`` in ``directory``."""
    if not name or "/" in name or name.startswith("."):
        raise KeyFileError(f"key name must be a plain file name, got {name!r}", field="name",
                           value=name)
    base = Path(directory)
    return base / f"{name}{_PUBLIC_SUFFIX}", base / f"{name}{_SECRET_SUFFIX}"


def _certificate(pair: KeyPair, *, with_secret: bool, hosts: tuple[str, ...] = ()) -> str:
    lines = ["#   ZeroMQ CURVE " + ("**Secret** Certificate" if with_secret
                                    else "Public Certificate"),
             "#   written by ghs" + ("; DO NOT share this file or loosen its permissions"
                                     if with_secret else ""),
             "", "metadata", *([f'    hosts = "{" ".join(hosts)}"'] if hosts else []),
             "curve", f'    public-key = "{pair.public.decode()}"']
    if with_secret and pair.secret is not None:
        lines.append(f'    secret-key = "{pair.secret.decode()}"')
    return "\n".join(lines) + "\n"


def _write(path: Path, content: str, mode: int, overwrite: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        descriptor = os.open(path, flags, mode)
    except FileExistsError:
        raise KeyFileError(f"{path} exists; refusing to overwrite a key (pass overwrite=True)",
                           field="path", value=str(path)) from None
    except OSError as exc:
        raise KeyFileError(f"cannot write {path}: {exc.strerror}", field="path",
                           value=str(path)) from None
    try:
        # os.open's mode is masked by the umask and ignored for an existing file; fix it first
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            descriptor = -1
            handle.write(content)
    finally:
        if descriptor >= 0:
            os.close(descriptor)


def write_keypair(pair: KeyPair, directory: str | Path, name: str, *,
                  overwrite: bool = False, hosts: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Write ``NAME.key`` (0644) and ``NAME.key_secret`` (0600); returns their paths.

    ``hosts``: host ids (or shell patterns) the key may report, written into the public
    certificate for a manager's allow-list folder.
    """
    if pair.secret is None:
        raise KeyFileError("cannot write a key pair without its secret key", field="secret")
    for host in hosts:
        if not host or any(c.isspace() or c == '"' for c in host):
            raise KeyFileError(f"host {host!r} must be one word without quotes", field="hosts",
                               value=host)
    public_path, secret_path = key_file_paths(directory, name)
    _write(secret_path, _certificate(pair, with_secret=True), 0o600, overwrite)
    _write(public_path, _certificate(pair, with_secret=False, hosts=tuple(hosts)), 0o644,
           overwrite)
    return public_path, secret_path


def _read_text(path: Path, what: str) -> str:
    """The file's ASCII text, or KeyFileError naming ``what`` and the path."""
    try:
        return path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise KeyFileError(f"{what} {path} does not exist", field="path",
                           value=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read {what} {path}: {exc}", field="path",
                           value=str(path)) from None


def _parse_certificate(path: Path) -> dict[str, bytes]:
    content = _read_text(path, "key file")
    found: dict[str, bytes] = {}
    for line in content.splitlines():
        match = _KEY_LINE.match(line)
        if match:
            found[match.group(1)] = normalise_key(match.group(2),
                                                  what=f"{match.group(1)} key in {path}")
    if "public" not in found:
        raise KeyFileError(f"{path} is not a ZeroMQ certificate (no public-key line)",
                           field="path", value=str(path))
    return found


def read_keypair(path: str | Path) -> KeyPair:
    """Read a secret certificate (``NAME.key_secret``); refuses one readable by group or others.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise KeyFileError(f"key file {path} does not exist", field="path",
                           value=str(path)) from None
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror}", field="path",
                           value=str(path)) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"secret key file {path} is accessible by other users "
                           f"(mode {stat.S_IMODE(mode):04o}); run: chmod 600 {path}",
                           field="path", value=str(path))
    found = _parse_certificate(path)
    if "secret" not in found:
        raise KeyFileError(f"{path} holds no secret-key line (is it the public .key file?)",
                           field="path", value=str(path))
    return KeyPair(public=found["public"], secret=found["secret"])


def read_public_key(path: str | Path) -> bytes:
    """The Z85 public key of a certificate file (public or secret)."""
    return _parse_certificate(Path(path))["public"]


def load_allowed_keys(path: str | Path) -> frozenset[bytes]:
    """Public keys from a directory of ``*.key`` certificates or a text file of Z85 keys."""
    return frozenset(load_allow_list(path))


def load_allow_list(path: str | Path) -> dict[bytes, tuple[str, ...]]:
    """Allowed public keys, each with the host-id patterns it may report (may be none)."""
    path = Path(path)
    if path.is_dir():
        return dict(_certificate_entry(item)
                    for item in sorted(path.glob(f"*{_PUBLIC_SUFFIX}")))
    content = _read_text(path, "allow-list")
    if "public-key" in content:
        return dict([_certificate_entry(path)])
    entries: dict[bytes, tuple[str, ...]] = {}
    for number, line in enumerate(content.splitlines(), start=1):
        words = line.split()
        # '#' is a Z85 digit, so only a whole line can be a comment
        if words and not words[0].startswith("#"):
            key = normalise_key(words[0], what=f"{path} line {number}")
            entries[key] = (*entries.get(key, ()), *words[1:])
    return entries


def _certificate_entry(path: Path) -> tuple[bytes, tuple[str, ...]]:
    hosts: list[str] = []
    for line in _read_text(path, "key file").splitlines():
        match = _HOSTS_LINE.match(line)
        if match:
            hosts.extend(match.group(1).split())
    return read_public_key(path), tuple(hosts)
