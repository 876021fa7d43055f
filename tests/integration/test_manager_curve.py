"""CurveZMQ end to end: only allow-listed agents and clients get through."""

import sqlite3
import subprocess
import sys
import time

import pytest
import zmq
from daemons import wait_for

from protocol import (
    ErrorReply,
    Measurement,
    MeasurementBatch,
    connect_dealer,
    read_keypair,
    read_public_key,
    request,
)

pytestmark = pytest.mark.slow


def keys(folder, name, *hosts):
    bound = [item for host in hosts for item in ("--host", host)]
    subprocess.run([sys.executable, "-m", "ghs", "keys", str(folder), "--name", name, *bound],
                   check=True, capture_output=True, timeout=60)
    return folder / f"{name}.key", folder / f"{name}.key_secret"


def test_only_listed_agents_are_stored(daemons, tmp_path):
    keyring, allowed = tmp_path / "keys", tmp_path / "allowed"
    allowed.mkdir()
    _, manager_secret = keys(keyring, "manager")
    manager_public = keyring / "manager.key"
    listed_public, listed_secret = keys(keyring, "listed", "listed-sim*")
    _, stranger_secret = keys(keyring, "stranger")
    client_public, client_secret = keys(keyring, "client")
    for public in (listed_public, client_public):
        (allowed / public.name).write_text(public.read_text())
    assert (manager_secret.stat().st_mode & 0o777) == 0o600

    _, endpoint = daemons.manager(
        GHS_PCM_KEYS=str(manager_secret), GHS_PCM_ALLOW=str(allowed),
        ping_keys=(read_keypair(client_secret), read_public_key(manager_public)))
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


def test_a_listed_agent_claiming_another_host_stores_nothing(daemons, tmp_path):
    keyring, allowed = tmp_path / "keys", tmp_path / "allowed"
    allowed.mkdir()
    _, manager_secret = keys(keyring, "manager")
    manager_public = keyring / "manager.key"
    honest_public, honest_secret = keys(keyring, "honest", "honest-sim*")
    liar_public, liar_secret = keys(keyring, "liar", "liar-sim*")
    client_public, client_secret = keys(keyring, "client")  # listed without hosts: queries
    for public in (honest_public, liar_public, client_public):
        (allowed / public.name).write_text(public.read_text())
    client_keys = (read_keypair(client_secret), read_public_key(manager_public))
    _, endpoint = daemons.manager(GHS_PCM_KEYS=str(manager_secret), GHS_PCM_ALLOW=str(allowed),
                                  ping_keys=client_keys)
    secure = {"GHS_AGENT_SERVER_KEY": str(manager_public)}
    daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--host-id", "honest",
                  outbox="honest.sqlite", log="honest.log",
                  GHS_AGENT_KEYS=str(honest_secret), **secure)
    # the liar's key is listed, but for liar-sim*: it claims the honest agent's host id
    liar = daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--seed", "9",
                         "--host-id", "honest", outbox="liar.sqlite", log="liar.log",
                         GHS_AGENT_KEYS=str(liar_secret), **secure)
    # and the query-only client key may not report at all
    daemons.agent(endpoint, "--simulate", "1", "--speedup", "3600", "--host-id", "client",
                  outbox="client.sqlite", log="client-agent.log",
                  GHS_AGENT_KEYS=str(client_secret), **secure)
    with daemons.client(endpoint, client_keys=client_keys[0],
                        server_public_key=client_keys[1]) as client:
        wait_for(lambda: client.status().counters["rejected"].get("host_not_allowed", 0) >= 4,
                 60, "the liar's and the client's messages to be refused")
        wait_for(lambda: any(h["name"] == "honest-sim00" and h["measurements"] > 20
                             for h in client.status().hosts), 60, "the honest agent's data")
        status = client.status()
    assert {h["name"] for h in status.hosts} == {"honest-sim00"}
    # the liar's agent never got past its refused hello: its measurements wait in its outbox
    with sqlite3.connect(daemons.root / "liar.sqlite") as connection:
        assert connection.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] > 0
    assert "host_not_allowed" in daemons.log("liar.log")
    # stopped, it keeps them for its next start and says why it did not wait for acks
    assert daemons.terminate(liar) == 0
    assert "kept for the next start (the manager refuses host honest-sim00)" in \
        daemons.log("liar.log")
    # a forged batch straight onto the wire under the honest host's id is refused too
    context = zmq.Context()
    try:
        socket = connect_dealer(context, endpoint, client_keys=read_keypair(liar_secret),
                                server_public_key=read_public_key(manager_public))
        forged = MeasurementBatch(request_id=7, host_id="honest-sim00", measurements=(
            Measurement(seq=10**9, start_epoch_seconds=1.0e9, end_epoch_seconds=1.0e9 + 60,
                        lam_per_second=0.5, rho=0.99, service_count=0,
                        service_cpu_seconds_sum=0.0, service_cpu_seconds_sum_squares=0.0,
                        busy_cpu_seconds=59.0, jobs_started=30, jobs_between=0,
                        running_processes=5),))
        reply = request(socket, forged, timeout_seconds=10)
        socket.close(linger=0)
    finally:
        context.term()
    assert isinstance(reply, ErrorReply) and reply.code == "host_not_allowed"
    with sqlite3.connect(daemons.root / "manager.sqlite") as connection:
        assert connection.execute("SELECT COUNT(*) FROM measurements WHERE seq = ?",
                                  [10**9]).fetchone()[0] == 0
