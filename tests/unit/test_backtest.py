"""The back-test engine: its JSON contract, realised times from an independent walk of the
log, and no launch seeing anything after it."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from rich.console import Console

from ghs.agent.replay import Station
from ghs.backtest import (
    DEFAULT_PREDICTOR,
    PARALLEL_PREDICTORS,
    PREDICTORS,
    RECOMBINED,
    BacktestSettings,
    run_backtest,
)
from ghs.backtest.view import plot_backtest, show_backtest
from ghs.cli import main
from ghs.config import SensorConfig

HOUR = 3600.0
LEVELS = ("p50", "p90", "p95")
# few measurements per hour keep the real sampler quick; it is the same code as the agent's
LIGHT = SensorConfig(max_per_hour=4)


def _rows(seed, days, rate_per_hour=4.0, mean_seconds=400.0):
    rng = np.random.default_rng(seed)
    t, rows = 0.0, []
    while t < days * 86400:
        t += rng.exponential(HOUR / rate_per_hour)
        rows.append((round(t, 3), round(float(rng.lognormal(math.log(mean_seconds), 1.0)), 3),
                     f"u{rng.integers(2)}", f"c{rng.integers(2)}"))
    return rows


def _write_csv(path, rows):
    path.write_text("arrival_seconds,cpu_seconds,user,command\n"
                    + "".join(f"{a},{c},{u},{x}\n" for a, c, u, x in rows))
    return str(path)


def _walk(rows, dedicated_seconds, launch_seconds):
    """Completion of a lowest-priority task: one core, local jobs FCFS and served first, so
    the task gets exactly the idle time after its launch."""
    free, need, now = -math.inf, dedicated_seconds, launch_seconds
    for arrival, cpu, *_ in rows:
        start = max(arrival, free)
        free = start + cpu
        if free <= now:
            continue
        if start > now:
            if start - now >= need:
                return now + need - launch_seconds
            need -= start - now
        now = max(now, free)
    return now + need - launch_seconds


@pytest.mark.slow
def test_cli_json_contract_and_realised_times_from_an_independent_walk(tmp_path):
    rows = {name: _rows(seed, 3.5) for name, seed in (("a", 1), ("b", 2))}
    paths = {name: _write_csv(tmp_path / f"{name}.csv", r) for name, r in rows.items()}
    config = tmp_path / "ghs.toml"
    config.write_text("[sensor]\nmax_per_hour = 4\n")
    base = ["--config", str(config), "backtest", "--trace", paths["a"], "--trace", paths["b"],
            "--work", "1h", "--work", "3h", "--start", "24h", "--launch-every", "6h",
            "--shadow-every", "6h", "--json"]
    for extra in ([], ["--parallel"]):
        result = CliRunner().invoke(main, base + extra)
        assert result.exit_code == 0, result.output
        body = json.loads(result.output)
        assert body["default_predictor"] == DEFAULT_PREDICTOR
        assert {r["predictor"] for r in body["launches"]} == set(
            PARALLEL_PREDICTORS if extra else PREDICTORS)
        for record in body["launches"]:
            assert set(record) == {"predictor", "launch_seconds", "work", "shares",
                                   "realised_seconds", "mean", "quantiles"}
            assert record["launch_seconds"] >= 24 * HOUR
            assert record["launch_seconds"] % (6 * HOUR) == 0
            assert sum(record["shares"].values()) == pytest.approx(record["work"])
            assert set(record["shares"]) <= set(paths.values())
            walked = max(_walk(rows[name], record["shares"][path], record["launch_seconds"])
                         for name, path in paths.items()
                         if record["shares"].get(path, 0.0) > 0)
            assert record["realised_seconds"] == pytest.approx(walked, rel=1e-9, abs=1e-6)
            if record["predictor"] == "naive":
                assert record["quantiles"] is None
            else:
                q = record["quantiles"]
                assert 0 < q["p50"] <= q["p90"] <= q["p95"]
                # no task finishes before its slowest share's dedicated time (tau 1)
                assert q["p50"] >= max(record["shares"].values()) * (1 - 1e-9)
        for record in body["unfinished"]:
            assert set(record) == {"predictor", "launch_seconds", "work", "shares",
                                   "known_seconds", "mean", "quantiles"}
        if not extra:
            # a single-host task is launched only where it finishes inside the log
            assert body["unfinished"] == []
        if extra:
            assert all(len(r["shares"]) == 2 for r in body["launches"])
        else:
            assert all(len(r["shares"]) == 1 for r in body["launches"])
        # one record per (launch, station, work) and predictor
        keys = [(r["predictor"], r["launch_seconds"], r["work"], tuple(sorted(r["shares"])))
                for r in body["launches"]]
        assert len(keys) == len(set(keys))
        for row in body["summary"]:
            chosen = [r for r in body["launches"] if r["predictor"] == row["predictor"]
                      and r["work"] == row["work"]]
            assert row["launches"] == len(chosen) > 0
            assert row["mode"] == ("parallel" if extra else "single")
            errors = [abs(r["mean"] - r["realised_seconds"]) / r["realised_seconds"]
                      for r in chosen]
            assert row["mean_abs_error"] == pytest.approx(np.mean(errors))
            assert row["median_abs_error"] == pytest.approx(np.median(errors))
            assert row["total_mean_over_realised"] == pytest.approx(
                sum(r["mean"] for r in chosen) / sum(r["realised_seconds"] for r in chosen))
            assert row["unfinished"] == len([r for r in body["unfinished"]
                                             if r["predictor"] == row["predictor"]
                                             and r["work"] == row["work"]])
            paper = {(r["launch_seconds"], tuple(r["shares"])): r for r in body["launches"]
                     if r["predictor"] == "paper" and r["work"] == row["work"]}
            if row["predictor"] == "paper":
                assert row["vs_paper"] is None
            else:
                shared = [(r, paper[r["launch_seconds"], tuple(r["shares"])]) for r in chosen
                          if (r["launch_seconds"], tuple(r["shares"])) in paper]
                assert row["vs_paper"]["launches"] == len(shared) > 0
                assert row["vs_paper"]["mean_abs_error_ratio"] == pytest.approx(
                    sum(abs(r["mean"] - r["realised_seconds"]) / r["realised_seconds"]
                        for r, _ in shared)
                    / sum(abs(p["mean"] - p["realised_seconds"]) / p["realised_seconds"]
                          for _, p in shared))
            if row["predictor"] != "naive":
                for level in LEVELS:
                    assert row["coverage"][level] == pytest.approx(np.mean(
                        [r["realised_seconds"] <= r["quantiles"][level] for r in chosen]))
                    assert row["finished_before"][level] == pytest.approx(np.mean(
                        [r["realised_seconds"] < r["quantiles"][level] * (1 - 1e-9)
                         for r in chosen]))
                    assert row["finished_before"][level] <= row["coverage"][level]


def test_a_launch_never_uses_what_came_after_it():
    rows = _rows(3, 3.0, rate_per_hour=2.0, mean_seconds=300.0)
    cut = 40 * HOUR
    poisoned = [r for r in rows if r[0] <= cut] + [
        (cut + k * 600.0 + 1.0, 480.0, "intruder", "burn") for k in range(200)]
    settings = BacktestSettings(start_seconds=12 * HOUR, every_seconds=4 * HOUR, sensor=LIGHT,
                                shadow_every_seconds=2 * HOUR)
    clean = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR], settings)
    dirty = run_backtest([Station("s", tuple(poisoned))], ["s.csv"], [HOUR], settings)

    def predictions(body):
        return {(r["predictor"], r["launch_seconds"]): (r["mean"], r["quantiles"])
                for r in body["launches"] if r["launch_seconds"] <= cut}

    before, after = predictions(clean), predictions(dirty)
    common = set(before) & set(after)
    assert {launch for _, launch in common} >= {12 * HOUR, 24 * HOUR, 36 * HOUR}
    assert {name for name, _ in common} == set(PREDICTORS)
    for key in common:
        assert before[key] == after[key], key
    # and the poison is real: later launches see it
    late = [r for r in dirty["launches"] if r["launch_seconds"] > cut + HOUR]
    assert late and max(r["realised_seconds"] for r in late) > 2 * HOUR


def test_bad_requests_are_one_line_errors(tmp_path):
    path = _write_csv(tmp_path / "a.csv", _rows(1, 1.0))
    # a station whose first job comes after the --end asked for
    late = _write_csv(tmp_path / "late.csv",
                      [(3 * 86400.0 + t, c, u, x) for t, c, u, x in _rows(1, 1.0)])
    # an arrival time of 1e300 s: numpy refused the launch array with a traceback
    far = _write_csv(tmp_path / "far.csv", [*_rows(1, 1.0), (1e300, 1.0, "u", "x")])
    for args, words in ((["--trace", path, "--work", "1h", "--start", "90m"], "whole number"),
                        (["--manager", "tcp://127.0.0.1:1", "--work", "1h", "--timeout", "1"],
                         "did not answer within 1 s"),
                        (["--work", "1h"], "give --manager EP (the manager's record) or "
                                           "--trace FILE"),
                        (["--manager", "tcp://127.0.0.1:1", "--trace", path, "--work", "1h"],
                         "not both"),
                        (["--trace", path, "--work", "1h", "--shadow-every", "20m"],
                         "--shadow-every must be a whole number of hours"),
                        (["--manager", "tcp://127.0.0.1:1", "--work", "1h", "--shadow-every",
                          "1h"], "--shadow-every goes with --trace"),
                        (["--trace", path, "--work", "1h", "--start", "30d"], "no launch"),
                        # a task that cannot finish inside the log: an empty table, exit 0
                        (["--trace", path, "--work", "20h", "--start", "12h"],
                         "no launch was scored: no task launched from --start 43200 s"),
                        (["--trace", late, "--work", "1h", "--end", "2d"],
                         "none of the 1 stations has a job before --end 172800 s"),
                        (["--trace", far, "--work", "1h"], "launch moments, over 100,000; cut "
                                                           "them with --end")):
        result = CliRunner().invoke(main, ["backtest", *args])
        assert result.exit_code == 2, result.output
        assert words in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("parallel", [False, True])
def test_a_station_with_no_job_is_an_idle_workstation(parallel):
    """A station given no job (a log cut more ways than it has users, or none before --end)
    is replayed as idle as far as the other stations' logs go: a task there takes its
    dedicated time, and it is scored beside the others (it stopped the back-test before)."""
    busy = Station("busy", tuple(_rows(1, 3.0)), 0.0)
    idle = Station("idle", (), 0.0)
    settings = BacktestSettings(start_seconds=24 * HOUR, every_seconds=6 * HOUR,
                                sensor=LIGHT, parallel=parallel)
    out = run_backtest([busy, idle], ["busy", "idle"], [HOUR], settings)
    last_job = busy.rows[-1][0]
    launches = {r["launch_seconds"] for r in out["launches"]}
    assert launches and max(launches) < last_job
    if not parallel:
        on_idle = [r for r in out["launches"] if list(r["shares"]) == ["idle"]]
        assert {r["launch_seconds"] for r in on_idle} == launches
        for r in on_idle:
            assert r["realised_seconds"] == HOUR
            if r["predictor"] in ("paper", "naive"):
                assert r["mean"] == pytest.approx(HOUR)
        return
    for r in out["launches"]:
        # the idle station's share runs undisturbed: the task ends with it or the busy one's
        assert r["realised_seconds"] >= r["shares"]["idle"] - 1e-9
        if r["predictor"] == "naive":
            # dedicated / (1 - utilisation): the idle station takes the larger share
            assert r["shares"]["idle"] >= r["shares"]["busy"]


def test_a_station_cut_from_a_log_is_known_until_the_log_ends(tmp_path):
    """A station whose users stop early is idle, not unknown, until the log it was cut from
    ends: its launches go on to the log's end (they stopped at its own last job: a 32-way
    split of KTH over 30 days scored nothing after day 7)."""
    rng = np.random.default_rng(3)
    lines, job = [], 0
    for user, days in ((1, 3.0), (2, 1.25)):
        t = 0.0
        while t < days * 86400:
            t += rng.exponential(HOUR / 3)
            job += 1
            fields = [job, round(t), 0, round(rng.exponential(300.0)) + 1, 1, -1, -1, 1, 3600,
                      -1, 1, user, 1, -1, -1, -1, -1, -1]
            lines.append(" ".join(map(str, fields)))
    path = tmp_path / "log.swf"
    path.write_text("; UnixStartTime: 843480031\n" + "\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["backtest", "--trace", str(path), "--stations", "2",
                                       "--work", "1h", "--start", "24h", "--launch-every",
                                       "6h", "--shadow-every", "6h", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    last = {key: max(r["launch_seconds"] for r in body["launches"] if key in r["shares"])
            for key in body["stations"]}
    assert len(last) == 2 and min(last.values()) >= 2.5 * 86400
    early = [r for r in body["launches"] if r["launch_seconds"] > 1.5 * 86400
             and r["predictor"] == "naive"]
    # after the early station's own last job its tasks run undisturbed
    assert any(r["realised_seconds"] == HOUR for r in early)


def test_hourly_shadow_launches_teach_the_calibrators_and_nothing_else():
    """Shadow launches between the scored ones change only the calibrated predictors' answers
    (their calibrators have seen more outcomes), never a model view's or which launches are
    scored."""
    rows = _rows(5, 2.5, rate_per_hour=3.0, mean_seconds=600.0)
    base = dict(start_seconds=24 * HOUR, every_seconds=6 * HOUR, sensor=LIGHT)
    lone = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR], BacktestSettings(
        **base, shadow_every_seconds=6 * HOUR, shadow_lead_seconds=0.0))
    shadowed = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR],
                            BacktestSettings(**base))

    def by_key(body):
        return {(r["predictor"], r["launch_seconds"]): r for r in body["launches"]}

    a, b = by_key(lone), by_key(shadowed)
    assert a.keys() == b.keys()
    calibrated = {"calibrated", "calibrated-state", "calibrated-held"}
    for key in a:
        if key[0] not in calibrated:  # equal but for rounding: the replay advanced in other steps
            assert a[key]["realised_seconds"] == b[key]["realised_seconds"], key
            assert a[key]["mean"] == pytest.approx(b[key]["mean"], rel=1e-9), key
            assert a[key]["quantiles"] == pytest.approx(b[key]["quantiles"], rel=1e-9), key
    # the first scored launch: without shadows nothing is known yet; with them, the outcomes
    # of the day before it are, so the reported quantiles move
    first = min(launch for _, launch in a)
    own, held = a["forecast", first]["quantiles"], a["uncalibrated", first]["quantiles"]
    # with jobs running at launch (the state start differs from the paper's idle one) the
    # default's p90 and p95 are the envelope of its view's and the held-backlog view's
    busy = a["state", first]["mean"] != a["paper", first]["mean"]
    assert a["calibrated", first]["quantiles"] == (
        {level: own[level] if level == "p50" else max(own[level], held[level])
         for level in own} if busy else own)
    assert b["calibrated", first]["quantiles"] != b["forecast", first]["quantiles"]


def test_on_a_mostly_idle_station_p50_is_its_dedicated_time_never_before(tmp_path):
    """Most runs meet no local job and end at the dedicated time exactly (an atom of the
    law). The p50 calibrator, learning that the model's p50 covers more than half, once
    pushed the served p50 below that time, a time no run can meet. Served at it instead,
    the p50 brackets one half between the runs finished before it and those finished by it."""
    rows = _rows(11, 6.0, rate_per_hour=0.15, mean_seconds=600.0)
    settings = BacktestSettings(start_seconds=24 * HOUR, every_seconds=HOUR, sensor=LIGHT,
                                shadow_every_seconds=HOUR)
    body = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR], settings)
    calibrated = [r for r in body["launches"] if r["predictor"] == "calibrated"]
    realised = np.array([r["realised_seconds"] for r in calibrated])
    assert np.mean(realised <= HOUR * (1 + 1e-9)) > 0.6  # mostly uninterrupted
    assert min(r["quantiles"]["p50"] for r in calibrated) >= HOUR
    row = next(r for r in body["summary"] if r["predictor"] == "calibrated")
    assert row["finished_before"]["p50"] <= 0.5 + 0.1
    assert row["coverage"]["p50"] >= 0.6
    # both sides reach a person: the table's column and the reliability diagram's bars
    console = Console(record=True, width=200)
    show_backtest(console, body)
    text = console.export_text()
    assert "finished before" in text and "means' total" in text
    assert f"{row['total_mean_over_realised']:.2f}" in text
    png = tmp_path / "reliability.png"
    assert plot_backtest(body, str(png)) == str(png) and png.stat().st_size > 0


def test_a_length_between_the_calibrated_ones_is_served_as_a_manager_serves_it():
    """``calibration_lengths_seconds``: the calibrators learn at 1 h and 4 h only, as a
    manager's at its fixed lengths, and a 2 h task (their geometric middle) is served the
    geometric mean of their factors. Scored at the calibrated lengths themselves, the run is
    the one where each scored length has its own calibrator."""
    rows = _rows(5, 4.0, rate_per_hour=1.0, mean_seconds=300.0)
    base = dict(start_seconds=24 * HOUR, every_seconds=3 * HOUR, sensor=LIGHT)
    station = [Station("s", tuple(rows))]
    own = run_backtest(station, ["s.csv"], [HOUR, 4 * HOUR], BacktestSettings(**base))
    fixed = run_backtest(station, ["s.csv"], [HOUR, 4 * HOUR], BacktestSettings(
        **base, calibration_lengths_seconds=(4 * HOUR, HOUR)))
    assert fixed == own
    between = run_backtest(station, ["s.csv"], [2 * HOUR], BacktestSettings(
        **base, calibration_lengths_seconds=(HOUR, 4 * HOUR)))
    assert {r["work"] for r in between["launches"]} == {2 * HOUR}
    assert {r["work"] for r in between["summary"]} == {2 * HOUR}

    def by_key(body):
        return {(r["predictor"], r["launch_seconds"], r["work"]): r for r in body["launches"]}

    a, b = by_key(own), by_key(between)
    checked = 0
    for name, launch, _ in b:
        if name != "calibrated" or a["state", launch, HOUR]["mean"] != a[
                "paper", launch, HOUR]["mean"]:
            continue  # jobs running at launch: the envelope, not the factors alone
        if ("calibrated", launch, 4 * HOUR) not in a:
            continue  # the 4 h task would not finish inside the log
        ratios, clean = [], dict.fromkeys(LEVELS, True)
        for length, body in ((HOUR, a), (4 * HOUR, a), (2 * HOUR, b)):
            served = body["calibrated", launch, length]["quantiles"]
            model = body["forecast", launch, length]["quantiles"]
            ratios.append({level: served[level] / model[level] for level in served})
            # a level neither held at the dedicated time nor raised to the level below's
            for below, level in zip((None, *LEVELS), LEVELS):
                clean[level] &= served[level] > length * (1 + 1e-9) and (
                    below is None or served[level] > served[below])
        for level in LEVELS:
            if clean[level]:
                assert ratios[2][level] == pytest.approx(
                    math.sqrt(ratios[0][level] * ratios[1][level]), rel=1e-9)
                checked += 1
    assert checked >= 10
    bad = CliRunner().invoke(main, ["backtest", "--manager", "tcp://127.0.0.1:1", "--work",
                                    "1h", "--calibrate-at", "1h"])
    assert bad.exit_code == 2 and "--calibrate-at goes with --trace" in bad.output


def test_a_split_is_also_scored_as_a_manager_serves_it_from_each_hosts_own_record():
    """``calibrated-hosts``: each station's law calibrated on its own single-host shadow
    launches (the state view) and the laws recombined, as a manager answers for several
    hosts. Split over one station it is that station's single-host answer: the single-mode
    ``calibrated-held`` (the same view and calibrators, its quantiles times the factors),
    up to the served law's grid. The station is forecast no arrivals at most launches, a
    model law that is one atom, which the served law once mapped to the atom whatever the
    factors (p90 20-40% short)."""
    rows = _rows(5, 4.0, rate_per_hour=1.0, mean_seconds=300.0)
    base = dict(start_seconds=24 * HOUR, every_seconds=3 * HOUR, sensor=LIGHT,
                calibration_lengths_seconds=(HOUR, 3 * HOUR))
    station = [Station("s", tuple(rows))]
    single = run_backtest(station, ["s.csv"], [HOUR, 3 * HOUR], BacktestSettings(**base))
    split = run_backtest(station, ["s.csv"], [HOUR, 3 * HOUR],
                         BacktestSettings(**base, parallel=True))
    assert RECOMBINED in PARALLEL_PREDICTORS and RECOMBINED not in PREDICTORS

    def by_key(body, name):
        return {(r["launch_seconds"], r["work"]): r for r in body["launches"]
                if r["predictor"] == name}

    held, hosts = by_key(single, "calibrated-held"), by_key(split, RECOMBINED)
    assert len(hosts) >= 20 and hosts.keys() <= held.keys()
    gaps = []
    for key, record in hosts.items():
        assert record["realised_seconds"] == pytest.approx(held[key]["realised_seconds"],
                                                           rel=1e-9)
        gaps += [record["quantiles"][level] / held[key]["quantiles"][level] - 1
                 for level in LEVELS]
    gaps = np.abs(gaps)
    assert np.median(gaps) < 0.01 and np.quantile(gaps, 0.9) < 0.03 and gaps.max() < 0.1



def test_the_pooled_far_tail_is_scored_at_its_factor_as_it_moves():
    """As a manager's (ghs.manager.shadow_outcomes): 200 shadow launches of 15 min whose
    p99.6 base is 1,000 s and which each take 3,000 s, all known together. Scored at the
    factor each was launched with they would all miss and run the factor to e^20; scored
    one after another at the factor as it stands, it stops near the one that covers (3)."""
    from ghs.backtest.engine import _Run
    from ghs.backtest.split import RECOMBINED_TAIL

    rows = _rows(5, 1.0)
    station = Station("s", tuple(rows))
    trace = None  # the runs' traces are not read by the calibrators
    run = _Run([station], ["s.csv"], [trace], np.array([86400.0]), np.array([HOUR]),
               BacktestSettings(parallel=True, calibration_lengths_seconds=(900.0, HOUR)))
    for k in range(200):
        run._calibrate(RECOMBINED_TAIL, 0, 900.0, 60.0 * k, 3000.0, np.array([1000.0]),
                       900.0)
    run.settle(86400.0)
    tail = run.calibrators[RECOMBINED_TAIL, 900.0]
    assert tail.scored[0, 0] == 200
    assert 2.9 < float(tail.factors([0])[0, 0]) < 4.0


@pytest.mark.parametrize("name", ["calibrated", "calibrated-held", "calibrated-hosts"])
def test_what_a_split_reads_is_scored_at_its_factors_as_they_move(name):
    """The same for a station's own p50, p90 and p95 where a split reads them (the split's
    per-station calibrators, and the held view, the manager's state view): scored at the
    factors each launch was made with, all 200 would miss and run the p95 factor to e^19;
    as they move, each stops near 3. The single-host default's are scored against the
    quantiles served at launch, as the manager's carried view: all 200 miss."""
    from ghs.backtest.engine import _Run

    station = Station("s", tuple(_rows(5, 1.0)))
    run = _Run([station], ["s.csv"], [None], np.array([86400.0]), np.array([HOUR]),
               BacktestSettings(parallel=name == "calibrated-hosts",
                                calibration_lengths_seconds=(900.0, HOUR)))
    for k in range(200):
        run._calibrate(name, 0, 900.0, 60.0 * k, 3000.0, np.full(3, 1000.0), 900.0)
    run.settle(86400.0)
    own = run.calibrators[name, 900.0]
    assert (own.scored[0] == 200).all()
    factors = own.factors([0])[0]
    if name == "calibrated":
        assert (own.covered[0] == 0).all()
        # 200 misses at the young-record steps (ghs.manager.calibrated_views.YOUNG_LAUNCHES),
        # leaning on the pool's plain-step correction (10 launches' worth)
        steps = own._steps(np.arange(200)).sum()
        lean = (200 * steps + 10 * 200 * 0.1) / 210
        assert steps > 20.5  # larger than the plain step's 200 x 0.1
        assert np.log(factors) == pytest.approx(lean * np.array([0.5, 0.9, 0.95]))
    else:
        assert ((factors > 2.9) & (factors < 4.0)).all(), factors


def _conditional_p50(body):
    """(busy, idle) coverage of the default's p50: launches that found local jobs running
    (the state start differs from the idle one) and those that did not."""
    by = {}
    for record in body["launches"]:
        by.setdefault(record["predictor"], {})[record["launch_seconds"]] = record
    busy = {k for k in by["calibrated"] if by["state"][k]["mean"] != by["paper"][k]["mean"]}

    def covered(keys):
        return np.mean([by["calibrated"][k]["realised_seconds"]
                        <= by["calibrated"][k]["quantiles"]["p50"] for k in keys])
    return covered(busy), covered(set(by["calibrated"]) - busy), len(busy)


def test_launches_with_jobs_running_teach_the_defaults_calibrators_of_their_own(monkeypatch):
    """The default's calibrators are apart for launches that found local jobs running: each
    launch, scored or shadow, is calibrated by the set its start says, and no other."""
    import ghs.backtest.engine as engine

    used = []
    calibrate = engine._Run._calibrate

    def spy(self, name, row, work, at, *args):
        used.append((name, at))
        return calibrate(self, name, row, work, at, *args)

    monkeypatch.setattr(engine._Run, "_calibrate", spy)
    rows = _rows(2, 4, rate_per_hour=1.0, mean_seconds=1000.0)
    body = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR], BacktestSettings(
        start_seconds=48 * HOUR, every_seconds=HOUR, sensor=LIGHT))
    default = {at for name, at in used if name == "calibrated"}
    apart = {at for name, at in used if name == "calibrated" + engine.JOBS_RUNNING}
    assert default and apart and not default & apart
    # the scored launches: apart exactly where the state start held running jobs
    by = {}
    for record in body["launches"]:
        by.setdefault(record["predictor"], {})[record["launch_seconds"]] = record
    busy = {k for k in by["calibrated"] if by["state"][k]["mean"] != by["paper"][k]["mean"]}
    assert busy and busy == apart & set(by["calibrated"])


@pytest.mark.slow
def test_calibrating_busy_and_idle_launches_apart_holds_each_ones_median(monkeypatch):
    """A Poisson workstation at utilisation ~0.45 with demands of ~30 min (lognormal, CoV
    1.3): the carried view is early when jobs are running and late when not, so one
    calibrator for both leaves each group's p50 off 0.5; apart, each is near it (three
    seeds pooled: summed distance from 0.5 of the two groups' p50 coverage .74 together,
    .24 apart)."""
    import ghs.backtest.engine as engine

    distance = {}
    for apart in (True, False):
        monkeypatch.setattr(engine, "BY_JOBS_RUNNING", ("calibrated",) if apart else ())
        total = 0.0
        for seed in (1, 2, 3):
            rows = _rows(seed, 8, rate_per_hour=1.0, mean_seconds=1000.0)
            body = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR],
                                BacktestSettings(start_seconds=48 * HOUR,
                                                 every_seconds=HOUR, sensor=LIGHT))
            busy, idle, count = _conditional_p50(body)
            assert count > 50
            total += abs(busy - 0.5) + abs(idle - 0.5)
        distance[apart] = total
    assert distance[True] < 0.35 < 0.6 < distance[False]


def test_the_defaults_mean_combines_the_age_floor_and_the_record():
    """A job that arrives at hour 1 and needs five days of CPU: every launch from hour 48
    finds it running with some 46 h or more of CPU used, so the carried view's mean is held
    at the work plus half that (scheduler.age_floor), where the view (forecast, the same mean
    before the floor) says less, and the default serves the geometric mean of that and the
    mean of the start the station's record chose (``weighted``; scheduler.combined_mean)."""
    rows = [r for r in _rows(5, 2.0, rate_per_hour=2.0, mean_seconds=200.0)
            if r[0] < HOUR] + [(HOUR + 1.0, 5 * 86400.0, "u9", "long")]
    rows += [(6 * 86400.0 + 10.0 * k, 1.0, "u0", "c0") for k in range(3)]
    body = run_backtest([Station("s", tuple(rows))], ["s.csv"], [HOUR], BacktestSettings(
        start_seconds=48 * HOUR, every_seconds=12 * HOUR, shadow_every_seconds=12 * HOUR,
        sensor=LIGHT))
    by = {}
    for record in body["launches"]:
        by.setdefault(record["predictor"], {})[record["launch_seconds"]] = record
    busy = {at: r for at, r in by["calibrated"].items() if at < HOUR + 5 * 86400.0 - HOUR}
    assert len(busy) >= 5
    for at, record in busy.items():
        age = at - HOUR - 15 * 60.0  # a snapshot at most a quarter of an hour old
        assert HOUR + 0.5 * age > by["forecast"][at]["mean"]
        # the floor that was used: half the CPU the job had at a sample before launch
        held = record["mean"] ** 2 / by["weighted"][at]["mean"]
        assert HOUR + 0.5 * age <= held * (1 + 1e-9)
        assert held <= (HOUR + 0.5 * (at - HOUR)) * (1 + 1e-9)
    # once the job has ended, no floor: the view's own mean combined with the record's
    # view's, idle under the new arrivals' load
    idle = [at for at in by["calibrated"] if at > HOUR + 5 * 86400.0 + HOUR]
    assert idle and all(by["calibrated"][at]["mean"] == pytest.approx(math.sqrt(
        by["forecast"][at]["mean"] * by["weighted"][at]["mean"]), rel=1e-12) for at in idle)


def test_a_forecast_of_almost_no_arrivals_beside_a_busy_cpu_is_a_host_not_an_error():
    """No job finished in the day before launch, so the mean demand comes from lam / rho; a
    forecast lam of 1e-24/s beside rho 0.54 (NASA cut 6 ways) made a mean demand of 5e23 s,
    which Host refuses, and the whole back-test failed. It is held at any workstation's."""
    from ghs.backtest.views import parameters_host
    from scheduler.hosts import MAX_DEMAND_SECONDS

    host = parameters_host("s", 1e-24, 0.54, None, None)
    assert host.mu == 1.0 / MAX_DEMAND_SECONDS and host.rho == 0.54
    assert host.sigma == MAX_DEMAND_SECONDS
    # an ordinary one is as before
    assert parameters_host("s", 0.01, 0.5, None, None).mu == pytest.approx(0.02)


def test_a_forecast_of_almost_no_load_beside_some_arrivals_predicts_a_finite_time():
    """The other end: a station idle for days after its users stopped (a 32-way KTH split
    over 30 days) forecast rho 1e-178 beside lam 1.4e-4/s; lam / rho made a mean demand of
    1e-175 s, whose square underflowed, and every fit of the demand law read NaN (the
    back-test stopped: "duration_for gave nan"). The mean is held at a microsecond."""
    from ghs.backtest.views import parameters_host
    from scheduler import predict
    from scheduler.hosts import MIN_DEMAND_SECONDS

    host = parameters_host("s", 1.3888888888888889e-4, 1.2113812961665785e-178, None, None)
    assert host.mu == 1.0 / MIN_DEMAND_SECONDS
    for dist in ("gamma", "weibull", "lognormal", "auto"):
        p = predict([host], 4 * HOUR, dist)
        assert math.isfinite(p.mean) and p.mean == pytest.approx(4 * HOUR, rel=1e-6)
        assert all(math.isfinite(q) for q in p.quantiles.values())


def test_a_splits_own_view_leaves_the_new_arrivals_unheld():
    """A week at utilisation 0.1, then a day's burst at 0.9: the view that holds a station's
    jobs as its backlog expects new arrivals at most at the long-run level for a single-host
    launch, and at the forecast for a split's own view (on LCG's busy stations the long-run
    level under-read the hours the shares ran)."""
    from ghs.backtest.views import Forecasts
    from ghs.backtest.world import Known
    from sensors.templates import TemplateBook

    hours = 7 * 24
    rho = np.where(np.arange(hours) >= 6 * 24, 0.9, 0.1)
    mean_demand_seconds = 300.0
    count = rho * HOUR / mean_demand_seconds
    measured = {"end_time": (np.arange(hours) + 1.0) * HOUR, "interval_seconds": np.full(
        hours, HOUR), "rho": rho, "lam": count / HOUR, "service_count": count,
        "service_sum_seconds": count * mean_demand_seconds,
        "service_sum_squares": count * 2 * mean_demand_seconds ** 2}
    known = Known(hours * HOUR, measured, None, TemplateBook(HOUR), ())
    forecasts = Forecasts(1)
    forecasts.update([known])
    view = {held: forecasts.hosts([0], ["s"], [known], known.epoch_seconds, 40 * HOUR,
                                  arrivals_only=True, held=held)[0] for held in (True, False)}
    long_run = (6 * 0.1 + 0.9) / 7
    assert view[True].rho == pytest.approx(long_run, rel=1e-6)
    assert view[False].rho > 0.5  # the battery's answer after a day of burst
    carried = forecasts.hosts([0], ["s"], [known], known.epoch_seconds, 40 * HOUR)[0]
    assert carried == forecasts.hosts([0], ["s"], [known], known.epoch_seconds, 40 * HOUR,
                                      held=False)[0]


def test_a_splits_served_mean_combines_its_view_with_the_held_one():
    """The split's view leaves the new arrivals as forecast; what it serves (``calibrated``,
    ``calibrated-hosts``) has the geometric mean of that view's mean and the held view's of
    the same shares (scheduler.combined_mean): never above the view's, below it wherever a
    station's forecast arrivals were above its long-run level, the same shares and outcome."""
    stations = [Station(f"s{k}", tuple(_rows(11 + k, 4.0, rate_per_hour=4.0)))
                for k in range(2)]
    body = run_backtest(stations, ["a.csv", "b.csv"], [HOUR, 3 * HOUR], BacktestSettings(
        start_seconds=24 * HOUR, every_seconds=3 * HOUR, sensor=LIGHT,
        calibration_lengths_seconds=(HOUR, 3 * HOUR), parallel=True))
    view = {(r["launch_seconds"], r["work"]): r for r in body["launches"]
            if r["predictor"] == "uncalibrated"}
    below = 0
    for name in ("calibrated", RECOMBINED):
        for record in (r for r in body["launches"] if r["predictor"] == name):
            own = view[record["launch_seconds"], record["work"]]
            assert record["shares"] == own["shares"]
            assert record["realised_seconds"] == own["realised_seconds"]
            assert record["mean"] <= own["mean"] * (1 + 1e-9)
            below += record["mean"] < own["mean"] * (1 - 1e-6)
    assert below >= 4


def test_a_split_that_runs_past_the_log_is_kept_as_unfinished_and_compared():
    """A station held by a job that outlasts its log: a split that gives it work cannot
    finish while the station is known. It is kept as unfinished, with the time known to
    have passed, so that the predictors that finished there can be compared with the paper
    model on its unfinished launches too (its error at least 1 - mean / known time)."""
    end = 60 * HOUR
    rows = [(h * HOUR + 17.0, 300.0, "u0", "c0") for h in range(0, 38, 2)]
    queue = Station("queue", (*rows, (40 * HOUR, 100 * HOUR, "u0", "big")), 0.0, end)
    idle = Station("idle", (), 0.0, end)
    settings = BacktestSettings(start_seconds=36 * HOUR, every_seconds=6 * HOUR,
                                shadow_every_seconds=6 * HOUR, sensor=LIGHT, parallel=True)
    out = run_backtest([queue, idle], ["queue", "idle"], [2 * HOUR], settings)
    scored = {(r["predictor"], r["launch_seconds"]) for r in out["launches"]}
    for r in out["unfinished"]:
        assert (r["predictor"], r["launch_seconds"]) not in scored
        # the busy station's share runs into the job that holds it past the log's end
        assert r["launch_seconds"] >= 40 * HOUR and r["shares"]["queue"] > 0
        assert r["known_seconds"] == pytest.approx(end - r["launch_seconds"])
    paper_open = {r["launch_seconds"]: r for r in out["unfinished"]
                  if r["predictor"] == "paper"}
    # blind to the running job, the paper model's split never finishes after it starts
    assert sorted(paper_open) == [42 * HOUR, 48 * HOUR, 54 * HOUR]
    paper = {r["launch_seconds"]: r for r in out["launches"] if r["predictor"] == "paper"}
    rows_by_name = {row["predictor"]: row for row in out["summary"]}
    assert rows_by_name["paper"]["unfinished"] == 3 and rows_by_name["paper"]["vs_paper"] is None
    # the default holds the running job and sends the whole task to the idle station
    mine = {r["launch_seconds"]: r for r in out["launches"] if r["predictor"] == "calibrated"}
    assert {48 * HOUR, 54 * HOUR} <= set(mine)
    for name in ("calibrated", "state", "naive"):
        own = {r["launch_seconds"]: r for r in out["launches"] if r["predictor"] == name}
        shared = [at for at in own if at in paper]
        censored = [at for at in own if at in paper_open]

        def error(r):
            return abs(r["mean"] - r["realised_seconds"]) / r["realised_seconds"]

        bound = [max(0.0, 1 - paper_open[at]["mean"] / paper_open[at]["known_seconds"])
                 for at in censored]
        comparison = rows_by_name[name]["vs_paper"]
        assert comparison["launches"] == len(shared)
        assert comparison["paper_unfinished"] == len(censored)
        assert comparison["mean_abs_error_ratio"] == pytest.approx(
            sum(error(own[at]) for at in shared) / sum(error(paper[at]) for at in shared))
        assert comparison["mean_abs_error_ratio_bound"] == pytest.approx(
            sum(error(own[at]) for at in shared + censored)
            / (sum(error(paper[at]) for at in shared) + sum(bound)))
    assert rows_by_name["calibrated"]["vs_paper"]["paper_unfinished"] >= 2
    for row in out["summary"]:
        own = [r for r in out["launches"] if r["predictor"] == row["predictor"]]
        open_ = [r for r in out["unfinished"] if r["predictor"] == row["predictor"]]
        assert row["unfinished"] == len(open_)
        if row["predictor"] == "naive":
            assert row["coverage_bounds"] is None
            assert all(r["quantiles"] is None for r in open_)
            continue
        for level in LEVELS:
            met = sum(r["realised_seconds"] <= r["quantiles"][level] for r in own)
            # past the known time: a quantile before it is missed, one after it undecided
            undecided = sum(r["quantiles"][level] > r["known_seconds"] for r in open_)
            assert row["coverage_bounds"][level] == pytest.approx(
                [met / (len(own) + len(open_)), (met + undecided) / (len(own) + len(open_))])
        if not open_:
            assert [row["coverage_bounds"][level][0] for level in LEVELS] == pytest.approx(
                [row["coverage"][level] for level in LEVELS])
    # the served quantiles of an unfinished split are the default's as it would serve them:
    # at or after the slowest share's dedicated time
    for r in out["unfinished"]:
        if r["quantiles"] is not None:
            assert r["quantiles"]["p50"] >= max(r["shares"].values()) * (1 - 1e-9)
    console = Console(record=True, width=250)
    show_backtest(console, out)
    text = console.export_text()
    assert "unfinished" in text and "(<= " in text


def test_a_paper_model_that_never_finishes_is_compared_by_its_bound():
    """On 32 RICC stations the paper model's split ran past the log at every launch: the
    others are still compared with it, on the least error it can have had."""
    from ghs.backtest.scoring import summarise

    def launch(predictor, at, mean, realised):
        return {"predictor": predictor, "launch_seconds": at, "work": HOUR,
                "shares": {"a": HOUR}, "realised_seconds": realised, "mean": mean,
                "quantiles": {"p50": mean, "p90": 2 * mean, "p95": 3 * mean}}

    ours = [launch("calibrated", 0.0, 2 * HOUR, 4 * HOUR),
            launch("calibrated", HOUR, 2 * HOUR, 2 * HOUR)]
    # known to have run 10 h and 4 h; means of 1 h: errors of at least 0.9 and 0.75
    paper = [{"predictor": "paper", "launch_seconds": at, "work": HOUR, "shares": {"a": HOUR},
              "known_seconds": known, "mean": HOUR,
              "quantiles": {"p50": HOUR, "p90": HOUR, "p95": 5 * HOUR}}
             for at, known in ((0.0, 10 * HOUR), (HOUR, 4 * HOUR))]
    rows = {row["predictor"]: row for row in summarise(ours, paper)}
    assert rows["calibrated"]["vs_paper"] == {
        "launches": 0, "mean_abs_error_ratio": None, "paper_unfinished": 2,
        "mean_abs_error_ratio_bound": pytest.approx((0.5 + 0.0) / (0.9 + 0.75))}
    # the paper model keeps its row: nothing finished, so no error, and its coverage is
    # known only as bounds (its p50 and p90 of 1 h came before the 10 h and 4 h known, its
    # p95 of 5 h before the 10 h; after the 4 h it may or may not have been met)
    assert rows["paper"] == {
        "predictor": "paper", "work": HOUR, "launches": 0, "mean_abs_error": None,
        "median_abs_error": None, "total_mean_over_realised": None, "coverage": None,
        "finished_before": None, "median_p90_over_p50": None, "unfinished": 2,
        "coverage_bounds": {"p50": [0.0, 0.0], "p90": [0.0, 0.0], "p95": [0.0, 0.5]},
        "vs_paper": None}
    console = Console(record=True, width=250)
    show_backtest(console, {"mode": "parallel", "stations": ["a"], "default_predictor":
                            "calibrated", "summary": [{**rows[name], "mode": "parallel"}
                                                      for name in ("paper", "calibrated")]})
    text = console.export_text()
    assert "- (<= 0.30x)" in text
    paper_line = next(line for line in text.splitlines() if line.strip("│ ").startswith("paper"))
    assert "- (>= 0%/0%/0%)" in paper_line and paper_line.count(" - ") >= 3
