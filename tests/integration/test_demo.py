"""``ghs demo`` end to end, as the README's main job."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_to_completion(tmp_path):
    completed = subprocess.run([sys.executable, "-m", "ghs", "demo", "--json"],
                               capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    result = json.loads(completed.stdout)
    hosts = result["status"]["hosts"]
    simulated = [h for h in hosts if h["simulated"]]
    real = [h for h in hosts if not h["simulated"]]
    assert len(simulated) == 12 and all(h["history_hours"] >= 24 for h in simulated)
    assert len(real) == 1 and real[0]["measurements"] >= 1
    assert result["status"]["counters"]["measurements_stored"] > 1000
    assert result["prediction"]["mean"] > 0 and result["schedule"]["method"] == "auto"
    assert result["seconds"] < 120
