"""``ghs measure`` as a user runs it, and the sensor overhead benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sensors.accounting_control import probe_accounting

REPO = Path(__file__).resolve().parents[2]


def ghs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ghs", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "GHS_CONFIG": "", **(env or {})})


def accounting_is_free() -> bool:
    probe = probe_accounting(())
    if probe.active is not None and probe.active.file is not None:
        probe.active.file.close()
    return probe.complete and probe.active is None


def test_measure_json_has_the_promised_keys():
    result = ghs("measure", "--interval", "2s", "--accounting", "off", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    for key in ("interval_seconds", "lam", "rho", "mu", "sigma", "jobs_started",
                "jobs_between", "service_count", "quality"):
        assert key in payload
    assert payload["interval_seconds"] == pytest.approx(2.0, abs=0.5)
    assert payload["lambda_source"] == "fork_counter" and "fork_counter" in payload["quality"]
    assert payload["accounting"] == "none" and 0.0 <= payload["rho"] <= 1.0


def test_measure_table_and_user_errors_are_one_line():
    table = ghs("measure", "--interval", "1", "--accounting", "off")
    assert table.returncode == 0 and "lambda" in table.stdout
    bad = ghs("measure", "--interval", "soon")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("ghs: error:")
    unknown = ghs("measure", "--interval", "1", "--accounting", "off",
                  env={"GHS_SENSOR_USERS_ALLOW": "no-such-user-ghs"})
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "ghs: error: unknown user 'no-such-user-ghs'"


@pytest.mark.root
def test_measure_with_accounting_on_switches_it_off_and_cleans_up(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: switches kernel process accounting")
    if not accounting_is_free():
        pytest.skip("process accounting is in use on this machine (or cannot be checked)")
    own = tmp_path / "pacct"
    result = ghs("measure", "--interval", "2s", "--accounting", "on", "--json",
                 env={"GHS_SENSOR_ACCOUNTING_PATH": str(own)})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["accounting"] == "own" and payload["lambda_source"] == "accounting"
    assert accounting_is_free() and not own.exists()


@pytest.mark.root
def test_sensor_overhead_reports_cpu_and_memory():
    if os.geteuid() != 0:
        pytest.skip("needs root: the benchmark runs with accounting on")
    if not accounting_is_free():
        pytest.skip("process accounting is in use on this machine (or cannot be checked)")
    from ghs.benchmarks.sensors import sensor_overhead

    result = sensor_overhead(3.0)
    assert result["accounting"] == "own"
    assert result["duration_seconds"] == pytest.approx(3.0, abs=1.5)
    assert 0.0 <= result["cpu_percent"] < 50.0
    assert 5.0 < result["rss_mb"] <= result["peak_rss_mb"] < 500.0
    assert result["interval_seconds"] == 60.0
    assert accounting_is_free()
