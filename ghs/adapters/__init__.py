"""Adapters to engines that run the pieces ghs plans: Dask (``ghs.adapters.dask``, extra
``ghs[dask]``) and HTCondor startd attributes (``ghs.adapters.condor``).

The core never imports this package; each adapter imports its engine only when used.
"""
