"""The ``ghs`` command line: a click group whose commands live in sibling modules.

Commands only parse arguments, call a library function and render the result; errors a user
can cause become one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import click

from ghs.cli.common import GhsGroup

COMMAND_MODULES = (
    "ghs.cli.scheduling",
    "ghs.cli.bench",
    "ghs.cli.experiment",
    "ghs.cli.measure",
)


@click.group(cls=GhsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ghs")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="TOML config file (default: $GHS_CONFIG or ~/.config/ghs/config.toml).")
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """Grid Harvest Service: predict and schedule divisible tasks on shared workstations."""
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path


def _register() -> None:
    import importlib

    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        for command in module.COMMANDS:
            main.add_command(command)


_register()


def run() -> None:  # pragma: no cover - thin alias for `python -m ghs`
    sys.exit(main())
