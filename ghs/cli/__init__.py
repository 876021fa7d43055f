"""The ``ghs`` command line: a click group whose commands live in sibling modules.

Commands only parse arguments, call a library function and render the result; errors a user
can cause become one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import click

from ghs.cli.common import GhsGroup

# command name -> "module:attribute"; modules load only when their command runs, so the
# agent never imports scipy and `ghs -h` stays quick
COMMANDS = {
    "predict": "ghs.cli.scheduling:predict",
    "schedule": "ghs.cli.scheduling:schedule",
    "simulate": "ghs.cli.scheduling:simulate",
    "bench": "ghs.cli.bench:bench",
    "experiment": "ghs.cli.experiment:experiment",
    "measure": "ghs.cli.measure:measure",
    "manager": "ghs.cli.daemons:manager",
    "agent": "ghs.cli.daemons:agent",
    "status": "ghs.cli.remote:status",
    "history": "ghs.cli.remote:history",
    "keys": "ghs.cli.remote:keys",
    "demo": "ghs.cli.demo:demo",
    "worker": "ghs.cli.adapters:worker",
    "condor-attrs": "ghs.cli.adapters:condor_attrs",
    "backtest": "ghs.cli.backtest:backtest",
    "eta": "ghs.cli.tracking:eta",
    "report": "ghs.cli.tracking:report",
    "accuracy": "ghs.cli.tracking:accuracy",
}


@click.group(cls=GhsGroup, commands_by_name=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ghs")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="TOML config file (default: $GHS_CONFIG or ~/.config/ghs/config.toml).")
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """Grid Harvest Service: predict and schedule divisible tasks on shared workstations."""
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path


def run() -> None:  # pragma: no cover - thin alias for `python -m ghs`
    sys.exit(main())
