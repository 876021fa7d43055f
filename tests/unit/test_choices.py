"""The named choices: one list in the scheduler, the wire's copy identical, both enforced."""

from __future__ import annotations

import dataclasses

import pytest

from ghs import config
from protocol import InvalidFieldError, decode, encode, queries
from scheduler import choices
from scheduler.errors import InvalidArgumentError
from scheduler.partitioning import check_partition
from scheduler.prediction import check_dist


def test_the_wire_carries_exactly_the_schedulers_names():
    # the protocol may not import the scheduler; this is the check that its copy is the same
    assert queries.DISTRIBUTIONS == choices.DISTRIBUTIONS
    assert queries.PARTITIONS == choices.PARTITIONS
    assert queries.METHODS == choices.METHODS


def _choices_of(section: type, name: str) -> tuple[str, ...]:
    return next(f.metadata["choices"] for f in dataclasses.fields(section) if f.name == name)


def test_the_config_checks_against_the_schedulers_lists():
    assert _choices_of(config.SchedulerConfig, "distribution") is choices.DISTRIBUTIONS
    assert _choices_of(config.SchedulerConfig, "partition") is choices.PARTITIONS
    assert _choices_of(config.SchedulerConfig, "method") is choices.METHODS
    assert _choices_of(config.SchedulerConfig, "start_state") is choices.START_STATES
    assert _choices_of(config.SimulationConfig, "service") is choices.DEMAND_KINDS
    assert config.SchedulerConfig().distribution == choices.DEFAULT_DISTRIBUTION
    with pytest.raises(config.ConfigError, match="gamma, weibull, lognormal, auto"):
        config.load_config(env={}, overrides={"scheduler": {"distribution": "pareto"}})


@pytest.mark.parametrize("dist", choices.DISTRIBUTIONS)
@pytest.mark.parametrize("method", choices.METHODS)
def test_every_choice_passes_the_wire_and_the_scheduler(dist, method):
    for partition in choices.PARTITIONS:
        request = queries.ScheduleRequest(request_id=1, work_seconds=60.0, distribution=dist,
                                          partition=partition, method=method)
        assert decode(encode(request)) == request
        assert check_partition(partition) == partition
    assert check_dist(dist) == dist


@pytest.mark.parametrize("field,value", [("distribution", "pareto"), ("partition", "random"),
                                         ("method", "greedy")])
def test_a_name_outside_the_lists_is_refused_on_the_wire(field, value):
    request = queries.ScheduleRequest(request_id=1, work_seconds=60.0, **{field: value})
    with pytest.raises(InvalidFieldError) as err:
        decode(encode(request))
    assert err.value.field == field


def test_the_scheduler_refuses_names_outside_its_lists():
    with pytest.raises(InvalidArgumentError):
        check_dist("pareto")
    with pytest.raises(InvalidArgumentError):
        check_partition("random")


def test_the_agents_speed_override_takes_the_wires_range_or_zero():
    from protocol.messages import TAU_RANGE
    meta = next(f.metadata for f in dataclasses.fields(config.SensorConfig) if f.name == "tau")
    assert (meta["low"], meta["high"]) == TAU_RANGE
    for good in (0.0, TAU_RANGE[0], 1.0, TAU_RANGE[1]):
        assert config.load_config(env={}, overrides={"sensor": {"tau": good}}).sensor.tau == good
    for bad in (1e-9, -1.0, 2e6):
        # the manager would refuse the agent's hello; the agent refuses to start instead
        with pytest.raises(config.ConfigError, match=r"sensor.tau.*0 or \[1e-06, 1e\+06\]"):
            config.load_config(env={}, overrides={"sensor": {"tau": bad}})


def test_a_hosts_cores_take_the_wires_range():
    from protocol.messages import MAX_CORES
    from scheduler import Host, InvalidHostError
    from scheduler.hosts import MAX_CORES as SCHEDULER_MAX_CORES
    assert SCHEDULER_MAX_CORES == MAX_CORES
    Host("big", lam=0.1, mu=0.01, sigma=100.0, rho=0.1, cores=MAX_CORES)
    for bad in (0, MAX_CORES + 1, 10**400):
        with pytest.raises(InvalidHostError, match="cores must be in"):
            Host("big", lam=0.1, mu=0.01, sigma=100.0, rho=0.1, cores=bad)


def test_units_take_the_wires_range():
    from protocol.queries import MAX_UNITS
    from scheduler.partitioning import MAX_UNITS as SCHEDULER_MAX_UNITS
    from scheduler.partitioning import whole_units
    assert SCHEDULER_MAX_UNITS == MAX_UNITS
    assert whole_units([1.0, 2.0], MAX_UNITS).sum() == MAX_UNITS
    with pytest.raises(InvalidArgumentError, match=r"units must be a whole number in \[0, "):
        whole_units([1.0, 2.0], MAX_UNITS + 1)
