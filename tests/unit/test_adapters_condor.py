"""``ghs condor-attrs`` and ``ghs worker --dry-run``: ClassAd output read by HTCondor's own
``classad`` module, and one clear line with exit code 2 on bad input."""

import json
import os

import pytest
from click.testing import CliRunner

from ghs.adapters.condor import format_classad
from ghs.cli import main

try:  # htcondor >= 24 ships the version-2 bindings; older wheels the original module
    import classad2 as classad
except ImportError:  # pragma: no cover - depends on the installed htcondor
    classad = pytest.importorskip("classad")

REQUIREMENTS = ("GhsUsable && GhsStale =!= true && GhsAvailableFraction >= 0.5 "
                "&& GhsP90SecondsPerHourOfWork < 2 * 3600")
HOSTS = {"hosts": [
    {"name": "ws1", "lam": 0.0017, "mu": 0.0083, "sigma": 240.0, "rho": 0.2, "tau": 1.25},
    {"name": "busy", "lam": 0.004, "mu": 0.005, "sigma": 200.0, "rho": 0.8},
    {"name": "full", "lam": 0.004, "mu": 0.004, "sigma": 200.0, "rho": 1.0},
]}


def run(*args, **env):
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.output


@pytest.fixture
def hosts_file(tmp_path):
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(HOSTS))
    return str(path)


def test_attributes_parse_as_a_classad_and_feed_requirements(hosts_file):
    code, output = run("condor-attrs", "--hosts-file", hosts_file, "--host", "ws1")
    assert code == 0, output
    assert all(" = " in line for line in output.splitlines())
    ad = classad.parseOne(output)
    assert ad["GhsHost"] == "ws1" and ad["GhsUsable"] is True and ad["GhsStale"] is False
    assert ad["GhsRho"] == pytest.approx(0.2) and ad["GhsTau"] == pytest.approx(1.25)
    assert ad["GhsAvailableFraction"] == pytest.approx(0.8)
    # E[T] = t / (1 - rho) exactly, with t = 1 h of work / tau
    assert ad["GhsMeanSecondsPerHourOfWork"] == pytest.approx(3600 / 1.25 / 0.8, rel=1e-3)
    assert ad["GhsP90SecondsPerHourOfWork"] > 3600 / 1.25
    assert ad["GhsUpdatedEpoch"] == int(os.stat(hosts_file).st_mtime)
    assert classad.ExprTree(REQUIREMENTS).eval(ad) is True
    assert classad.ExprTree("GhsAvailableFraction * GhsTau").eval(ad) == pytest.approx(1.0)


def test_a_loaded_or_saturated_host_fails_the_requirements(hosts_file):
    _, output = run("condor-attrs", "--hosts-file", hosts_file, "--host", "busy",
                    "--work-hour", "8h")
    busy = classad.parseOne(output)
    assert busy["GhsUsable"] is True
    assert classad.ExprTree(REQUIREMENTS).eval(busy) is False
    code, output = run("condor-attrs", "--hosts-file", hosts_file, "--host", "full")
    assert code == 0
    full = classad.parseOne(output)
    assert full["GhsUsable"] is False and "saturated" in full["GhsReason"]
    assert classad.ExprTree(REQUIREMENTS).eval(full) is False
    assert classad.ExprTree("isUndefined(GhsP90SecondsPerHourOfWork)").eval(full) is True


def test_json_output_has_the_same_attributes(hosts_file):
    code, output = run("condor-attrs", "--hosts-file", hosts_file, "--host", "ws1", "--json")
    assert code == 0
    payload = json.loads(output)
    assert payload["GhsHost"] == "ws1" and payload["GhsStale"] is False


def test_strings_round_trip_through_classad_quoting():
    tricky = 'a "quoted" back\\slash'
    ad = classad.parseOne(format_classad({"GhsReason": tricky + "\nline two\\",
                                          "GhsRho": float("nan"), "GhsStale": None}))
    assert ad["GhsReason"] == tricky + " line two"
    assert classad.ExprTree("isUndefined(GhsRho) && isUndefined(GhsStale)").eval(ad) is True


@pytest.mark.parametrize("args, expected", [
    (("--host", "nowhere"), "unknown host 'nowhere'"),
    (("--host", "ws1", "--work", "0"), "--work"),
])
def test_bad_input_is_one_line_and_exit_2(hosts_file, args, expected):
    code, output = run("condor-attrs", "--hosts-file", hosts_file, *args)
    assert code == 2
    assert expected in output and len(output.strip().splitlines()) == 1


def test_a_dead_manager_is_one_line_and_exit_2():
    code, output = run("condor-attrs", "--manager", "tcp://127.0.0.1:9", "--host", "ws1",
                       GHS_CLIENT_TIMEOUT_SECONDS="0.3", GHS_CONFIG=os.devnull)
    assert code == 2
    assert "did not answer" in output and len(output.strip().splitlines()) == 1


def test_worker_dry_run_forwards_options_and_the_marker():
    code, output = run("worker", "tcp://sched:8786", "--host", "ws1", "--nthreads", "2",
                       "--resources", "GPU=1", "--dry-run", "--json", "--", "--no-nanny")
    assert code == 0, output
    payload = json.loads(output)
    command = payload["command"]
    assert command[command.index("--nthreads") + 1] == "2"
    assert command[command.index("--resources") + 1] == "GPU=1,ghs_host:ws1=1"
    assert command[-1] == "--no-nanny" and "tcp://sched:8786" in command
    assert payload["environment"] == {"GHS_REMOTE_TASK": "1"}


@pytest.mark.parametrize("args, expected", [
    (("tcp://s:1", "--resources", "GPU"), "bad resource 'GPU'"),
    (("tcp://s:1", "--host", "two words"), "bad ghs host name"),
    (("tcp://s:1", "--nthreads", "0"), "--nthreads"),
])
def test_worker_bad_input_is_one_line_and_exit_2(args, expected):
    code, output = run("worker", *args, "--dry-run")
    assert code == 2
    assert expected in output and len(output.strip().splitlines()) == 1
