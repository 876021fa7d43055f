"""``ghs worker`` (a low-priority Dask worker) and ``ghs condor-attrs`` (startd attributes)."""

from __future__ import annotations

import click

from ghs.cli.common import DURATION, config_from, emit_json, json_option
from ghs.config import DISTRIBUTIONS


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("scheduler")
@click.option("--nthreads", type=click.IntRange(min=1), default=None,
              help="Worker threads (default from config: 1).")
@click.option("--host", "host", default=None, metavar="NAME",
              help="The ghs host this worker runs on (adds the resource ghs_host:NAME=1; "
                   "default: the adapter uses the machine's host name).")
@click.option("--name", default=None, help="Unique Dask worker name.")
@click.option("--resources", default="", help='Dask resources, "NAME=AMOUNT,...".')
@click.option("--dry-run", is_flag=True, help="Print the command and environment marker only.")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@json_option
@click.pass_context
def worker(ctx, scheduler, nthreads, host, name, resources, dry_run, extra, as_json):
    """Start a Dask worker at the lowest priority, marked as a remote task.

    SCHEDULER is the Dask scheduler address (tcp://HOST:8786). Arguments after `--` go to
    `dask worker` unchanged.
    """
    import importlib.util
    import os

    from ghs.adapters.worker import lowest_priority_session, worker_command, worker_environment
    from ghs.errors import GhsError

    config = config_from(ctx)
    command = worker_command(scheduler, nthreads=nthreads or config.adapters.worker_nthreads,
                             host=host, name=name, resources=resources, extra=extra)
    marker = config.sensor.remote_marker
    environment = worker_environment(os.environ, marker)
    if dry_run:
        if as_json:
            emit_json({"command": command, "environment": {marker: "1"}})
        else:
            click.echo(f"{marker}=1 {' '.join(command)}")
        return
    if importlib.util.find_spec("distributed") is None:
        raise GhsError("ghs worker needs dask.distributed: pip install 'ghs[dask]'",
                       field="worker", value=None)
    if os.getpid() != os.getpgrp():
        priority = lowest_priority_session()
        click.echo(f"ghs worker: {priority}, {marker}=1: {' '.join(command)}", err=True)
        os.execve(command[0], command, environment)
    # started from a shell, this process leads its group and cannot start a session of its
    # own (which lowest priority needs under autogroup scheduling): its child does
    import signal
    import subprocess

    click.echo(f"ghs worker: a session of its own at the lowest priority, {marker}=1: "
               f"{' '.join(command)}", err=True)
    child = subprocess.Popen(command, env=environment, preexec_fn=lowest_priority_session)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, lambda signum, _frame: child.send_signal(signum))
    ctx.exit(child.wait())


@click.command("condor-attrs")
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Ask this manager (or GHS_MANAGER, or config) when no --hosts-file is given.")
@click.option("--hosts-file", type=click.Path(dir_okay=False), default=None,
              help="JSON host file instead of a manager.")
@click.option("--host", "name", default=None, metavar="NAME",
              help="The ghs host (default: this machine's host name).")
@click.option("--work", "--work-hour", "work", type=DURATION, default=None,
              help="Task size behind the per-hour forecasts (default 1h).")
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Fit of the delay distribution (default from config).")
@json_option
@click.pass_context
def condor_attrs(ctx, endpoint, hosts_file, name, work, dist, as_json):
    """Print ClassAd attributes of this host for an HTCondor startd cron hook."""
    import socket

    from ghs.adapters.condor import attributes_for, format_classad
    from ghs.errors import GhsError

    config = config_from(ctx)
    if work is not None and work <= 0:
        raise GhsError(f"--work must be > 0, got {work:g}", field="work", value=work)
    attributes = attributes_for(config, name or socket.gethostname(), endpoint=endpoint,
                                hosts_file=hosts_file,
                                work_seconds=work or config.adapters.condor_work_seconds,
                                dist=dist or config.scheduler.distribution)
    if as_json:
        emit_json(attributes)
    else:
        click.echo(format_classad(attributes), nl=False)
