"""``ghs manager`` and ``ghs agent``: the two daemons (systemd units in examples/)."""

from __future__ import annotations

import click
import zmq

from ghs.cli.common import config_from, setting_duration
from ghs.config import SensorConfig
from ghs.daemon import configure_logging, stop_on_signals


@click.command()
@click.option("--endpoint", default=None,
              help="ROUTER for agents and queries (default pcm.endpoint, "
                   "tcp://127.0.0.1:5555).")
@click.option("--client-endpoint", default=None, help="Optional second ROUTER for queries.")
@click.option("--database", default=None, help="SQLite file (default pcm.database).")
@click.option("--insecure", is_flag=True, default=None,
              help="Allow binding beyond loopback without CurveZMQ keys.")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def manager(ctx, endpoint, client_endpoint, database, insecure, verbose):
    """Run the manager (PCM): store measurements, answer status/predict/schedule."""
    from ghs.errors import GhsError
    from ghs.manager.run import build_manager, serve
    from protocol.errors import InsecureBindError

    configure_logging(verbose)
    config = config_from(ctx)
    stop = stop_on_signals()
    context = zmq.Context()
    try:
        try:
            service = build_manager(config, context=context, endpoint=endpoint,
                                    client_endpoint=client_endpoint, database=database,
                                    insecure=insecure)
        except InsecureBindError as exc:
            # the protocol's message names its Python argument; here the flag is the way
            raise GhsError(f"refusing to bind {exc.value} without CurveZMQ keys: anyone who "
                           "can reach it could read and forge measurements; set pcm.keys and "
                           "pcm.allow, bind to loopback, or pass --insecure to accept the "
                           "risk", field="endpoint", value=exc.value) from None
        click.echo(f"ghs manager listening on {', '.join(service.endpoints)}", err=True)
        serve(service, stop, retention_seconds=config.pcm.retention_days * 86400.0)
    finally:
        context.term()


@click.command()
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Manager endpoint (or GHS_MANAGER, or config 'manager').")
@click.option("--simulate", type=click.IntRange(min=0), default=0,
              help="Run N simulated workstations instead of measuring this machine.")
@click.option("--speedup", type=click.FloatRange(min=1.0), default=1.0,
              help="Simulated clock speed: 3600 runs an hour a second (with --simulate).")
@click.option("--seed", type=int, default=1, help="Seed of the simulated workstations.")
@click.option("--interval", type=setting_duration(SensorConfig, "interval_seconds"),
              default=None,
              help="Length of one measurement (default sensor.interval_seconds).")
@click.option("--host-id", default=None, help="Id at the manager (default: hostname).")
@click.option("--outbox", default=None, help="SQLite outbox (default agent.outbox).")
@click.option("--store", default=None,
              help="SQLite store of this machine's measurements (default agent.store).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def agent(ctx, endpoint, simulate, speedup, seed, interval, host_id, outbox, store, verbose):
    """Run the measuring agent: sample this machine (or simulated ones), ship to the manager."""
    if not simulate:
        from ghs.daemon import keep_numpy_out

        keep_numpy_out()
    from ghs.agent.runner import build_agent
    from ghs.endpoint import manager_endpoint

    configure_logging(verbose)
    config = config_from(ctx)
    endpoint = manager_endpoint(config, endpoint)
    stop = stop_on_signals()
    context = zmq.Context()
    try:
        running = build_agent(config, context=context, stop=stop, endpoint=endpoint,
                              simulate=simulate, speedup=speedup, seed=seed,
                              interval_seconds=interval, host_id=host_id, outbox_path=outbox,
                              store_path=store)
        names = ", ".join(host.identity.host_id for host in running.hosts)
        click.echo(f"ghs agent measuring {names} -> {endpoint}", err=True)
        running.run(stop)
    finally:
        context.term()
