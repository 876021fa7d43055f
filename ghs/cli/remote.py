"""``ghs status`` and ``ghs keys``."""

from __future__ import annotations

import dataclasses

import click

from ghs.cli.common import DURATION, config_from, console, emit_json, json_option


@click.command()
@click.option("--manager", "endpoint", default=None, envvar="GHS_MANAGER",
              help="Manager endpoint (or GHS_MANAGER, or config 'manager').")
@click.option("--wait", is_flag=True,
              help="First wait until the manager answers a ping (for scripts starting one).")
@click.option("--timeout", type=DURATION, default=None,
              help="How long to wait for the manager (with --wait: to become ready), e.g. "
                   "30s; default client.timeout_seconds.")
@json_option
@click.pass_context
def status(ctx, endpoint, wait, timeout, as_json):
    """Hosts the manager knows, their current estimates, and its counters."""
    from ghs import render
    from ghs.remote import open_client

    config = config_from(ctx)
    if timeout is not None:
        if not timeout > 0:
            raise click.BadParameter("must be more than 0 s", param_hint="--timeout")
        config = dataclasses.replace(config, client=dataclasses.replace(
            config.client, timeout_seconds=timeout))
    with open_client(config, endpoint) as client:
        if wait:
            client.wait_ready(config.client.timeout_seconds)
        result = client.status()
    if as_json:
        emit_json(result.to_dict())
    else:
        render.show_status(console(), result)


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

    from protocol import generate_keypair, write_keypair

    Path(directory).mkdir(parents=True, exist_ok=True, mode=0o700)
    pair = generate_keypair()
    public_path, secret_path = write_keypair(pair, directory, name, overwrite=force,
                                             hosts=tuple(hosts))
    if as_json:
        emit_json({"public": str(public_path), "secret": str(secret_path),
                   "public_key": pair.public.decode()})
    else:
        click.echo(f"public key  {public_path}\nsecret key  {secret_path} (keep it private)")
