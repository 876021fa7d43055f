"""How ``ghs experiment live`` scores a run: the p90's coverage read against the target and
against a p90 that is exactly right (the binomial chances checked by exact enumeration)."""

import io
import math

import pytest
from rich.console import Console

from ghs.experiments.live import show
from ghs.experiments.live_scoring import nominal_chances, summarise, targets


def _tasks(covered, missed):
    inside = {"realised_seconds": 60.5, "mean": 60.0, "quantiles": {"p50": 60.2, "p90": 61.0}}
    outside = {"realised_seconds": 61.5, "mean": 60.0, "quantiles": {"p50": 60.2, "p90": 61.0}}
    return [inside] * covered + [outside] * missed


def _binomial_at_most(k, n, p):
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1))


def test_a_runs_p90_is_read_against_an_exact_p90():
    summary = summarise(_tasks(19, 3))
    assert summary["p90_covered_tasks"] == 19 and summary["p90_coverage"] == pytest.approx(19 / 22)
    chances = nominal_chances(summary)
    assert chances["nominal"] == 0.9
    assert chances["nominal_at_most_chance"] == pytest.approx(_binomial_at_most(19, 22, 0.9))
    assert chances["nominal_at_least_chance"] == pytest.approx(
        1.0 - _binomial_at_most(18, 22, 0.9))
    # a calibrated p90 misses the 85% target on 22 tasks about one run in six
    assert nominal_chances(summarise(_tasks(18, 4)))["nominal_at_most_chance"] == pytest.approx(
        0.172, abs=0.001)
    # every task covered: at least that many is the chance all 22 are, 0.9^22
    assert nominal_chances(summarise(_tasks(22, 0)))["nominal_at_least_chance"] == pytest.approx(
        0.9**22)


def test_the_targets_carry_the_chances_and_a_run_without_tasks_has_none():
    verdict = targets(summarise(_tasks(18, 4)))
    assert verdict["p90_coverage"]["met"] is False
    assert verdict["mean_error"]["met"] is True and "nominal" not in verdict["mean_error"]
    empty = targets(summarise([]))
    assert empty["p90_coverage"]["met"] is None
    assert empty["p90_coverage"]["nominal_at_most_chance"] is None


def test_the_report_says_how_a_run_reads_against_an_exact_p90():
    summary = summarise(_tasks(19, 3))
    owners = {"phase": 1, "jobs": 10, "utilisation": 0.3, "utilisation_target": 0.3,
              "with_remote": {"mean_slowdown": 1.1}, "without_remote": {"mean_slowdown": 1.0},
              "slowdown_ratio": 1.1}
    result = {"settings": {"task_seconds": 60.0, "duration_seconds": 1800.0,
                           "utilisations": [0.3, 0.5]},
              "host": {"name": "ws"}, "summary": summary,
              "phases": [{"phase": 1, **summary}], "beside": {}, "owners": [owners],
              "machine": {"cores": 2, "busy_fraction": 0.5, "owners_busy_fraction": 0.2},
              "targets": targets(summary)}
    out = io.StringIO()
    show(Console(file=out, width=200), result)
    text = out.getvalue()
    assert "target p90 coverage >= 85%: 86% met" in text
    assert "19 of 22 by their p90; a p90 exactly at 90% has 19 or fewer in 38% of runs of 22" \
        in text
