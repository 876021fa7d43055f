"""The sensor config section, and the simulated-host wiring to the workload generators."""

from __future__ import annotations

import numpy as np
import pytest

from ghs.config import Config, SensorConfig, load_config
from ghs.errors import ConfigError
from ghs.simulated_hosts import piecewise_rows, poisson_host, poisson_rows, trace_rows
from scheduler.workload import Trace, demand
from sensors.clock import VirtualClock
from sensors.errors import InvalidArgumentError
from sensors.host import LOCAL_SENSOR_OPTIONS, options_from, split_list


def test_sensor_config_names_match_the_local_sensor_options():
    options = options_from(Config().sensor)
    assert set(options) == set(LOCAL_SENSOR_OPTIONS)
    assert options["accounting"] == "auto"
    assert SensorConfig().retention_days >= 8


def test_sensor_settings_come_from_the_environment_and_are_validated(tmp_path):
    env = {"HOME": str(tmp_path), "GHS_SENSOR_INTERVAL_SECONDS": "30s",
           "GHS_SENSOR_ACCOUNTING": "off", "GHS_SENSOR_USERS_ALLOW": "alice, bob"}
    section = load_config(env=env).sensor
    assert section.interval_seconds == 30.0 and section.accounting == "off"
    assert split_list(section.users_allow) == ("alice", "bob")
    for key, value in (("RETENTION_DAYS", "7"), ("ACCOUNTING", "maybe"),
                       ("MAX_PER_HOUR", "0"), ("INTERVAL_SECONDS", "2h")):
        with pytest.raises(ConfigError):
            load_config(env={"HOME": str(tmp_path), f"GHS_SENSOR_{key}": value})


def test_poisson_rows_are_sorted_across_hourly_chunks_at_the_right_rate():
    rows = list(poisson_rows(0.5, demand("exponential", 2.0), np.random.default_rng(1),
                             0.0, 5 * 3600.0, user="u", command="c"))
    arrivals = [row[0] for row in rows]
    assert arrivals == sorted(arrivals) and arrivals[-1] < 5 * 3600
    assert len(rows) == pytest.approx(9000, rel=0.05)
    assert rows[0][2:] == ("u", "c")
    assert np.mean([row[1] for row in rows]) == pytest.approx(2.0, rel=0.05)


def test_piecewise_rows_follow_the_segments_and_refuse_overlaps():
    jobs = demand("deterministic", 1.0)
    rng = np.random.default_rng(2)
    rows = list(piecewise_rows([(0.0, 1000.0, 0.1, jobs), (1000.0, 2000.0, 1.0, jobs)], rng))
    early = sum(1 for row in rows if row[0] < 1000)
    assert early == pytest.approx(100, abs=40) and len(rows) - early == pytest.approx(1000,
                                                                                     abs=120)
    with pytest.raises(InvalidArgumentError):
        list(piecewise_rows([(0.0, 10.0, 1.0, jobs), (5.0, 20.0, 1.0, jobs)], rng))


def test_trace_rows_and_a_poisson_host_feed_the_sensor():
    trace = Trace.from_rows([(3.0, 1.0), (1.0, 0.5)])
    assert list(trace_rows(trace)) == [(1.0, 0.5), (3.0, 1.0)]
    clock = VirtualClock(0.0)
    host = poisson_host(clock=clock, rate_per_second=1.0, demand=demand("exponential", 0.2),
                        rng=np.random.default_rng(3), cores=2, speed=2.0)
    m = host.sensor().measure(600.0)
    assert m.lam == pytest.approx(1.0, rel=0.15)
    assert m.mean_service_seconds == pytest.approx(0.1, rel=0.2)  # speed 2 halves demands
    assert m.rho == pytest.approx(1.0 * 0.1 / 2, rel=0.25)
