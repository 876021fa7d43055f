"""Completion-time prediction, partitioning and machine-set selection (numpy/scipy only)."""

from scheduler.errors import (
    InvalidArgumentError,
    InvalidHostError,
    NoUsableHostsError,
    SchedulerError,
    TooManyHostsError,
)
from scheduler.hosts import Host
from scheduler.partition import partition, whole_units
from scheduler.prediction import Prediction, predict
from scheduler.selection import Exclusion, Plan, schedule
from scheduler.simulation import SimulationResult, simulate

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
