"""--processes-per-host against the per-core simulators (never against the model's own
formulas): each core its own server with its own Poisson stream, the share run by processes
held on given cores (pinned) or moved at once to whichever cores are free (unpinned)
(scheduler.core_simulation)."""

import numpy as np
import pytest

from scheduler import Host, migrating, pinned, predict
from scheduler.backlog import Backlog
from scheduler.core_simulation import simulate_cores, simulate_migrating
from scheduler.errors import InvalidArgumentError
from scheduler.simulation import simulate

MEAN_DEMAND = 120.0
RUNS = 40_000
MIGRATING_RUNS = 6_000  # one run at a time (an event sweep each), so fewer
WORK = 8 * 3600.0


def simulated(host, rates, cores, seed, work=WORK):
    times = simulate_cores(host, work, core_rates_per_second=rates, process_cores=cores,
                           runs=RUNS, rng=np.random.default_rng(seed))
    return times.mean(), np.quantile(times, 0.9)


def rates(*utilisations):
    return [u / MEAN_DEMAND for u in utilisations]


def host(loads, processes, tau=1.0):
    """A host whose cores carry ``loads`` (utilisation per core) and run ``processes``."""
    return Host("ws", lam=sum(loads) / MEAN_DEMAND, mu=1 / MEAN_DEMAND, sigma=MEAN_DEMAND,
                rho=sum(loads) / len(loads), tau=tau, cores=len(loads), processes=processes)


@pytest.mark.parametrize(("loads", "processes", "cores", "tau"), [
    ((0.4, 0.4), 1, [1], 1.0),
    ((0.3, 0.3, 0.3, 0.3), 2, [0, 2], 1.5),
    ((0.5, 0.5, 0.5), 3, [0, 1, 2], 0.8),
])
def test_fewer_processes_than_cores_pinned_to_evenly_loaded_cores(loads, processes, cores,
                                                                 tau):
    ws = host(loads, processes, tau)
    mean, p90 = simulated(ws, rates(*loads), cores, seed=processes * 7 + len(loads))
    model = predict([pinned(ws, loads)], WORK)
    assert model.mean == pytest.approx(mean, rel=0.01)
    assert model.quantiles["p90"] == pytest.approx(p90, rel=0.03)
    assert model.dedicated_seconds[0] == pytest.approx(WORK / (processes * tau))


@pytest.mark.parametrize(("loads", "processes", "cores"), [
    ((0.6, 0.2), 1, [1]),
    ((0.5, 0.1, 0.1), 2, [1, 2]),
    ((0.7, 0.0), 1, [1]),
])
def test_pinned_processes_on_the_least_loaded_cores(loads, processes, cores):
    ws = host(loads, processes)
    mean, p90 = simulated(ws, rates(*loads), cores, seed=sum(cores) + 11)
    model = predict([pinned(ws, loads)], WORK)
    assert model.mean == pytest.approx(mean, rel=0.01)
    assert model.quantiles["p90"] == pytest.approx(p90, rel=0.03)


def migrated(ws, loads, seed, work=WORK, runs=MIGRATING_RUNS):
    times = simulate_migrating(ws, work, core_rates_per_second=rates(*loads), runs=runs,
                               rng=np.random.default_rng(seed))
    return times.mean(), np.quantile(times, 0.9)


@pytest.mark.parametrize("loads", [(0.4, 0.4), (0.6, 0.2), (0.5, 0.5), (0.3, 0.2, 0.4)])
def test_an_unpinned_process_runs_wherever_a_core_is_free(loads):
    """One process that the kernel moves to any free core is stopped only while every core
    is busy: its host is scaled to that busy fraction (cores free independently)."""
    ws = host(loads, 1)
    mean, p90 = migrated(ws, loads, seed=len(loads) * 13 + int(10 * loads[0]))
    model = predict([migrating(ws, [1 - u for u in loads])], WORK)
    assert model.mean == pytest.approx(mean, rel=0.01)
    assert model.quantiles["p90"] == pytest.approx(p90, rel=0.03)


@pytest.mark.parametrize(("loads", "processes"), [
    ((0.3, 0.3, 0.3, 0.3), 2),
    ((0.5, 0.5, 0.5, 0.5), 3),
    ((0.5,) * 8, 4),
    ((0.6, 0.2, 0.4, 0.3), 2),
])
def test_several_unpinned_processes_pool_the_free_cores(loads, processes):
    """Several processes the kernel moves to any free core share them: the task moves at
    min(N, free) cores. The model runs them as one server of their dedicated time at the
    all-busy fraction (Host.pooled); as N servers finishing with the slowest it erred
    1.5-13% long on the mean and 3-18% on the p90 on these. A pooled server stops whole where
    the task only slows, so it stays a little long (README, "Processes per host")."""
    ws = host(loads, processes)
    mean, p90 = migrated(ws, loads, seed=5 + processes)
    placed = migrating(ws, [1 - u for u in loads])
    assert placed.pooled
    model = predict([placed], WORK)
    assert mean * 0.995 <= model.mean <= 1.03 * mean
    assert p90 * 0.99 <= model.quantiles["p90"] <= 1.07 * p90


def test_single_process_on_two_cores_with_all_load_on_one(capsys):
    """The issue's case: the kernel's balancer puts an unpinned process on the idle core, so
    it runs as if pinned there; the old answers (the average core, or the share split over
    both cores) were a guess between the cores and faster than even the idle core."""
    loads = (0.5, 0.0)
    ws = host(loads, 1)
    work = 3600.0
    loaded_mean, loaded_p90 = simulated(ws, rates(*loads), [0], seed=3, work=work)
    idle_mean, idle_p90 = simulated(ws, rates(*loads), [1], seed=4, work=work)
    moving_mean, _ = migrated(ws, loads, seed=6, work=work, runs=2_000)
    unpinned = predict([migrating(ws, [1 - u for u in loads])], work)
    on_pinned = predict([pinned(ws, loads)], work)
    average = predict([ws], work)
    split = predict([host(loads, 2)], work)
    with capsys.disabled():
        print(f"\n2 cores, load 0.5 on core 0, 1 h single process: simulated loaded core mean "
              f"{loaded_mean:.0f} s p90 {loaded_p90:.0f} s, idle core {idle_mean:.0f} s, "
              f"moving to a free core {moving_mean:.0f} s; model unpinned {unpinned.mean:.0f} "
              f"s, pinned {on_pinned.mean:.0f} s, average core {average.mean:.0f} s, split "
              f"over both cores {split.mean:.0f} s")
    assert moving_mean == pytest.approx(idle_mean, rel=1e-9)
    for model in (unpinned, on_pinned):
        assert model.mean == pytest.approx(idle_mean, rel=1e-9)
        assert model.quantiles["p90"] == pytest.approx(idle_p90, rel=1e-6)
    assert idle_mean < average.mean < loaded_mean
    assert split.mean < idle_mean


def test_migrating_simulator_starts_from_the_work_each_core_holds():
    """Without arrivals the held work decides alone: one process waits only until some core
    is free, two share whichever cores are."""
    ws = host((0.0, 0.0), 1)
    rng = np.random.default_rng(1)

    def run(processes, held, work):
        times = simulate_migrating(host((0.0, 0.0), processes), work,
                                   core_rates_per_second=[0.0, 0.0], runs=3, rng=rng,
                                   start_seconds=held)
        return set(np.round(times, 9))

    assert run(1, [100.0, 0.0], 60.0) == {60.0}
    assert run(1, [100.0, 50.0], 60.0) == {110.0}
    # one process on the free core until 100 s, then both: 100 + 20 / 2
    assert run(2, [100.0, 0.0], 120.0) == {110.0}
    for bad in ([100.0], [100.0, -1.0], [100.0, float("nan")]):
        with pytest.raises(InvalidArgumentError, match="start_seconds"):
            simulate_migrating(ws, 60.0, core_rates_per_second=[0.0, 0.0], runs=1, rng=rng,
                               start_seconds=bad)
    with pytest.raises(InvalidArgumentError, match="warm"):
        simulate_migrating(ws, 60.0, core_rates_per_second=[0.0, 0.0], runs=1, rng=rng,
                           start_seconds=[1.0, 0.0], warm=True)


def test_held_work_on_one_core_agrees_with_the_chain_simulator():
    """Two independent walks of one core holding 600 s of local work at launch, at load
    0.4: the migrating sweep and the arrival-by-arrival chains (scheduler.simulation)."""
    ws = host((0.4,), 1)
    work = 1800.0
    swept = simulate_migrating(ws, work, core_rates_per_second=rates(0.4), runs=4_000,
                               rng=np.random.default_rng(21), start_seconds=[600.0])
    chained = simulate([ws], [work], runs=40_000, rng=np.random.default_rng(22),
                       initial_work_seconds=[[600.0]]).completion_seconds
    error = np.hypot(swept.std() / np.sqrt(swept.size), chained.std() / np.sqrt(chained.size))
    assert abs(swept.mean() - chained.mean()) < 4 * error
    assert np.quantile(swept, 0.9) == pytest.approx(np.quantile(chained, 0.9), rel=0.03)


@pytest.mark.parametrize(("loads", "held"), [
    ((0.3, 0.3), [300.0, 0.0]),
    ((0.5, 0.5), [100.0, 0.0]),
    ((0.4, 0.4, 0.4), [300.0, 300.0, 0.0]),
    ((0.6, 0.0), [300.0, 0.0]),
])
def test_a_job_held_on_another_core_is_predicted_on_the_safe_side(loads, held, capsys):
    """One unpinned process while a local job of 2-minute demands runs on another core: on
    evenly loaded cores the held phase's rule (scheduler.held_phase) errs long by 7-16% on
    the mean here, where the geometric mix erred 15-34%; on the uneven (0.6, 0) host the
    geometric mix stays, 50% long (README, "Processes per host", and the measurement log's
    entries of 2026-11-30 on jobs held on other cores)."""
    ws = host(loads, 1)
    work = 600.0
    times = simulate_migrating(ws, work, core_rates_per_second=rates(*loads), runs=3_000,
                               rng=np.random.default_rng(int(sum(held))),
                               start_seconds=held)
    jobs = sorted((b for b in held if b > 0), reverse=True)
    model = predict([migrating(ws, [1 - u for u in loads])], work,
                    backlog=[Backlog.exact(jobs)])
    with capsys.disabled():
        print(f"\nloads {loads}, held {held}, 600 s, one process: simulated mean "
              f"{times.mean():.0f} s p90 {np.quantile(times, 0.9):.0f} s; model "
              f"{model.mean:.0f} s p90 {model.quantiles['p90']:.0f} s")
    assert model.mean >= times.mean()
    assert model.quantiles["p90"] >= np.quantile(times, 0.9)


SHORT_DEMAND = 20.0


@pytest.mark.parametrize(("loads", "held", "work", "processes"), [
    ((0.3, 0.3), [300.0, 0.0], 600.0, 1),
    ((0.3, 0.3), [3000.0, 0.0], 600.0, 1),
    ((0.4, 0.4, 0.4), [300.0, 0.0, 0.0], 600.0, 1),
    ((0.4, 0.4, 0.4), [300.0, 300.0, 0.0], 600.0, 1),
    ((0.5, 0.5), [1000.0, 0.0], 600.0, 1),
    ((0.5, 0.5), [300.0, 100.0], 600.0, 1),
    ((0.4, 0.4, 0.4, 0.4), [300.0, 0.0, 0.0, 0.0], 1200.0, 2),
])
def test_jobs_held_on_evenly_loaded_cores_against_the_migrating_simulator(loads, held, work,
                                                                          processes):
    """Unpinned processes on evenly loaded cores while jobs hold some of them at launch
    (20 s local demands): the processes start on the least-held cores and meet the free
    cores' load while the others work off their jobs. The rule is an approximation (the
    held phase taken at its mean length): within 0-5% of the simulator's mean and -3% to
    +9% of its p90 on these, where the geometric mix erred 3-350% long."""
    ws = Host("ws", lam=sum(loads) / SHORT_DEMAND, mu=1 / SHORT_DEMAND, sigma=SHORT_DEMAND,
              rho=sum(loads) / len(loads), cores=len(loads), processes=processes)
    times = simulate_migrating(ws, work, core_rates_per_second=[u / SHORT_DEMAND
                                                                for u in loads],
                               runs=4_000, rng=np.random.default_rng(int(sum(held)) + 5),
                               start_seconds=held)
    placed = migrating(ws, [1 - u for u in loads])
    assert placed.core_rho == pytest.approx(ws.rho)
    jobs = sorted((b for b in held if b > 0), reverse=True)
    model = predict([placed], work, backlog=[Backlog.exact(jobs)])
    assert -0.01 <= model.mean / times.mean() - 1 <= 0.05
    assert -0.03 <= model.quantiles["p90"] / np.quantile(times, 0.9) - 1 <= 0.09


def test_uneven_cores_keep_the_geometric_mix():
    """Which core a job holds is not in a snapshot: on unevenly loaded cores the host keeps
    no core load (so no held-phase rule), and the model errs long whichever core holds the
    job, where the rule's average core erred 13% short with the job on the idle core."""
    loads = (0.6, 0.0)
    ws = host(loads, 1)
    placed = migrating(ws, [1 - u for u in loads])
    assert placed.core_rho is None
    model = predict([placed], 600.0, backlog=[Backlog.exact([300.0])])
    for held in ([300.0, 0.0], [0.0, 300.0]):
        times = simulate_migrating(ws, 600.0, core_rates_per_second=rates(*loads), runs=3_000,
                                   rng=np.random.default_rng(7), start_seconds=held)
        assert model.mean >= times.mean()
        assert model.quantiles["p90"] >= np.quantile(times, 0.9)
