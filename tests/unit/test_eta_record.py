"""The record-based calibration the eta-coverage experiment gives the ETA: outcomes reach the
calibrators only once known, a station whose record overruns its model gets wider quantiles,
and no calibrated quantile falls below the slowest share's dedicated time."""

from __future__ import annotations

import numpy as np
import pytest

from ghs.experiments.eta_coverage import covered
from ghs.experiments.eta_record import calibrated_quantiles, factors_at
from scheduler import Backlog, Host
from scheduler.eta import remaining
from scheduler.stops import trace_streams
from scheduler.workload import Trace

QUIET = Host("q", lam=1 / 3600, mu=1 / 60, sigma=60.0, rho=1 / 60, tau=1.0)


def _record(arrivals, demands, launches, after=40 * 3600.0):
    trace = Trace(np.asarray(arrivals, dtype=float), np.asarray(demands, dtype=float))
    return [trace_streams(trace, launches, before_seconds=3600.0, after_seconds=after)]


def _state(k, launch, ages):
    return QUIET, Backlog.exact([])


def test_no_outcome_is_used_before_it_is_known():
    # a 5-hour local job at 3 h: launches from 2 h on overrun badly, 15-minute ones known late
    launches = np.arange(1, 40) * 3600.0
    streams = _record([3 * 3600.0], [5 * 3600.0], launches)
    queries = np.array([0.0, 3600.0 + 899.0, 3600.0 + 901.0, 7.9 * 3600.0])
    factors = factors_at(streams, launches, queries, _state, lengths_seconds=(900.0,))
    assert factors.shape == (4, 1, 1, 3)
    # before any launch, and just before the first outcome (the 1 h launch ends at 1 h 15 min)
    np.testing.assert_array_equal(factors[0], 1.0)
    np.testing.assert_array_equal(factors[1], 1.0)
    # that launch ran in its dedicated time, within every quantile: narrower just after
    assert (factors[2] < 1.0).all()
    # the overruns of the launches at 3..7 h, known as they pass their p95, widened all
    assert (factors[3][..., 1:] > 1.0).all()


def test_a_station_that_overruns_its_model_gets_wider_quantiles_than_a_quiet_one():
    launches = np.arange(1, 120) * 3600.0
    rng = np.random.default_rng(3)
    # the model says one 60 s job an hour; the record has hour-long bursts every ~5 hours
    bursts = np.sort(rng.uniform(0, 120 * 3600.0, 24))
    busy = _record(bursts, np.full(bursts.size, 3600.0), launches)
    quiet = _record([1e9], [1.0], launches)
    at = np.array([119 * 3600.0])
    wide = factors_at(busy, launches, at, _state, lengths_seconds=(900.0,))[0, 0, 0]
    narrow = factors_at(quiet, launches, at, _state, lengths_seconds=(900.0,))[0, 0, 0]
    # the median sits on the atom of an uninterrupted finish for both; the tail widens
    assert (wide[1:] > 1.0).all() and (wide[1:] > narrow[1:]).all(), (wide, narrow)


def test_calibrated_quantiles_never_fall_below_the_slowest_dedicated_time():
    hosts = [QUIET, Host("b", lam=1 / 900, mu=1 / 300, sigma=300.0, rho=1 / 3, tau=2.0)]
    law = remaining(hosts, [1800.0, 3600.0], fraction_done={"b": 0.0, "q": 0.5},
                    backlog=[Backlog.exact([]), Backlog.exact([])])
    shrink = np.full((2, 4, 3), 0.2)
    quantiles = calibrated_quantiles(law, shrink)
    slowest = float(law.dedicated_seconds.max())
    assert min(quantiles.values()) >= slowest
    unchanged = calibrated_quantiles(law, np.ones((2, 4, 3)))
    assert unchanged["p90"] == pytest.approx(law.quantiles["p90"], rel=0.03)


def test_a_continuation_equal_to_its_quantile_up_to_rounding_is_covered():
    quantiles = np.array([[779.0, 779.0, 800.0]])
    hits = covered(np.array([779.0 * (1 + 4e-16)]), quantiles)
    assert hits.tolist() == [[True, True, True]]
    assert covered(np.array([779.0 * (1 + 1e-6)]), quantiles).tolist() == [[False, False, True]]
