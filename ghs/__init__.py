"""Grid Harvest Service: prediction and scheduling of divisible tasks on shared workstations."""

__version__ = "0.1.0"
