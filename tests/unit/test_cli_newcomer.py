"""What a newcomer trips on (issue 10 items 1-3): honest output, a responsive CLI, plots."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_manager_parts import facts, rows, serving

from ghs.cli import main
from ghs.cli.common import config_first
from ghs.client import Client
from ghs.hostfile import load_hosts
from ghs.manager.store import ManagerStore
from scheduler import predict
from scheduler.simulation import simulate
from scheduler.workload import demand_for_host

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "hosts.json")
HOUR = 3600.0


def invoke(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


def write_hosts(tmp_path, hosts, name="hosts.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"hosts": hosts}))
    return str(path)


def host(name, rho=0.2, lam=0.002, mu=0.01, sigma=150.0, tau=1.0, cores=1):
    return {"name": name, "lam": lam, "mu": mu, "sigma": sigma, "rho": rho, "tau": tau,
            "cores": cores}


def one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("ghs: error:"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- item 1: honest output ---------------------------------------------------------------

def test_predict_and_simulate_list_each_saturated_host_with_its_reason(tmp_path):
    path = write_hosts(tmp_path, [host("a"), host("b", rho=0.3, lam=0.003),
                                  host("full", rho=1.2, lam=0.012)])
    predicted = json.loads(invoke("predict", "--hosts-file", path, "--work", "1h",
                                  "--json").stdout)
    assert [h["name"] for h in predicted["hosts"]] == ["a", "b"]
    assert predicted["excluded"] == [{"name": "full",
                                      "reason": "rho 1.2 >= 1: saturated by local jobs"}]
    table = invoke("predict", "--hosts-file", path, "--work", "1h").stdout
    assert "excluded full: rho 1.2 >= 1" in table
    simulated = json.loads(invoke("simulate", "--hosts-file", path, "--work", "1h", "--runs",
                                  "200", "--seed", "1", "--json").stdout)
    assert [e["name"] for e in simulated["excluded"]] == ["full"]
    table = invoke("simulate", "--hosts-file", path, "--work", "1h", "--runs", "200").stdout
    assert "excluded full: rho 1.2 >= 1" in table


def test_predict_and_schedule_say_what_the_model_assumes():
    for command in ("predict", "schedule"):
        payload = json.loads(invoke(command, "--hosts-file", EXAMPLE, "--work", "8h",
                                    "--dist", "gamma", "--json").stdout)
        assert payload["assumptions"] == {
            "start_state": "a steady-state backlog (Pollaczek-Khinchine)",
            "calibration": "none", "distribution": "gamma",
            "load_model": "flat: the host file's parameters held for the whole task",
            "processes": "one process per core: each host's share split evenly over all its "
                         "cores"}
        assert all(row["provisional"] is False for row in payload["hosts"])
        assert {row["backlog"]["source"] for row in payload["hosts"]} == {"steady-state"}
        table = invoke(command, "--hosts-file", EXAMPLE, "--work", "8h").stdout
        assert "assumes: start a steady-state backlog" in table
        assert "calibration none" in table
        idle = json.loads(invoke(command, "--hosts-file", EXAMPLE, "--work", "8h", "--json",
                                 env={"GHS_SCHEDULER_START_STATE": "idle"}).stdout)
        assert idle["assumptions"]["start_state"].startswith("idle")
        assert idle["mean"] < payload["mean"]


def test_an_uncalibrated_answer_names_the_hosts_outside_where_its_fit_held(tmp_path):
    # `ghs experiment envelope`: the lognormal fit's p90/p95 held within 3% of the simulator
    # for shares of 100x or more the mean local demand with a demand CoV of at most 3
    path = write_hosts(tmp_path, [host("long"), host("heavy", sigma=800.0),
                                  host("idle", rho=0.0, lam=0.0)])
    inside = json.loads(invoke("predict", "--hosts-file", path, "--work", "200h", "--host",
                               "long", "--json").stdout)
    assert inside["assumptions"]["fit_range"].endswith("every host here is inside")
    # 4 h over the three: each busy host's share under 100x its 100 s mean demand; the idle
    # host has nothing to fit, and another fit than the one measured gets no claim
    payload = json.loads(invoke("predict", "--hosts-file", path, "--work", "4h",
                                "--json").stdout)
    note = payload["assumptions"]["fit_range"]
    length = {row["name"]: row["dedicated_seconds"] / 100.0 for row in payload["hosts"]}
    assert max(length["long"], length["heavy"]) < 100
    assert note.endswith(f"outside: long (share {length['long']:.2g}x), heavy (share "
                         f"{length['heavy']:.2g}x, CoV 8)")
    table = invoke("schedule", "--hosts-file", path, "--work", "4h").stdout
    assert "fit lognormal (p90/p95 within 3% of simulation" in table
    gamma = json.loads(invoke("predict", "--hosts-file", path, "--work", "4h", "--dist",
                              "gamma", "--json").stdout)
    assert "fit_range" not in gamma["assumptions"]


def test_simulate_defaults_follow_each_hosts_demand_spread(tmp_path):
    # CoV of demands 3 (sigma 300 s, mean 100 s): far from the exponential's 1
    path = write_hosts(tmp_path, [host("spread", rho=0.4, lam=0.004, mu=0.01, sigma=300.0)])
    common = ["simulate", "--hosts-file", path, "--work", "20m", "--runs", "3000", "--seed",
              "5", "--json"]
    default = json.loads(invoke(*common).stdout)
    explicit = json.loads(invoke(*common, "--service", "lognormal", "--cov", "3").stdout)
    exponential = json.loads(invoke(*common, "--service", "exponential").stdout)
    assert default["service"] == "lognormal" and default["demand_cov"] is None
    assert default["start_state"] == "warm" and default["warm"] is True
    assert "sigma" in default["demands"]
    assert default["mean"] == explicit["mean"] and default["std"] == explicit["std"]
    assert default["std"] != pytest.approx(exponential["std"], rel=0.05)
    # the model beside a warm simulation starts from the steady state too
    assert default["predicted"]["assumptions"]["start_state"].startswith("a steady-state")
    assert default["predicted"]["mean"] == pytest.approx(default["mean"], rel=0.1)
    table = invoke(*common[:-1]).stdout
    assert "simulated (warm start)" in table and "steady-state start" in table
    idle = json.loads(invoke(*common, "--idle").stdout)
    assert idle["predicted"]["assumptions"]["start_state"].startswith("idle")
    assert "local demands lognormal (each host's mean 1/mu and sigma)" in table


def test_piped_tables_keep_full_values(tmp_path):
    long_name = "laboratory-workstation-with-a-really-long-fully-qualified-name.example.org"
    path = write_hosts(tmp_path, [host(long_name), host("b")])
    result = invoke("predict", "--hosts-file", path, "--work", "123456")
    assert long_name in result.stdout and "…" not in result.stdout
    assert "123,456 ref-CPU-s" in result.stdout


def test_one_unit_per_duration_column():
    table = invoke("predict", "--hosts-file", EXAMPLE, "--work", "8h").stdout
    header = next(line for line in table.splitlines() if "dedicated" in line)
    assert "dedicated (min)" in header and "mean (min)" in header and "std (min)" in header
    # the table's rows (the assumptions under it name hosts too)
    rows = [line for line in table.splitlines() if line.startswith("│ lab-ws")]
    assert rows and not any(unit in row for row in rows for unit in ("m ", "h ", "s "))
    simulated = invoke("simulate", "--hosts-file", EXAMPLE, "--work", "8h", "--runs", "300",
                       "--seed", "2").stdout
    assert "mean (h)" in simulated and "p99 (h)" in simulated


def test_summary_keeps_large_host_sets_short(tmp_path):
    rng = np.random.default_rng(4)
    hosts = []
    for index in range(400):
        rho = float(rng.uniform(0.05, 0.6))
        mu = float(rng.uniform(0.005, 0.05))
        hosts.append(host(f"ws{index:04d}", rho=rho, lam=rho * mu, mu=mu, sigma=1 / mu))
    hosts += [host(f"busy{index}", rho=1.1, lam=0.011) for index in range(9)]
    path = write_hosts(tmp_path, hosts)
    full = invoke("predict", "--hosts-file", path, "--work", "100h").stdout
    short = invoke("predict", "--hosts-file", path, "--work", "100h", "--summary").stdout
    assert full.count("\n") > 400
    assert short.count("\n") < 30
    # no host rows (the assumptions may name a few hosts outside the fit's range)
    assert "│ ws0000" not in short and "and 4 more excluded (9 in all" in short
    payload = json.loads(invoke("predict", "--hosts-file", path, "--work", "100h",
                                "--summary", "--json").stdout)
    assert len(payload["hosts"]) == 400 and len(payload["excluded"]) == 9
    plan = invoke("schedule", "--hosts-file", path, "--work", "100h", "--summary").stdout
    assert plan.count("\n") < 30 and "sets evaluated" in plan and "ws0000 " not in plan


# --- provisional estimates, through a real manager and ghs.Client --------------------------

@pytest.fixture
def manager_endpoint(tmp_path):
    """A real manager over loopback: 'steady' has over 24 h of history, 'young' 18 h, 'full'
    is saturated."""
    store = ManagerStore(tmp_path / "m.sqlite")
    now = time.time()
    for name, rho in (("steady", 0.2), ("young", 0.2), ("full", 1.0)):
        store.upsert_host(facts(name, seen=now))
        store.add_measurements(rows(name, 4 if name == "young" else 48, rho=rho))
    # a second day's start takes 'steady' and 'full' past 24 h; 'young' stays at 18 h
    for name, rho in (("steady", 0.2), ("full", 1.0)):
        store.add_measurements(rows(name, 2, rho=rho, first_seq=48, start=1.0e9 + 24 * HOUR))
    with serving(store) as (endpoint, _):
        yield endpoint


def test_provisional_hosts_are_marked_through_the_client_and_the_cli(manager_endpoint):
    with Client(manager_endpoint, timeout_seconds=10) as client:
        answer = client.predict_answer(4 * HOUR)
        plan = client.schedule_answer(4 * HOUR, method="optimal")
    assert answer.provisional == {"young"} and plan.provisional == {"young"}
    assert [e.name for e in answer.excluded] == ["full"]
    assert answer.assumptions.load_model.startswith("forecast over the task's own run window")
    payload = json.loads(invoke("predict", "--manager", manager_endpoint, "--work", "4h",
                                "--json").stdout)
    flags = {row["name"]: row["provisional"] for row in payload["hosts"]}
    assert flags == {"steady": False, "young": True}
    assert [e["name"] for e in payload["excluded"]] == ["full"]
    table = invoke("schedule", "--manager", manager_endpoint, "--work", "4h").stdout
    young = next(line for line in table.splitlines() if "young" in line)
    assert "provisional (< 24 h history)" in young
    assert "excluded full:" in table
    simulated = json.loads(invoke("simulate", "--manager", manager_endpoint, "--work", "1h",
                                  "--runs", "100", "--json").stdout)
    assert [e["name"] for e in simulated["excluded"]] == ["full"]
    status = invoke("status", "--manager", manager_endpoint).stdout
    assert "history (h)" in status and " h " not in status and "…" not in status


# --- item 2: a responsive CLI --------------------------------------------------------------

def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("command", [["status"], ["predict", "--work", "1h"],
                                     ["schedule", "--work", "1h"],
                                     ["simulate", "--work", "1h"]])
def test_a_dead_manager_gets_one_line_within_the_timeout(command):
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    result = invoke(*command, "--manager", endpoint, "--timeout", "0.4")
    one_line_error(result, endpoint, "did not answer within 0.4 s")
    assert time.monotonic() - started < 5


def test_client_timeout_comes_from_the_environment_too():
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    result = invoke("status", "--manager", endpoint,
                    env={"GHS_CLIENT_TIMEOUT_SECONDS": "0.3"})
    one_line_error(result, "within 0.3 s")


def test_an_endpoint_without_a_scheme_gets_a_hint():
    for command in (["status"], ["predict", "--work", "1h"]):
        one_line_error(invoke(*command, "--manager", "localhost:5555"),
                       "did you mean tcp://localhost:5555?")


@pytest.mark.parametrize(("args", "fragment"), [
    (["bench", "--part", "sensors", "--sensor-duration", "0"], "--sensor-duration"),
    (["demo", "--work", "0"], "--work"),
    (["agent", "--manager", "tcp://127.0.0.1:1", "--interval", "0"],
     "outside the allowed range [1 s, 3600 s]"),
    (["measure", "--interval", "0.5"], "[1 s, 3600 s]"),
    (["status", "--manager", "tcp://127.0.0.1:1", "--timeout", "0"], "--timeout"),
    # a negative elapsed time or horizon was taken and answered (a total of -2125 s)
    (["eta", "--plan", EXAMPLE, "--hosts-file", EXAMPLE, "--elapsed", "-1h"],
     "-3600 s is outside the allowed range [0 s, inf]"),
    (["predict", "--hosts-file", EXAMPLE, "--work", "1h", "--by", "-1h"], "--by"),
])
def test_bad_durations_are_refused_at_once_with_the_range(args, fragment):
    started = time.monotonic()
    one_line_error(invoke(*args), fragment)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("args", [
    ["simulate", "--hosts-file", EXAMPLE, "--work", "1h", "--runs", "2"],
    ["bench", "--quick", "--part", "scheduler"],
    ["experiment", "distributions", "--size", "100"],
    ["experiment", "envelope", "--size", "100"],
    ["backtest", "--trace", "x.swf", "--work", "1h"],
    ["demo", "--work", "1h"],
])
def test_a_negative_seed_is_refused_with_the_range_not_a_traceback(args):
    # numpy's generators raise ValueError on a negative seed deep inside a run
    one_line_error(invoke(*args, "--seed", "-1"), "-1 is not in the range x>=0")


def test_bare_ghs_prints_its_help_not_an_error():
    result = invoke()
    assert result.exit_code in (0, 2)
    assert result.output.startswith("Usage:") and "ghs: error" not in result.output
    assert "predict" in result.output and "Commands:" in result.output


def test_config_works_after_the_subcommand(tmp_path):
    config = tmp_path / "ghs.toml"
    config.write_text("[scheduler]\ndistribution = 'weibull'\n")
    for args in (["--config", str(config), "predict"], ["predict", "--config", str(config)],
                 ["predict", f"--config={config}"]):
        payload = json.loads(invoke(*args, "--hosts-file", EXAMPLE, "--work", "1h",
                                    "--json").stdout)
        assert payload["distribution"] == "weibull"
    assert config_first(["status", "--", "--config", "x"]) == ["status", "--", "--config", "x"]


def test_messages_name_flags_not_python_arguments(tmp_path):
    assert invoke("keys", str(tmp_path)).exit_code == 0
    line = one_line_error(invoke("keys", str(tmp_path)), "--force")
    assert "overwrite=True" not in line
    config = tmp_path / "none.toml"
    config.write_text("")
    completed = subprocess.run(
        [sys.executable, "-m", "ghs", "manager", "--endpoint", "tcp://0.0.0.0:*",
         "--database", str(tmp_path / "m.sqlite")], capture_output=True, text=True,
        timeout=60, cwd=ROOT, env={"GHS_CONFIG": str(config),
                                   "HOME": str(tmp_path), "PATH": ""})
    assert completed.returncode == 2, completed.stderr
    assert "--insecure" in completed.stderr and "insecure=True" not in completed.stderr
    assert completed.stderr.strip().count("\n") == 0


def test_host_file_strings_are_refused_and_defaults_and_oddities_are_stated(tmp_path):
    quoted = write_hosts(tmp_path, [{**host("a"), "lam": "0.002"}], "quoted.json")
    one_line_error(invoke("predict", "--hosts-file", quoted, "--work", "1h"),
                   "lam must be a JSON number, got the string '0.002'")
    bare = {key: value for key, value in host("a").items() if key not in ("tau", "cores")}
    odd = host("odd", rho=0.6, lam=0.001, mu=0.01)  # lam / mu = 0.1, far below 0.6
    path = write_hosts(tmp_path, [bare, odd], "mixed.json")
    lab = load_hosts(path)
    assert lab.hosts[0].tau == 1.0 and lab.hosts[0].cores == 1
    warnings = " | ".join(lab.warnings)
    assert "no tau given for a: assuming tau 1" in warnings
    assert "no cores given for a: assuming cores 1" in warnings
    assert "'odd': rho 0.6 is far above lam / (cores mu) = 0.1" in warnings
    result = invoke("predict", "--hosts-file", path, "--work", "1h", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["work"] == HOUR
    assert "ghs: warning:" in result.stderr and "assuming tau 1" in result.stderr
    assert not load_hosts(EXAMPLE).warnings


def test_measure_shows_tau():
    result = invoke("measure", "--interval", "1", "--accounting", "off", "--json",
                    env={"GHS_SENSOR_TAU": "1.75"})
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["tau"] == 1.75 and payload["tau_source"] == "override"
    table = invoke("measure", "--interval", "1", "--accounting", "off",
                   env={"GHS_SENSOR_TAU": "1.75"}).stdout
    assert "tau: speed vs the reference machine" in table and "1.75" in table


# --- item 3: --by and --plot ---------------------------------------------------------------

def test_by_answers_the_chance_of_finishing_as_the_simulator_sees_it():
    lab = load_hosts(EXAMPLE)
    payload = json.loads(invoke("predict", "--hosts-file", EXAMPLE, "--work", "8h", "--by",
                                "1h", "--json").stdout)
    assert payload["by"]["seconds"] == HOUR
    shares = np.array([row["share"] for row in payload["hosts"]])
    laws = [demand_for_host(h, "lognormal") for h in lab.hosts]
    # the default prediction starts each host in its steady state, as a warm simulation does
    runs = simulate(lab.hosts, shares, runs=4000, rng=np.random.default_rng(11),
                    service=laws, warm=True)
    simulated = float(np.mean(runs.completion_seconds <= HOUR))
    assert payload["by"]["probability"] == pytest.approx(simulated, abs=0.04)
    table = invoke("predict", "--hosts-file", EXAMPLE, "--work", "8h", "--by", "1h").stdout
    assert "P(done by 60.0m)" in table and f"{payload['by']['probability']:.3f}" in table


def test_host_laws_multiply_to_the_task_law():
    lab = load_hosts(EXAMPLE)
    prediction = predict(lab.hosts, 8 * HOUR)
    times = np.linspace(0, prediction.quantiles["p99"], 50)
    per_host = prediction.host_cdf(times)
    assert per_host.shape == (len(lab.hosts), 50)
    assert np.all(np.diff(per_host, axis=1) >= -1e-12)
    assert np.allclose(np.prod(per_host, axis=0), prediction.cdf(times), atol=1e-9)


def test_plot_writes_a_png_of_the_completion_law(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "cdf.png"
    result = invoke("predict", "--hosts-file", EXAMPLE, "--work", "8h", "--plot", str(target),
                    "--by", "2h", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["plot"] == str(target)
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_plot_without_matplotlib_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were absent
    result = invoke("predict", "--hosts-file", EXAMPLE, "--work", "8h", "--plot",
                    str(tmp_path / "x.png"))
    one_line_error(result, "pip install 'ghs[plot]'")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("command", [
    ("predict", "--hosts-file", EXAMPLE, "--work", "8h"),
    ("backtest", "--trace", "{csv}", "--work", "1h"),
    ("experiment", "calibration", "--size", "1"),
    ("history", "ws1", "--manager", "tcp://127.0.0.1:9"),
])
def test_a_plot_into_a_missing_folder_is_refused_before_any_work(tmp_path, command):
    """A back-test or an experiment draws its figure last: a --plot whose folder is missing
    was a traceback after minutes of work. It is one line, at once, on every command."""
    log = tmp_path / "ws.csv"  # a workstation log a back-test would run for minutes
    log.write_text("arrival_seconds,cpu_seconds,user,command\n"
                   + "".join(f"{k * 3600},{600},u,job\n" for k in range(24 * 8)))
    started = time.monotonic()
    result = invoke(*(str(log) if a == "{csv}" else a for a in command), "--plot",
                    str(tmp_path / "missing" / "x.png"))
    one_line_error(result, "--plot", "does not exist")
    assert time.monotonic() - started < 10.0


def test_a_plot_that_cannot_be_written_is_one_error(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ghs.errors import GhsError
    from ghs.figure_file import save_figure

    figure = Figure()
    FigureCanvasAgg(figure)
    (tmp_path / "taken.png").mkdir()  # a folder where the file should go
    with pytest.raises(GhsError, match="cannot write the plot to"):
        save_figure(figure, tmp_path / "taken.png", 50)
    # a format matplotlib does not write: refused at once, and one line if it gets through
    one_line_error(invoke("predict", "--hosts-file", EXAMPLE, "--work", "1h", "--plot",
                          str(tmp_path / "x.xyz")), "--plot", "cannot write .xyz files")
    with pytest.raises(GhsError, match=r"cannot write the plot to.*xyz"):
        save_figure(figure, tmp_path / "x.xyz", 50)
    # a host name the font cannot draw is a box in the figure, not warnings under it
    import warnings
    figure.text(0.5, 0.5, "\u65e5\u672c\tws")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        save_figure(figure, tmp_path / "names.png", 50)
    assert not [w for w in caught if "Glyph" in str(w.message)]


def test_figure_labels_count_and_axes_follow_the_compared_lines():
    from ghs.experiments.figures import counted, log_limits

    assert counted(1, "workstation") == "1 workstation"
    assert counted(32, "workstation") == "32 workstations"
    low, high = log_limits([0.02, 0.3, None, float("nan"), 0.0])
    assert 0.01 < low < 0.02 and 0.3 < high < 0.5


@pytest.mark.parametrize("kind", ["hosts", "plan", "config"])
def test_a_file_nested_thousands_deep_is_one_error(tmp_path, kind):
    # the JSON and TOML parsers recurse per bracket: a RecursionError traceback before
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / ("deep.toml" if kind == "config" else "deep.json")
    path.write_text(f"a = {deep}\n" if kind == "config" else '{"hosts": ' + deep + "}")
    args = {"hosts": ["predict", "--hosts-file", str(path), "--work", "1h"],
            "plan": ["eta", "--plan", str(path), "--hosts-file", EXAMPLE],
            "config": ["--config", str(path), "predict", "--hosts-file", EXAMPLE, "--work",
                       "1h"]}[kind]
    one_line_error(invoke(*args), "nests too deeply")


def test_a_plans_share_past_any_float_is_one_error(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"hosts": [{"name": "a", "share": 1' + "0" * 400 + "}]}")
    line = one_line_error(invoke("eta", "--plan", str(plan), "--hosts-file", EXAMPLE),
                          "the share of host 'a' must be a number")
    assert len(line) < 200
