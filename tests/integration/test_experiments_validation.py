"""Issue 5's validation experiments, small but end to end: the real sampler on simulated
workstations, tasks run into the same job streams, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from rich.console import Console

from ghs.cli import main
from ghs.errors import GhsError
from ghs.experiments import calibration, error_vs_length, tables, trace_study
from ghs.experiments.launches import HOUR_SECONDS, Station, host_from_estimate
from ghs.traces import read_log
from scheduler.workload import Trace
from sensors.estimates import Estimate

pytestmark = pytest.mark.slow

USERS = 40


def _bursty_log(path, days=6, seed=3):
    """A synthetic SWF log: 40 users submitting batches of 1-6 jobs, heavy-tailed run times."""
    rng = np.random.default_rng(seed)
    rows = []
    for user in range(USERS):
        t = rng.uniform(0, 3600)
        while t < days * 86400:
            for _ in range(int(rng.integers(1, 7))):
                rows.append((t + rng.uniform(0, 60), max(1.0, rng.lognormal(4.0, 1.5)), user))
            t += rng.exponential(3 * 3600)
    rows.sort()
    lines = ["; Computer: synthetic lab", ";"]
    for job, (submit, run, user) in enumerate(rows, start=1):
        lines.append(f"{job} {submit:.0f} 0 {run:.0f} 1 -1 -1 1 -1 -1 1 {user} 1 -1 -1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return read_log(_bursty_log(tmp_path_factory.mktemp("logs") / "lab.swf"))


@pytest.fixture(scope="module")
def poisson_family():
    return error_vs_length.collect_family(
        "poisson-loguniform", 3, 5, log=None, stations=4, single_hours=(1.0, 8.0),
        parallel_hours=(8.0, 64.0), sampling=error_vs_length.SAMPLING, dist="lognormal",
        rho_max=0.9, spacing_hours=3)


def test_clairvoyant_misses_by_the_backlog_at_launch_alone(poisson_family):
    # No local work is left when a task ends, so T = (t + B0) / (1 - offered load of its run):
    # the model fed that load predicts t / (1 - load), exactly t / (t + B0) of the truth.
    single = poisson_family["single"]
    dedicated = np.array([1.0, 8.0]) * HOUR_SECONDS
    valid = single["valid"]
    assert valid.all()
    expected = dedicated[None, :] / (dedicated[None, :] + single["backlog"])
    ratio = single["clairvoyant"] / single["simulated"]
    assert np.allclose(ratio[valid], expected[valid], rtol=1e-6)
    assert (single["backlog"] > 0).any()  # launches land on busy machines too


def test_poisson_errors_shrink_with_length_and_beat_the_naive_predictor(poisson_family):
    summary = error_vs_length.summarise(poisson_family)
    one_hour, eight_hours = summary["single"]
    assert one_hour["tasks"] == eight_hours["tasks"] == 12  # 4 stations x 3 launches
    # ~6% expected at 8 h (the task's own randomness); 20% leaves room for 12 tasks
    assert eight_hours["ours"]["mean"] < 0.2
    assert eight_hours["ours"]["mean"] < one_hour["ours"]["mean"]
    for row in summary["single"] + summary["parallel"]:
        # one-minute readings of 120 s jobs are mostly 0 or 1: the naive guess is far off
        assert row["naive"]["mean"] > 3 * row["ours"]["mean"]
        assert row["true"] is not None and row["past"] is not None
    assert summary["info"]["sampling"]["mean_per_hour"] > 2
    json.dumps(summary, allow_nan=False)


def test_the_back_tested_default_runs_the_experiments_own_tasks(poisson_family):
    # one-workstation tasks: the engine walks the same stream from the same launches, so its
    # realised times are the experiment's simulated ones, task for task, and none is lost
    single = poisson_family["single"]
    valid = single["valid"]
    for name in ("default", "engine_paper"):
        realised = single[f"{name}_realised"]
        assert np.array_equal(np.isfinite(realised), valid)
        assert np.allclose(realised[valid], single["simulated"][valid], rtol=1e-9)
    # a split task is split by each predictor's own view, so only the launches match
    parallel = poisson_family["parallel"]
    assert np.isfinite(parallel["default_realised"]).sum() == parallel["valid"].sum() == 6


def test_the_default_beside_the_paper_model(poisson_family):
    summary = error_vs_length.summarise(poisson_family)
    for row in summary["single"] + summary["parallel"]:
        default = row["default"]
        assert default is not None and np.isfinite(default["mean"]) and default["mean"] >= 0
        assert row["default_over_ours"] == pytest.approx(default["mean"] / row["ours"]["mean"])
        cover = row["coverage"]["default"]
        assert 0 <= cover["p50"] <= cover["p90"] <= cover["p95"] <= 1
        assert row["width"]["default"] >= 1 and row["width"]["ours"] >= 1
    for row in summary["single"]:
        assert row["default"]["count"] == row["ours"]["count"] == row["tasks"]
    console = Console(record=True, width=400)
    tables.show_error_vs_length(console, {"families": [summary], "stations": 4})
    text = console.export_text()
    assert "default p50/p90/p95" in text and "default/ours" in text


def test_trace_family_and_calibration_end_to_end(log):
    result = calibration.run(size=2, seed=4, log=log, stations=4, single_hours=(1.0,),
                             parallel_hours=(8.0,), poisson_kinds=())
    json.dumps(result, allow_nan=False)
    (family,) = result["families"]
    assert family["name"] == "trace" and family["launches"] == 2
    pooled = family["single"]["pooled"]
    assert 0 < pooled["tasks"] <= 8 and pooled["true"] is None  # no long-run truth for logs
    # the log's stretch is shifted to the engine's clock and back: every task is scored
    assert pooled["default_tasks"] == pooled["tasks"]
    for name in ("ours", "past", "clairvoyant", "default"):
        values = pooled[name]
        assert 0 <= values["p50"] <= values["p90"] <= values["p95"] <= 1
    for section in ("single", "parallel"):
        width = family[section]["pooled"]["width"]["default"]
        assert width is not None and width >= 1
    console = Console(record=True, width=300)
    tables.show_calibration(console, result)
    assert "p90/p50 ours/default" in console.export_text()


def test_error_sources_replays_and_names_the_largest(log):
    result = trace_study.run(log, size=1, seed=4, stations=2, hours=(1.0, 4.0))
    json.dumps(result, allow_nan=False)
    assert set(result["variants"]) == set(trace_study.VARIANTS)
    for row in result["variants"]["idle"]:
        # idle at launch: the clairvoyant model is exact (no backlog to miss)
        assert row["clairvoyant"]["mean"] == pytest.approx(0.0, abs=1e-9)
    for row in result["variants"]["stationary"]:
        assert row["true"] is not None  # the replay knows its own parameters
    assert result["largest"] in {"bursts within an hour", "bursts within a day",
                                 "heavy tails", "idle at launch", "non-stationarity"}
    assert len(result["costs"]["per_length"]) == 2
    for name, rows in result["variants"].items():
        for row in rows:
            if name == "idle":  # the engine cannot empty the machine at launch
                assert row["default"] is None
                continue
            assert np.isfinite(row["default"]["mean"])
            cover = row["coverage"]["default"]
            assert 0 <= cover["p50"] <= cover["p90"] <= cover["p95"] <= 1
    for entry in result["costs"]["per_length"]:
        assert set(entry["default_mean"]) == {"bursts within an hour", "bursts within a day",
                                              "heavy tails"}
    console = Console(record=True, width=300)
    tables.show_trace_study(console, result)
    assert "default p50/p90/p95" in console.export_text()


def test_replays_keep_what_they_promise():
    rng = np.random.default_rng(1)
    arrivals = np.sort(np.concatenate([np.full(50, 7200.0 + 5), rng.uniform(0, 86400 * 2, 200)]))
    demands = rng.lognormal(3, 2, arrivals.size)
    station = Station("ws", Trace(arrivals, demands), 86400 * 2)
    spread = trace_study.replay("spread", station, 0.0, rng).trace
    hours = np.floor(arrivals / HOUR_SECONDS)
    assert np.array_equal(np.floor(spread.arrival_seconds / HOUR_SECONDS), hours)
    assert np.array_equal(spread.cpu_seconds, demands)  # jobs keep their demands and hour
    assert np.unique(spread.arrival_seconds).size == arrivals.size  # the burst is spread
    daily = trace_study.replay("spread-day", station, 0.0, rng).trace
    days = np.floor(arrivals / 86400)
    assert np.array_equal(np.floor(daily.arrival_seconds / 86400), days)
    assert np.array_equal(daily.cpu_seconds, demands)
    light = trace_study.replay("light", station, 0.0, rng).trace
    assert np.array_equal(light.arrival_seconds, arrivals)
    assert light.cpu_seconds.max() < demands.max()
    stationary = trace_study.replay("stationary", station, 0.0, rng)
    assert stationary.host is not None
    assert stationary.host.lam == pytest.approx(arrivals.size / (86400 * 2))


def test_host_from_estimate_follows_the_manager_rules():
    base = dict(time=0.0, measurements=10, service_count=0, observed_seconds=600.0,
                window_seconds=86400.0, history_seconds=86400.0, provisional=False,
                mu_source=None, fork_counter_share=0.0)
    no_exits = host_from_estimate("a", Estimate(lam=0.01, rho=0.4, mu=None, sigma=None, **base))
    assert no_exits.mu == pytest.approx(0.01 / 0.4) and no_exits.sigma == pytest.approx(40.0)
    saturated = host_from_estimate("b", Estimate(lam=0.01, rho=1.0, mu=0.02, sigma=30.0, **base))
    assert saturated.rho == pytest.approx(0.95)
    silent = host_from_estimate("c", Estimate(lam=None, rho=None, mu=None, sigma=None, **base))
    assert silent.lam == 0 and silent.rho == 0


def test_sampling_cost_falls_when_steady_and_rises_when_the_load_varies(tmp_path):
    # the one three-day run goes through the CLI (JSON and plot), then the table
    image = tmp_path / "fig8.png"
    outcome = CliRunner().invoke(main, ["experiment", "sampling-cost", "--size", "1",
                                        "--seed", "2", "--json", "--plot", str(image)])
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plot skipped" in outcome.stderr
    else:
        assert image.read_bytes().startswith(b"\x89PNG")
    counts = [hour["adaptive_count"] for hour in result["hours"]]
    assert len(counts) == 72 and counts[0] == 30  # no history: the maximum
    steady = np.mean(counts[4:24])
    assert steady <= 5
    assert np.mean(counts[-6:]) >= 3 * steady
    first = result["summary"][0]
    assert first["phase"] == "steady" and first["saving"] > 0.5
    assert first["adaptive_error_past_24h"] < first["naive_error_past_24h"]
    console = Console(record=True, width=300)
    tables.show_sampling_cost(console, result)
    assert "measurements per hour" in console.export_text()


def test_cli_commands_json_plot_and_errors(tmp_path, log):
    runner = CliRunner()
    outcome = runner.invoke(main, ["experiment", "error-vs-length", "--size", "1",
                                   "--stations", "2", "--family", "lognormal", "--json"])
    assert outcome.exit_code == 0, outcome.output
    payload = json.loads(outcome.stdout)
    assert [f["name"] for f in payload["families"]] == ["poisson-lognormal"]
    assert [row["hours"] for row in payload["families"][0]["single"]] == [0.5, 1, 2, 4, 8]
    outcome = runner.invoke(main, ["experiment", "error-sources"])
    assert outcome.exit_code == 2 and "--trace" in outcome.output
    missing = tmp_path / "none.swf"
    outcome = runner.invoke(main, ["experiment", "calibration", "--trace", str(missing)])
    assert outcome.exit_code == 2
    assert outcome.output.strip().splitlines() == [
        f"ghs: error: trace file {str(missing)!r} does not exist"]


def test_calibration_pools_independent_draws_and_keeps_each_ones_coverage():
    options = dict(size=2, stations=3, single_hours=(1.0,), parallel_hours=(8.0,),
                   poisson_kinds=("loguniform",))
    pooled = calibration.run(seed=4, paths=2, **options)
    alone = calibration.run(seed=5, **options)
    json.dumps(pooled, allow_nan=False)
    assert pooled["seeds"] == [4, 5] and alone["seeds"] == [5]
    (family,), (second,) = pooled["families"], alone["families"]
    first, other = family["paths"]
    # a path is the same draw a run with its seed makes: its coverage is that run's
    assert other["seed"] == 5 and other["launches"] == second["launches"] == 2
    assert other["single"] == second["single"]["pooled"]
    assert other["parallel"] == second["parallel"]["pooled"]
    assert family["launches"] == 4
    for section in ("single", "parallel"):
        both = family[section]["pooled"]
        counts = [first[section]["tasks"], other[section]["tasks"]]
        assert both["tasks"] == sum(counts) > 0
        for name in ("ours", "true"):
            for level in ("p50", "p90", "p95"):
                expected = (first[section][name][level] * counts[0]
                            + other[section][name][level] * counts[1]) / sum(counts)
                assert both[name][level] == pytest.approx(expected)
    console = Console(record=True, width=300)
    tables.show_calibration(console, pooled)
    text = console.export_text()
    assert "each draw of the workstations" in text and "\n│    5 │" in text.replace("┃", "│")


def test_calibration_refuses_a_bad_number_of_paths():
    result = CliRunner().invoke(main, ["experiment", "calibration", "--paths", "0"])
    assert result.exit_code == 2 and "--paths" in result.output and "Traceback" not in result.output
    with pytest.raises(GhsError, match="paths must be a whole number >= 1, got 0"):
        calibration.run(paths=0)
