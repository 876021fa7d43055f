"""Do predictions hold on a real kernel? (``ghs experiment live``, root only)

On this machine: the owners' workload of :mod:`ghs.experiments.live_owners` (an unused uid,
one core, Poisson arrivals of heavy-tailed CPU-bound jobs, utilisation ``utilisations[0]``
then ``utilisations[1]`` after half the run); a real manager and a real agent (kernel process
accounting switched on into a temporary file, as ``ghs agent`` does with
``sensor.accounting = on``); and real remote tasks launched one after another, each a single
process burning ``task_seconds`` of CPU at the lowest priority (SCHED_IDLE, nice 19) with the
remote-task marker in its environment, so the agent never counts it as the owners' load. Just
before each launch the manager is asked for the completion law of that task with one process
(``Client.predict_answer(..., processes_per_host=1)``); the task's wall time from launch to
exit is compared with it, and its finish is reported to the manager (``Client.report``, as
``ghs report`` and the Dask adapter do), whose calibrators learn from the outcomes of the
predictions it served. Between tasks the machine gets a pause with no remote task, so the
owners' jobs can be compared with and without one.

Everything else running on the machine is real load as well and is measured by the agent
like the owners' (the agent counts every user); the report gives the machine's total busy
fraction beside the owners' so a reader can see how shared it was.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ghs.adapters.worker import lowest_priority_session, worker_environment
from ghs.client import Client, ManagerError
from ghs.demo import _ghs, _start, _stop
from ghs.errors import GhsError
from ghs.experiments.live_owners import OwnerPlan, Owners, job_summary, unused_uid
from ghs.experiments.live_scoring import summarise, targets
from ghs.launch import exited_early, free_loopback_endpoint, wait_for_manager
from scheduler import Backlog, Host, predict

MEAN_DEMAND_SECONDS = 1.0
AGENT_INTERVAL_SECONDS = 5.0
MIN_MEASUREMENTS = 3
MARKER = "GHS_REMOTE_TASK"
# a remote task still running this many task lengths after the owners' end is stopped and
# counted as finishing after every predicted quantile
_STOP_AFTER_TASKS = 2.0
_BURN = ("import sys, time\nlimit = float(sys.argv[1])\n"
         "while time.process_time() < limit:\n    pass\n")


class LiveExperimentError(GhsError):
    """The live experiment cannot run here, or its daemons did not come up."""

    code = "live_failed"


def check_settings(duration_seconds: float, task_seconds: float,
                   utilisations: Sequence[float]) -> tuple[float, float]:
    """The two utilisations after checking every setting (LiveExperimentError otherwise)."""
    if not (isinstance(task_seconds, (int, float)) and math.isfinite(task_seconds)
            and task_seconds >= 1.0):
        raise LiveExperimentError(f"task length must be at least 1 s, got {task_seconds!r}",
                                  field="task_seconds", value=task_seconds)
    least = max(60.0, 4.0 * task_seconds)
    if not (isinstance(duration_seconds, (int, float)) and math.isfinite(duration_seconds)
            and duration_seconds >= least):
        raise LiveExperimentError(f"duration must be at least {least:g} s (60 s and 4 tasks), "
                                  f"got {duration_seconds!r}", field="duration",
                                  value=duration_seconds)
    values = tuple(utilisations)
    if len(values) != 2 or not all(isinstance(u, (int, float)) and 0 < u < 1 for u in values):
        raise LiveExperimentError(f"utilisation needs two values in (0, 1), got {values!r}",
                                  field="utilisation", value=list(values))
    return float(values[0]), float(values[1])


def check_root(geteuid: Callable[[], int] = os.geteuid) -> None:
    if geteuid() != 0:
        raise LiveExperimentError(
            "ghs experiment live needs root: it runs the owners' jobs as an unused uid and "
            "switches kernel process accounting on", field="uid", value=geteuid())


def _cpu_busy_and_total() -> tuple[float, float]:
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [float(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


def run(duration_seconds: float = 1800.0, task_seconds: float = 60.0,
        utilisations: Sequence[float] = (0.3, 0.5), *, seed: int = 7,
        progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the experiment (blocks for ``duration_seconds`` and a little more) and report.

    ``progress`` is called with each task's record as it finishes.
    """
    first, second = check_settings(duration_seconds, task_seconds, utilisations)
    check_root()
    uid = unused_uid()
    if uid is None:
        raise LiveExperimentError("no unused uid for the owners' workload", field="uid")
    core = max(os.sched_getaffinity(0))
    plan = OwnerPlan(uid=uid, core=core, duration_seconds=float(duration_seconds),
                     utilisations=(first, second), mean_demand_seconds=MEAN_DEMAND_SECONDS,
                     seed=seed)
    busy_before = _cpu_busy_and_total()
    started = time.time()
    # the owners fork before any daemon or ZeroMQ thread exists in this process
    owners = Owners(plan)
    owners.start()
    try:
        tasks, host = _with_daemons(plan, started, float(task_seconds), progress)
        record = owners.report()
    finally:
        owners.stop()
    busy_after = _cpu_busy_and_total()
    cores = os.cpu_count() or 1
    machine_busy = ((busy_after[0] - busy_before[0]) / (busy_after[1] - busy_before[1])
                    if busy_after[1] > busy_before[1] else 0.0)
    return _report(plan, float(task_seconds), host, tasks, record, machine_busy, cores,
                   started)


def _with_daemons(plan: OwnerPlan, started: float, task_seconds: float,
                  progress: Callable[[dict[str, Any]], None] | None
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="ghs-live-") as folder:
        root = Path(folder)
        (root / "none.toml").write_text("")
        env = {key: value for key, value in os.environ.items() if not key.startswith("GHS_")}
        env.update({"GHS_CONFIG": str(root / "none.toml"), "HOME": str(root)})
        processes: list[subprocess.Popen] = []
        try:
            endpoint = free_loopback_endpoint()
            manager = _start(_ghs("manager", "--endpoint", endpoint, "--database",
                                  str(root / "manager.sqlite")), root / "manager.log", env)
            processes.append(manager)
            try:
                wait_for_manager(manager, endpoint, 30.0, root / "manager.log")
            except GhsError as exc:
                raise LiveExperimentError(exc.message) from None
            agent_env = {**env, "GHS_SENSOR_ACCOUNTING": "on",
                         "GHS_SENSOR_ACCOUNTING_PATH": str(root / "pacct"),
                         "GHS_SENSOR_MAX_PER_HOUR": str(int(3600 / AGENT_INTERVAL_SECONDS)),
                         "GHS_SENSOR_CAPACITY_INTERVAL_SECONDS": f"{AGENT_INTERVAL_SECONDS:g}",
                         "GHS_SENSOR_SPEED_RUNS": "3"}
            processes.append(_start(_ghs(
                "agent", "--manager", endpoint, "--interval", f"{AGENT_INTERVAL_SECONDS:g}s",
                "--outbox", str(root / "outbox.sqlite"), "--store",
                str(root / "store.sqlite")), root / "agent.log", agent_env))
            with Client(endpoint, timeout_seconds=30.0) as client:
                name = _wait_for_host(client, processes, root,
                                      started + max(plan.duration_seconds / 4, 60.0))
                return _run_tasks(client, name, plan, started, task_seconds, progress)
        finally:
            _stop(processes)


def _wait_for_host(client: Client, processes: list[subprocess.Popen], root: Path,
                   deadline: float) -> str:
    """The agent's host once the manager has MIN_MEASUREMENTS of it and can use it."""
    while True:
        exited = exited_early(processes, root)
        if exited is not None:
            raise LiveExperimentError(f"a daemon exited early {exited}")
        rows = [row for row in client.status().hosts
                if row.get("usable") and row.get("measurements", 0) >= MIN_MEASUREMENTS]
        if rows:
            return str(rows[0]["name"])
        if time.time() > deadline:
            raise LiveExperimentError("the agent did not report enough measurements within "
                                      "the warm-up (a quarter of the run, at least 60 s)")
        time.sleep(0.5)


def _run_tasks(client: Client, name: str, plan: OwnerPlan, started: float,
               task_seconds: float, progress: Callable[[dict[str, Any]], None] | None
               ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    end = started + plan.duration_seconds
    middle = started + plan.duration_seconds / 2
    pause = max(2.0, 0.25 * task_seconds)
    tasks: list[dict[str, Any]] = []
    host: dict[str, Any] = {"name": name}
    # launches stop two task lengths before the owners do: the last tasks still meet them
    while time.time() + 2 * task_seconds < end:
        try:
            params = next(h for h in client.hosts() if h.name == name)
            # the jobs the manager's latest snapshot lists (which processes the start held)
            running = client.history(name, since_seconds=1.0).get("running")
            answer = client.predict_answer(task_seconds * params.tau, [name],
                                           processes_per_host=1)
        except (StopIteration, ManagerError) as exc:
            raise LiveExperimentError(f"the manager cannot predict on {name}: {exc}") from None
        prediction = answer.prediction
        launch = time.time()
        host = {"name": name, "cores": params.cores, "tau": params.tau,
                "assumptions": answer.assumptions.to_dict(),
                "last_estimate": {"lam": params.lam, "rho": params.rho, "mu": params.mu,
                                  "predicted_mean": prediction.mean}}
        realised = _time_task(task_seconds, end - launch + _STOP_AFTER_TASKS * task_seconds)
        beside = _beside(params, task_seconds * params.tau)
        model = getattr(prediction, "model", None)
        if model is not None:  # the manager's own figures before its calibration
            beside["uncalibrated"] = {"mean": model["mean"], "quantiles": {
                key: model["quantiles"][key] for key in ("p50", "p90")}}
        record = {"launch_offset_seconds": launch - started,
                  "phase": 1 if launch < middle else 2,
                  "end_offset_seconds": time.time() - started,
                  "realised_seconds": realised, "mean": prediction.mean,
                  "quantiles": {key: prediction.quantiles[key] for key in ("p50", "p90")},
                  "reported": _report_finish(client, answer.prediction_id, name, launch,
                                             realised),
                  "beside": beside,
                  "backlog": prediction.backlog()[0],
                  "lam": params.lam, "rho": params.rho, "mu": params.mu,
                  # why the manager served what it did: the snapshot's jobs, forecasters
                  # and calibration (factors, the calibrator's record, any envelope)
                  "served": {key: answer.host_parameters[0].get(key)
                             for key in ("start", "predictor_view")}
                  if answer.host_parameters else None,
                  "running_at_launch": running}
        tasks.append(record)
        if progress is not None:
            progress(record)
        time.sleep(pause)
    return tasks, host


def _report_finish(client: Client, prediction_id: int | None, host: str, launch: float,
                   realised: float | None) -> bool:
    """Tell the manager when the task's share on ``host`` finished, as a batch system would
    (``ghs report --host``): its calibrators learn from the outcomes of host shares of the
    predictions it served. Whether it was taken."""
    if prediction_id is None or realised is None:
        return False
    try:
        client.report(prediction_id, launch + realised, host=host)
    except ManagerError:
        return False
    return True


def _beside(host: Host, work: float) -> dict[str, dict[str, Any]]:
    """The same estimates under the other start states, one process (what the manager's own
    start state adds or costs)."""
    out = {}
    for name, backlog in (("idle", None), ("steady-state", [Backlog.steady_state()])):
        other = predict([host], work, backlog=backlog, processes_per_host=1)
        out[name] = {"mean": other.mean,
                     "quantiles": {key: other.quantiles[key] for key in ("p50", "p90")}}
    return out


def _time_task(task_seconds: float, hard_limit_seconds: float) -> float | None:
    """Wall seconds of one remote task from launch to exit (None: stopped at the limit)."""
    began = time.monotonic()
    task = subprocess.Popen([sys.executable, "-c", _BURN, repr(task_seconds)],
                            env=worker_environment(os.environ, MARKER),
                            preexec_fn=lowest_priority_session,
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        task.wait(hard_limit_seconds)
    except subprocess.TimeoutExpired:
        task.kill()
        task.wait()
        return None
    finally:
        # interrupted (Ctrl-C, SIGTERM): the task must not outlive the experiment
        if task.poll() is None:
            task.kill()
            task.wait()
    return time.monotonic() - began


def _report(plan: OwnerPlan, task_seconds: float, host: dict[str, Any],
            tasks: list[dict[str, Any]], record: dict[str, Any], machine_busy: float,
            cores: int, started: float) -> dict[str, Any]:
    elapsed = time.time() - started
    jobs = record["jobs"]
    busy = [(started + t["launch_offset_seconds"], started + t["end_offset_seconds"])
            for t in tasks]
    phases = []
    for index, (low, high) in enumerate(((record["start"], record["middle"]),
                                         (record["middle"], record["end"]))):
        members = [job for job in jobs if low <= job["forked"] < high]
        phases.append({"phase": index + 1, "utilisation_target": plan.utilisations[index],
                       **job_summary(members, busy, low, high)})
    summary = summarise(tasks)
    by_phase = [{"phase": phase, **summarise([t for t in tasks if t["phase"] == phase])}
                for phase in (1, 2)]
    owners_cpu = sum(job["cpu"] for job in jobs)
    beside = {name: summarise(tasks, name) for name in ("idle", "steady-state", "uncalibrated")
              if all(name in t["beside"] for t in tasks)}
    return {
        "settings": {"duration_seconds": plan.duration_seconds, "task_seconds": task_seconds,
                     "utilisations": list(plan.utilisations),
                     "mean_demand_seconds": plan.mean_demand_seconds, "core": plan.core,
                     "uid": plan.uid, "seed": plan.seed, "processes_per_host": 1},
        "host": host,
        "summary": summary,
        "phases": by_phase,
        "beside": beside,
        "owners": phases,
        "machine": {"cores": cores, "busy_fraction": machine_busy,
                    "owners_busy_fraction": owners_cpu / max(elapsed * cores, 1e-9),
                    "elapsed_seconds": elapsed},
        "targets": targets(summary),
        "tasks": tasks,
    }


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def show(console: Any, result: dict[str, Any]) -> None:
    """Coverage and error per phase, the owners' slowdown, and the targets."""
    from rich.table import Table

    settings = result["settings"]
    table = Table(title=f"{settings['task_seconds']:g} s single-process remote tasks on "
                        f"{result['host'].get('name')} over {settings['duration_seconds']:g} s "
                        f"(owners at {settings['utilisations'][0]:g} then "
                        f"{settings['utilisations'][1]:g} of one core)", title_justify="left")
    for column in ("tasks of", "tasks", "by p50", "by p90", "mean |error|", "p90/p50",
                   "mean realised s", "mean predicted s"):
        table.add_column(column, justify="right")
    for label, row in [("all", result["summary"]),
                       *((f"phase {p['phase']}", p) for p in result["phases"]),
                       *((f"all, {name}" + ("" if name == "uncalibrated" else " start"), row)
                         for name, row in result["beside"].items())]:
        table.add_row(label, str(row["tasks"]), _percent(row["p50_coverage"]),
                      _percent(row["p90_coverage"]), _percent(row["mean_error"]),
                      "-" if row["median_width"] is None else f"{row['median_width']:.2f}",
                      _seconds(row.get("mean_realised_seconds")),
                      _seconds(row.get("mean_predicted_seconds")))
    console.print(table)
    for phase in result["owners"]:
        ratio = phase["slowdown_ratio"]
        console.print(
            f"owners, phase {phase['phase']}: {phase['jobs']} jobs, utilisation "
            f"{phase['utilisation']:.2f} (target {phase['utilisation_target']:g}); mean "
            f"slowdown {_ratio(phase['with_remote']['mean_slowdown'])} with a remote task "
            f"running, {_ratio(phase['without_remote']['mean_slowdown'])} without"
            + ("" if ratio is None else f" (x{ratio:.2f})"))
    console.print("all, idle start / steady-state start: the manager's 24-hour estimates on the "
                  "host's average core with the paper's idle start, or a steady-state backlog; "
                  "all, uncalibrated: the manager's answer before its calibration (each task's "
                  "finish is reported to the manager, whose calibrators learn from it)")
    machine = result["machine"]
    console.print(f"machine: {machine['cores']} cores {100 * machine['busy_fraction']:.0f}% "
                  f"busy overall, of which the owners {100 * machine['owners_busy_fraction']:.0f}"
                  "% (the rest is everything else running here: a shared machine)")
    for key, entry in result["targets"].items():
        verdict = "-" if entry["met"] is None else ("met" if entry["met"] else "MISSED")
        console.print(f"target {key.replace('_', ' ')} {'>=' if 'coverage' in key else '<='} "
                      f"{_percent(entry['target'])}: {_percent(entry['measured'])} {verdict}")
        if entry.get("nominal_at_most_chance") is not None:
            summary = result["summary"]
            covered, tasks = summary["p90_covered_tasks"], summary["tasks"]
            console.print(
                f"  {covered} of {tasks} by their p90; a p90 exactly at "
                f"{_percent(entry['nominal'])} has {covered} or fewer in "
                f"{_percent(entry['nominal_at_most_chance'])} of runs of {tasks}, {covered} or "
                f"more in {_percent(entry['nominal_at_least_chance'])}")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
