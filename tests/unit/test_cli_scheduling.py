"""The CLI's contract: JSON keys, tables, and one clear line with exit code 2 on bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ghs.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "hosts.json")


def run(*args):
    """(exit code, stdout) on success; (exit code, stdout and stderr) on failure."""
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def write(tmp_path, text, name="hosts.json"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_predict_json_contract():
    code, output = run("predict", "--hosts-file", EXAMPLE, "--work", "8h", "--json")
    assert code == 0
    payload = json.loads(output)
    assert payload["work"] == 8 * 3600
    assert {"name", "share", "dedicated_seconds", "mean", "std"} <= set(payload["hosts"][0])
    assert set(payload["quantiles"]) == {"p50", "p90", "p95", "p99"}
    assert payload["criterion"] == pytest.approx(payload["mean"] + payload["std"])
    assert sum(h["share"] for h in payload["hosts"]) == pytest.approx(8 * 3600)


def test_predict_table_and_host_selection():
    code, output = run("predict", "--hosts-file", EXAMPLE, "--work", "2h", "--host", "lab-ws01",
                       "--host", "lab-ws05", "--dist", "gamma")
    assert code == 0
    assert "lab-ws01" in output and "lab-ws05" in output and "lab-ws02" not in output
    assert "gamma" in output


@pytest.mark.parametrize("method", ["auto", "heuristic", "optimal", "prefix"])
def test_schedule_json_with_units(method):
    code, output = run("schedule", "--hosts-file", EXAMPLE, "--work", "8h", "--method", method,
                       "--units", "1000", "--json")
    assert code == 0
    payload = json.loads(output)
    assert payload["method"] == method
    assert payload["evaluations"] >= 1 and payload["elapsed_seconds"] >= 0
    assert sum(h["units"] for h in payload["hosts"]) == 1000
    assert payload["units"] == 1000


def test_simulate_json_beside_the_model():
    code, output = run("simulate", "--hosts-file", EXAMPLE, "--work", "4h", "--runs", "500",
                       "--seed", "3", "--idle", "--json")
    assert code == 0
    payload = json.loads(output)
    assert payload["runs"] == 500 and payload["warm"] is False
    assert set(payload["quantiles"]) == {"p50", "p90", "p95", "p99"}
    assert payload["mean"] == pytest.approx(payload["predicted"]["mean"], rel=0.15)
    again = json.loads(run("simulate", "--hosts-file", EXAMPLE, "--work", "4h", "--runs", "500",
                           "--seed", "3", "--idle", "--json")[1])
    assert again["mean"] == payload["mean"]


@pytest.mark.parametrize("start", [[], ["--idle"]])
def test_simulate_splits_the_task_as_predict_does(tmp_path, start):
    # a host at utilisation 0.95 holds a steady-state backlog of 380 s: predict leaves it
    # out of a warm start's split, and simulate had given it 212 s of the hour regardless
    path = write(tmp_path, json.dumps({"hosts": [
        {"name": "calm", "lam": 0.01, "mu": 0.05, "sigma": 20, "rho": 0.2},
        {"name": "hot", "lam": 0.0475, "mu": 0.05, "sigma": 20, "rho": 0.95}]}))
    # predict's start comes from the config (scheduler.start_state)
    predicted = json.loads(CliRunner().invoke(
        main, ["predict", "--hosts-file", path, "--work", "1h", "--json"],
        env={"GHS_SCHEDULER_START_STATE": "idle" if start else "steady-state"}).stdout)
    simulated = json.loads(run("simulate", "--hosts-file", path, "--work", "1h", "--runs",
                               "300", "--seed", "1", "--json", *start)[1])
    shares = {h["name"]: h["share"] for h in simulated["hosts"]}
    assert shares == pytest.approx({h["name"]: h["share"] for h in predicted["hosts"]})
    assert (shares["hot"] == 0.0) == (not start)
    assert simulated["mean"] == pytest.approx(simulated["predicted"]["mean"], rel=0.05)


def test_saturated_hosts_are_reported(tmp_path):
    path = write(tmp_path, json.dumps({"hosts": [
        {"name": "a", "lam": 0.001, "mu": 0.01, "sigma": 100, "rho": 0.1},
        {"name": "b", "lam": 0.01, "mu": 0.01, "sigma": 100, "rho": 1.2}]}))
    code, output = run("schedule", "--hosts-file", path, "--work", "1h", "--json")
    assert code == 0
    assert json.loads(output)["excluded"][0]["name"] == "b"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["predict", "--hosts-file", "missing.json", "--work", "1h"], "does not exist"),
        (["predict", "--hosts-file", EXAMPLE, "--work", "0"],
         "outside the allowed range [1e-06 s, 1e+15 s]"),
        # past any task: the model's moments overflowed and --json could not print the NaN
        (["predict", "--hosts-file", EXAMPLE, "--work", "1e300s", "--json"],
         "outside the allowed range [1e-06 s, 1e+15 s]"),
        (["predict", "--hosts-file", EXAMPLE, "--work", "-5h"], "outside the allowed range"),
        (["predict", "--hosts-file", EXAMPLE, "--work", "soon"], "cannot parse"),
        # the flag as typed, not the parameter's name ("works")
        (["backtest", "--trace", EXAMPLE, "--work", "soon"], "--work: cannot parse"),
        (["predict", "--hosts-file", EXAMPLE, "--work", "1h", "--host", "nope"],
         "unknown host 'nope'"),
        (["predict", "--work", "1h"], "--hosts-file"),
        (["schedule", "--hosts-file", EXAMPLE, "--work", "1h", "--method", "magic"],
         "magic"),
        (["simulate", "--hosts-file", EXAMPLE, "--work", "1h", "--runs", "0"], "runs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    code, output = run(*args)
    assert code == 2
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("ghs: error:") and message in lines[0]
    assert "Traceback" not in output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"hosts": {}}', '"hosts" list'),
        ('{"hosts": [{"name": "a", "lam": 0.1}]}', "missing field 'mu'"),
        ('{"hosts": [{"name": "a", "lam": -1, "mu": 1, "sigma": 1, "rho": 0.1}]}', "lam"),
        ('{"hosts": [{"name": "a", "lam": 1, "mu": 1, "sigma": 1, "rho": 0.1, "cpu": 2}]}',
         "unknown field 'cpu'"),
        ('{"hosts": [{"name": "a", "lam": 1, "mu": 1, "sigma": 1, "rho": 0.1, "tau": 0}]}',
         "tau"),
        ('{"hosts": [{"name": "a", "lam": 1, "mu": 1, "sigma": 1, "rho": 2.0}]}',
         "no usable hosts"),
        ('{"hosts": [{"name": "a", "lam": 1, "mu": 1, "sigma": 1, "rho": true}]}', "rho"),
    ],
)
def test_malformed_host_files(tmp_path, text, message):
    code, output = run("predict", "--hosts-file", write(tmp_path, text), "--work", "1h")
    assert code == 2
    assert output.count("\n") == 1 and message in output, output


def test_every_saturated_host_makes_schedule_exit_2(tmp_path):
    path = write(tmp_path, json.dumps({"hosts": [
        {"name": "b", "lam": 0.01, "mu": 0.01, "sigma": 100, "rho": 1.0}]}))
    code, output = run("schedule", "--hosts-file", path, "--work", "1h")
    assert code == 2 and "no usable hosts" in output


def test_real_process_exit_code_and_stderr():
    completed = subprocess.run(
        [sys.executable, "-m", "ghs", "predict", "--hosts-file", "nope.json", "--work", "1h"],
        capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.strip().count("\n") == 0
    assert "does not exist" in completed.stderr


@pytest.mark.parametrize("command", ["predict", "simulate"])
def test_a_demand_past_double_precision_is_one_line_without_warnings(tmp_path, command):
    # mu 1e308 with sigma 1 s: numpy's overflow warnings came before predict's refusal,
    # and simulate walked nan demands without end
    path = write(tmp_path, json.dumps({"hosts": [
        {"name": "a", "lam": 0.001, "mu": 1e308, "sigma": 1.0, "rho": 0.2}]}))
    completed = subprocess.run(
        [sys.executable, "-m", "ghs", command, "--hosts-file", path, "--work", "1h"],
        capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0, completed.stderr
    assert "host 'a'" in completed.stderr and "double precision" in completed.stderr


def test_optimal_past_its_budget_is_one_line_and_exit_2():
    result = CliRunner().invoke(
        main, ["schedule", "--hosts-file", EXAMPLE, "--work", "8h", "--method", "optimal"],
        env={"GHS_SCHEDULER_OPTIMAL_BUDGET_SECONDS": "0.000001"})
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "passed its time budget" in result.output
    refused = CliRunner().invoke(
        main, ["schedule", "--hosts-file", EXAMPLE, "--work", "8h"],
        env={"GHS_SCHEDULER_OPTIMAL_BUDGET_SECONDS": "0"})
    assert refused.exit_code == 2 and "optimal_budget_seconds" in refused.output
