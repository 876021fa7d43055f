"""``ghs status`` and ``ghs keys``."""

from __future__ import annotations

import click

from ghs.cli.common import (
    POSITIVE_DURATION,
    asking,
    config_from,
    console,
    emit_json,
    json_option,
    plot_option,
    timeout_option,
)


@click.command()
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Manager endpoint (or GHS_MANAGER, or config 'manager').")
@click.option("--wait", is_flag=True,
              help="First wait until the manager answers a ping (for scripts starting one).")
@timeout_option
@json_option
@click.pass_context
def status(ctx, endpoint, wait, timeout, as_json):
    """Hosts the manager knows, their current estimates, and its counters."""
    from ghs import render
    from ghs.remote import open_client

    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    with open_client(config, endpoint) as client, asking(client):
        if wait:
            client.wait_ready(config.client.timeout_seconds)
        result = client.status()
    if as_json:
        emit_json(result.to_dict())
    else:
        render.show_status(console(), result)


@click.command()
@click.argument("host")
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Manager endpoint (or GHS_MANAGER, or config 'manager').")
@click.option("--since", type=POSITIVE_DURATION, default=86400.0,
              help="How far back from the host's latest record (default 24h).")
@plot_option("Write a PNG of load and available fraction against time of day.")
@timeout_option
@json_option
@click.pass_context
def history(ctx, host, endpoint, since, plot_path, timeout, as_json):
    """A host's measurements, capacity series and jobs running at its latest report."""
    from ghs.history_view import plot_history, show_history
    from ghs.remote import open_client

    config = config_from(ctx, {"client": {"timeout_seconds": timeout}})
    with open_client(config, endpoint) as client, asking(client):
        result = client.history(host, since_seconds=since)
    if plot_path:
        plot_history(result, plot_path)
    if as_json:
        emit_json(result)
    else:
        show_history(console(), result)
        if plot_path:
            click.echo(f"plot written to {plot_path}")


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--name", default="ghs", show_default=True, help="File name stem.")
@click.option("--force", is_flag=True, help="Overwrite existing key files.")
@click.option("--host", "hosts", multiple=True,
              help="Host id (or pattern such as 'lab-sim*') this key may report, written "
                   "into NAME.key for the manager's allow-list (repeatable; none: query only).")
@json_option
def keys(directory, name, force, hosts, as_json):
    """Make a CurveZMQ key pair: NAME.key (public) and NAME.key_secret (mode 0600)."""
    from pathlib import Path

    from ghs.errors import GhsError
    from protocol import generate_keypair, write_keypair

    existing = [path for path in (Path(directory) / f"{name}.key",
                                  Path(directory) / f"{name}.key_secret") if path.exists()]
    if existing and not force:
        raise GhsError(f"{existing[0]} exists; refusing to overwrite a key (add --force)",
                       field="force", value=str(existing[0]))
    Path(directory).mkdir(parents=True, exist_ok=True, mode=0o700)
    pair = generate_keypair()
    public_path, secret_path = write_keypair(pair, directory, name, overwrite=force,
                                             hosts=tuple(hosts))
    if as_json:
        emit_json({"public": str(public_path), "secret": str(secret_path),
                   "public_key": pair.public.decode()})
    else:
        click.echo(f"public key  {public_path}\nsecret key  {secret_path} (keep it private)")
