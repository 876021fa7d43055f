"""``ghs backtest --manager``: the manager's own record of its predictions, as a back-test.

Every hour of each host's clock the manager made a shadow launch (:mod:`ghs.manager.calibration`)
and scored it on the host's capacity series; this selects those records and summarises them in
the JSON of ``ghs backtest --trace``, so the two read alike: per launch and predictor the
realised time, the mean and the reported quantiles; per predictor and task length the mean and
median |error| of the mean, the coverage of p50/p90/p95 and the median p90/p50 width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ghs.backtest.scoring import summarise

MAX_LAUNCHES = 50_000


def manager_backtest(ledger: Sequence[dict[str, Any]], *, lengths_seconds: Sequence[float],
                     work_seconds: Sequence[float] | None = None,
                     launch_every_seconds: float | None = None,
                     start_seconds: float | None = None) -> dict[str, Any]:
    """Launch records and their summary from ``ledger`` rows (oldest first). ``work_seconds``:
    keep the lengths nearest these (dedicated seconds per core); ``launch_every_seconds``:
    keep launches on that grid (whole hours); ``start_seconds``: skip each host's first
    launches within this much of its first one."""
    wanted = None if not work_seconds else {
        min(lengths_seconds, key=lambda length: abs(math.log(length / w)))
        for w in work_seconds}
    every = launch_every_seconds or 3600.0
    first: dict[str, float] = {}
    launches = []
    for row in ledger:
        host = row["host_id"]
        first.setdefault(host, row["launch_epoch_seconds"])
        since = row["launch_epoch_seconds"] - first[host]
        if wanted is not None and row["length_seconds"] not in wanted:
            continue
        if start_seconds is not None and since < start_seconds:
            continue
        # launches sit at (or just after, with the hour's snapshot) whole hours
        if round(since / 3600.0) % max(round(every / 3600.0), 1):
            continue
        launches.append({
            "predictor": row["predictor"], "host": host,
            "launch_seconds": row["launch_epoch_seconds"], "work": row["length_seconds"],
            "shares": {host: row["length_seconds"]},
            "realised_seconds": row["realised_seconds"], "mean": row["mean"],
            "quantiles": {"p50": row["p50"], "p90": row["p90"], "p95": row["p95"]}})
    summary = [{**entry, "mode": "single"} for entry in summarise(launches)]
    kept = launches[-MAX_LAUNCHES:]
    return {"default_predictor": "calibrated", "mode": "single", "source": "manager",
            "stations": sorted({launch["host"] for launch in launches}),
            "launches": kept, "launches_omitted": len(launches) - len(kept),
            "summary": summary}
