"""``ghs experiment NAME``: reproducible studies of the model against simulation."""

from __future__ import annotations

import click

from ghs.cli.common import console, emit_json, json_option


@click.group()
def experiment():
    """Run an experiment (see README): a table, or --json."""


@experiment.command()
@click.option("--size", type=click.IntRange(min=100), default=40_000, show_default=True,
              help="Simulated runs per case.")
@click.option("--seed", type=int, default=7, show_default=True, help="Random seed.")
@json_option
def distributions(size, seed, as_json):
    """Which delay fit (gamma, weibull, lognormal, auto) predicts p90/p99 best."""
    from ghs.experiments import distributions as study

    result = study.run(runs=size, seed=seed)
    if as_json:
        emit_json(result)
    else:
        study.show(console(), result)


COMMANDS = [experiment]
