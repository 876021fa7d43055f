"""``ghs eta``, ``ghs report`` and ``ghs accuracy``: follow a running task, close the loop."""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone

import click

from ghs.cli.common import (
    DURATION,
    POSITIVE_DURATION,
    asking,
    config_from,
    console,
    emit_json,
    json_option,
    timeout_option,
)
from ghs.config import DISTRIBUTIONS
from ghs.errors import GhsError

_MANAGER_HELP = "Manager endpoint (or GHS_MANAGER, or config 'manager')."


def finished_at(text: str, now: float) -> float:
    """Epoch seconds from ``now``, a number of epoch seconds or an ISO time (UTC if no zone)."""
    text = text.strip()
    if text.lower() == "now":
        return now
    try:
        value = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise GhsError(f"--finished-at: cannot read {text!r}; give epoch seconds, an ISO "
                           "time (2026-11-22T21:05:00Z) or 'now'", field="finished_at",
                           value=text) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        value = moment.timestamp()
    if not (math.isfinite(value) and value > 0):
        raise GhsError(f"--finished-at: {text!r} is not a time after 1970", field="finished_at",
                       value=text)
    return value


@click.command()
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False), required=True,
              help="The plan being run: the JSON of 'ghs schedule --json' or "
                   "'ghs predict --json'.")
@click.option("--progress", "progress_items", multiple=True, metavar="HOST=FRACTION",
              help="Fraction of a host's share done, 0.4 or 40% (repeatable; hosts not "
                   "named have not started).")
@click.option("--elapsed", type=DURATION, default=None,
              help="Time since the launch, e.g. 1.5h: also gives the total time.")
@click.option("--dist", type=click.Choice(DISTRIBUTIONS), default=None,
              help="Fit of the delay distribution (default from config).")
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Ask this manager (hosts' current state) when no --hosts-file is given.")
@click.option("--hosts-file", type=click.Path(dir_okay=False), default=None,
              help="JSON host file: compute locally, each host in its steady state.")
@timeout_option
@json_option
@click.pass_context
def eta(ctx, plan_path, progress_items, elapsed, dist, endpoint, hosts_file, timeout, as_json):
    """When will a running task finish? The remaining-time law from each share's progress."""
    from ghs.eta import load_plan, local_eta, parse_progress

    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    plan = load_plan(plan_path)
    progress = parse_progress(progress_items)
    if hosts_file is None and (endpoint or config.manager):
        from ghs.remote import open_client

        with open_client(config, endpoint) as client, asking(client):
            result = client.eta(plan, progress, elapsed_seconds=elapsed, dist=dist)
    elif hosts_file is None:
        raise GhsError("no hosts: give --hosts-file FILE or --manager tcp://HOST:PORT",
                       field="hosts_file", value=None)
    else:
        from ghs.hostfile import load_hosts

        result = local_eta(load_hosts(hosts_file).hosts, plan, progress,
                           elapsed_seconds=elapsed, dist=dist or config.scheduler.distribution)
    if as_json:
        emit_json(result.to_dict())
        return
    click.echo(result.line())
    if elapsed is not None:
        total = result.to_dict()["total_seconds"]
        from ghs.eta import human

        click.echo(f"total since launch: about {human(total['mean'])}, 90% by "
                   f"{human(total['p90'])}")


@click.command()
@click.argument("prediction_id", type=click.IntRange(min=1))
@click.option("--host", default=None,
              help="The host whose share finished (omit: the whole task finished).")
@click.option("--finished-at", "finished", required=True,
              help="When it finished: epoch seconds, an ISO time (UTC unless it says) or "
                   "'now'.")
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER", help=_MANAGER_HELP)
@timeout_option
@json_option
@click.pass_context
def report(ctx, prediction_id, host, finished, endpoint, timeout, as_json):
    """Report when a share (or the whole task) of a served prediction finished."""
    from ghs.remote import open_client

    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    when = finished_at(finished, time.time())
    with open_client(config, endpoint) as client, asking(client):
        result = client.report(prediction_id, when, host)
    if as_json:
        emit_json(result)
    else:
        from ghs.eta import human

        what = "the task" if host is None else f"host {host}"
        click.echo(f"prediction {prediction_id}: {what} took "
                   f"{human(result['realised_seconds'])}")


@click.command()
@click.option("--since", type=POSITIVE_DURATION, default=None,
              help="Only predictions served in this last span, e.g. 7d (default: all).")
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER", help=_MANAGER_HELP)
@timeout_option
@json_option
@click.pass_context
def accuracy(ctx, since, endpoint, timeout, as_json):
    """How often the served predictions held: realised p50/p90 coverage and mean error."""
    from ghs.remote import open_client

    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    start = None if since is None else max(time.time() - since, 0.0)
    with open_client(config, endpoint) as client, asking(client):
        result = client.accuracy(start)
    if as_json:
        emit_json(result)
        return
    from rich.table import Table

    from ghs.eta import human

    table = Table(title="Track record of served predictions")
    for column in ("", "reports", "<= p50", "<= p90", "mean |error|", "realised / predicted"):
        table.add_column(column, justify="left" if not column else "right")

    def cells(row):
        def share(value):
            return "-" if value is None else f"{100 * value:.0f}%"

        error = row["mean_abs_error_seconds"]
        ratio = row["realised_over_predicted"]
        return (str(row["reports"]), share(row["p50_coverage"]), share(row["p90_coverage"]),
                "-" if error is None else human(error), "-" if ratio is None else f"{ratio:.2f}")

    for row in result["hosts"]:
        table.add_row(row["name"], *cells(row))
    table.add_row("whole tasks", *cells(result["task"]))
    table.add_row("overall", *cells(result["overall"]))
    console().print(table)
