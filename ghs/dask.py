"""``ghs.dask``: the Dask adapter (``ghs.adapters.dask``) under a short name.

Importing it needs the ``dask`` extra; ``import ghs`` never does.
"""

from ghs.adapters.dask import DivisibleRun, RunEvent, run_divisible

__all__ = ["DivisibleRun", "RunEvent", "run_divisible"]
