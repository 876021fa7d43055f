"""Demand templates: the remaining demand of a running job, and the choice of template."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from scheduler.errors import InvalidArgumentError
from scheduler.templates import Histogram, TwoMomentDemand, choose_template

EDGES = np.geomspace(0.1, 1e5, 61)  # 10 bins per decade
LAWS = {
    # command: (frozen scipy law of the CPU demand, ages of running jobs in seconds)
    "compile": (stats.lognorm(s=math.sqrt(math.log(1.25)), scale=30.0 / math.sqrt(1.25)),
                [0.0, 10.0, 20.0]),
    "simulate": (stats.gamma(a=4.0, scale=150.0), [0.0, 300.0, 600.0]),
}
STREAMS = 10


def conditional_mean(law, age):
    """E[D - a | D > a] = int_a^inf S(x) dx / S(a), by quadrature of the true law."""
    tail, _ = integrate.quad(law.sf, age, np.inf, limit=200)
    return tail / law.sf(age)


def templates_from_stream(jobs, seed):
    rng = np.random.default_rng(seed)
    commands = rng.choice(list(LAWS), size=jobs)
    demands = {name: LAWS[name][0].rvs(size=int((commands == name).sum()), random_state=rng)
               for name in LAWS}
    per_command = {name: Histogram(EDGES, np.histogram(values, EDGES)[0])
                   for name, values in demands.items()}
    pooled = Histogram(EDGES, np.histogram(np.concatenate(list(demands.values())), EDGES)[0])
    return per_command, pooled


def test_remaining_demand_of_running_jobs_within_5_percent_after_500_jobs():
    # One stream of ~500 jobs per command has a sampling error of a few percent at these
    # ages (a few hundred jobs above the age); averaged over streams, the estimate must be
    # within 5% of the law's conditional mean, and no single stream off by more than 15%.
    fallback = TwoMomentDemand(300.0, 400.0)
    cases = [(name, age) for name, (_, ages) in LAWS.items() for age in ages]
    ratios = np.zeros((STREAMS, len(cases)))
    pooled_ratios = np.zeros((STREAMS, len(cases)))
    for stream in range(STREAMS):
        per_command, pooled = templates_from_stream(1000, seed=stream)
        for column, (name, age) in enumerate(cases):
            assert per_command[name].jobs >= 420
            choice = choose_template([("user-command", per_command[name]), ("user", None),
                                      ("pooled", pooled)], 400, fallback, age)
            assert choice.level == "user-command"
            truth = conditional_mean(LAWS[name][0], age)
            ratios[stream, column] = choice.law.mean_seconds / truth
            pooled_ratios[stream, column] = pooled.remaining(age).mean_seconds / truth
    assert np.abs(ratios.mean(axis=0) - 1).max() <= 0.05
    assert np.abs(ratios - 1).max() <= 0.15
    # the mixed stream's pooled template would be far off
    assert np.abs(pooled_ratios.mean(axis=0) - 1).max() > 0.5


def test_choose_template_falls_back_in_order_and_reports_job_counts():
    counts = np.zeros(60)
    counts[20] = 3.5  # decayed counts may be fractional
    few = Histogram(EDGES, counts)
    many = Histogram(EDGES, counts * 100)
    fallback = TwoMomentDemand(100.0, 50.0)
    choice = choose_template([("user-command", few), ("user", many)], 50, fallback)
    assert (choice.level, choice.jobs) == ("user", 350.0)
    # no template job ran as long as this age: the two-moment law
    choice = choose_template([("user-command", few), ("user", many)], 1, fallback, 1e4)
    assert (choice.level, choice.jobs) == ("two-moment", 0.0)


def test_two_moment_fallback_matches_a_sampled_lognormal():
    fallback = TwoMomentDemand(200.0, 300.0)
    s = math.sqrt(math.log1p(1.5**2))
    draws = np.random.default_rng(5).lognormal(math.log(200.0) - s * s / 2, s, 4_000_000)
    for age in (0.0, 100.0, 800.0):
        kept = draws[draws > age] - age
        law = fallback.remaining(age)
        assert law.mean_seconds == pytest.approx(kept.mean(), rel=0.01)
        assert math.sqrt(law.variance_seconds2) == pytest.approx(kept.std(), rel=0.03)
        assert law.cdf(kept.mean()) == pytest.approx((kept <= kept.mean()).mean(), abs=0.005)


@pytest.mark.parametrize("law", [Histogram(EDGES, np.arange(60.0)).remaining(50.0),
                                 TwoMomentDemand(60.0, 90.0).remaining(50.0)])
def test_sampling_cdf_and_moments_agree(law):
    draws = law.sample(np.random.default_rng(9), 400_000)
    assert draws.min() >= 0
    assert draws.mean() == pytest.approx(law.mean_seconds, rel=0.02)
    assert draws.var() == pytest.approx(law.variance_seconds2, rel=0.05)
    for r in np.quantile(draws, [0.1, 0.5, 0.9]):
        assert law.cdf(r) == pytest.approx((draws <= r).mean(), abs=0.005)


@pytest.mark.parametrize("edges, counts", [([1.0], []), ([0.0, 1.0], [1.0]),
                                           ([2.0, 1.0], [1.0]), ([1.0, 2.0], [-1.0]),
                                           ([1.0, 2.0], [1.0, 2.0])])
def test_bad_histograms_are_refused(edges, counts):
    with pytest.raises(InvalidArgumentError):
        Histogram(edges, counts)


def test_bad_ages_and_min_jobs_are_refused():
    with pytest.raises(InvalidArgumentError) as caught:
        TwoMomentDemand(1.0, 1.0).remaining(-1.0)
    assert caught.value.field == "age_seconds"
    with pytest.raises(InvalidArgumentError) as caught:
        choose_template([], float("nan"), TwoMomentDemand(1.0, 1.0))
    assert caught.value.field == "min_jobs"
