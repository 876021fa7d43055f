"""What every command shares: error handling, config loading, JSON output, duration args."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console

from ghs.config import Config, load_config
from ghs.durations import parse_duration
from ghs.errors import GhsError
from ghs.figure_file import plot_path_problem
from protocol.errors import ProtocolError
from scheduler.errors import SchedulerError
from sensors.errors import SensorError

# Error bases of every package ghs wires together; each carries a one-line message.
USER_ERRORS: tuple[type[Exception], ...] = (GhsError, SchedulerError, SensorError,
                                            ProtocolError)


def fail(message: str) -> None:
    click.echo(f"ghs: error: {message}", err=True)
    sys.exit(2)


def warn(message: str) -> None:
    click.echo(f"ghs: warning: {message}", err=True)


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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, config_first(args))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError as exc:
            # bare `ghs`: the help itself, with click's exit code for a group without command
            click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
            sys.exit(2)
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


def config_first(args: list[str]) -> list[str]:
    """``args`` with every ``--config FILE`` moved to the front, so the group's option also
    works after the subcommand (``ghs status --config FILE``); nothing after ``--`` moves."""
    moved: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest.extend(args[index:])
            break
        if arg == "--config" and index + 1 < len(args):
            moved += args[index:index + 2]
            index += 2
            continue
        (moved if arg.startswith("--config=") else rest).append(arg)
        index += 1
    return moved + rest


class DurationType(click.ParamType):
    """A click parameter accepting 90, 90s, 30m, 8h, 2d; the value is seconds (float).

    ``low``/``high`` bound it (closed unless ``low_open``); a value outside is refused with
    the allowed range, naming the flag.
    """

    name = "duration"

    def __init__(self, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        # the flag as a user types it (a parameter's name can differ: --work is "works")
        flags = [opt for opt in param.opts if opt.startswith("--")] if param is not None else []
        label = flags[0] if flags else "value"
        if isinstance(value, float):
            seconds = value
        else:
            try:
                seconds = parse_duration(value, what=label)
            except GhsError as exc:
                self.fail(exc.message, param, ctx)
        too_low = self.low is not None and (seconds < self.low
                                             or (self.low_open and seconds == self.low))
        if too_low or (self.high is not None and seconds > self.high):
            left = "(" if self.low_open else "["
            low = "-inf" if self.low is None else f"{self.low:g} s"
            high = "inf" if self.high is None else f"{self.high:g} s"
            self.fail(f"{seconds:g} s is outside the allowed range "
                      f"{left}{low}, {high}]", param, ctx)
        return seconds


# no option of ghs takes a negative duration (an elapsed time, a task length, a window)
DURATION = DurationType(0.0)
POSITIVE_DURATION = DurationType(0.0, low_open=True)
# numpy's generators take no negative seed: refused here with the range, not a traceback
SEED = click.IntRange(min=0)


def setting_duration(section: type, name: str) -> DurationType:
    """A duration parameter bounded like the config field ``name`` of ``section``."""
    meta = next(f.metadata for f in dataclasses.fields(section) if f.name == name)
    return DurationType(meta["low"], meta["high"], low_open=bool(meta["low_open"]))


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


# wide enough that no cell of a piped table is cut: rich would otherwise assume 80 columns
PIPED_WIDTH = 10_000


def console() -> Console:
    """stdout for tables: the terminal's width, or no width limit when piped or logged."""
    if sys.stdout.isatty():
        return Console(highlight=False, soft_wrap=False)
    return Console(highlight=False, soft_wrap=False, width=PIPED_WIDTH)


def plot_option(help_text: str) -> Any:
    """``--plot PNG``, its folder checked before the command runs (a back-test or an
    experiment draws its figure minutes later, last)."""
    def checked(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        problem = None if value is None else plot_path_problem(value)
        if problem is not None:
            raise click.BadParameter(f"cannot write {value!r}: {problem}", ctx=ctx, param=param)
        return value

    return click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
                        callback=checked, help=help_text)


def timeout_option(function: Any) -> Any:
    option = click.option(
        "--timeout", type=POSITIVE_DURATION, default=None,
        help="Longest wait for the manager's answer (default client.timeout_seconds, 30 s; "
             "or GHS_CLIENT_TIMEOUT_SECONDS).")
    return option(function)


@contextmanager
def asking(client: Any) -> Iterator[None]:
    """Say on a terminal's stderr which manager is being waited for, while waiting."""
    if not sys.stderr.isatty():
        yield
        return
    status = Console(stderr=True).status(
        f"waiting for the manager at {client.endpoint} (up to {client.timeout_seconds:g} s)")
    with status:
        yield
