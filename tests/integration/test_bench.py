"""``ghs bench --quick`` runs every part it measures and reports ratios, not bare times."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_quick_bench_reports_ratios(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "ghs", "bench", "--quick", "--json", "--part", "scheduler",
         "--part", "manager"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    results = json.loads(completed.stdout)
    scheduler = results["scheduler"]
    assert all(row["speedup"] > 1 for row in scheduler["prediction"])
    assert abs(scheduler["prediction"][0]["baseline_mean_rel_diff"]) < 1e-3
    assert {row["method"] for row in scheduler["selection"]} == {"heuristic", "prefix", "auto"}
    for row in scheduler["selection"]:
        if row["method"] == "auto":
            assert row["criterion_vs_prefix"] <= 1 + 1e-6
            # the sets the calibrated search scored, beside its time
            assert isinstance(row["calibrated_evaluations"], int)
            assert row["calibrated_evaluations"] >= 1
    for row in scheduler["optimal"]:
        assert row["evaluations"] <= row["subsets"]
        assert row["auto_criterion_vs_optimal"] <= 1.01
        if row["literal_ran"]:
            assert row["literal_criterion"] == pytest.approx(row["criterion"], rel=1e-6)
    manager = results["manager"]
    assert manager["store"]["stored"] == manager["store"]["measurements"]
    assert manager["stream"]["stored"] == manager["stream"]["measurements"]
    assert manager["fan_in"]["exactly_once"]
