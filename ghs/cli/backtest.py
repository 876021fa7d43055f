"""``ghs backtest``."""

from __future__ import annotations

import click

from ghs.cli.common import (
    DURATION,
    SEED,
    asking,
    config_from,
    console,
    emit_json,
    fail,
    json_option,
    plot_option,
    timeout_option,
)


@click.command()
@click.option("--manager", "endpoint", default=None,
              help="The manager's own record: its hourly shadow launches on each host, "
                   "scored on the hosts' capacity series.")
@click.option("--host", "hosts", multiple=True, help="With --manager: only these hosts.")
@click.option("--trace", "traces", multiple=True, type=click.Path(dir_okay=False),
              help="A single-core workstation log (CSV arrival_seconds,cpu_seconds[,user"
                   "[,command]], or SWF cut with --stations); repeatable.")
@click.option("--work", "works", multiple=True, type=DURATION, required=True,
              help="Task length in dedicated seconds (90, 30m, 8h); repeatable.")
@click.option("--launch-every", type=DURATION, default=None,
              help="Time between launches (whole hours; default 3h, with --manager 1h).")
@click.option("--start", type=DURATION, default=None,
              help="First launch on the log's clock (whole hours; default 48h), or with "
                   "--manager after each host's first shadow launch (default 0).")
@click.option("--shadow-every", type=DURATION, default=None,
              help="With --trace: how often the calibrators learn from a shadow launch of "
                   "each station's record (whole hours; default 1h, as a manager does).")
@click.option("--calibrate-at", "calibrate_at", multiple=True, type=DURATION,
              help="With --trace: the task lengths the calibrators learn at, as a manager's "
                   "fixed ones (15m, 1h, 4h, 16h); a --work between them is served factors "
                   "interpolated in log length, as a manager serves it (default: each --work "
                   "its own calibrator); repeatable.")
@click.option("--end", type=DURATION, default=None,
              help="Cut the logs at this log time (default: their own ends).")
@click.option("--parallel", is_flag=True,
              help="One task of each length split over all stations (else one per station).")
@click.option("--stations", type=click.IntRange(min=1), default=1,
              help="Cut each SWF log into N workstations.")
@click.option("--utilisation", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=0.3, help="Offered load of each workstation cut from an SWF log.")
@click.option("--seed", type=SEED, default=1, help="Seed of the sampler's random times.")
@plot_option("Write a PNG: reliability diagram and error against task length.")
@timeout_option
@json_option
@click.pass_context
def backtest(ctx, endpoint, hosts, traces, works, launch_every, start, shadow_every,
             calibrate_at, end, parallel, stations, utilisation, seed, plot_path, timeout, as_json):
    """Score the predictors at past launches of replayed workstations (coverage, error)."""
    if bool(endpoint) == bool(traces):
        raise click.UsageError("give --manager EP or --trace FILE, not both" if endpoint
                               else "give --manager EP (the manager's record) or --trace FILE "
                               "(a workstation log to replay)")
    if hosts and not endpoint:
        raise click.UsageError("--host goes with --manager")
    if shadow_every is not None and endpoint:
        raise click.UsageError("--shadow-every goes with --trace (a manager's are hourly)")
    if calibrate_at and endpoint:
        raise click.UsageError("--calibrate-at goes with --trace (a manager's lengths are its "
                               "own)")
    if endpoint:
        from ghs.backtest.view import plot_backtest, show_backtest
        from ghs.remote import open_client

        config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
        with open_client(config, endpoint) as client, asking(client):
            result = client.backtest(hosts or None, list(works), launch_every, start)
        if not result["launches"]:
            fail("the manager has no scored launch yet for these hosts and lengths (a shadow "
                 "launch is made every hour of a host's record and scored once it has run)")
        _render(result, plot_path, as_json, show_backtest, plot_backtest)
        return
    launch_every = 3 * 3600.0 if launch_every is None else launch_every
    start = 48 * 3600.0 if start is None else start
    from ghs.agent.replay import read_stations
    from ghs.backtest import BacktestSettings, run_backtest
    from ghs.backtest.view import plot_backtest, show_backtest

    config = config_from(ctx)
    found, keys = [], []
    for path in traces:
        cut = read_stations([path], stations=stations, utilisation=utilisation)
        found.extend(cut)
        keys.extend([path] if len(cut) == 1 else [f"{path}#{k}" for k in range(len(cut))])
    if len(set(keys)) != len(keys):
        raise click.UsageError("each --trace file may be given once")
    settings = BacktestSettings(start_seconds=start, every_seconds=launch_every,
                                parallel=parallel, sensor=config.sensor, seed=seed,
                                end_seconds=end, shadow_every_seconds=(
                                    3600.0 if shadow_every is None else shadow_every),
                                calibration_lengths_seconds=tuple(calibrate_at) or None)
    result = run_backtest(found, keys, list(works), settings)
    if not result["launches"]:
        # (the experiments read an empty back-test as no outcome; a person gets an error)
        fail(f"no launch was scored: no task launched from --start {start:g} s finished "
             "inside its stations' logs; start earlier, or give longer logs")
    _render(result, plot_path, as_json, show_backtest, plot_backtest)


def _render(result, plot_path, as_json, show, plot) -> None:
    if plot_path:
        plot(result, plot_path)
    if as_json:
        emit_json(result)
    else:
        show(console(), result)
        if plot_path:
            click.echo(f"plot written to {plot_path}")
