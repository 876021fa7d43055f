"""How often the remaining-time law of a running task covers what the simulator does next.

Tasks split over a few one-core hosts are simulated (scheduler.stops) and stopped when they
have done 10%, 50% or 90% of their work. The predictor is then given only what an agent and
the manager would have: each host's parameters, each share's fraction done, and the local jobs
present at the stop with the CPU they have used (never their true remaining demands); it
builds each host's state as the manager does (ghs.manager.state, two-moment fallback laws)
and asks scheduler.eta for the law of the remaining time. The coverage of a quantile is the
share of stopped runs whose true continuation finished by it.

Two families: ``poisson`` (Poisson arrivals, lognormal demands with the hosts' parameters)
and ``trace`` (the jobs of a real log cut into workstations; each host's parameters are the
24 hours before the launch, what the manager's average would hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ghs.errors import GhsError
from ghs.manager.state import host_backlog
from ghs.traces import JobLog, trace_host, workstation_traces
from scheduler import Host, partition
from scheduler.eta import remaining
from scheduler.stops import Stops, poisson_streams, stop_runs, trace_streams
from scheduler.workload import demand
from sensors.templates import bin_edges_seconds

FRACTIONS = (0.1, 0.5, 0.9)
LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95}
DAY_SECONDS = 86400.0
POISSON_HOSTS = (Host("p1", lam=1 / 900, mu=1 / 300, sigma=450.0, rho=1 / 3, tau=1.0),
                 Host("p2", lam=1 / 600, mu=1 / 120, sigma=240.0, rho=0.2, tau=1.5),
                 Host("p3", lam=1 / 2000, mu=1 / 1000, sigma=1500.0, rho=0.5, tau=1.0))
TRACE_UTILISATION = (0.2, 0.35, 0.5)
MAX_RHO = 0.95
_EDGES = np.asarray(bin_edges_seconds())


def coverage(stops: Stops, hosts_per_run: Sequence[Sequence[Host]],
             dist: str = "lognormal",
             templates_per_run: Sequence[Sequence[list]] | None = None) -> dict[str, Any]:
    """Coverage of p50/p90/p95, and the mean predicted against the mean true remaining time
    (seconds), over the stopped runs. ``templates_per_run[r][k]``: host k's demand templates
    (as the manager stores them) in run r; none: the two-moment laws."""
    hits = {name: 0 for name in LEVELS}
    means = []
    for r, hosts in enumerate(hosts_per_run):
        names = [h.name for h in hosts]
        fractions = dict(zip(names, stops.fraction_done[r].tolist()))
        backlogs = []
        for k, host in enumerate(hosts):
            ages, _ = stops.jobs[r][k]
            running = {"jobs": [{"user": "owner", "command": "job", "cpu_seconds": float(a)}
                                for a in ages]}
            templates = [] if templates_per_run is None else templates_per_run[r][k]
            backlogs.append(host_backlog(host, running, templates, fresh=True)[0])
        law = remaining(hosts, stops.shares, fraction_done=fractions, backlog=backlogs,
                        dist=dist)
        truth = float(stops.remaining_seconds[r])
        for name in LEVELS:
            hits[name] += truth <= law.quantiles[name]
        means.append(law.mean)
    runs = len(hosts_per_run)
    return {"runs": runs, **{name: hits[name] / runs for name in LEVELS},
            "mean_predicted_seconds": float(np.mean(means)),
            "mean_true_seconds": float(np.mean(stops.remaining_seconds))}


def poisson_family(runs: int, rng: np.random.Generator, *,
                   fractions: Sequence[float] = FRACTIONS, hosts: Sequence[Host] = POISSON_HOSTS,
                   work_seconds: float = 3 * 3600.0, cov: float | None = None,
                   dist: str = "lognormal") -> list[dict[str, Any]]:
    """Coverage per stop fraction on Poisson hosts (lognormal demands of each host's mean
    and CoV sigma * mu, or ``cov`` for all)."""
    hosts = list(hosts)
    shares = partition(hosts, work_seconds)
    laws = [demand("lognormal", 1 / h.mu, h.sigma * h.mu if cov is None else cov)
            for h in hosts]
    horizon = _horizon(hosts, shares)
    rows = []
    for fraction in fractions:
        streams = [poisson_streams(h, law, runs, before_seconds=DAY_SECONDS / 2,
                                   after_seconds=horizon, rng=rng)
                   for h, law in zip(hosts, laws)]
        stops = stop_runs(hosts, shares, streams, fraction)
        rows.append({"family": "poisson", "fraction": fraction,
                     **coverage(stops, [hosts] * runs, dist)})
    return rows


def trace_family(log: JobLog, runs: int, rng: np.random.Generator, *,
                 fractions: Sequence[float] = FRACTIONS, work_seconds: float = 3 * 3600.0,
                 utilisation: Sequence[float] = TRACE_UTILISATION,
                 dist: str = "lognormal", past_seconds: float = DAY_SECONDS,
                 templates: bool = True) -> list[dict[str, Any]]:
    """Coverage per stop fraction on workstations cut from ``log`` at random launches; each
    host's parameters (and, with ``templates``, its pooled demand histogram, as an agent
    keeps it) are those of its jobs in the ``past_seconds`` before the launch."""
    cut = workstation_traces(log, len(utilisation), list(utilisation))
    first, last = float(log.submit_seconds[0]), float(log.submit_seconds[-1])
    tail = 10 * DAY_SECONDS
    if last - first <= past_seconds + tail:
        raise GhsError(f"{log.source} is too short for the trace family", field="log",
                       value=log.source)
    rows = []
    for fraction in fractions:
        launches = rng.uniform(first + past_seconds, last - tail, runs)
        hosts_per_run, templates_per_run = [], []
        for launch in launches:
            hosts, pooled = [], []
            for k, trace in enumerate(cut.traces):
                a, b = np.searchsorted(trace.arrival_seconds, [launch - past_seconds, launch])
                window = type(trace)(trace.arrival_seconds[a:b], trace.cpu_seconds[a:b])
                hosts.append(_trace_host(f"w{k}", window, past_seconds))
                pooled.append([pooled_template(window.cpu_seconds)] if templates else [])
            hosts_per_run.append(hosts)
            templates_per_run.append(pooled)
        shares = partition(_mean_hosts(hosts_per_run), work_seconds)
        streams = [trace_streams(trace, launches, before_seconds=DAY_SECONDS,
                                 after_seconds=tail) for trace in cut.traces]
        stops = stop_runs(hosts_per_run[0], shares, streams, fraction)
        rows.append({"family": "trace", "fraction": fraction,
                     **coverage(stops, hosts_per_run, dist, templates_per_run)})
    return rows


def _trace_host(name: str, window: Any, span_seconds: float) -> Host:
    """A workstation's parameters over a span (``ghs.traces.trace_host``; a span with no job
    is an idle host, one busier than the model admits is held just under saturation)."""
    cpu = window.cpu_seconds
    if len(window) == 0 or cpu.sum() <= 0:
        return Host(name, lam=0.0, mu=1.0, sigma=0.0, rho=0.0, tau=1.0)
    rho = float(cpu.sum() / span_seconds)
    if rho < MAX_RHO:
        return trace_host(name, window, span_seconds)
    lam = len(window) / span_seconds * MAX_RHO / rho
    return Host(name, lam=lam, mu=1.0 / float(cpu.mean()), sigma=float(cpu.std()), rho=MAX_RHO,
                tau=1.0)


def pooled_template(cpu_seconds: np.ndarray) -> dict[str, Any]:
    """Past demands (seconds) as the manager stores a host's pooled template: sparse counts
    over the sensors' bins."""
    index = np.clip(np.searchsorted(_EDGES, cpu_seconds, side="right") - 1, 0, _EDGES.size - 2)
    counts = np.bincount(index, minlength=_EDGES.size - 1)
    return {"scope": "pooled", "user": None, "command": None,
            "bins": [[int(i), float(counts[i])] for i in np.flatnonzero(counts)]}


def _mean_hosts(hosts_per_run: Sequence[Sequence[Host]]) -> list[Host]:
    """One split for every run: the hosts' average 24-hour parameters."""
    columns = list(zip(*hosts_per_run))
    result = []
    for group in columns:
        rho = float(np.mean([h.rho for h in group]))
        lam = float(np.mean([h.lam for h in group]))
        result.append(Host(group[0].name, lam=lam, mu=lam / rho if rho > 0 else 1.0,
                           sigma=float(np.mean([h.sigma for h in group])), rho=rho, tau=1.0))
    return result


def _horizon(hosts: Sequence[Host], shares: np.ndarray) -> float:
    """Seconds of local stream after the launch: far beyond any host's completion."""
    return float(max(40.0 * share / (h.tau * (1 - h.rho)) for h, share in zip(hosts, shares)))


def run(size: int = 1000, seed: int = 7, *, logs: Sequence[JobLog] = ()) -> dict[str, Any]:
    """The Poisson family and one trace family per log, ``size`` stopped tasks a fraction."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GhsError(f"size must be a whole number >= 1, got {size!r}", field="size",
                       value=size)
    rng = np.random.default_rng(seed)
    rows = poisson_family(size, rng)
    for log in logs:
        rows += [{**row, "family": f"trace {log.source}"} for row in trace_family(log, size, rng)]
    return {"size": size, "seed": seed, "rows": rows}


def show(console: Any, result: dict[str, Any]) -> None:
    """A table: coverage of p50/p90/p95 per family and stop fraction."""
    from rich.table import Table

    table = Table(title=f"Remaining-time law against simulated continuations "
                        f"({result['size']} stopped tasks a row)")
    for column in ("hosts", "stopped at", "<= p50", "<= p90", "<= p95"):
        table.add_column(column, justify="left" if column == "hosts" else "right")
    for row in result["rows"]:
        table.add_row(row["family"], f"{100 * row['fraction']:.0f}%",
                      *(f"{100 * row[name]:.1f}%" for name in LEVELS))
    console.print(table)
