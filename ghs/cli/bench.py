"""``ghs bench``: speed against straightforward baselines run in the same process."""

from __future__ import annotations

import click

from ghs.cli.common import console, emit_json, json_option


@click.command()
@click.option("--quick", is_flag=True, help="Small sizes only (seconds instead of minutes).")
@click.option("--seed", type=int, default=1, help="Random seed of the generated hosts.")
@json_option
def bench(quick, seed, as_json):
    """Measure prediction and selection speed against baselines (ratios, not just times)."""
    from ghs.benchmarks import scheduling

    results = scheduling.run(quick=quick, seed=seed)
    if as_json:
        emit_json(results)
    else:
        scheduling.show(console(), results)


COMMANDS = [bench]
