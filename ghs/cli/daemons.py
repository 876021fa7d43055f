"""``ghs manager`` and ``ghs agent``: the two daemons (systemd units in examples/)."""

from __future__ import annotations

import click
import zmq

from ghs.cli.common import DURATION, config_from
from ghs.daemon import configure_logging, open_metrics, stop_on_signals


@click.command()
@click.option("--endpoint", default=None,
              help="ROUTER for agents and queries (default pcm.endpoint, "
                   "tcp://127.0.0.1:5555).")
@click.option("--client-endpoint", default=None, help="Optional second ROUTER for queries.")
@click.option("--database", default=None, help="SQLite file (default pcm.database).")
@click.option("--insecure", is_flag=True, default=None,
              help="Allow binding beyond loopback without CurveZMQ keys.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics at http://ADDRESS:PORT/metrics (address: "
                   "pcm.metrics_address, loopback by default; 0: off).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def manager(ctx, endpoint, client_endpoint, database, insecure, metrics_port, verbose):
    """Run the manager (PCM): store measurements, answer status/predict/schedule."""
    from ghs.manager.run import build_manager, serve

    configure_logging(verbose)
    config = config_from(ctx)
    port = config.pcm.metrics_port if metrics_port is None else metrics_port
    registry, metrics = open_metrics(config.pcm.metrics_address, port)
    stop = stop_on_signals()
    context = zmq.Context()
    try:
        service = build_manager(config, context=context, endpoint=endpoint,
                                client_endpoint=client_endpoint, database=database,
                                insecure=insecure)
        if registry is not None:
            from ghs.manager.metrics import register_manager_metrics

            register_manager_metrics(registry, service)
        click.echo(f"ghs manager listening on {', '.join(service.endpoints)}", err=True)
        serve(service, stop, retention_seconds=config.pcm.retention_days * 86400.0)
    finally:
        if metrics is not None:
            metrics.shutdown()
        context.term()


@click.command()
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Manager endpoint (or GHS_MANAGER, or config 'manager').")
@click.option("--simulate", type=click.IntRange(min=0), default=0,
              help="Run N simulated workstations instead of measuring this machine.")
@click.option("--speedup", type=click.FloatRange(min=1.0), default=1.0,
              help="Simulated clock speed: 3600 runs an hour a second (with --simulate).")
@click.option("--seed", type=int, default=1, help="Seed of the simulated workstations.")
@click.option("--interval", type=DURATION, default=None,
              help="Length of one measurement (default sensor.interval_seconds).")
@click.option("--host-id", default=None, help="Id at the manager (default: hostname).")
@click.option("--outbox", default=None, help="SQLite outbox (default agent.outbox).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics at http://ADDRESS:PORT/metrics (address: "
                   "agent.metrics_address, loopback by default; 0: off).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def agent(ctx, endpoint, simulate, speedup, seed, interval, host_id, outbox, metrics_port,
          verbose):
    """Run the measuring agent: sample this machine (or simulated ones), ship to the manager."""
    if not simulate:
        from ghs.daemon import keep_numpy_out

        keep_numpy_out()
    from ghs.agent.runner import build_agent
    from ghs.errors import GhsError

    configure_logging(verbose)
    config = config_from(ctx)
    endpoint = endpoint or config.manager
    if not endpoint:
        raise GhsError("no manager: give --manager tcp://HOST:PORT (or GHS_MANAGER)",
                       field="manager")
    port = config.agent.metrics_port if metrics_port is None else metrics_port
    registry, metrics = open_metrics(config.agent.metrics_address, port)
    stop = stop_on_signals()
    context = zmq.Context()
    try:
        running = build_agent(config, context=context, stop=stop, endpoint=endpoint,
                              simulate=simulate, speedup=speedup, seed=seed,
                              interval_seconds=interval, host_id=host_id, outbox_path=outbox)
        if registry is not None:
            from ghs.agent.metrics import register_agent_metrics

            register_agent_metrics(registry, running)
        names = ", ".join(host.identity.host_id for host in running.hosts)
        click.echo(f"ghs agent measuring {names} -> {endpoint}", err=True)
        running.run(stop)
    finally:
        if metrics is not None:
            metrics.shutdown()
        context.term()
