"""Wiring an agent together: its hosts' samplers on threads, the sender on the caller's."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import zmq

from ghs.agent.hosts import MeasuringHost, local_host, simulated_hosts
from ghs.agent.outbox import Outbox
from ghs.agent.sender import Sender
from ghs.config import Config
from ghs.errors import GhsError
from protocol import read_keypair, read_public_key

LOG = logging.getLogger("ghs.agent")


def expand(path: str) -> str:
    return str(Path(os.path.expanduser(path)))


class Agent:
    """Samplers feeding ``outbox`` and a ``sender`` draining it, until ``stop`` is set."""

    def __init__(self, hosts: Sequence[MeasuringHost], sender: Sender, outbox: Outbox) -> None:
        self.hosts = list(hosts)
        self.sender = sender
        self.outbox = outbox
        self.failures: list[BaseException] = []

    def _sample(self, host: MeasuringHost, stop: threading.Event) -> None:
        try:
            host.run(stop)
        except Exception as exc:  # a broken sampler must not take the others down
            LOG.exception("sampler of %s stopped", host.identity.host_id)
            self.failures.append(exc)

    def run(self, stop: threading.Event, *, drain_seconds: float = 2.0) -> None:
        threads = [threading.Thread(target=self._sample, args=(host, stop), daemon=True,
                                    name=f"ghs-sampler-{host.identity.host_id}")
                   for host in self.hosts]
        for thread in threads:
            thread.start()
        try:
            self.sender.run(stop, drain_seconds=drain_seconds)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=10)
            for host in self.hosts:
                host.close()
            self.sender.close()
            self.outbox.close()


def build_agent(config: Config, *, context: zmq.Context, stop: threading.Event,
                endpoint: str, simulate: int = 0, speedup: float = 1.0, seed: int = 1,
                interval_seconds: float | None = None, host_id: str | None = None,
                outbox_path: str | None = None, store_path: str | None = None) -> Agent:
    """An agent for this machine, or for ``simulate`` simulated workstations."""
    settings = config.agent
    outbox = Outbox(expand(outbox_path or settings.outbox))
    try:
        if simulate > 0:
            prefix = host_id or settings.host_id or "lab"
            hosts = simulated_hosts(simulate, config.sensor, speedup=speedup, seed=seed,
                                    prefix=prefix, sink=outbox.add,
                                    interval_seconds=interval_seconds)
        else:
            hosts = [local_host(config.sensor, host_id=host_id or settings.host_id or None,
                                store_path=expand(store_path or settings.store), stop=stop,
                                sink=outbox.add, seed=seed, interval_seconds=interval_seconds)]
        client_keys = read_keypair(settings.keys) if settings.keys else None
        server_key = read_public_key(settings.server_key) if settings.server_key else None
        if (client_keys is None) != (server_key is None):
            raise GhsError("CurveZMQ needs both agent.keys and agent.server_key",
                           field="agent.keys", value=settings.keys)
        sender = Sender(context=context, endpoint=endpoint, outbox=outbox,
                        hosts=[host.identity for host in hosts], client_keys=client_keys,
                        server_public_key=server_key, batch_size=settings.batch_size,
                        ack_timeout_seconds=settings.ack_timeout_seconds,
                        max_backoff_seconds=settings.max_backoff_seconds,
                        heartbeat_seconds=settings.heartbeat_seconds)
    except BaseException:
        outbox.close()
        raise
    return Agent(hosts, sender, outbox)
