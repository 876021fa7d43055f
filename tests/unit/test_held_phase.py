"""Where fewer unpinned processes than cores run while jobs hold cores at launch, and the
load they meet then (scheduler.held_phase; checked against the migrating simulator in
tests/integration/test_placement_vs_simulation.py)."""

from dataclasses import replace

import numpy as np
import pytest

from ghs.placement import scaled
from scheduler import Host, InvalidHostError, migrating, predict
from scheduler.backlog import Backlog
from scheduler.held_phase import load_ratio, process_mult
from scheduler.prediction import host_arrays


def two_cores(rho=0.3, processes=1, core_rho=0.3):
    return Host("ws", lam=2 * rho / 20.0, mu=1 / 20.0, sigma=20.0, rho=rho, cores=2,
                processes=processes, core_rho=core_rho)


def test_core_rho_is_checked_and_named():
    with pytest.raises(InvalidHostError, match="core_rho must be in"):
        two_cores(core_rho=1.2)
    with pytest.raises(InvalidHostError, match="core_rho must be finite"):
        two_cores(core_rho=float("nan"))
    assert two_cores(core_rho=None).core_rho is None


def test_the_process_takes_the_least_held_core():
    arrays = host_arrays([two_cores()], [Backlog.exact([300.0])])
    mult = process_mult(arrays)
    held = arrays.backlog.low + arrays.backlog.extra_mean
    # the one process sits on the group holding nothing, none on the held core
    assert mult[0][held[0] == 0].sum() == 1.0
    assert mult[0][held[0] > 0].sum() == 0.0


def test_without_core_load_the_geometric_mix_stays():
    arrays = host_arrays([two_cores(core_rho=None)], [Backlog.exact([300.0])])
    mult = process_mult(arrays)
    assert np.allclose(mult[arrays.backlog.mult > 0], 0.5)
    assert load_ratio(arrays, np.array([600.0])) is None


def test_the_held_phase_raises_the_load_and_fades_with_the_run():
    arrays = host_arrays([two_cores(rho=0.09)], [Backlog.exact([300.0])])
    short, long_run = load_ratio(arrays, np.array([[60.0], [1e7]]))[:, 0]
    # while the other core is held the process meets its own core's 0.3, not both cores'
    # 0.09: a short run almost wholly in the held phase sees nearly 0.3 / 0.09
    assert 3.0 < short <= 0.3 / 0.09 + 1e-12
    assert long_run == pytest.approx(1.0, abs=1e-3)


def test_a_job_on_every_core_leaves_the_ratio_at_the_process_own_core():
    host = Host("ws", lam=3 * 0.4 / 20.0, mu=1 / 20.0, sigma=20.0, rho=0.4, cores=3,
                processes=1, core_rho=0.4)
    arrays = host_arrays([host], [Backlog.exact([300.0, 200.0, 100.0])])
    mult = process_mult(arrays)
    held = arrays.backlog.low + arrays.backlog.extra_mean
    assert mult[0][held[0] == 100.0].sum() == 1.0
    ratio = load_ratio(arrays, np.array([600.0]))
    assert ratio is not None and ratio[0] >= 1.0


def test_migrating_keeps_core_load_only_on_even_cores():
    host = Host("ws", lam=0.6 / 20.0, mu=1 / 20.0, sigma=20.0, rho=0.3, cores=2, processes=1)
    assert migrating(host, [0.7, 0.7]).core_rho == pytest.approx(0.3)
    assert migrating(host, [0.4, 1.0]).core_rho is None
    # one process per core: the average core, nothing kept
    assert migrating(replace(host, processes=2), [0.7, 0.7]).core_rho is None


def test_a_scaled_view_keeps_its_own_core_load():
    host = two_cores(rho=0.3, core_rho=0.25)
    (view,) = scaled([host], [0.4])
    assert view.rho == pytest.approx(0.12)
    assert view.core_rho == pytest.approx(0.3)
    (plain,) = scaled([two_cores(core_rho=None)], [0.4])
    assert plain.core_rho is None


def test_an_idle_start_is_unchanged_by_core_load():
    with_load = predict([two_cores(rho=0.09)], 600.0)
    without = predict([two_cores(rho=0.09, core_rho=None)], 600.0)
    assert with_load.mean == without.mean
    assert with_load.quantiles == without.quantiles


def test_a_selection_scores_held_hosts_as_a_prediction_of_its_set_does():
    """The selection's batches (hosts gathered per subset) reach the same held-phase laws as
    one prediction of the chosen set."""
    from scheduler import schedule

    def host(name, rho, cores):
        return migrating(Host(name, lam=cores * rho / 20.0, mu=1 / 20.0, sigma=20.0, rho=rho,
                              cores=cores, processes=1), [1 - rho] * cores)

    hosts = [host("a", 0.3, 2), host("b", 0.4, 3), host("c", 0.2, 2), host("d", 0.5, 4)]
    starts = {"a": Backlog.exact([400.0]), "b": Backlog.exact([100.0, 50.0]),
              "c": Backlog.idle(), "d": Backlog.exact([900.0])}
    plan = schedule(hosts, 3600.0, "optimal", backlog=starts)
    chosen = [h for h in hosts if h.name in plan.prediction.hosts]
    again = predict(chosen, 3600.0, backlog=[starts[h.name] for h in chosen])
    assert again.mean == pytest.approx(plan.prediction.mean, rel=1e-9)
    assert all(h.core_rho is not None for h in hosts)


def test_pooled_is_checked_and_set_by_migrating():
    with pytest.raises(InvalidHostError, match="pooled must be true or false"):
        replace(two_cores(), pooled="yes")
    host = Host("ws", lam=0.09 / 20.0, mu=1 / 20.0, sigma=20.0, rho=0.3, cores=3,
                processes=2)
    assert migrating(host, [0.7, 0.7, 0.7]).pooled
    assert not migrating(replace(host, processes=3), [0.7, 0.7, 0.7]).pooled
    assert not host.pooled


def test_pooled_processes_are_one_server_of_their_dedicated_time():
    """N pooled processes of w / N each are the law of one process of w / N on the host."""
    host = Host("ws", lam=4 * 0.2 / 30.0, mu=1 / 30.0, sigma=30.0, rho=0.2, cores=4,
                processes=2, pooled=True)
    pooled = predict([host], 7200.0)
    one = predict([replace(host, processes=1, pooled=False)], 3600.0)
    assert pooled.mean == pytest.approx(one.mean, rel=1e-12)
    assert pooled.quantiles["p90"] == pytest.approx(one.quantiles["p90"], rel=1e-9)
    apart = predict([replace(host, pooled=False)], 7200.0)
    assert apart.mean > pooled.mean  # the slower of two servers
