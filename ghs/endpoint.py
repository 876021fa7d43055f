"""Which manager to talk to: the flag, else GHS_MANAGER or the config (no numpy: the agent
imports this)."""

from __future__ import annotations

from ghs.config import Config
from ghs.errors import GhsError

SCHEMES = ("tcp://", "ipc://", "inproc://")


def manager_endpoint(config: Config, endpoint: str | None) -> str:
    """The endpoint to reach the manager at: the flag, else GHS_MANAGER or the config."""
    chosen = endpoint or config.manager
    if not chosen:
        raise GhsError("no manager: give --manager tcp://HOST:PORT (or set GHS_MANAGER, or "
                       "'manager' in the config file)", field="manager")
    if not chosen.startswith(SCHEMES):
        raise GhsError(f"manager endpoint {chosen!r} has no scheme: did you mean "
                       f"tcp://{chosen}?", field="manager", value=chosen)
    return chosen
