"""The named choices of the scheduler's public functions: the one list each is checked against.

Plain tuples of strings with no imports, so the configuration (``ghs.config``) and the command
line can read them without loading numpy. The wire protocol may not import the scheduler: it
keeps its own copy of the names a query may carry (``protocol.queries``), and a test in the
``ghs`` suite proves the copies identical.
"""

from __future__ import annotations

DISTRIBUTIONS = ("gamma", "weibull", "lognormal", "auto")
"""Fits of the conditional delay G (``auto``: the paper's rule on each host's rho)."""

DEFAULT_DISTRIBUTION = "lognormal"
"""Chosen from the simulation study in the README ("Which distribution"): Lognormal has the
smallest worst-case p90/p99 error over exponential, lognormal (CoV 2) and log-uniform demands."""

PARTITIONS = ("equal-mean", "equal-load", "speed")
"""How divisible work is split over a machine set."""

METHODS = ("auto", "heuristic", "optimal", "prefix")
"""Machine-set selection methods."""

START_STATES = ("auto", "steady-state", "idle")
"""The local work a task finds at launch (``auto``: a fresh snapshot, else the steady state)."""

DEMAND_KINDS = ("exponential", "deterministic", "lognormal", "gamma", "hyperexponential",
                "loguniform")
"""Laws of a local job's CPU demand in the simulator."""

PREDICTORS = ("calibrated", "model")
"""A manager's answers: calibrated (run-window forecast, conformal per host) or the model."""
START_CHOICES = ("auto", "carried", "state", "record")
"""Calibrated answers: carried load, the state held as backlog, the start the record chose,
or auto (carried for one host, state for a task split over several)."""
