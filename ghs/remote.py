"""Opening a Client from the Config (endpoint from flag, GHS_MANAGER or config; keys)."""

from __future__ import annotations

from ghs.client import Client
from ghs.config import Config
from ghs.daemon import expand
from ghs.endpoint import manager_endpoint
from ghs.errors import GhsError
from protocol import read_keypair, read_public_key


def open_client(config: Config, endpoint: str | None) -> Client:
    settings = config.client
    client_keys = read_keypair(expand(settings.keys)) if settings.keys else None
    server_key = read_public_key(expand(settings.server_key)) if settings.server_key else None
    if (client_keys is None) != (server_key is None):
        raise GhsError("CurveZMQ needs both client.keys and client.server_key",
                       field="client.keys", value=settings.keys)
    return Client(manager_endpoint(config, endpoint), timeout_seconds=settings.timeout_seconds,
                  client_keys=client_keys, server_public_key=server_key)
