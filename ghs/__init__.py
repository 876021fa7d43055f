"""Grid Harvest Service: prediction and scheduling of divisible tasks on shared workstations.

``ghs.Client`` talks to a manager; it is loaded on first use so ``import ghs`` stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Client":
        from ghs.client import Client

        return Client
    raise AttributeError(f"module 'ghs' has no attribute {name!r}")
