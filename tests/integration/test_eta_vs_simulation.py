"""The remaining-time law against the simulator: tasks over three hosts stopped at 10%, 50%
and 90% of their work; the predictor knows each host's parameters, each share's progress,
the local jobs present with their ages (never their true remaining demands) and, as a
manager serves it, each host's calibration from its own record before the stop. Its p90 must
cover 85-95% of the simulated continuations, on Poisson hosts and on real logs' workstations
(HPC2N calibrated, whose bursts the uncalibrated model missed; KTH with the model alone)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ghs.experiments.eta_coverage import poisson_family, trace_family
from ghs.traces import read_log

pytestmark = pytest.mark.slow

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"
RUNS = 400  # per stop fraction: the p90 coverage's standard error is 1.5 points


def _check(rows, atom_heavy: bool = False):
    assert [row["fraction"] for row in rows] == [0.1, 0.5, 0.9]
    for row in rows:
        assert row["p50"] <= row["p90"] <= row["p95"], row
        if atom_heavy and row["uninterrupted"] >= 0.9:
            # 90% of the continuations ran exactly their dedicated time, which no quantile
            # can be below: any p90 covers those, so 95% is out of reach of even a
            # calibrated law (its p90 covers its atom's mass); it may cover few others
            assert 0.85 <= row["p90"] <= row["uninterrupted"] + 0.05, row
        else:
            assert 0.85 <= row["p90"] <= 0.95, row


def test_eta_p90_covers_poisson_continuations():
    _check(poisson_family(RUNS, np.random.default_rng(11)))


@pytest.mark.skipif(not (SHARED_TRACES / "KTH-SP2.swf").exists(),
                    reason="the shared KTH-SP2 log is not present")
def test_eta_p90_covers_trace_continuations():
    # the model alone on KTH (the calibrated ETA is checked on Poisson hosts and on HPC2N
    # below; calibrating here replays shadow launches over the log's eleven months, a minute
    # of the suite's time)
    _check(trace_family(read_log(SHARED_TRACES / "KTH-SP2.swf"), RUNS,
                        np.random.default_rng(12), calibrated=False))


@pytest.mark.skipif(not (SHARED_TRACES / "hpc2n.swf").exists(),
                    reason="the shared HPC2N log is not present")
def test_eta_p90_covers_bursty_trace_continuations():
    _check(trace_family(read_log(SHARED_TRACES / "hpc2n.swf"), RUNS,
                        np.random.default_rng(13)), atom_heavy=True)
