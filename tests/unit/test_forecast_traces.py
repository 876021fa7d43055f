"""The forecaster battery on workstations cut from a real log (skipped when it is absent)."""

from pathlib import Path

import numpy as np
import pytest

from ghs.traces import busy_fraction, read_log, workstation_traces
from scheduler.forecast import FORECASTERS, ForecastBank

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "traces"
HOUR = 3600.0


@pytest.mark.skipif(not (TRACES / "LCG.swf.gz").exists(), reason="trace logs not present")
def test_nws_on_lcg_workstations_beats_the_day_average_and_tracks_the_best():
    log = read_log(TRACES / "LCG.swf.gz")
    stations = 8
    cut = workstation_traces(log, stations, np.random.default_rng(1).uniform(0.05, 0.5,
                                                                             stations))
    hours = np.arange(int(np.ceil(cut.start_seconds / HOUR)), int(cut.end_seconds // HOUR))
    busy = np.array([busy_fraction(trace, (hours + 1) * HOUR, HOUR) for trace in cut.traces])
    rows, window, warmup = np.arange(stations), 4, 72
    bank = ForecastBank(stations)
    nws, each, realised = [], [], []
    for k, hour in enumerate(hours):
        if warmup <= k <= hours.size - window:
            answer = bank.forecast(rows, hour * HOUR, window * HOUR)
            nws.append(answer.value)
            each.append(answer.values)
            realised.append(busy[:, k:k + window].mean(axis=1))
        bank.push(rows, hour, busy[:, k])
    realised = np.concatenate(realised)
    nws_error = np.abs(np.concatenate(nws) - realised).mean()
    single = dict(zip(FORECASTERS, np.abs(np.concatenate(each) - realised[:, None]).mean(
        axis=0)))
    assert nws_error <= 1.15 * min(single.values())
    assert nws_error <= 0.75 * single["day_average"]
