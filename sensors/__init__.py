"""Per-host measurement of local load: lambda, rho, mu, sigma and tau (SPEC section 5).

Dependencies: the standard library, psutil and sqlite-utils only. Modules:

- :mod:`sensors.clock` - real, virtual and accelerated clocks;
- :mod:`sensors.processes` - process snapshots and the local-load filter;
- :mod:`sensors.accounting` - acct v3 records and the incremental reader;
  :mod:`sensors.accounting_probe` / :mod:`sensors.accounting_control` - finding and switching
  kernel accounting without ever taking over someone else's file;
- :mod:`sensors.cpu` - kernel CPU counters; :mod:`sensors.measurement` - one measurement;
- :mod:`sensors.estimates` / :mod:`sensors.sampler` - adaptive sampling and 24 h estimates;
- :mod:`sensors.store` - the local SQLite store; :mod:`sensors.speed` - tau;
- :mod:`sensors.host` - this machine wired up; :mod:`sensors.simulated` - a simulated host;
- :mod:`sensors.capacity` - the harvestable-capacity series; :mod:`sensors.running` - the
  local jobs running now (and keyed hashing of identities); :mod:`sensors.templates` -
  mergeable demand histograms; :mod:`sensors.tau_refresh` - tau re-measured at idle priority.

Nothing is imported here, so ``import sensors`` has no cost or side effect.
"""
