"""``ghs predict``, ``ghs schedule`` and ``ghs simulate``."""

from __future__ import annotations

import click

from ghs import planning, render
from ghs.cli.common import DURATION, config_from, console, emit_json, json_option
from ghs.config import DISTRIBUTIONS, METHODS, PARTITIONS
from ghs.errors import HostFileError
from ghs.hostfile import HostList, load_hosts
from ghs.remote import open_client
from scheduler.simulation import CORES_MODES
from scheduler.workload import DEMAND_KINDS


def _host_options(function):
    function = click.option("--host", "names", multiple=True, metavar="NAME",
                            help="Use only this host (repeatable).")(function)
    function = click.option("--hosts-file", type=click.Path(dir_okay=False), default=None,
                            help="JSON host file (see examples/hosts.json).")(function)
    function = click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
                            help="Ask this manager (or GHS_MANAGER, or config) when no "
                                 "--hosts-file is given.")(function)
    function = click.option("--work", type=DURATION, required=True,
                            help="Task size in reference-CPU-seconds: 90, 30m, 8h, 2d.")(function)
    return function


def _load(hosts_file: str | None) -> HostList:
    if hosts_file is None:
        raise HostFileError("no hosts: give --hosts-file FILE (a JSON host file) or "
                            "--manager tcp://HOST:PORT",
                            field="hosts_file", value=None)
    return load_hosts(hosts_file)


@click.command()
@_host_options
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Fit of the delay distribution (default from config: lognormal).")
@click.option("--partition", type=click.Choice(PARTITIONS), default=None,
              help="How the work is split (default equal-mean).")
@json_option
@click.pass_context
def predict(ctx, work, hosts_file, endpoint, names, dist, partition, as_json):
    """Predict the completion time of a divisible task on the given hosts."""
    config = config_from(ctx)
    if hosts_file is None and (endpoint or config.manager):
        with open_client(config, endpoint) as client:
            result = client.predict(work, names or None, dist, partition)
    else:
        result = planning.predict_hosts(_load(hosts_file), work, config, names=names,
                                        dist=dist, partition=partition)
    if as_json:
        emit_json(result.to_dict())
    else:
        render.show_prediction(console(), result)


@click.command()
@_host_options
@click.option("--method", type=click.Choice(METHODS), default=None,
              help="Machine-set selection (default auto: exact up to 8 candidates, else a "
                   "search within 1% of optimal; heuristic is the paper's Fig. 3).")
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Fit of the delay distribution.")
@click.option("--partition", type=click.Choice(PARTITIONS), default=None,
              help="How the work is split (default equal-mean).")
@click.option("--units", type=click.IntRange(min=0), default=None,
              help="Also split N indivisible work units into whole numbers per host.")
@click.option("--rho-max", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Hosts at or above this utilisation are not candidates (default 0.9).")
@json_option
@click.pass_context
def schedule(ctx, work, hosts_file, endpoint, names, method, dist, partition, units, rho_max,
             as_json):
    """Choose the hosts and the split that minimise E(T)(1+CoV)."""
    config = config_from(ctx, {"scheduler": {"rho_max": rho_max}})
    if hosts_file is None and (endpoint or config.manager):
        with open_client(config, endpoint) as client:
            plan = client.schedule(work, method, names or None, dist, partition, units)
    else:
        plan = planning.schedule_hosts(_load(hosts_file), work, config, names=names,
                                       method=method, dist=dist, partition=partition)
    if as_json:
        emit_json(plan.to_dict(units))
    else:
        render.show_plan(console(), plan, units)


@click.command()
@_host_options
@click.option("--runs", type=click.IntRange(min=1), default=None,
              help="Monte Carlo repetitions (default 4000).")
@click.option("--service", type=click.Choice(DEMAND_KINDS), default=None,
              help="Distribution of local jobs' CPU demands (default exponential).")
@click.option("--cov", type=click.FloatRange(min=0), default=None,
              help="Demand CoV for every host (default: each host's sigma * mu).")
@click.option("--warm/--idle", default=None,
              help="Start hosts in steady state (default) or idle, as the model assumes.")
@click.option("--partition", type=click.Choice(PARTITIONS), default=None,
              help="How the work is split (default equal-mean).")
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Distribution of the model prediction shown beside the simulation.")
@click.option("--cores-mode", type=click.Choice(CORES_MODES), default="partitioned",
              help="Multi-core hosts: one queue per core (the model) or one shared queue.")
@click.option("--seed", type=int, default=None, help="Random seed for a repeatable run.")
@json_option
@click.pass_context
def simulate(ctx, work, hosts_file, endpoint, names, runs, service, cov, warm, partition, dist,
             cores_mode, seed, as_json):
    """Simulate the task with the discrete-event simulator (Monte Carlo)."""
    config = config_from(ctx)
    if hosts_file is None and (endpoint or config.manager):
        with open_client(config, endpoint) as client:
            host_list = HostList(tuple(client.hosts()), ())
    else:
        host_list = _load(hosts_file)
    report = planning.simulate_hosts(host_list, work, config, names=names, runs=runs,
                                     service=service, cov=cov, warm=warm, partition=partition,
                                     dist=dist, cores_mode=cores_mode, seed=seed)
    if as_json:
        emit_json(report.to_dict())
    else:
        render.show_simulation(console(), report)

