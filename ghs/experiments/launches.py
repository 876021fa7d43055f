"""Remote tasks launched into workstation job streams that the Part 2 sampler has watched.

The shared machinery of ``ghs experiment error-vs-length``, ``calibration`` and
``error-sources``. A *station* is one single-core workstation given as a job stream (a
:class:`scheduler.workload.Trace`: Poisson-generated or cut from a real log). The real
sampler (:class:`sensors.sampler.AdaptiveSampler`, the sensor of a
:class:`sensors.simulated.SimulatedHost` fed that very stream, a memory store) watches it from
``start`` on; at each launch time (an hour end, 24 hours or more after ``start``) its 24-hour
``Adapt_avg`` estimate becomes the model's host, exactly as the manager would build it, and
the last measurement before the launch is what the naive predictor reads. The task then runs
into the same stream from the launch: :func:`scheduler.trace_simulation.simulate_trace_many` walks
the stream's real arrivals after the real backlog left by earlier jobs.

References scored on the same tasks (``MODELS`` lists the model-based ones):

- naive: dedicated / (1 - last measured utilisation), capped at ``RHO_CAP``;
- past: the model fed the exact parameters of the 24 hours before the launch (rate, demands
  and offered load of the jobs that arrived in them), i.e. a sampler without measurement
  noise that counts arrivals rather than reading the busy fraction;
- true: the model fed the station's long-run parameters, when they are known (Poisson
  stations): what is left is the task's own randomness and the backlog at launch;
- clairvoyant: the model fed the parameters of the task's own run window [launch, completion):
  arrival rate, mean and spread of the demands of the jobs arriving in it, and their offered
  load. Since no local work is left when the task finishes, the completion is exactly
  (dedicated + backlog at launch) / (1 - that offered load), so the clairvoyant's mean misses
  by the backlog at launch alone.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ghs.errors import GhsError
from ghs.experiments.partition import NAIVE_MAX_UTILISATION, naive_predictions
from ghs.manager.estimates import model_parameters
from ghs.simulated_hosts import simulated_host, trace_rows
from scheduler import Host, predict
from scheduler.trace_simulation import simulate_trace_many
from scheduler.workload import Trace
from sensors.clock import VirtualClock
from sensors.estimates import Estimate
from sensors.sampler import AdaptiveSampler
from sensors.store import SensorStore

HOUR_SECONDS = 3600.0
# The naive predictor's cap for the model too: a saturated day predicts 20x, not forever.
RHO_CAP = NAIVE_MAX_UTILISATION
LEVELS = ("p50", "p90", "p95")
MODELS = ("ours", "past", "true", "clairvoyant")  # every model-based predictor, in table order
DAY_SECONDS = 86400.0


@dataclass(frozen=True)
class Sampling:
    """The sampler's settings (the ``[sensor]`` config section's defaults unless given)."""

    interval_seconds: float = 60.0
    min_per_hour: int = 2
    max_per_hour: int = 30
    window_hours: float = 24.0

    @classmethod
    def from_config(cls, sensor: object) -> Sampling:
        """From a ``[sensor]`` config section (:class:`ghs.config.SensorConfig`)."""
        return cls(float(sensor.interval_seconds), int(sensor.min_per_hour),
                   int(sensor.max_per_hour), float(sensor.window_hours))


SAMPLING = Sampling()


@dataclass(frozen=True, eq=False)
class Station:
    """One workstation: its local jobs, known completely on [trace start, ``known_until``)."""

    name: str
    trace: Trace
    known_until: float
    host: Host | None = None


@dataclass(frozen=True, eq=False)
class Watch:
    """What the sampler saw: the estimate at every hour end and every measured utilisation."""

    hour_ends: np.ndarray
    estimates: tuple[Estimate, ...]
    counts: np.ndarray
    measured_end: np.ndarray
    measured_rho: np.ndarray

    def estimate_at(self, launch_seconds: float) -> Estimate:
        index = int(np.searchsorted(self.hour_ends, launch_seconds))
        if index >= self.hour_ends.size or self.hour_ends[index] != launch_seconds:
            raise GhsError(f"no sampler estimate at {launch_seconds:g} s (launches must be "
                           "hour ends inside the watched span)", field="launch_seconds",
                           value=launch_seconds)
        return self.estimates[index]

    def last_rho(self, launch_seconds: float) -> float:
        index = int(np.searchsorted(self.measured_end, launch_seconds, side="right")) - 1
        return float(self.measured_rho[index]) if index >= 0 else 0.0


def watch(station: Station, *, start_seconds: float, end_seconds: float, sampling: Sampling,
          rng: random.Random) -> Watch:
    """Run the adaptive sampler on ``station`` over [start, end) (hour multiples, seconds).

    The simulated host boots idle at the trace's first arrival (or at ``start``) and replays
    the trace from there, so its backlog is the trace's own.
    """
    if start_seconds % HOUR_SECONDS or end_seconds % HOUR_SECONDS or end_seconds <= start_seconds:
        raise GhsError(f"the watched span [{start_seconds:g}, {end_seconds:g}) s must be whole "
                       "hours and not empty", field="start_seconds", value=start_seconds)
    arrivals = station.trace.arrival_seconds
    boot = min(float(arrivals[0]), start_seconds) if arrivals.size else start_seconds
    clock = VirtualClock(boot)
    host = simulated_host(trace_rows(station.trace), clock=clock, cores=1, speed=1.0)
    while clock.now() < start_seconds:
        # an hour at a time, so finished jobs are retired before the next hour's arrive
        clock.advance(min(HOUR_SECONDS, start_seconds - clock.now()))
        host.sample()
    ends: list[float] = []
    rhos: list[float] = []

    def keep(measurement) -> None:
        ends.append(measurement.end_time)
        rhos.append(measurement.rho)

    sampler = AdaptiveSampler(host.sensor(), SensorStore(None), clock, rng,
                              interval_seconds=sampling.interval_seconds,
                              min_per_hour=sampling.min_per_hour,
                              max_per_hour=sampling.max_per_hour,
                              window_hours=sampling.window_hours, on_measurement=keep)
    reports = sampler.run(until=end_seconds)
    return Watch(hour_ends=np.array([r.hour_start + HOUR_SECONDS for r in reports]),
                 estimates=tuple(r.estimate for r in reports),
                 counts=np.array([r.completed for r in reports]),
                 measured_end=np.array(ends), measured_rho=np.array(rhos))


def host_from_estimate(name: str, estimate: Estimate, rho_cap: float = RHO_CAP) -> Host:
    """The model's host from a 24-hour estimate, by the manager's rules.

    No finished job seen: mu from the utilisation law (lam / rho); spread unknown: exponential
    (sigma = 1/mu); no measurement at all: an idle host. The utilisation is capped at
    ``rho_cap`` (the manager would call a host at rho >= 1 saturated and unusable).
    """
    lam, mu, sigma, _ = model_parameters(estimate, cores=1)
    return Host(name, lam=lam, mu=mu, sigma=sigma, rho=min(estimate.rho or 0.0, rho_cap))


def window_host(name: str, trace: Trace, start_seconds: float, end_seconds: float) -> Host:
    """Parameters of the jobs arriving in [start, end): rate, demand mean and spread, load."""
    arrivals, demands = trace.arrival_seconds, trace.cpu_seconds
    first, last = np.searchsorted(arrivals, [start_seconds, end_seconds], side="left")
    chosen = demands[first:last]
    duration = end_seconds - start_seconds
    total = float(chosen.sum())
    if chosen.size == 0 or total <= 0:
        return Host(name, lam=0.0, mu=1.0, sigma=0.0, rho=0.0)
    mean = total / chosen.size
    return Host(name, lam=chosen.size / duration, mu=1.0 / mean, sigma=float(chosen.std()),
                rho=min(total / duration, 1.0 - 1e-9))


def _prediction_row(hosts: Sequence[Host], work: float, dist: str,
                    shares: np.ndarray | None = None) -> list[float]:
    prediction = predict(hosts, work, dist, shares=shares)
    return [prediction.mean, *(prediction.quantiles[level] for level in LEVELS)]


def _reference_hosts(station: Station, at: float, finish: float, estimated: Host
                     ) -> dict[str, Host | None]:
    """Each model-based predictor's host for a task launched at ``at`` ending at ``finish``."""
    past = window_host(station.name, station.trace, at - DAY_SECONDS, at)
    past = Host(past.name, lam=past.lam, mu=past.mu, sigma=past.sigma,
                rho=min(past.rho, RHO_CAP))
    ran = (window_host(station.name, station.trace, at, finish) if finish > at
           else estimated)
    return {"ours": estimated, "past": past, "true": station.host, "clairvoyant": ran}


def single_tasks(station: Station, watched: Watch, launches: np.ndarray,
                 dedicated_seconds: Sequence[float], *, dist: str,
                 idle_at_launch: bool = False) -> dict[str, np.ndarray]:
    """Each launch x task length on one station: predictions and the simulated completion.

    ``idle_at_launch``: the task runs as if the jobs that arrived before its launch had never
    been (the model's assumption of an idle machine), the later ones unchanged.

    Returns arrays of shape (launches, lengths), seconds: ``simulated`` and
    ``simulated_idle`` (the same task on the machine emptied at launch); each of ``MODELS``
    (predicted mean; NaN for ``true`` when the station's parameters are unknown) with its
    ``*_p50/p90/p95``; ``naive``; ``backlog`` at launch; ``capped`` (the estimate's
    utilisation hit the cap) and ``valid`` (the task finished while the trace was known).
    """
    lengths = np.asarray(dedicated_seconds, dtype=float)
    launch = np.asarray(launches, dtype=float)
    from_idle = np.array([simulate_trace_many(_after(station.trace, at), lengths, at)
                          for at in launch]).reshape(launch.size, lengths.size)
    if idle_at_launch:
        simulated = from_idle
        backlog = np.zeros(launch.size)
    else:
        simulated = simulate_trace_many(station.trace, lengths[None, :], launch[:, None])
        backlog = station.trace.backlog_seconds(launch)
    shape = simulated.shape
    table = {name: np.full((*shape, 4), np.nan) for name in MODELS}
    naive = np.zeros(shape)
    capped = np.zeros(shape, dtype=bool)
    for i, at in enumerate(launch):
        estimate = watched.estimate_at(at)
        estimated = host_from_estimate(station.name, estimate)
        capped[i] = (estimate.rho or 0.0) > RHO_CAP
        reading = [np.array([watched.last_rho(at)])]
        for k, length in enumerate(lengths):
            naive[i, k] = naive_predictions(np.array([length]), reading)[0]
            hosts = _reference_hosts(station, at, at + simulated[i, k], estimated)
            for name, host in hosts.items():
                if host is not None:
                    table[name][i, k] = _prediction_row([host], length, dist)
    result = {"simulated": simulated, "simulated_idle": from_idle, "naive": naive,
              "capped": capped,
              "backlog": np.broadcast_to(backlog[:, None], shape).copy(),
              "valid": launch[:, None] + simulated < station.known_until}
    for name in MODELS:
        result.update(_columns(name, table[name]))
    return result


def _after(trace: Trace, at: float) -> Trace:
    """The jobs of ``trace`` arriving at or after ``at``."""
    first = int(np.searchsorted(trace.arrival_seconds, at, side="left"))
    return Trace(trace.arrival_seconds[first:], trace.cpu_seconds[first:])


def _columns(name: str, table: np.ndarray) -> dict[str, np.ndarray]:
    columns = {name: table[..., 0]}
    for index, level in enumerate(LEVELS, start=1):
        columns[f"{name}_{level}"] = table[..., index]
    return columns


def parallel_tasks(stations: Sequence[Station], watches: Sequence[Watch], launches: np.ndarray,
                   works: Sequence[float], *, dist: str, rho_max: float
                   ) -> dict[str, np.ndarray]:
    """One task of each size in ``works`` (reference-CPU-seconds) over all stations per launch.

    The candidates are the stations whose estimated utilisation is below ``rho_max`` (the
    scheduler's rule); the work is split by the equal-mean partition of their estimates, and
    the task completes when its last share does. The references predict the same split. Same
    keys as :func:`single_tasks` plus ``hosts`` (stations used); ``backlog`` is the largest
    among the used stations; ``simulated_idle`` empties every station at launch.
    """
    launch = np.asarray(launches, dtype=float)
    work = np.asarray(works, dtype=float)
    shape = (launch.size, work.size)
    table = {name: np.full((*shape, 4), np.nan) for name in MODELS}
    out = {name: np.zeros(shape) for name in ("simulated", "simulated_idle", "naive", "backlog",
                                              "hosts")}
    out["valid"] = np.ones(shape, dtype=bool)
    out["capped"] = np.zeros(shape, dtype=bool)
    for i, at in enumerate(launch):
        estimates = [w.estimate_at(at) for w in watches]
        chosen = [k for k, e in enumerate(estimates) if (e.rho or 0.0) < rho_max]
        if not chosen:
            raise GhsError(f"no station is below rho_max {rho_max:g} at {at:g} s",
                           field="rho_max", value=rho_max)
        hosts = [host_from_estimate(stations[k].name, estimates[k]) for k in chosen]
        readings = [np.array([watches[k].last_rho(at)]) for k in chosen]
        backlog = np.array([float(stations[k].trace.backlog_seconds(at)) for k in chosen])
        after = [_after(stations[k].trace, at) for k in chosen]
        for j, size in enumerate(work):
            prediction = predict(hosts, size, dist)
            shares = prediction.shares
            used = shares > 0
            finish = np.array([simulate_trace_many(stations[k].trace, share, at)
                               if share > 0 else 0.0 for k, share in zip(chosen, shares)])
            out["simulated"][i, j] = float(finish.max())
            out["simulated_idle"][i, j] = max(
                float(simulate_trace_many(after[m], share, at)) if share > 0 else 0.0
                for m, share in enumerate(shares))
            out["naive"][i, j] = naive_predictions(shares, readings)[0]
            out["backlog"][i, j] = float(backlog[used].max())
            out["hosts"][i, j] = int(used.sum())
            out["valid"][i, j] = all(at + f < stations[k].known_until
                                     for k, f in zip(chosen, finish))
            table["ours"][i, j] = [prediction.mean,
                                   *(prediction.quantiles[lv] for lv in LEVELS)]
            per_host = [_reference_hosts(stations[k], at, at + f, host)
                        for k, f, host in zip(chosen, finish, hosts)]
            for name in MODELS[1:]:
                chosen_hosts = [h[name] for h in per_host]
                if all(h is not None for h in chosen_hosts):
                    table[name][i, j] = _prediction_row(chosen_hosts, size, dist, shares)
    for name in MODELS:
        out.update(_columns(name, table[name]))
    return out


def errors(predicted: np.ndarray, simulated: np.ndarray) -> np.ndarray:
    """|predicted - simulated| / simulated, elementwise."""
    return np.abs(predicted - simulated) / simulated


def error_summary(values: np.ndarray) -> dict[str, float] | None:
    """Mean, variance (ddof 0, the paper's 'variance of the error'), median, p90 and count of
    the finite values; None when there is none."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return {"mean": float(values.mean()), "variance": float(values.var()),
            "median": float(np.median(values)), "p90": float(np.quantile(values, 0.9)),
            "count": int(values.size)}


def outcomes(tasks: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(which tasks count for ``name``, their realised seconds): the experiment's valid tasks
    and simulated times, or a predictor's own (``NAME_realised``, NaN where it has none) when
    it ran its own tasks (the back-tested default splits a parallel task its own way)."""
    own = tasks.get(f"{name}_realised")
    if own is None:
        return tasks["valid"] & np.isfinite(tasks[name]), tasks["simulated"]
    return np.isfinite(own) & np.isfinite(tasks[name]), own


def coverage(tasks: dict[str, np.ndarray], name: str = "ours") -> dict[str, float] | None:
    """Fraction of valid tasks finishing at or before each of ``name``'s predicted quantiles
    (None when ``name`` predicted none of them)."""
    valid, realised = outcomes(tasks, name)
    valid = valid & np.isfinite(tasks[f"{name}_{LEVELS[0]}"])
    simulated = realised[valid]
    if simulated.size == 0:
        return None
    return {level: float(np.mean(simulated <= tasks[f"{name}_{level}"][valid]))
            for level in LEVELS}


def width(tasks: dict[str, np.ndarray], name: str = "ours") -> float | None:
    """Median predicted p90 / p50 of ``name`` over the tasks that count for it (None when it
    predicted none): how wide an interval its coverage was bought with."""
    valid, _ = outcomes(tasks, name)
    valid = valid & np.isfinite(tasks[f"{name}_p50"]) & (tasks[f"{name}_p50"] > 0)
    if not valid.any():
        return None
    return float(np.median(tasks[f"{name}_p90"][valid] / tasks[f"{name}_p50"][valid]))


def launch_times(first_seconds: float, count: int, spacing_hours: float) -> np.ndarray:
    """``count`` launch times ``spacing_hours`` apart from ``first`` (hour multiples)."""
    if count < 1 or spacing_hours <= 0 or spacing_hours % 1:
        raise GhsError(f"need at least one launch and a whole number of hours between them, "
                       f"got {count!r} and {spacing_hours!r}", field="launches", value=count)
    return first_seconds + np.arange(count) * spacing_hours * HOUR_SECONDS
