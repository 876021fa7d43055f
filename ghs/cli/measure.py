"""``ghs measure``: one measurement of this machine's local load, printed."""

from __future__ import annotations

import os
from typing import Any

import click

from ghs.cli.common import config_from, console, emit_json, json_option, setting_duration
from ghs.config import ACCOUNTING_MODES, SensorConfig
from ghs.daemon import sigterm_as_interrupt
from sensors.clock import SystemClock
from sensors.host import LocalSensor, options_from
from sensors.speed import resolve_tau


@click.command()
@click.option("--interval", type=setting_duration(SensorConfig, "interval_seconds"), default=None,
              help="Length of the measurement, e.g. 30s (default: sensor.interval_seconds).")
@click.option("--accounting", type=click.Choice(ACCOUNTING_MODES), default=None,
              help="Process accounting: on (root: the sensor's own file), auto, off.")
@json_option
@click.pass_context
def measure(ctx: click.Context, interval: float | None, accounting: str | None,
            as_json: bool) -> None:
    """Measure this machine once: lambda, rho, mu, sigma of its local jobs, and tau."""
    config = config_from(ctx, {"sensor": {"interval_seconds": interval,
                                          "accounting": accounting}})
    section = config.sensor
    # SIGTERM must also leave the sensor's context, which switches accounting off
    with sigterm_as_interrupt(), LocalSensor(
            clock=SystemClock(), exclude_pids=[os.getpid()], proc_root="/proc",
            remove_accounting_file=True, **options_from(section)) as local:
            result = local.measure(section.interval_seconds)
            payload = result.to_dict()
            payload["accounting"] = local.session.source
            payload["accounting_note"] = local.session.reason
    # the same speed rule as the agent's, so the tau shown is the tau the manager would get
    speed = resolve_tau(override=section.tau, command=section.speed_command,
                        command_reference_seconds=section.speed_command_reference_seconds,
                        runs=section.speed_runs)
    payload["tau"] = speed.tau
    payload["tau_source"] = speed.source
    if as_json:
        emit_json(payload)
        return
    _show(payload)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _show(payload: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="local load of this machine", show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("interval (s)", payload["interval_seconds"]),
        ("lambda: arrivals per second", payload["lam"]),
        ("rho: busy fraction per core", payload["rho"]),
        ("mu: jobs per CPU-second", payload["mu"]),
        ("sigma: demand std dev (s)", payload["sigma"]),
        ("mean demand (s)", payload["mean_service_seconds"]),
        ("jobs started and still running", payload["jobs_started"]),
        ("jobs started and finished", payload["jobs_between"]),
        ("finished jobs timed", payload["service_count"]),
        ("running processes", payload["running"]),
        ("cores", payload["cores"]),
        ("tau: speed vs the reference machine", payload["tau"]),
        ("tau from", payload["tau_source"]),
        ("lambda from", payload["lambda_source"]),
        ("rho from", payload["rho_source"]),
        ("accounting", payload["accounting"] + (f" ({payload['accounting_note']})"
                                                if payload["accounting_note"] else "")),
        ("quality", ", ".join(payload["quality"]) or "ok"),
    ]
    for label, value in rows:
        table.add_row(label, _number(value))
    console().print(table)

