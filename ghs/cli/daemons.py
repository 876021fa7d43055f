"""``ghs manager`` and ``ghs agent``: the two daemons (systemd units in examples/)."""

from __future__ import annotations

import click
import zmq

from ghs.cli.common import POSITIVE_DURATION, SEED, config_from, setting_duration
from ghs.config import SensorConfig
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
    from ghs.errors import GhsError
    from ghs.manager.run import build_manager, serve
    from protocol.errors import InsecureBindError

    configure_logging(verbose)
    config = config_from(ctx)
    port = config.pcm.metrics_port if metrics_port is None else metrics_port
    registry, metrics = open_metrics(config.pcm.metrics_address, port)
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
        if registry is not None:
            from ghs.manager.metrics import register_manager_metrics

            register_manager_metrics(registry, service)
        click.echo(f"ghs manager listening on {', '.join(service.endpoints)}", err=True)
        serve(service, stop, retention_seconds=config.pcm.retention_days * 86400.0,
              calibrate_every_seconds=config.pcm.calibrate_every_seconds)
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
@click.option("--seed", type=SEED, default=1, help="Seed of the simulated workstations.")
@click.option("--interval", type=setting_duration(SensorConfig, "interval_seconds"),
              default=None,
              help="Length of one measurement (default sensor.interval_seconds).")
@click.option("--host-id", default=None, help="Id at the manager (default: hostname).")
@click.option("--outbox", default=None, help="SQLite outbox (default agent.outbox).")
@click.option("--store", default=None,
              help="SQLite store of this machine's measurements (default agent.store).")
@click.option("--replay", "replay", multiple=True, type=click.Path(dir_okay=False),
              help="Replay a workload log as a workstation (CSV arrival_seconds,cpu_seconds"
                   "[,user[,command]], or SWF cut with --stations); repeatable.")
@click.option("--stations", type=click.IntRange(min=1), default=1,
              help="Cut each SWF log into N workstations (host ids NAME-k).")
@click.option("--utilisation", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=0.3, help="Utilisation each SWF workstation is scaled to.")
@click.option("--until", "until", type=POSITIVE_DURATION, default=None,
              help="Stop the replay clock at this log time, send a last report, drain, exit.")
@click.option("--replay-epoch", type=float, default=None,
              help="Epoch seconds that log time 0 maps to (default: the SWF UnixStartTime, "
                   "else 2026-01-05 00:00 UTC).")
@click.option("--drain-timeout", type=POSITIVE_DURATION, default=120.0, show_default=True,
              help="With --until: how long to wait for the manager to acknowledge everything.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics at http://ADDRESS:PORT/metrics (address: "
                   "agent.metrics_address, loopback by default; 0: off).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def agent(ctx, endpoint, simulate, speedup, seed, interval, host_id, outbox, store, replay,
          stations, utilisation, until, replay_epoch, drain_timeout, metrics_port, verbose):
    """Run the measuring agent: sample this machine (or simulated ones, or replayed logs) and
    ship to the manager."""
    if until is not None and not replay:
        raise click.UsageError("--until goes with --replay")
    if replay and simulate:
        raise click.UsageError("give --replay or --simulate, not both")
    if not simulate and not replay:
        from ghs.daemon import keep_numpy_out

        keep_numpy_out()
    from ghs.agent.runner import build_agent
    from ghs.endpoint import manager_endpoint
    from ghs.errors import GhsError

    configure_logging(verbose)
    config = config_from(ctx)
    endpoint = manager_endpoint(config, endpoint)
    port = config.agent.metrics_port if metrics_port is None else metrics_port
    registry, metrics = open_metrics(config.agent.metrics_address, port)
    stop = stop_on_signals()
    context = zmq.Context()
    try:
        running = build_agent(config, context=context, stop=stop, endpoint=endpoint,
                              simulate=simulate, speedup=speedup, seed=seed,
                              interval_seconds=interval, host_id=host_id, outbox_path=outbox,
                              store_path=store, replay=replay, stations=stations,
                              utilisation=utilisation, until_seconds=until,
                              replay_zero_epoch_seconds=replay_epoch)
        if registry is not None:
            from ghs.agent.metrics import register_agent_metrics

            register_agent_metrics(registry, running)
        names = ", ".join(host.identity.host_id for host in running.hosts)
        click.echo(f"ghs agent measuring {names} -> {endpoint}", err=True)
        running.run(stop, drain_seconds=drain_timeout if until is not None else 2.0)
        if until is not None and not running.drained:
            raise GhsError(f"the manager at {endpoint} did not acknowledge everything within "
                           f"{drain_timeout:g} s; the rest stays in the outbox",
                           field="drain_timeout", value=drain_timeout)
    finally:
        if metrics is not None:
            metrics.shutdown()
        context.term()
