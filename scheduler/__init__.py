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

__all__ = [
    "Host",
    "InvalidArgumentError",
    "InvalidHostError",
    "NoUsableHostsError",
    "Prediction",
    "SchedulerError",
    "TooManyHostsError",
    "partition",
    "predict",
    "whole_units",
]
