"""The manager's calibrated schedule picks its set by the calibrated law it serves."""

from __future__ import annotations

import numpy as np
import pytest

from ghs.config import SchedulerConfig
from ghs.manager.estimates import EstimateCache
from ghs.manager.queries import QueryService
from ghs.manager.simulated_feed import ZERO_EPOCH_SECONDS, ManagerFeed, poisson_jobs
from ghs.manager.store import ManagerStore

pytestmark = pytest.mark.slow

DAYS = 2.0


@pytest.fixture(scope="module")
def twins():
    """Two workstations fed the same job stream for two days: the model cannot tell them
    apart, so only a calibration can."""
    jobs = poisson_jobs(DAYS + 0.5, utilisation=0.3, mean_cpu_seconds=300.0, cov=2.0, seed=4)
    store = ManagerStore(None)
    feeds = [ManagerFeed(store, name, jobs) for name in ("ws1", "ws2")]
    for feed in feeds:
        feed.run_until(ZERO_EPOCH_SECONDS + DAYS * 86400.0)
    now = ZERO_EPOCH_SECONDS + DAYS * 86400.0
    queries = QueryService(EstimateCache(store), SchedulerConfig(), stale_after_seconds=1e9,
                           clock=lambda: now)
    while queries.refresh():
        pass
    yield queries
    for feed in feeds:
        feed.close()
    store.close()


def chosen(queries, work_seconds):
    return sorted(row["name"] for row in queries.schedule(work_seconds)["hosts"])


def test_a_host_whose_record_says_it_overruns_is_left_out(twins):
    work = 4 * 3600.0
    assert chosen(twins, work) == ["ws1", "ws2"]
    served = twins.schedule(work)
    # every launch of ws2's record ran past all its quantiles, at every length and start
    calibration = twins.calibration
    row = calibration.track("ws2", 1).row
    for view in calibration.views:
        for calibrator in calibration.calibrators[view]:
            for _ in range(60):
                # the host's own outcomes only: the pool (ws1's prior) stays as it was
                calibrator.record([row], np.ones((1, 3), bool), np.zeros((1, 3), bool),
                                  pool_decided=np.zeros((1, 3), bool))
    table = twins._selection_calibration([state.host for state in twins.states()], None)
    ws1, ws2 = (np.asarray(table.factors[name]) for name in ("ws1", "ws2"))
    # the host's own levels; the far tail is one factor for all hosts
    assert (ws2[:, :3] > 5 * ws1[:, :3]).all() and (ws2[:, 3:] == ws1[:, 3:]).all()
    # the model alone still splits over both; the calibrated law makes ws2 the whole wait
    after = twins.schedule(work)
    assert sorted(row["name"] for row in after["hosts"]) == ["ws1"]
    # alone, ws1 takes twice the work: the served law is slower than the pair's was
    assert after["mean"] > served["mean"]
