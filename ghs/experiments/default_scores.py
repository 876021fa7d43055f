"""The served default predictor scored on an experiment's own stations and launches.

The launch experiments (``error-vs-length``, ``calibration``, ``error-sources``) build their
workstations as job streams and launch tasks every few hours. The default a manager serves
(``calibrated``: the run-window forecast of the measured load, idle start, quantiles corrected
per host by adaptive conformal inference) is scored by the back-test engine
(:func:`ghs.backtest.run_backtest`) on the same streams, with the same launch times and task
lengths, so its figures sit beside the paper model's on the same tasks. The engine replays
each stream through the real sampler and the agent's streams, calibrates on hourly shadow
launches from a day before the first scored launch, and walks the stream for the realised time
exactly as the experiments do (:func:`scheduler.trace_simulation.simulate_trace_many` from the
backlog earlier jobs left), so a one-workstation task's realised time is the experiment's
simulated one. A task split over the stations is split by each predictor's own view, so its
realised time is its own (``NAME_realised``); its default is what a manager serves for a split
(``calibrated-hosts``: each station's law from its state, calibrated on that station's own
single-host record and the far tail pooled over the stations, the laws recombined), not the
back-test's ``calibrated`` column, which calibrates the split on the split launches themselves
(16 a length in these experiments, too few for the adaptive steps to settle).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ghs.agent.replay import DEFAULT_ZERO_EPOCH_SECONDS
from ghs.agent.replay import Station as ReplayStation
from ghs.backtest import DEFAULT_PREDICTOR, RECOMBINED, BacktestSettings, run_backtest
from ghs.config import SensorConfig
from ghs.experiments.launches import HOUR_SECONDS, LEVELS, Sampling, Station

# column name in the experiments' task tables -> the engine's predictor (single tasks)
ENGINE_PREDICTORS = {"default": DEFAULT_PREDICTOR, "engine_paper": "paper"}
# ... and for a split task: the default is the split a manager serves
PARALLEL_ENGINE_PREDICTORS = {"default": RECOMBINED, "engine_paper": "paper"}


def engine_predictors(parallel: bool) -> dict[str, str]:
    """Column name -> the engine predictor scored under it, for split or single tasks."""
    return dict(PARALLEL_ENGINE_PREDICTORS if parallel else ENGINE_PREDICTORS)


_USER, _COMMAND = "local", "job"  # the streams carry no owner or program


def replay_stations(stations: Sequence[Station], boot_seconds: float) -> list[ReplayStation]:
    """The engine's stations: each stream shifted so ``boot_seconds`` is the log's zero, known
    until ``known_until`` (later jobs dropped), so the engine keeps the tasks the experiment
    keeps (those finishing before it) rather than those finishing before the last job."""
    found = []
    for station in stations:
        # a replay may move jobs past the known end; they cannot touch a task kept
        kept = station.trace.arrival_seconds < station.known_until
        arrivals = station.trace.arrival_seconds[kept] - boot_seconds
        rows = tuple((a, c, _USER, _COMMAND) for a, c in zip(
            arrivals.tolist(), station.trace.cpu_seconds[kept].tolist()))
        found.append(ReplayStation(station.name, rows,
                                   end_seconds=station.known_until - boot_seconds))
    return found


def score(stations: Sequence[Station], launches: np.ndarray, works_seconds: Sequence[float], *,
          boot_seconds: float, sampling: Sampling, seed: int, parallel: bool
          ) -> dict[str, np.ndarray]:
    """Each of :func:`engine_predictors` on the experiment's tasks, as task-table columns.

    ``launches``: the experiment's launch times (seconds on the streams' clock, whole hours,
    evenly spaced); ``boot_seconds``: the whole hour the streams start from. Single tasks:
    arrays of shape (stations x launches, lengths), station-major as the experiments
    concatenate them; ``parallel``: (launches, lengths). Per name: ``NAME`` (predicted mean,
    seconds), ``NAME_p50/p90/p95`` and ``NAME_realised`` (seconds from launch); NaN where the
    task did not finish while its streams were known.
    """
    launch = np.asarray(launches, dtype=float)
    work = np.asarray(works_seconds, dtype=float)
    every = float(launch[1] - launch[0]) if launch.size > 1 else HOUR_SECONDS
    sensor = dataclasses.replace(SensorConfig(), interval_seconds=sampling.interval_seconds,
                                 min_per_hour=sampling.min_per_hour,
                                 max_per_hour=sampling.max_per_hour,
                                 window_hours=sampling.window_hours)
    settings = BacktestSettings(start_seconds=float(launch[0] - boot_seconds),
                                every_seconds=every, parallel=parallel, sensor=sensor,
                                seed=seed, zero_epoch_seconds=DEFAULT_ZERO_EPOCH_SECONDS
                                + boot_seconds,
                                last_launch_seconds=float(launch[-1] - boot_seconds))
    keys = [station.name for station in stations]
    result = run_backtest(replay_stations(stations, boot_seconds), keys, work, settings)
    rows = 1 if parallel else len(stations)
    predictors = engine_predictors(parallel)
    table = {name: np.full((rows, launch.size, work.size, len(LEVELS) + 2), np.nan)
             for name in predictors}
    by_engine = {engine: name for name, engine in predictors.items()}
    station_row = {key: k for k, key in enumerate(keys)}
    for record in result["launches"]:
        name = by_engine.get(record["predictor"])
        if name is None:
            continue
        i = int(np.searchsorted(launch, record["launch_seconds"] + boot_seconds))
        j = int(np.flatnonzero(work == record["work"])[0])
        row = 0 if parallel else station_row[next(iter(record["shares"]))]
        table[name][row, i, j] = [record["mean"], *(record["quantiles"][lv] for lv in LEVELS),
                                  record["realised_seconds"]]
    columns: dict[str, np.ndarray] = {}
    for name, values in table.items():
        values = values.reshape(rows * launch.size, work.size, -1)
        columns[name] = values[..., 0]
        for index, level in enumerate(LEVELS, start=1):
            columns[f"{name}_{level}"] = values[..., index]
        columns[f"{name}_realised"] = values[..., -1]
    return columns
