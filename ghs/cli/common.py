"""What every command shares: error handling, config loading, JSON output, duration args."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

from ghs.config import Config, load_config
from ghs.durations import parse_duration
from ghs.errors import GhsError
from protocol.errors import ProtocolError
from scheduler.errors import SchedulerError
from sensors.errors import SensorError

# Error bases of every package ghs wires together; each carries a one-line message.
USER_ERRORS: tuple[type[Exception], ...] = (GhsError, SchedulerError, SensorError,
                                            ProtocolError)


def fail(message: str) -> None:
    click.echo(f"ghs: error: {message}", err=True)
    sys.exit(2)


class GhsGroup(click.Group):
    """A group that turns known errors into one line and exit code 2, never a traceback.

    ``commands_by_name`` maps names to "module:attribute"; each loads on first use.
    """

    def __init__(self, *args: Any, commands_by_name: dict[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(commands_by_name or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            import importlib

            module_name, attribute = self.lazy[name].split(":")
            self.add_command(getattr(importlib.import_module(module_name), attribute), name)
        return super().get_command(ctx, name)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("ghs: aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            # click's own usage errors: one line, like ours, instead of its multi-line block
            fail(exc.format_message().replace("\n", " "))
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            fail(getattr(exc, "message", None) or str(exc))
        except KeyboardInterrupt:
            click.echo("ghs: interrupted", err=True)
            sys.exit(130)


class DurationType(click.ParamType):
    """A click parameter accepting 90, 90s, 30m, 8h, 2d; the value is seconds (float)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        named = param is not None and param.name
        label = f"--{param.name.replace('_', '-')}" if named else "value"
        try:
            return parse_duration(value, what=label)
        except GhsError as exc:
            self.fail(exc.message, param, ctx)


DURATION = DurationType()


def config_from(ctx: click.Context, overrides: dict[str, Any] | None = None) -> Config:
    root = ctx.find_root()
    path = (root.obj or {}).get("config_path")
    return load_config(path, overrides=overrides)


def json_option(function: Any) -> Any:
    option = click.option("--json", "as_json", is_flag=True,
                          help="Print machine-readable JSON (stable keys) instead of tables.")
    return option(function)


def emit_json(payload: Any) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=False, allow_nan=False))


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)
