"""What each host holds at launch, as the scheduler's Backlog, from the manager's records.

A host whose latest running-jobs snapshot is fresh (at most ``fresh_seconds`` older than its
latest record, and the host not stale) starts from those jobs: each job's remaining CPU demand
is the law of D - a given D > a (a: the CPU it has used) from the most specific demand
template with at least ``min_template_jobs`` jobs ((user, command), then user, then pooled),
else the host's two-moment lognormal. A host with no fresh snapshot starts from the backlog of
a machine in its steady state (Pollaczek-Khinchine), never from "idle".

The description returned beside each Backlog is what a prediction's JSON reports per host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scheduler import Host
from scheduler.backlog import Backlog
from scheduler.templates import Histogram, TwoMomentDemand, choose_template
from sensors.templates import bin_edges_seconds

MIN_TEMPLATE_JOBS = 20.0
_EDGES = np.asarray(bin_edges_seconds()[1:-1])


def histogram_of(template: Mapping[str, Any]) -> Histogram:
    """A stored template (sparse bins over the sensors' edges) as the scheduler's Histogram.

    The sensors' open-ended end bins ([0, 10 ms) and [1e7 s, inf)) are folded into their
    neighbours: the scheduler's bins need finite positive edges, and jobs that short or
    that long change no backlog measurably.
    """
    counts = np.zeros(_EDGES.size + 1)
    for index, count in template["bins"]:
        counts[int(index)] += float(count)
    counts[1] += counts[0]
    counts[-2] += counts[-1]
    return Histogram(_EDGES, counts[1:-1])


def _templates_by_key(templates: Sequence[Mapping[str, Any]]
                      ) -> dict[tuple[str, str, str], Histogram]:
    return {(t["scope"], t.get("user") or "", t.get("command") or ""): histogram_of(t)
            for t in templates}


def host_backlog(host: Host, running: Mapping[str, Any] | None,
                 templates: Sequence[Mapping[str, Any]], *, fresh: bool,
                 min_template_jobs: float = MIN_TEMPLATE_JOBS
                 ) -> tuple[Backlog, dict[str, Any]]:
    """The host's Backlog at launch and its description (source, jobs, templates used)."""
    if running is None or not fresh:
        why = "no snapshot" if running is None else "snapshot not fresh"
        return Backlog.steady_state(), {"source": "steady-state", "reason": why}
    jobs = running["jobs"]
    if not jobs:
        return Backlog.exact([]), {"source": "snapshot", "jobs": 0, "mean_seconds": 0.0,
                                   "templates": {}}
    by_key = _templates_by_key(templates)
    fallback = TwoMomentDemand(1.0 / host.mu, host.sigma)
    laws, levels = [], {}
    for job in jobs:
        user, command = job["user"], job["command"]
        candidates = [("user-command", by_key.get(("command", user, command))),
                      ("user", by_key.get(("user", user, ""))),
                      ("pooled", by_key.get(("pooled", "", "")))]
        choice = choose_template(candidates, min_template_jobs, fallback,
                                 age_seconds=job["cpu_seconds"])
        laws.append(choice.law)
        levels[choice.level] = levels.get(choice.level, 0) + 1
    backlog = Backlog.from_laws(laws, [job["cpu_seconds"] for job in jobs])
    return backlog, {"source": "snapshot", "jobs": len(jobs),
                     "mean_seconds": float(sum(law.mean_seconds for law in laws)),
                     "templates": levels}
