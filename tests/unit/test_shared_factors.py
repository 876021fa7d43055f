"""The hosts of a split share their calibration factors (scheduler.calibrated_selection.
shared_table), checked against the discrete-event simulator."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler import Host, predict
from scheduler.calibrated import calibrated_prediction
from scheduler.calibrated_selection import shared_table
from scheduler.conformal import LEVELS
from scheduler.errors import InvalidArgumentError
from scheduler.simulation import simulate


def test_hosts_sharing_a_task_take_the_geometric_mean_of_their_tables():
    rng = np.random.default_rng(1)
    tables = np.exp(rng.normal(0.0, 0.3, (3, 4, 5)))  # (hosts, lengths, levels)
    shared = shared_table(tables)
    for k in range(3):
        np.testing.assert_allclose(shared[k], np.cbrt(tables[0] * tables[1] * tables[2]),
                                   rtol=1e-12)
    # only the hosts marked share; one host alone keeps its own table, to the bit
    some = shared_table(tables, [True, False, True])
    assert (some[1] == tables[1]).all()
    np.testing.assert_allclose(some[2], np.sqrt(tables[0] * tables[2]), rtol=1e-12)
    assert (shared_table(tables[:1]) == tables[:1]).all()
    assert (shared_table(tables, [False, True, False]) == tables).all()
    # a batch of sets (padded with hosts that have no part), each set on its own
    batch = np.stack([tables, tables[::-1]])
    sets = shared_table(batch, [[True, True, False], [False, False, True]])
    np.testing.assert_allclose(sets[0, 1], np.sqrt(tables[0] * tables[1]), rtol=1e-12)
    assert (sets[0, 2] == tables[2]).all() and (sets[1] == batch[1]).all()
    # bad tables and marks are named
    for bad, sharing in ((-tables, None), (tables[0], None), (tables, [True, False])):
        with pytest.raises(InvalidArgumentError):
            shared_table(bad, sharing)


def test_shared_factors_keep_a_splits_quantiles_where_each_hosts_noisy_own_lift_them():
    """Eight like hosts, each calibrator's factor off the truth (1) by independent noise, as
    an adaptive one is at any launch: the split ends with its latest share, which the hosts
    whose factors sit highest decide, so their own factors lift the task's quantiles; the
    set's geometric mean does not (the simulator gives the truth)."""
    mean_seconds = 600.0
    hosts = [Host(f"ws{k}", lam=0.3 / mean_seconds, mu=1.0 / mean_seconds,
                  sigma=mean_seconds, rho=0.3) for k in range(8)]
    law = predict(hosts, 8 * 4 * 3600.0, "lognormal")
    realised = simulate(hosts, law.shares, runs=20_000, rng=np.random.default_rng(3),
                        service="lognormal").completion_seconds
    model = np.mean(realised <= law.quantiles["p50"])
    rng = np.random.default_rng(5)
    own, shared = [], []
    for _ in range(40):
        # one factor per host at every level (non-decreasing in the level, unbiased in log)
        factors = np.repeat(np.exp(rng.normal(0.0, 0.2, (8, 1, 1))), len(LEVELS), axis=2)
        for table, out in ((factors, own), (shared_table(factors), shared)):
            served = calibrated_prediction(law, table[:, 0], LEVELS)
            out.append([np.mean(realised <= served.quantiles[q]) for q in ("p50", "p90")])
    own_p50, own_p90 = np.mean(own, axis=0)
    shared_p50, shared_p90 = np.mean(shared, axis=0)
    # measured: the model .47, own factors .69 (p90 .96), shared .49 (p90 .91)
    assert own_p50 > model + 0.15 and own_p90 > 0.95
    assert shared_p50 == pytest.approx(model, abs=0.05) and 0.88 < shared_p90 < 0.94
