"""CurveZMQ end to end: only allow-listed agents and clients get through."""

import sqlite3
import subprocess
import sys
import time

import pytest
from daemons import wait_for

from protocol import read_keypair, read_public_key

pytestmark = pytest.mark.slow


def keys(folder, name):
    subprocess.run([sys.executable, "-m", "ghs", "keys", str(folder), "--name", name],
                   check=True, capture_output=True, timeout=60)
    return folder / f"{name}.key", folder / f"{name}.key_secret"


def test_only_listed_agents_are_stored(daemons, tmp_path):
    keyring, allowed = tmp_path / "keys", tmp_path / "allowed"
    allowed.mkdir()
    _, manager_secret = keys(keyring, "manager")
    manager_public = keyring / "manager.key"
    listed_public, listed_secret = keys(keyring, "listed")
    _, stranger_secret = keys(keyring, "stranger")
    client_public, client_secret = keys(keyring, "client")
    for public in (listed_public, client_public):
        (allowed / public.name).write_text(public.read_text())
    assert (manager_secret.stat().st_mode & 0o777) == 0o600

    _, endpoint = daemons.manager(GHS_PCM_KEYS=str(manager_secret), GHS_PCM_ALLOW=str(allowed))
    secure = {"GHS_AGENT_SERVER_KEY": str(manager_public)}
    daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--host-id", "listed",
                  outbox="listed.sqlite", log="listed.log",
                  GHS_AGENT_KEYS=str(listed_secret), **secure)
    daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--host-id", "stranger",
                  outbox="stranger.sqlite", log="stranger.log",
                  GHS_AGENT_KEYS=str(stranger_secret), **secure)
    client = daemons.client(endpoint, client_keys=read_keypair(client_secret),
                            server_public_key=read_public_key(manager_public))
    with client:
        wait_for(lambda: any(h["name"] == "listed-sim00" and h["measurements"] > 20
                             for h in client.status().hosts), 60, "the listed agent's data")
        time.sleep(1.0)  # the stranger has had every chance by now
        names = {h["name"] for h in client.status().hosts}
    assert names == {"listed-sim00"}
    with sqlite3.connect(daemons.root / "manager.sqlite") as connection:
        hosts = {row[0] for row in connection.execute("SELECT DISTINCT host_id FROM "
                                                      "measurements")}
    assert hosts == {"listed-sim00"}
    # the stranger's measurements wait in its outbox, never lost, never stored
    with sqlite3.connect(daemons.root / "stranger.sqlite") as connection:
        assert connection.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] > 0
    # a client without keys gets no answer
    plain = daemons.client(endpoint, timeout_seconds=1.0)
    with plain, pytest.raises(Exception, match="did not answer"):
        plain.status()
