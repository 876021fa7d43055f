"""The remaining-time law against the simulator: tasks over three hosts stopped at 10%, 50%
and 90% of their work; the predictor knows each host's parameters, each share's progress and
the local jobs present with their ages (never their true remaining demands). Its p90 must
cover 85-95% of the simulated continuations, on Poisson hosts and on a real log's
workstations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ghs.experiments.eta_coverage import poisson_family, trace_family
from ghs.traces import read_log

pytestmark = pytest.mark.slow

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"
RUNS = 400  # per stop fraction: the p90 coverage's standard error is 1.5 points


def _check(rows):
    assert [row["fraction"] for row in rows] == [0.1, 0.5, 0.9]
    for row in rows:
        assert 0.85 <= row["p90"] <= 0.95, row
        assert row["p50"] < row["p90"] <= row["p95"], row


def test_eta_p90_covers_poisson_continuations():
    _check(poisson_family(RUNS, np.random.default_rng(11)))


@pytest.mark.skipif(not (SHARED_TRACES / "KTH-SP2.swf").exists(),
                    reason="the shared KTH-SP2 log is not present")
def test_eta_p90_covers_trace_continuations():
    _check(trace_family(read_log(SHARED_TRACES / "KTH-SP2.swf"), RUNS,
                        np.random.default_rng(12)))
