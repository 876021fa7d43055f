"""The adapters against a real manager fed by simulated agents: ``ghs condor-attrs`` output
read by HTCondor's ``classad`` module, and a Dask run planned by the manager."""

from __future__ import annotations

import subprocess
import sys

import pytest
from daemons import wait_for

from ghs.config import load_config

try:
    import classad2 as classad
except ImportError:  # pragma: no cover - depends on the installed htcondor
    classad = pytest.importorskip("classad")

HOSTS = ("ws-sim00", "ws-sim01")


@pytest.fixture
def manager_with_hosts(daemons):
    _, endpoint = daemons.manager()
    daemons.agent(endpoint, "--simulate", "2", "--speedup", "3600", "--seed", "4",
                  "--host-id", "ws", outbox="ws.sqlite", log="ws.log")
    with daemons.client(endpoint) as client:
        def estimated():
            rows = [h for h in client.status().hosts if h["usable"]]
            return len(rows) == 2 and rows
        rows = wait_for(estimated, 60, "two hosts with estimates")
    return daemons, endpoint, {row["name"]: row for row in rows}


def _ghs(daemons, *args):
    return subprocess.run([sys.executable, "-m", "ghs", *args], capture_output=True, text=True,
                          env=daemons.env, timeout=60)


def test_condor_attrs_from_a_manager(manager_with_hosts):
    daemons, endpoint, rows = manager_with_hosts
    done = _ghs(daemons, "condor-attrs", "--manager", endpoint, "--host", HOSTS[0])
    assert done.returncode == 0, done.stderr
    ad = classad.parseOne(done.stdout)
    assert ad["GhsHost"] == HOSTS[0] and ad["GhsStale"] is False and ad["GhsUsable"] is True
    # the simulated hours run on, so the estimate moves between two reads: check the ad itself
    assert 0 <= ad["GhsRho"] < 1 and rows[HOSTS[0]]["rho"] is not None
    assert ad["GhsAvailableFraction"] == pytest.approx(1 - ad["GhsRho"])
    assert ad["GhsProvisional"] is True  # minutes of history, not 24 hours
    assert classad.ExprTree("GhsP90SecondsPerHourOfWork >= 3600 / GhsTau").eval(ad) is True
    unknown = _ghs(daemons, "condor-attrs", "--manager", endpoint, "--host", "nowhere")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().startswith("ghs: error: unknown host 'nowhere'")
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_a_dask_run_planned_by_the_manager(manager_with_hosts):
    distributed = pytest.importorskip("distributed")
    from ghs.adapters.dask import DivisibleRun

    _, endpoint, _ = manager_with_hosts
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        names = sorted(info["name"] for info in client.scheduler_info()["workers"].values())
        mapping = {str(name): host for name, host in zip(names, HOSTS)}
        run = DivisibleRun(client, abs, range(-40, 0), work_per_item=600.0, manager=endpoint,
                           worker_hosts=mapping, method="prefix", progress=False,
                           config=load_config(None, env={}))
        results = run.run()
    assert results == [abs(item) for item in range(-40, 0)]
    assert {host.name for host in run.plan.hosts} <= set(HOSTS)
    assert all(host in HOSTS for host in run.host_of_item)
