"""Tests that read the real CPU run alone.

The README's test command spreads the suite over every core (pytest-xdist). A test that
switches process accounting on (it is global: every process that exits is written to the
file), that reads the kernel's idle time or fork counter, that needs a SCHED_IDLE process to
make progress, or that compares timed runs, would take the neighbour test's work for its
own. Such tests are marked ``exclusive`` (``root`` implies it: every root test switches
accounting on, unless it is also marked ``busy_machine_ok``: the short live run, whose
checks hold on a busy machine, and whose minute would otherwise leave the other worker
waiting). Every test holds a shared lock for its run and an exclusive test holds it
alone; a turnstile taken before either keeps a waiting exclusive test from being passed
over by the other workers' next tests. In one process (``-n 0``, or without xdist) nothing
runs beside a test and no lock is taken.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest


def _alone(item: pytest.Item) -> bool:
    if item.get_closest_marker("exclusive") is not None:
        return True
    # A root test checks nothing that a neighbour's CPU could upset when it says so
    # (busy_machine_ok). It still never runs beside another root test, which is exclusive.
    # Process accounting has one file for the whole machine.
    return item.get_closest_marker("root") is not None \
        and item.get_closest_marker("busy_machine_ok") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The exclusive tests first, one after another on the worker the run's head goes to: the
    # other worker then waits for them from its first, short tests, not from minute-long ones
    # met later (each wait is the rest of the test it is in). A stable sort keeps each
    # module's own order, and every worker collects the same order.
    items.sort(key=lambda item: not _alone(item))


@pytest.fixture(scope="session")
def _run_locks(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
               ) -> tuple[Path, Path] | None:
    if not hasattr(request.config, "workerinput"):
        return None
    # every worker's base temp sits in one folder of this run
    shared = tmp_path_factory.getbasetemp().parent
    return shared / "ghs-tests.turnstile", shared / "ghs-tests.lock"


@pytest.fixture(autouse=True)
def _exclusive_when_marked(request: pytest.FixtureRequest,
                           _run_locks: tuple[Path, Path] | None) -> Iterator[None]:
    if _run_locks is None:
        yield
        return
    turnstile_path, lock_path = _run_locks
    with open(turnstile_path, "a") as turnstile, open(lock_path, "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if _alone(request.node) else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
