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
from ghs.experiments.eta_record import (
    HOUR_SECONDS,
    LENGTHS_SECONDS,
    calibrated_quantiles,
    factors_at,
)
from ghs.manager.state import host_backlog
from ghs.traces import JobLog, trace_host, workstation_traces
from scheduler import Host, partition
from scheduler.eta import remaining
from scheduler.stops import Stops, poisson_streams, stop_runs, trace_streams
from scheduler.workload import Trace, demand
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
# far below the 1e-7 relative precision the predictor solves its quantiles to
TIE_REL_TOL = 1e-9
# The manager launches shadows hourly at every length; every 3 hours, and only the lengths a
# 3-hour task's shares are nearest to (up to 4 h), keep the replay of a year-long log to
# minutes (the calibrators' memory, about 1 / step = 10 launches, then spans 30 hours)
SHADOW_EVERY_SECONDS = 3 * HOUR_SECONDS
SHADOW_LENGTHS_SECONDS = LENGTHS_SECONDS[:3]


def coverage(stops: Stops, hosts_per_run: Sequence[Sequence[Host]],
             dist: str = "lognormal",
             templates_per_run: Sequence[Sequence[list]] | None = None,
             factors_per_run: np.ndarray | None = None) -> dict[str, Any]:
    """Coverage of p50/p90/p95, the median interval width p95 / p50, the share of
    continuations no local job interrupted (they took the slowest share's dedicated time),
    and the mean predicted against the mean true remaining time (seconds), over the stopped
    runs.
    ``templates_per_run[r][k]``: host k's demand templates (as the manager stores them) in run
    r; none: the two-moment laws. ``strict`` is the coverage without the tie rule (see
    :func:`covered`)."""
    truths, predicted, means, dedicated = [], [], [], []
    for r, hosts in enumerate(hosts_per_run):
        names = [h.name for h in hosts]
        fractions = dict(zip(names, stops.fraction_done[r].tolist()))
        backlogs = []
        for k, host in enumerate(hosts):
            templates = [] if templates_per_run is None else templates_per_run[r][k]
            backlogs.append(host_backlog(host, _running(stops.jobs[r][k][0]), templates,
                                         fresh=True)[0])
        law = remaining(hosts, stops.shares, fraction_done=fractions, backlog=backlogs,
                        dist=dist)
        truths.append(float(stops.remaining_seconds[r]))
        dedicated.append(float(law.dedicated_seconds.max()))
        quantiles = law.quantiles if factors_per_run is None else calibrated_quantiles(
            law, factors_per_run[r], SHADOW_LENGTHS_SECONDS)
        predicted.append([quantiles[name] for name in LEVELS])
        means.append(law.mean)
    truth, quantiles = np.array(truths), np.array(predicted)
    hits = covered(truth, quantiles).mean(axis=0)
    strict = (truth[:, None] <= quantiles).mean(axis=0)
    return {"runs": len(truths), **dict(zip(LEVELS, map(float, hits))),
            "strict": dict(zip(LEVELS, map(float, strict))),
            "median_p95_over_p50": float(np.median(quantiles[:, 2] / quantiles[:, 0])),
            # no quantile can be below the dedicated time, so any p90 covers at least these
            "uninterrupted": float(covered(truth, np.array(dedicated)[:, None]).mean()),
            "median_p90_seconds": float(np.median(quantiles[:, 1])),
            "mean_predicted_seconds": float(np.mean(means)),
            "mean_true_seconds": float(np.mean(truth))}


def covered(truth_seconds: np.ndarray, quantile_seconds: np.ndarray) -> np.ndarray:
    """(runs, levels) whether each true remaining time is within each predicted quantile.

    A continuation no local job interrupted takes exactly its dedicated time, and where the
    predicted law's atom there holds the level, the quantile is that same time: the two are
    one number reached by different float paths (the simulator subtracts absolute times, the
    predictor scales the share left), so a strict comparison scores rounding noise, and about
    half of these ties land a few ulps above. Equality up to TIE_REL_TOL counts as covered;
    the predictor's own quantiles are solved only to 1e-7 relative, so nothing it resolves is
    excused.
    """
    truth = np.asarray(truth_seconds, dtype=float)[:, None]
    return truth <= np.asarray(quantile_seconds, dtype=float) * (1.0 + TIE_REL_TOL)


def poisson_family(runs: int, rng: np.random.Generator, *,
                   fractions: Sequence[float] = FRACTIONS, hosts: Sequence[Host] = POISSON_HOSTS,
                   work_seconds: float = 3 * 3600.0, cov: float | None = None,
                   dist: str = "lognormal", calibrated: bool = True,
                   record_days: float = 30.0) -> list[dict[str, Any]]:
    """Coverage per stop fraction on Poisson hosts (lognormal demands of each host's mean
    and CoV sigma * mu, or ``cov`` for all). With ``calibrated``, each host's quantiles are
    corrected by calibrators fed shadow launches over a ``record_days`` record of
    the same host drawn before the tasks (:mod:`ghs.experiments.eta_record`)."""
    hosts = list(hosts)
    shares = partition(hosts, work_seconds)
    laws = [demand("lognormal", 1 / h.mu, h.sigma * h.mu if cov is None else cov)
            for h in hosts]
    horizon = _horizon(hosts, shares)
    stopped = []
    for fraction in fractions:
        streams = [poisson_streams(h, law, runs, before_seconds=DAY_SECONDS / 2,
                                   after_seconds=horizon, rng=rng)
                   for h, law in zip(hosts, laws)]
        stopped.append(stop_runs(hosts, shares, streams, fraction))
    found = None
    if calibrated:
        # drawn after the tasks, so the tasks are the same with and without calibration
        record = record_days * DAY_SECONDS
        traces = []
        for host, law in zip(hosts, laws):
            arrivals, cpu = poisson_streams(host, law, 1, before_seconds=0.0,
                                            after_seconds=record + horizon, rng=rng)
            finite = np.isfinite(arrivals[0])
            traces.append(Trace(arrivals[0][finite], cpu[0][finite]))
        shadow = np.arange(HOUR_SECONDS, record, SHADOW_EVERY_SECONDS)

        def state_at(k: int, launch: float, ages: np.ndarray) -> tuple[Host, Any]:
            return hosts[k], host_backlog(hosts[k], _running(ages), [], fresh=True)[0]

        held = factors_at([trace_streams(trace, shadow, before_seconds=DAY_SECONDS,
                                         after_seconds=horizon) for trace in traces],
                          shadow, np.array([record]), state_at,
                          lengths_seconds=SHADOW_LENGTHS_SECONDS)
        found = np.broadcast_to(held, (runs, *held.shape[1:]))
    return [{"family": "poisson", "fraction": fraction,
             **coverage(stops, [hosts] * runs, dist, factors_per_run=found)}
            for fraction, stops in zip(fractions, stopped)]


def trace_family(log: JobLog, runs: int, rng: np.random.Generator, *,
                 fractions: Sequence[float] = FRACTIONS, work_seconds: float = 3 * 3600.0,
                 utilisation: Sequence[float] = TRACE_UTILISATION,
                 dist: str = "lognormal", past_seconds: float = DAY_SECONDS,
                 templates: bool = True, calibrated: bool = True) -> list[dict[str, Any]]:
    """Coverage per stop fraction on workstations cut from ``log`` at random launches; each
    host's parameters (and, with ``templates``, its pooled demand histogram, as an agent
    keeps it) are those of its jobs in the ``past_seconds`` before the launch. With
    ``calibrated``, each host's quantiles are corrected as the manager's calibrators would
    hold them at the stop, from shadow launches on the station's earlier record
    (:mod:`ghs.experiments.eta_record`)."""
    cut = workstation_traces(log, len(utilisation), list(utilisation))
    first, last = float(log.submit_seconds[0]), float(log.submit_seconds[-1])
    tail = 10 * DAY_SECONDS
    if last - first <= past_seconds + tail:
        raise GhsError(f"{log.source} is too short for the trace family", field="log",
                       value=log.source)
    stopped = []
    for fraction in fractions:
        launches = rng.uniform(first + past_seconds, last - tail, runs)
        views = [[_past_view(trace, f"w{k}", launch, past_seconds, templates)
                  for k, trace in enumerate(cut.traces)] for launch in launches]
        hosts_per_run = [[host for host, _ in view] for view in views]
        templates_per_run = [[pooled for _, pooled in view] for view in views]
        shares = partition(_mean_hosts(hosts_per_run), work_seconds)
        streams = [trace_streams(trace, launches, before_seconds=DAY_SECONDS,
                                 after_seconds=tail) for trace in cut.traces]
        stops = stop_runs(hosts_per_run[0], shares, streams, fraction)
        stopped.append((launches + stops.stop_seconds, stops, hosts_per_run, templates_per_run))
    factors: list[Any] = [None] * len(stopped)
    if calibrated:
        queries = np.concatenate([at for at, *_ in stopped])
        shadow = np.arange(first + past_seconds, queries.max(), SHADOW_EVERY_SECONDS)

        def state_at(k: int, launch: float, ages: np.ndarray) -> tuple[Host, Any]:
            host, pooled = _past_view(cut.traces[k], f"w{k}", launch, past_seconds, templates)
            return host, host_backlog(host, _running(ages), pooled, fresh=True)[0]

        found = factors_at([trace_streams(trace, shadow, before_seconds=DAY_SECONDS,
                                          after_seconds=tail) for trace in cut.traces],
                           shadow, queries, state_at, lengths_seconds=SHADOW_LENGTHS_SECONDS)
        factors = np.split(found, len(stopped))
    rows = []
    for fraction, (_, stops, hosts_per_run, templates_per_run), found in zip(
            fractions, stopped, factors):
        rows.append({"family": "trace", "fraction": fraction,
                     **coverage(stops, hosts_per_run, dist, templates_per_run, found)})
    return rows


def _past_view(trace: Any, name: str, launch: float, past_seconds: float,
               templates: bool) -> tuple[Host, list]:
    """A station's parameters and pooled template over the ``past_seconds`` before ``launch``."""
    a, b = np.searchsorted(trace.arrival_seconds, [launch - past_seconds, launch])
    window = type(trace)(trace.arrival_seconds[a:b], trace.cpu_seconds[a:b])
    return (_trace_host(name, window, past_seconds),
            [pooled_template(window.cpu_seconds)] if templates else [])


def _running(ages: np.ndarray) -> dict[str, Any]:
    """A running-jobs snapshot as an agent sends it: the jobs present and their CPU used."""
    return {"jobs": [{"user": "owner", "command": "job", "cpu_seconds": float(a)}
                     for a in ages]}


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


def run(size: int = 1000, seed: int = 7, *, logs: Sequence[JobLog] = (),
        calibrated: bool = True) -> dict[str, Any]:
    """The Poisson family and one trace family per log, ``size`` stopped tasks a fraction;
    ``calibrated``: each host's quantiles corrected on its own record, as the manager serves
    them (else the model's own)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GhsError(f"size must be a whole number >= 1, got {size!r}", field="size",
                       value=size)
    rng = np.random.default_rng(seed)
    rows = poisson_family(size, rng, calibrated=calibrated)
    for log in logs:
        rows += [{**row, "family": f"trace {log.source}"}
                 for row in trace_family(log, size, rng, calibrated=calibrated)]
    return {"size": size, "seed": seed, "calibrated": calibrated, "rows": rows}


def show(console: Any, result: dict[str, Any]) -> None:
    """A table: coverage of p50/p90/p95 and the median width per family and stop fraction."""
    from rich.table import Table

    table = Table(title=f"Remaining-time law against simulated continuations "
                        f"({result['size']} stopped tasks a row)")
    for column in ("hosts", "stopped at", "<= p50", "<= p90", "<= p95", "median p95/p50"):
        table.add_column(column, justify="left" if column == "hosts" else "right")
    for row in result["rows"]:
        table.add_row(row["family"], f"{100 * row['fraction']:.0f}%",
                      *(f"{100 * row[name]:.1f}%" for name in LEVELS),
                      f"{row['median_p95_over_p50']:.2f}")
    console.print(table)
