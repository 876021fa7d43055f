"""Wiring an agent together: its hosts' samplers on threads, the sender on the caller's."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import zmq

from ghs.agent.hosts import MeasuringHost, local_host, simulated_hosts
from ghs.agent.outbox import Outbox
from ghs.agent.replay import Replay, read_stations, replay_hosts
from ghs.agent.sender import Sender
from ghs.config import Config
from ghs.errors import GhsError
from protocol import read_keypair, read_public_key

LOG = logging.getLogger("ghs.agent")


def expand(path: str) -> str:
    return str(Path(os.path.expanduser(path)))


class Agent:
    """Samplers and streams feeding ``outbox`` and a ``sender`` draining it, until ``stop``.

    With a ``replay`` stopping at a moment, the hosts' threads end when its clock gets there,
    each host sends a last round stamped with that moment, and the agent stops once the
    outbox is drained (``drained`` says whether it was).
    """

    restart_first_seconds = 5.0
    """How long a host's failed sampler or stream waits before it starts again (doubling
    up to ``restart_max_seconds``)."""
    restart_max_seconds = 300.0

    def __init__(self, hosts: Sequence[MeasuringHost], sender: Sender, outbox: Outbox,
                 replay: Replay | None = None) -> None:
        self.hosts = list(hosts)
        self.sender = sender
        self.outbox = outbox
        self.replay = replay
        self.failures: list[BaseException] = []  # the last ten
        self.loop_failures = 0  # host samplers' and streams' failures (each then restarted)
        self._failures_lock = threading.Lock()  # the hosts' threads fail independently
        self.drained = False

    def _loop(self, host: MeasuringHost, name: str, loop: Callable[[threading.Event], None],
              world: threading.Event) -> None:
        # a broken sampler must not take the others down, nor stop measuring for good: a full
        # disk or a locked outbox passes, so it starts again, waiting longer each time
        delay = self.restart_first_seconds
        while True:
            try:
                loop(world)
                return
            except Exception as exc:
                LOG.exception("%s of %s stopped; starting it again in %g s", name,
                              host.identity.host_id, delay)
                with self._failures_lock:
                    self.failures = [*self.failures[-9:], exc]
                    self.loop_failures += 1
            if world.wait(delay):
                return
            delay = min(2.0 * delay, self.restart_max_seconds)

    def run(self, stop: threading.Event, *, drain_seconds: float = 2.0) -> None:
        # the hosts' world stops with the agent, or at the replay's --until moment
        world = self.replay.released if self.replay is not None else threading.Event()
        threads = [threading.Thread(target=self._loop, args=(host, name, loop, world),
                                    daemon=True, name=f"ghs-{name}-{host.identity.host_id}")
                   for host in self.hosts for name, loop in host.tasks()]
        for thread in threads:
            thread.start()
        if self.replay is not None and self.replay.until_epoch_seconds is not None:
            threading.Thread(target=self._stop_world, args=(stop, world, threads),
                             daemon=True, name="ghs-replay-until").start()
        else:
            threading.Thread(target=lambda: (stop.wait(), world.set()), daemon=True,
                             name="ghs-world").start()
        try:
            self.sender.run(stop, drain_seconds=drain_seconds)
        finally:
            stop.set()
            world.set()
            for thread in threads:
                thread.join(timeout=10)
            self.drained = self.outbox.count() == 0 and self.outbox.held_count() == 0
            for host in self.hosts:
                host.close()
            self.sender.close()
            self.outbox.close()

    def _stop_world(self, stop: threading.Event, world: threading.Event,
                    threads: list[threading.Thread]) -> None:
        """At the replay's end: freeze the hosts, take the last round, let the sender drain."""
        assert self.replay is not None
        clock = self.replay.clock
        while not stop.is_set() and not clock.reached():  # type: ignore[attr-defined]
            stop.wait(0.005)
        world.set()
        for thread in threads:
            thread.join(timeout=30)
        if not stop.is_set():
            for host in self.hosts:
                host.finish()
            LOG.info("replay stopped at log time %.0f s; draining the outbox",
                     self.replay.until_epoch_seconds - self.replay.zero_epoch_seconds)
        stop.set()


def build_agent(config: Config, *, context: zmq.Context, stop: threading.Event,
                endpoint: str, simulate: int = 0, speedup: float = 1.0, seed: int = 1,
                interval_seconds: float | None = None, host_id: str | None = None,
                outbox_path: str | None = None, store_path: str | None = None,
                replay: Sequence[str] = (), stations: int = 1, utilisation: float = 0.3,
                until_seconds: float | None = None,
                replay_zero_epoch_seconds: float | None = None) -> Agent:
    """An agent for this machine, for ``simulate`` simulated workstations, or replaying the
    workload logs in ``replay``."""
    settings = config.agent
    outbox = Outbox(expand(outbox_path or settings.outbox),
                    hold_max_records=settings.outbox_hold_records)
    replayed = None
    try:
        if replay:
            replayed = replay_hosts(
                read_stations(list(replay), stations=stations, utilisation=utilisation),
                config.sensor, speedup=speedup, sink=outbox,
                zero_epoch_seconds=replay_zero_epoch_seconds, until_seconds=until_seconds,
                seed=seed, interval_seconds=interval_seconds)
            hosts = replayed.hosts
        elif simulate > 0:
            prefix = host_id or settings.host_id or "lab"
            hosts = simulated_hosts(simulate, config.sensor, speedup=speedup, seed=seed,
                                    prefix=prefix, sink=outbox,
                                    interval_seconds=interval_seconds)
        else:
            hosts = [local_host(config.sensor, host_id=host_id or settings.host_id or None,
                                store_path=expand(store_path or settings.store), stop=stop,
                                sink=outbox, seed=seed, interval_seconds=interval_seconds)]
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
    return Agent(hosts, sender, outbox, replayed)
