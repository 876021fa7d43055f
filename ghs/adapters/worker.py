"""``ghs worker``: a Dask worker that the owners of the workstation never notice.

It runs at the lowest CPU priority (SCHED_IDLE where the kernel has it, nice 19 anyway) and
carries the remote-task marker in its environment, so the ghs agent on the same machine
never counts it as the owners' load; ``--host`` labels it with the ``ghs_host:NAME`` resource
the Dask adapter maps workers by.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence

from ghs.adapters.dask_workers import host_resource
from ghs.adapters.errors import AdapterError


def worker_command(scheduler: str, *, nthreads: int, host: str | None = None,
                   name: str | None = None, resources: str = "",
                   extra: Sequence[str] = ()) -> list[str]:
    """The ``dask worker`` command line (run with this Python) for the given options.

    ``resources``: Dask's ``"NAME=AMOUNT,..."``; the ghs host label is added to it.
    """
    if not scheduler or scheduler.startswith("-"):
        raise AdapterError(f"bad scheduler address {scheduler!r} (e.g. tcp://HOST:8786)",
                           field="scheduler", value=scheduler)
    if isinstance(nthreads, bool) or not isinstance(nthreads, int) or nthreads < 1:
        raise AdapterError(f"nthreads must be an integer >= 1, got {nthreads!r}",
                           field="nthreads", value=nthreads)
    pairs = [pair.strip() for pair in resources.split(",") if pair.strip()]
    for pair in pairs:
        label, _, amount = pair.partition("=")
        try:
            valid = bool(label.strip()) and math.isfinite(float(amount))
        except ValueError:
            valid = False
        if not valid:
            raise AdapterError(f"bad resource {pair!r}: expected NAME=AMOUNT",
                               field="resources", value=resources)
    if host is not None:
        pairs.append(f"{host_resource(host)}=1")
    command = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler,
               "--nthreads", str(nthreads)]
    if name:
        command += ["--name", name]
    if pairs:
        command += ["--resources", ",".join(pairs)]
    return [*command, *extra]


def worker_environment(environ: Mapping[str, str], marker: str) -> dict[str, str]:
    """``environ`` plus the remote-task marker variable set to 1."""
    if not marker or "=" in marker or "\0" in marker:
        raise AdapterError(f"remote marker must be an environment variable name, got "
                           f"{marker!r}", field="sensor.remote_marker", value=marker)
    return {**environ, marker: "1"}


def lowest_priority_session() -> str:
    """Start a session of its own at autogroup nice 19, then drop to the lowest priority
    within it; says which priority it got. Run it in a child before exec (a process-group
    leader cannot start a session: ``os.setsid`` raises PermissionError there).

    With autogroup scheduling (``kernel.sched_autogroup_enabled``) the kernel first shares
    the CPU between sessions and only then between the processes of a session, so a
    SCHED_IDLE task in a session of normal weight still takes about half a busy core from an
    owner's session. A session of its own at autogroup nice 19 leaves it the leftovers only.
    """
    os.setsid()
    grouped = ""
    try:
        with open("/proc/self/autogroup", "w", encoding="ascii") as handle:
            handle.write("19")
        grouped = ", autogroup nice 19"
    except OSError:  # no autogroup in this kernel: the process priority is all there is
        pass
    return lower_priority() + grouped


def lower_priority() -> str:
    """Drop this process (and what it starts) to the lowest CPU priority; says which one."""
    os.nice(max(0, 19 - os.nice(0)))
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "SCHED_IDLE"
        except OSError:
            pass
    return "nice 19"
