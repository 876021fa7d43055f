"""Completion-time prediction, partitioning and machine-set selection (numpy/scipy only).

Names are loaded on first use, so importing one light module (say ``scheduler.errors``) does
not pull in scipy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SchedulerError": "scheduler.errors",
    "BudgetExceededError": "scheduler.errors",
    "InvalidArgumentError": "scheduler.errors",
    "InvalidHostError": "scheduler.errors",
    "NoUsableHostsError": "scheduler.errors",
    "TooManyHostsError": "scheduler.errors",
    "Calibrator": "scheduler.conformal",
    "ForecastBank": "scheduler.forecast",
    "forecast_parameters": "scheduler.window_forecast",
    "forecast_window": "scheduler.window_forecast",
    "Host": "scheduler.hosts",
    "with_processes": "scheduler.placement",
    "pinned": "scheduler.placement",
    "migrating": "scheduler.placement",
    "Backlog": "scheduler.backlog",
    "Histogram": "scheduler.templates",
    "TwoMomentDemand": "scheduler.templates",
    "choose_template": "scheduler.templates",
    "partition": "scheduler.partitioning",
    "whole_units": "scheduler.partitioning",
    "Prediction": "scheduler.prediction",
    "predict": "scheduler.prediction",
    "predict_mean": "scheduler.prediction",
    "Exclusion": "scheduler.selection",
    "Plan": "scheduler.selection",
    "schedule": "scheduler.selection",
    "SelectionCalibration": "scheduler.calibrated_selection",
    "SimulationResult": "scheduler.simulation",
    "simulate": "scheduler.simulation",
}

__all__ = [
    "Backlog",
    "BudgetExceededError",
    "Calibrator",
    "Exclusion",
    "ForecastBank",
    "Histogram",
    "Host",
    "InvalidArgumentError",
    "InvalidHostError",
    "NoUsableHostsError",
    "Plan",
    "Prediction",
    "SchedulerError",
    "SelectionCalibration",
    "SimulationResult",
    "TooManyHostsError",
    "TwoMomentDemand",
    "choose_template",
    "forecast_parameters",
    "forecast_window",
    "partition",
    "pinned",
    "predict",
    "predict_mean",
    "schedule",
    "simulate",
    "whole_units",
    "with_processes",
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
