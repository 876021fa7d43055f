"""Completion-time prediction, partitioning and machine-set selection (numpy/scipy only).

Names are loaded on first use, so importing one light module (say ``scheduler.errors``) does
not pull in scipy.
"""

from __future__ import annotations

import importlib
from typing import Any

# numpy-only modules load at once; the function ``partition`` must win over the submodule
# of the same name, which it does by being bound here after that submodule is imported
from scheduler.errors import (
    InvalidArgumentError,
    InvalidHostError,
    NoUsableHostsError,
    SchedulerError,
    TooManyHostsError,
)
from scheduler.hosts import Host
from scheduler.partition import partition, whole_units

_EXPORTS = {
    "Prediction": "scheduler.prediction",
    "predict": "scheduler.prediction",
    "Exclusion": "scheduler.selection",
    "Plan": "scheduler.selection",
    "schedule": "scheduler.selection",
    "SimulationResult": "scheduler.simulation",
    "simulate": "scheduler.simulation",
}

__all__ = [
    "Exclusion",
    "Host",
    "InvalidArgumentError",
    "InvalidHostError",
    "NoUsableHostsError",
    "Plan",
    "Prediction",
    "SchedulerError",
    "SimulationResult",
    "TooManyHostsError",
    "partition",
    "predict",
    "schedule",
    "simulate",
    "whole_units",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scheduler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
