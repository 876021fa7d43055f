"""Realised times worked out on a prefix of the series and up to its first break: the same
figures, to the bit, as the whole suffix after the launch worked out at once."""

from __future__ import annotations

import numpy as np

from ghs.manager.realised import GAP_TOLERANCE_SECONDS, CapacitySeries, _realised


def _whole(series, launch, dedicated):
    """The straightforward form: every interval after the launch, cut at the first break."""
    first = int(np.searchsorted(series.end, launch, side="right"))
    if first == series.end.size:
        return None, 0.0
    start, end, free = series.start[first:], series.end[first:], series.free[first:]
    if start[0] > launch + GAP_TOLERANCE_SECONDS:
        return None, 0.0
    breaks = np.nonzero(start[1:] - end[:-1] > GAP_TOLERANCE_SECONDS)[0]
    unbroken = breaks.size == 0
    if not unbroken:
        stop = int(breaks[0]) + 1
        start, end, free = start[:stop], end[:stop], free[:stop]
    span = end - start
    share = np.clip((end - np.maximum(start, launch)) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    got = free * share[:, None]
    total = np.cumsum(got, axis=0)
    done = total >= dedicated
    if not done.any(axis=0).all():
        return None, float(np.max(dedicated - total[-1])) if unbroken else 0.0
    index = np.argmax(done, axis=0)
    cores = np.arange(free.shape[1])
    before = np.where(index > 0, total[index - 1, cores], 0.0)
    rate = got[index, cores] / np.maximum(end[index] - np.maximum(start[index], launch), 1e-9)
    finish = np.maximum(start[index], launch) + (dedicated - before) / np.maximum(rate, 1e-12)
    return float(finish.max() - launch), 0.0


def test_realised_times_match_the_whole_suffix_worked_out_at_once():
    rng = np.random.default_rng(3)
    finished = 0
    for trial in range(1500):
        n, cores = int(rng.integers(1, 300)), int(rng.integers(1, 4))
        span = rng.choice([10.0, 60.0, 60.0, 300.0, 4000.0], n)
        gaps = np.where(rng.random(n) < 0.01, rng.uniform(0, 600, n), 0.0)
        start = 1e6 + np.cumsum(span + gaps) - span
        end = start + span
        if trial % 3 == 0:  # overlapping and empty intervals
            start = start - np.where(rng.random(n) < 0.05, rng.uniform(0, 30, n), 0.0)
            end = np.maximum.accumulate(np.where(rng.random(n) < 0.03, start, end))
        free = rng.uniform(0, 1, (n, cores)) * (end - start)[:, None] * (rng.random((n, 1)) < .9)
        series = CapacitySeries(start, end, free)
        for _ in range(4):
            launch = float(rng.uniform(start[0] - 100, end[-1]))
            dedicated = float(rng.choice([60.0, 900.0, 3600.0, 14400.0, 57600.0]))
            found = _realised(series, launch, dedicated)
            assert found == _whole(series, launch, dedicated)
            finished += found[0] is not None
    assert finished > 500
