"""The agent's host threads: a failed sampler starts again instead of measuring no more."""

from __future__ import annotations

import threading
import time
import types

from ghs.agent.outbox import Outbox
from ghs.agent.runner import Agent


def test_a_failing_host_loop_starts_again_until_the_world_stops():
    agent = Agent([], sender=None, outbox=Outbox(None))
    agent.restart_first_seconds, agent.restart_max_seconds = 0.01, 0.04
    host = types.SimpleNamespace(identity=types.SimpleNamespace(host_id="ws1"))
    world = threading.Event()
    starts = []

    def loop(stop):
        starts.append(stop)
        if len(starts) <= 4:
            raise OSError("database or disk is full")
        stop.wait()  # measuring, until the agent stops

    thread = threading.Thread(target=agent._loop, args=(host, "sampler", loop, world))
    thread.start()
    deadline = time.monotonic() + 5.0
    while len(starts) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    world.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(starts) == 5 and all(stop is world for stop in starts)
    assert [str(exc) for exc in agent.failures] == ["database or disk is full"] * 4
    assert agent.loop_failures == 4


def test_a_failing_host_loop_is_not_restarted_once_the_world_has_stopped():
    agent = Agent([], sender=None, outbox=Outbox(None))
    host = types.SimpleNamespace(identity=types.SimpleNamespace(host_id="ws1"))
    world = threading.Event()
    calls = []

    def loop(stop):
        calls.append(1)
        stop.set()  # the agent stopped while this loop was failing
        raise RuntimeError("boom")

    agent._loop(host, "streams", loop, world)  # returns at once: no 5 s wait
    assert calls == [1] and len(agent.failures) == 1
