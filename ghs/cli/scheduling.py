"""``ghs predict``, ``ghs schedule`` and ``ghs simulate``."""

from __future__ import annotations

import click

from ghs import planning, render
from ghs.answers import Answer
from ghs.cli.common import (
    DURATION,
    SEED,
    DurationType,
    asking,
    config_from,
    console,
    emit_json,
    json_option,
    plot_option,
    timeout_option,
    warn,
)
from ghs.config import DISTRIBUTIONS, METHODS, PARTITIONS
from ghs.errors import HostFileError
from ghs.hostfile import HostList, load_hosts
from ghs.remote import open_client
from scheduler.partitioning import MAX_UNITS, MAX_WORK_SECONDS, MIN_WORK_SECONDS
from scheduler.simulation import CORES_MODES
from scheduler.workload import DEMAND_KINDS

# the scheduler's range of a task's work, refused by the flag's name before any host is read
WORK_DURATION = DurationType(MIN_WORK_SECONDS, MAX_WORK_SECONDS)


def _host_options(function):
    function = timeout_option(function)
    function = click.option("--host", "names", multiple=True, metavar="NAME",
                            help="Use only this host (repeatable).")(function)
    function = click.option("--hosts-file", type=click.Path(dir_okay=False), default=None,
                            help="JSON host file (see examples/hosts.json).")(function)
    function = click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
                            help="Ask this manager (or GHS_MANAGER, or config) when no "
                                 "--hosts-file is given.")(function)
    function = click.option("--work", type=WORK_DURATION, required=True,
                            help="Task size in reference-CPU-seconds: 90, 30m, 8h, 2d.")(function)
    return function


def _process_options(function):
    function = click.option("--pinned", is_flag=True,
                            help="The processes stay on each host's least-loaded cores "
                                 "(default: they move between cores and see the host's "
                                 "average core load).")(function)
    return click.option("--processes-per-host", "processes", type=click.IntRange(min=1),
                        default=None, help="How many processes run each host's share (at "
                                           "most its cores; default: one per core).")(function)


def _summary_option(function):
    return click.option("--summary", is_flag=True,
                        help="Tables: the totals only, no per-host rows (for large host "
                             "sets); JSON is unchanged.")(function)


def _load(hosts_file: str | None) -> HostList:
    if hosts_file is None:
        raise HostFileError("no hosts: give --hosts-file FILE (a JSON host file) or "
                            "--manager tcp://HOST:PORT",
                            field="hosts_file", value=None)
    return load_hosts(hosts_file)


def _warn(host_list: HostList | None) -> None:
    # after the answer, so a failing command still says one line only
    for message in () if host_list is None else host_list.warnings:
        warn(message)


def _remote(hosts_file: str | None, endpoint: str | None, config) -> bool:
    return hosts_file is None and bool(endpoint or config.manager)


@click.command()
@_host_options
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Fit of the delay distribution (default from config: lognormal).")
@click.option("--partition", type=click.Choice(PARTITIONS), default=None,
              help="How the work is split (default equal-mean).")
@click.option("--by", "by_seconds", type=DURATION, default=None,
              help="Also give the probability of finishing by this time after launch, "
                   "e.g. 3h (JSON key 'by').")
@plot_option("Draw the completion-time CDF with each host's law to this PNG "
             "(needs the 'plot' extra: matplotlib).")
@_process_options
@_summary_option
@json_option
@click.pass_context
def predict(ctx, work, hosts_file, endpoint, names, timeout, dist, partition, by_seconds,
            plot_path, processes, pinned, summary, as_json):
    """Predict the completion time of a divisible task on the given hosts."""
    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    if plot_path is not None:
        from ghs.completion_plot import require_matplotlib

        require_matplotlib()
    host_list = None
    if _remote(hosts_file, endpoint, config):
        with open_client(config, endpoint) as client, asking(client):
            result = client.predict_answer(work, names or None, dist, partition,
                                           processes_per_host=processes, pinned=pinned)
    else:
        host_list = _load(hosts_file)
        result = planning.predict_hosts(host_list, work, config, names=names, dist=dist,
                                        partition=partition, processes_per_host=processes,
                                        pinned=pinned)
    if plot_path is not None:
        from ghs.completion_plot import plot_completion

        plot_completion(result.prediction, plot_path, by_seconds=by_seconds)
    if as_json:
        payload = result.to_dict()
        if by_seconds is not None:
            payload["by"] = _by(result, by_seconds)
        if plot_path is not None:
            payload["plot"] = str(plot_path)
        emit_json(payload)
    else:
        render.show_prediction(console(), result, summary=summary, by_seconds=by_seconds)
        if plot_path is not None:
            click.echo(f"plot written to {plot_path}")
    _warn(host_list)


def _by(result: Answer, by_seconds: float) -> dict[str, float]:
    return {"seconds": by_seconds, "probability": float(result.prediction.cdf(by_seconds))}


@click.command()
@_host_options
@click.option("--method", type=click.Choice(METHODS), default=None,
              help="Machine-set selection (default auto: exact up to 8 candidates, else a "
                   "search within 1% of optimal; heuristic is the paper's Fig. 3).")
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Fit of the delay distribution.")
@click.option("--partition", type=click.Choice(PARTITIONS), default=None,
              help="How the work is split (default equal-mean).")
@click.option("--units", type=click.IntRange(min=1, max=MAX_UNITS), default=None,
              help="Also split N indivisible work units into whole numbers per host.")
@click.option("--rho-max", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Hosts at or above this utilisation are not candidates (default 0.9).")
@_process_options
@_summary_option
@json_option
@click.pass_context
def schedule(ctx, work, hosts_file, endpoint, names, timeout, method, dist, partition, units,
             rho_max, processes, pinned, summary, as_json):
    """Choose the hosts and the split that minimise E(T)(1+CoV)."""
    config = config_from(ctx, {"scheduler": {"rho_max": rho_max},
                               "client": {"timeout_seconds": timeout}})
    host_list = None
    if _remote(hosts_file, endpoint, config):
        with open_client(config, endpoint) as client, asking(client):
            result = client.schedule_answer(work, method, names or None, dist, partition,
                                            units, rho_max=rho_max,
                                            processes_per_host=processes, pinned=pinned)
    else:
        host_list = _load(hosts_file)
        result = planning.schedule_hosts(host_list, work, config, names=names,
                                         method=method, dist=dist, partition=partition,
                                         processes_per_host=processes, pinned=pinned)
    if as_json:
        emit_json(result.to_dict(units))
    else:
        render.show_plan(console(), result, units, summary=summary)
    _warn(host_list)


@click.command()
@_host_options
@click.option("--runs", type=click.IntRange(min=1), default=None,
              help="Monte Carlo repetitions (default 4000).")
@click.option("--service", type=click.Choice(DEMAND_KINDS), default=None,
              help="Distribution of local jobs' CPU demands (default lognormal with each "
                   "host's mean 1/mu and sigma).")
@click.option("--cov", type=click.FloatRange(min=0), default=None,
              help="Demand CoV for every host (default: each host's sigma * mu; ignored by "
                   "exponential and deterministic).")
@click.option("--warm/--idle", default=None,
              help="Start hosts in steady state (default: a launch at a random time) or idle, "
                   "as the model assumes.")
@click.option("--partition", type=click.Choice(PARTITIONS), default=None,
              help="How the work is split (default equal-mean).")
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Distribution of the model prediction shown beside the simulation.")
@click.option("--cores-mode", type=click.Choice(CORES_MODES), default="partitioned",
              help="Multi-core hosts: one queue per core (the model) or one shared queue.")
@click.option("--seed", type=SEED, default=None, help="Random seed for a repeatable run.")
@json_option
@click.pass_context
def simulate(ctx, work, hosts_file, endpoint, names, timeout, runs, service, cov, warm,
             partition, dist, cores_mode, seed, as_json):
    """Simulate the task with the discrete-event simulator (Monte Carlo)."""
    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    if _remote(hosts_file, endpoint, config):
        with open_client(config, endpoint) as client, asking(client):
            status = client.status()
        host_list = HostList(tuple(status.usable()), tuple(status.excluded()))
        source = "manager"
    else:
        host_list, source = _load(hosts_file), "host file"
    report = planning.simulate_hosts(host_list, work, config, names=names, runs=runs,
                                     service=service, cov=cov, warm=warm, partition=partition,
                                     dist=dist, cores_mode=cores_mode, seed=seed,
                                     source=source)
    if as_json:
        emit_json(report.to_dict())
    else:
        render.show_simulation(console(), report)
    _warn(host_list if source == "host file" else None)
