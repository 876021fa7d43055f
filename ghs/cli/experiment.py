"""``ghs experiment NAME``: reproducible studies of the model against simulation."""

from __future__ import annotations

import click

from ghs.cli.common import DURATION, SEED, config_from, console, emit_json, json_option
from ghs.cli.common import plot_option as png_option
from ghs.daemon import sigterm_as_interrupt


@click.group()
def experiment():
    """Run an experiment (see README): a table, or --json."""


@experiment.command()
@click.option("--size", type=click.IntRange(min=100), default=40_000, show_default=True,
              help="Simulated runs per case.")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@json_option
def distributions(size, seed, as_json):
    """Which delay fit (gamma, weibull, lognormal, auto) predicts p90/p99 best."""
    from ghs.experiments import distributions as study
    from ghs.experiments.tables import show_distributions

    _render(study.run(runs=size, seed=seed), as_json, show_distributions)


@experiment.command()
@click.option("--size", type=click.IntRange(min=100), default=40_000, show_default=True,
              help="Simulated runs per case.")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@click.option("--warm/--idle", default=False, show_default=True,
              help="Start in the steady state, as a host file's answers do (else idle).")
@json_option
def envelope(size, seed, warm, as_json):
    """Where the uncalibrated model's quantiles hold: utilisation x demand CoV x length."""
    from ghs.experiments import envelope as study
    from ghs.experiments.tables import show_envelope

    _render(study.run(runs=size, seed=seed, warm=warm), as_json, show_envelope)


def plot_option(function):
    return png_option("Also draw a PNG here (needs matplotlib: pip install 'ghs[plot]').")(
        function)


def _render(result, as_json, show, plot=None, plot_path=None):
    """Print an experiment's result as JSON or with ``show``; draw it with ``plot`` if asked."""
    if as_json:
        emit_json(result)
    else:
        show(console(), result)
    if plot_path is not None:
        drawn = plot(result, plot_path)
        click.echo(f"plot written to {drawn}" if drawn else
                   "plot skipped: matplotlib is not installed (pip install 'ghs[plot]')",
                   err=as_json)


@experiment.command()
@click.option("--size", type=click.IntRange(min=10), default=40_000, show_default=True,
              help="Simulated runs per case.")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@plot_option
@json_option
@click.pass_context
def partition(ctx, size, seed, plot_path, as_json):
    """Equal-mean vs equal-load vs speed partition on two workstations (paper figure 7)."""
    from ghs.experiments import partition as study
    from ghs.experiments.plots import plot_partition
    from ghs.experiments.tables import show_partition

    measure = config_from(ctx).sensor.interval_seconds
    _render(study.run(runs=size, seed=seed, measure_seconds=measure), as_json, show_partition,
            plot_partition, plot_path)


@experiment.command()
@click.option("--size", type=click.IntRange(min=10), default=10_000, show_default=True,
              help="Simulated runs per machine set.")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@click.option("--repetitions", type=click.IntRange(min=1), default=10, show_default=True,
              help="New pools and random subsets per pool size.")
@click.option("--pool", "pools", type=click.IntRange(min=2, max=22), multiple=True,
              default=(10, 15, 20), show_default=True, help="Pool size (repeatable).")
@click.option("--work", type=DURATION, default="2h", show_default=True,
              help="Task size in reference-CPU time.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Derive the pools from this SWF or CSV log instead of the generator.")
@click.option("--window", type=DURATION, default="24h", show_default=True,
              help="Length of the trace window each pool is cut from.")
@plot_option
@json_option
@click.pass_context
def selection(ctx, size, seed, repetitions, pools, work, trace_path, window, plot_path,
              as_json):
    """Paper Table 1: random subsets, all hosts, optimal, heuristic and prefix selection."""
    from ghs.experiments import selection as study
    from ghs.experiments.plots import plot_selection
    from ghs.experiments.tables import show_selection
    from ghs.traces import read_log

    log = read_log(trace_path) if trace_path else None
    result = study.run(runs=size, seed=seed, repetitions=repetitions, pool_sizes=pools,
                       work_seconds=work, log=log, window_hours=window / 3600.0,
                       measure_seconds=config_from(ctx).sensor.interval_seconds)
    _render(result, as_json, show_selection, plot_selection, plot_path)


def _trace_option(function):
    option = click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
                          default=None, help="Also run trace-driven workstations cut from "
                                             "this SWF or CSV log (e.g. LCG.swf.gz).")
    return option(function)


def _validation_options(function):
    for option in reversed((
            click.option("--size", type=click.IntRange(min=1), default=48, show_default=True,
                         help="Launches per family (3 hours apart, after a day of sampling)."),
            click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed."),
            click.option("--stations", type=click.IntRange(min=1, max=64), default=32,
                         show_default=True, help="Workstations per family."),
            _trace_option)):
        function = option(function)
    return function


def _paths_option(function):
    option = click.option("--paths", type=click.IntRange(min=1), default=1, show_default=True,
                          help="Independent draws of the workstations (seeds SEED, SEED+1, "
                               "...), every task pooled: one draw's launches share most of "
                               "their run windows.")
    return option(function)


def _run_launches(ctx, study, views, size, seed, stations, trace_path, families, plot_path,
                  as_json, **options):
    """The launch-based studies take the same inputs: sampler settings and scheduler rules
    (``options``: a study's own)."""
    from ghs.experiments.launches import Sampling
    from ghs.traces import read_log

    config = config_from(ctx)
    result = study.run(size=size, seed=seed, log=read_log(trace_path) if trace_path else None,
                       stations=stations, poisson_kinds=families,
                       sampling=Sampling.from_config(config.sensor),
                       dist=config.scheduler.distribution, rho_max=config.scheduler.rho_max,
                       **options)
    _render(result, as_json, *views, plot_path)


@experiment.command("error-vs-length")
@_validation_options
@click.option("--family", "families", type=click.Choice(["loguniform", "lognormal"]),
              multiple=True, default=("loguniform", "lognormal"), show_default=True,
              help="Poisson workstation family (repeatable).")
@_paths_option
@plot_option
@json_option
@click.pass_context
def error_vs_length(ctx, size, seed, stations, trace_path, families, paths, plot_path,
                    as_json):
    """Prediction error against task length on one workstation and on --stations (paper 4-6)."""
    from ghs.experiments import error_vs_length as study
    from ghs.experiments.plots import plot_error_vs_length
    from ghs.experiments.tables import show_error_vs_length

    _run_launches(ctx, study, (show_error_vs_length, plot_error_vs_length), size, seed,
                  stations, trace_path, families, plot_path, as_json, paths=paths)


@experiment.command()
@_validation_options
@click.option("--family", "families", type=click.Choice(["loguniform", "lognormal"]),
              multiple=True, default=("loguniform",), show_default=True,
              help="Poisson workstation family (repeatable).")
@_paths_option
@plot_option
@json_option
@click.pass_context
def calibration(ctx, size, seed, stations, trace_path, families, paths, plot_path, as_json):
    """Share of tasks finished by the predicted p50, p90 and p95 against 50%, 90%, 95%."""
    from ghs.experiments import calibration as study
    from ghs.experiments.plots import plot_calibration
    from ghs.experiments.tables import show_calibration

    _run_launches(ctx, study, (show_calibration, plot_calibration), size, seed, stations,
                  trace_path, families, plot_path, as_json, paths=paths)


@experiment.command("error-sources")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), required=True,
              help="The SWF or CSV log to cut workstations from (e.g. LCG.swf.gz).")
@click.option("--size", type=click.IntRange(min=1), default=48, show_default=True,
              help="Launches (3 hours apart, after a day of sampling).")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@click.option("--stations", type=click.IntRange(min=1, max=32), default=8, show_default=True,
              help="Workstations studied (of the 32 the log is cut into).")
@plot_option
@json_option
@click.pass_context
def error_sources(ctx, trace_path, size, seed, stations, plot_path, as_json):
    """What burstiness, heavy tails, non-stationarity and a busy start cost on a real log."""
    from ghs.experiments import trace_study as study
    from ghs.experiments.launches import Sampling
    from ghs.experiments.plots import plot_trace_study
    from ghs.experiments.tables import show_trace_study
    from ghs.traces import read_log

    config = config_from(ctx)
    result = study.run(read_log(trace_path), size=size, seed=seed, stations=stations,
                       sampling=Sampling.from_config(config.sensor),
                       dist=config.scheduler.distribution)
    _render(result, as_json, show_trace_study, plot_trace_study, plot_path)


@experiment.command("sampling-cost")
@click.option("--size", type=click.IntRange(min=1, max=60), default=3, show_default=True,
              help="Virtual days of each phase (steady, step, hourly changes).")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@plot_option
@json_option
@click.pass_context
def sampling_cost(ctx, size, seed, plot_path, as_json):
    """Measurements per hour as a workstation settles, then changes (paper figure 8)."""
    from ghs.experiments import sampling_cost as study
    from ghs.experiments.launches import Sampling
    from ghs.experiments.plots import plot_sampling_cost
    from ghs.experiments.tables import show_sampling_cost

    result = study.run(size=size, seed=seed,
                       sampling=Sampling.from_config(config_from(ctx).sensor))
    _render(result, as_json, show_sampling_cost, plot_sampling_cost, plot_path)


@experiment.command("eta-coverage")
@click.option("--size", type=click.IntRange(min=10), default=1000, show_default=True,
              help="Stopped tasks per family and stop fraction.")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@click.option("--trace", "trace_paths", type=click.Path(dir_okay=False), multiple=True,
              help="Also a trace family from this SWF or CSV log (repeatable).")
@click.option("--uncalibrated", is_flag=True,
              help="The model's own quantiles, without each host's record-based calibration.")
@json_option
def eta_coverage(size, seed, trace_paths, uncalibrated, as_json):
    """How often the ETA's p50/p90/p95 cover tasks stopped at 10%, 50% and 90%."""
    from ghs.experiments import eta_coverage as study
    from ghs.traces import read_log

    result = study.run(size, seed, logs=[read_log(path) for path in trace_paths],
                       calibrated=not uncalibrated)
    if as_json:
        emit_json(result)
    else:
        study.show(console(), result)


@experiment.command()
@click.option("--duration", type=DURATION, default="30m", show_default=True,
              help="Length of the owners' workload (the load changes halfway).")
@click.option("--task-seconds", type=DURATION, default="60", show_default=True,
              help="CPU seconds each remote task burns (one process, SCHED_IDLE).")
@click.option("--utilisation", "utilisations", type=click.FloatRange(0, 1, min_open=True,
                                                                       max_open=True),
              nargs=2, default=(0.3, 0.5), show_default=True,
              help="The owners' utilisation of their core before and after the change.")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Random seed.")
@json_option
def live(duration, task_seconds, utilisations, seed, as_json):
    """Root: real owners' jobs, agent, manager and remote tasks timed against predictions."""
    from ghs.experiments import live as study

    def progress(task):
        realised = task["realised_seconds"]
        click.echo(f"task at {task['launch_offset_seconds']:.0f} s: realised "
                   f"{'stopped' if realised is None else f'{realised:.1f} s'}, predicted mean "
                   f"{task['mean']:.1f} s, p90 {task['quantiles']['p90']:.1f} s", err=True)

    # SIGTERM unwinds like Ctrl-C: the owners, daemons and the running task are stopped
    with sigterm_as_interrupt():
        result = study.run(duration, task_seconds, utilisations, seed=seed, progress=progress)
    if as_json:
        emit_json(result)
    else:
        study.show(console(), result)
