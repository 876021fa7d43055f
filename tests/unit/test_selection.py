import itertools
import math

import numpy as np
import pytest

from scheduler import (
    BudgetExceededError,
    Host,
    InvalidArgumentError,
    NoUsableHostsError,
    TooManyHostsError,
    predict,
)
from scheduler.prefix_methods import binary_search_sizes, heuristic_upper
from scheduler.selection import schedule


def random_hosts(rng, count):
    hosts = []
    for index in range(count):
        cores = int(rng.choice([1, 1, 2, 4]))
        rho = rng.uniform(0.05, 0.7)
        mean = math.exp(rng.uniform(math.log(20), math.log(900)))
        hosts.append(Host(f"h{index}", lam=cores * rho / mean, mu=1 / mean,
                          sigma=mean * rng.uniform(0.3, 3.0), rho=rho,
                          tau=rng.uniform(0.4, 2.5), cores=cores))
    return hosts


@pytest.mark.parametrize(("count", "seed"), [(1, 0), (3, 1), (5, 2), (7, 3), (8, 4),
                                            pytest.param(10, 5, marks=pytest.mark.slow)])
def test_optimal_equals_a_brute_force_minimum(count, seed):
    rng = np.random.default_rng(seed)
    hosts = random_hosts(rng, count)
    work = 3600.0 * count * rng.uniform(0.05, 3.0)
    plan = schedule(hosts, work, "optimal")
    # brute force: one independent prediction per subset, the paper's Fig. 2 loop
    best_value, best_names = math.inf, None
    for size in range(1, count + 1):
        for subset in itertools.combinations(hosts, size):
            value = predict(list(subset), work).criterion
            if value < best_value:
                best_value, best_names = value, {h.name for h in subset}
    assert plan.prediction.criterion == pytest.approx(best_value, rel=1e-6)
    assert {h.name for h in plan.hosts} == best_names
    assert plan.evaluations <= 2**count - 1


def test_heuristic_reproduces_a_hand_worked_trace_of_fig3():
    # f(x) of prefixes C(1..8): falls to a minimum at 4, then rises
    table = {1: 10.0, 2: 8.0, 3: 7.0, 4: 6.5, 5: 6.8, 6: 7.5, 7: 9.0, 8: 12.0}
    size, trace = binary_search_sizes(lambda sizes: [table[s] for s in sizes], 8, 8)
    # a=1,b=8,c=4: f(c) smallest, f(4) < f(5) -> b=4; a=1,b=4,c=2: f(b) smallest -> a=2;
    # a=2,b=4,c=3: f(b) smallest -> a=3; a+1 >= b stops; f(4) < f(3) picks C(4)
    assert trace == [(1, 8, 4), (1, 4, 2), (2, 4, 3)]
    assert size == 4


def test_heuristic_follows_the_rules_even_where_they_miss_the_minimum():
    # two valleys: the search keeps to the one its first comparison points at
    table = {1: 5.0, 2: 9.0, 3: 9.5, 4: 9.8, 5: 9.9, 6: 4.0, 7: 6.0}
    size, trace = binary_search_sizes(lambda sizes: [table[s] for s in sizes], 7, 7)
    # a=1,b=7,c=4: f(a)=5 smallest -> b=4; a=1,b=4,c=2: f(a) -> b=2; stop; f(1) < f(2)
    assert trace == [(1, 7, 4), (1, 4, 2)]
    assert size == 1


def test_heuristic_upper_bound_uses_the_task_ratio():
    assert heuristic_upper(20, 3600.0, 300.0, 4.0) == 3
    assert heuristic_upper(20, 10.0, 300.0, 4.0) == 1
    assert heuristic_upper(5, 1e9, 300.0, 4.0) == 5


def test_methods_are_ordered_and_shares_sum_to_the_work():
    rng = np.random.default_rng(11)
    hosts = random_hosts(rng, 12)
    work = 12 * 3600.0
    plans = {method: schedule(hosts, work, method) for method in
             ("heuristic", "prefix", "optimal")}
    criteria = {m: p.prediction.criterion for m, p in plans.items()}
    assert criteria["optimal"] <= criteria["prefix"] * (1 + 1e-9)
    assert criteria["prefix"] <= criteria["heuristic"] * (1 + 1e-9)
    for plan in plans.values():
        assert plan.prediction.shares.sum() == pytest.approx(work)
        assert plan.elapsed_seconds > 0 and plan.evaluations >= 1
        assert sum(plan.units(1001).values()) == 1001


def test_saturated_hosts_are_excluded_with_a_reason():
    hosts = [Host("busy", lam=0.01, mu=0.01, sigma=100, rho=0.95),
             Host("free", lam=0.001, mu=0.01, sigma=100, rho=0.1)]
    plan = schedule(hosts, 3600.0, "optimal", rho_max=0.9)
    assert [h.name for h in plan.hosts] == ["free"]
    assert plan.excluded[0].name == "busy" and "rho_max" in plan.excluded[0].reason
    with pytest.raises(NoUsableHostsError):
        schedule(hosts[:1], 3600.0, rho_max=0.9)


def test_optimal_refuses_above_its_limit_and_bad_methods_are_named():
    hosts = random_hosts(np.random.default_rng(3), 6)
    with pytest.raises(TooManyHostsError) as caught:
        schedule(hosts, 3600.0, "optimal", max_optimal_hosts=5)
    assert "limit is 5" in str(caught.value)
    with pytest.raises(InvalidArgumentError) as caught:
        schedule(hosts, 3600.0, "fastest")
    assert caught.value.field == "method"


class SteppingClock:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


@pytest.mark.parametrize("calibrated", [False, True])
def test_optimal_gives_up_past_its_time_budget_naming_what_it_ruled_on(calibrated):
    # a pool's branch and bound can take a minute at 22 hosts (another took 3 s): a budget,
    # not the host limit, keeps a manager's worker and a waiting client from being held
    from scheduler.calibrated import SERVED_LEVELS
    from scheduler.calibrated_selection import SelectionCalibration
    hosts = random_hosts(np.random.default_rng(3), 7)
    calibration = SelectionCalibration((3600.0,), {
        h.name: np.ones((1, len(SERVED_LEVELS))) for h in hosts}, SERVED_LEVELS) \
        if calibrated else None
    plain = schedule(hosts, 3600.0, "optimal", calibration=calibration)
    # every read of this clock is a second later: a budget of 1.5 s lets the first batch
    # (the singletons) through and stops before the pairs
    with pytest.raises(BudgetExceededError) as caught:
        schedule(hosts, 3600.0, "optimal", clock=SteppingClock(1.0),
                 optimal_budget_seconds=1.5, calibration=calibration)
    assert caught.value.code == "budget_exceeded" and caught.value.value == 7
    assert "budget of 1.5 s" in str(caught.value) and "up to 1 hosts ruled on, 7 of 127" \
        in str(caught.value)
    # a budget it stays within changes nothing
    within = schedule(hosts, 3600.0, "optimal", clock=SteppingClock(1e-9),
                      optimal_budget_seconds=60.0, calibration=calibration)
    assert [h.name for h in within.hosts] == [h.name for h in plain.hosts]
    # auto and the other methods do not read it
    schedule(hosts, 3600.0, "prefix", clock=SteppingClock(1.0), optimal_budget_seconds=1e-9)
    with pytest.raises(InvalidArgumentError, match="budget must be > 0"):
        schedule(hosts, 3600.0, "optimal", optimal_budget_seconds=0.0)


def test_prefix_scales_to_thousands_of_hosts():
    hosts = random_hosts(np.random.default_rng(8), 1500)
    plan = schedule(hosts, 1500 * 3600.0, "prefix")
    heuristic = schedule(hosts, 1500 * 3600.0, "heuristic")
    assert plan.prediction.criterion <= heuristic.prediction.criterion * (1 + 1e-9)
