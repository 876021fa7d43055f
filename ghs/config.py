"""The one configuration object: every default lives here.

``load_config`` builds it in one place from, in rising precedence, the defaults below, a TOML
file (``--config``, ``GHS_CONFIG`` or ``~/.config/ghs/config.toml``), ``GHS_*`` environment
variables and command-line flags. Each section is a frozen dataclass; a field's metadata gives
its allowed range or choices, which validation names when a value is bad.

To add a setting: add a field with ``setting(...)`` to a section (or a new section to
``Config``). Its environment variable is ``GHS_<SECTION>_<FIELD>`` in upper case (``GHS_MANAGER``
for the top-level manager endpoint).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ghs.durations import parse_duration
from ghs.errors import ConfigError, DurationError
from scheduler.choices import (  # plain tuples: reading the config does not load numpy
    DEFAULT_DISTRIBUTION,
    DEMAND_KINDS,
    DISTRIBUTIONS,
    METHODS,
    PARTITIONS,
    PREDICTORS,
    START_CHOICES,
    START_STATES,
)

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[no-redef]


def setting(default: Any, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False, or_zero: bool = False,
            choices: tuple[str, ...] | None = None, duration: bool = False,
            help: str = "") -> Any:
    """A config field with its allowed range (closed unless ``*_open``; ``or_zero``: 0 is
    allowed too, as "off") or choices."""
    return field(default=default, metadata={
        "low": low, "high": high, "low_open": low_open, "high_open": high_open,
        "or_zero": or_zero, "choices": choices, "duration": duration, "help": help,
    })


@dataclass(frozen=True)
class SchedulerConfig:
    """Defaults of prediction and machine-set selection."""

    distribution: str = setting(DEFAULT_DISTRIBUTION, choices=DISTRIBUTIONS,
                                help="fit for the conditional delay (see README for the data)")
    partition: str = setting("equal-mean", choices=PARTITIONS, help="how work is split")
    method: str = setting("auto", choices=METHODS,
                         help="machine-set selection method (auto: within 1% of optimal)")
    rho_max: float = setting(0.9, low=0.0, high=1.0, low_open=True,
                             help="hosts at or above this utilisation are not candidates")
    optimal_max_hosts: int = setting(22, low=1, high=30,
                                     help="largest candidate set exact selection accepts")
    optimal_budget_seconds: float = setting(
        20.0, low=0.0, low_open=True, high=86400.0, duration=True,
        help="longest exact selection runs before it gives up (below a client's 30 s wait)")
    task_ratio: float = setting(4.0, low=0.0, low_open=True,
                                help="minimum work per host over mean local demand (Fig. 3)")
    predictor: str = setting("calibrated", choices=PREDICTORS,
                             help="a manager's answers (README: Calibrated answers)")
    start_choice: str = setting("auto", choices=START_CHOICES,
                                help="calibrated answers' start: carried load, state, record, "
                                     "or auto (carried for one host, else state; README)")
    start_state: str = setting(
        "auto", choices=START_STATES,
        help="the local work a task finds at launch: auto (the jobs of a fresh running "
             "snapshot, else the steady state), steady-state, or idle (the paper's model)")


@dataclass(frozen=True)
class SimulationConfig:
    """Defaults of ``ghs simulate``."""

    runs: int = setting(4000, low=1, high=10_000_000, help="Monte Carlo repetitions")
    service: str = setting("lognormal", choices=DEMAND_KINDS,
        help="distribution of local jobs' CPU demands (lognormal: each host's mu and sigma)")
    warm: bool = setting(True, help="start hosts in a warmed-up (stationary) state, as a "
                                    "machine is at a random launch time")


ACCOUNTING_MODES = ("on", "auto", "off")


@dataclass(frozen=True)
class SensorConfig:
    """Defaults of the per-host sensor (``ghs measure`` and the agent). Lists are comma-separated.

    Field names match ``sensors.host.LOCAL_SENSOR_OPTIONS`` where they overlap.
    """

    interval_seconds: float = setting(60.0, low=1.0, high=3600.0, duration=True,
                                      help="length of one measurement")
    accounting: str = setting("auto", choices=ACCOUNTING_MODES,
                              help="on: root switches kernel accounting to accounting_path; "
                                   "auto: use an active readable accounting file; off: never")
    accounting_path: str = setting("/var/lib/ghs/pacct",
                                   help="the accounting file the sensor owns in mode 'on'")
    accounting_existing: str = setting(
        "share", choices=("share", "refuse"),
        help="mode 'on' when another accounting file is active: read it, or refuse")
    accounting_candidates: str = setting(
        "/var/log/account/pacct,/var/account/pacct,/var/log/pacct,/var/adm/pacct",
        help="where system accounting files usually are")
    accounting_max_bytes: int = setting(16_000_000, low=65536, high=2**40,
                                        help="the sensor's own accounting file is emptied "
                                             "between measurements beyond this size")
    min_per_hour: int = setting(2, low=1, high=3600, help="fewest measurements in an hour")
    max_per_hour: int = setting(30, low=1, high=3600,
                                help="most measurements in an hour (also the first hour's)")
    window_hours: float = setting(24.0, low=1.0, high=168.0,
                                  help="history behind n_s and the estimates (paper: 24)")
    retention_days: float = setting(8.0, low=8.0, high=366.0, help="how long the store keeps data")
    users_allow: str = setting("", help="only these users' processes are local load (empty: all)")
    users_deny: str = setting("", help="these users' processes are never local load")
    remote_users: str = setting("", help="users whose processes are remote tasks")
    remote_cgroup: str = setting("", help="cgroup path prefix holding remote tasks")
    remote_marker: str = setting("GHS_REMOTE_TASK",
                                 help="environment variable marking remote tasks")
    # the manager's range of a host's speed (protocol.messages.TAU_RANGE): an override it
    # would refuse in the agent's hello is refused here, when the agent starts
    tau: float = setting(0.0, low=1e-6, high=1e6, or_zero=True,
                         help="speed override (0: benchmark)")
    speed_command: str = setting("", help="time this command instead of the benchmark")
    speed_command_reference_seconds: float = setting(
        0.0, low=0.0, help="CPU seconds the speed command takes on the reference machine")
    speed_runs: int = setting(5, low=1, high=100, help="benchmark runs (best is kept)")
    capacity_interval_seconds: float = setting(
        60.0, low=1.0, high=3600.0, duration=True,
        help="cadence of the harvestable-capacity series (independent of measurements)")
    running_max_jobs: int = setting(64, low=1, high=100_000,
                                    help="most jobs in one running-jobs snapshot (largest CPU)")
    running_min_core_share: float = setting(
        0.05, low=0.0, high=1.0,
        help="a sleeping process seen before is a running job only if it used this share of "
             "one core since the previous snapshot (0: any CPU)")
    hash_identities: bool = setting(False, help="replace users and commands by keyed hashes")
    identity_key_path: str = setting("", help="per-site secret key file for hash_identities")
    template_half_life_seconds: float = setting(
        7 * 86400.0, low=3600.0, high=366 * 86400.0, duration=True,
        help="demand templates: a job's weight halves after this long")
    template_interval_seconds: float = setting(
        600.0, low=1.0, high=86400.0, duration=True,
        help="how often the demand templates' increments are shipped")
    template_max_keys: int = setting(2000, low=1, high=1_000_000,
                                     help="most (user, command) and user templates kept")
    tau_refresh_interval_seconds: float = setting(
        3600.0, low=0.0, high=30 * 86400.0, duration=True,
        help="re-measure tau at idle priority this often (0: never)")
    tau_refresh_threshold: float = setting(0.02, low=0.0, high=1.0,
                                           help="relative tau change worth reporting")


@dataclass(frozen=True)
class ManagerConfig:
    """Defaults of ``ghs manager`` (the ``[pcm]`` table; the top-level ``manager`` is the
    endpoint clients and agents connect to)."""

    endpoint: str = setting("tcp://127.0.0.1:5555", help="ROUTER for agents (and queries)")
    client_endpoint: str = setting("", help="optional second ROUTER for queries only")
    database: str = setting("~/.local/share/ghs/manager.sqlite", help="SQLite file (WAL)")
    stale_after_seconds: float = setting(300.0, low=1.0, high=86400.0 * 7, duration=True,
                                         help="a host silent this long is stale")
    keys: str = setting("", help="the manager's CurveZMQ secret key file (from ghs keys)")
    allow: str = setting("", help="allowed agents'/clients' public keys: a directory or file")
    insecure: bool = setting(False, help="allow binding beyond loopback without keys")
    workers: int = setting(2, low=1, high=64, help="threads answering queries")
    max_pending_queries: int = setting(256, low=1, high=100_000,
                                       help="queries waiting beyond this get 'busy'")
    snapshot_fresh_seconds: float = setting(
        180.0, low=1.0, high=86400.0, duration=True,
        help="a running-jobs snapshot this much older than its host's latest record is stale")
    retention_days: float = setting(8.0, low=1.0, high=3660.0,
                                    help="measurements, full-resolution capacity and "
                                         "running-jobs history older than this (before each "
                                         "host's latest record) are pruned")
    hourly_retention_days: float = setting(90.0, low=1.0, high=3660.0,
                                           help="hourly capacity sums are kept this long")
    calibrate_every_seconds: float = setting(
        60.0, low=1.0, high=86400.0, duration=True,
        help="how often the manager brings every host's forecast and calibration up to date")
    metrics_port: int = setting(0, low=0, high=65535,
                                help="serve Prometheus metrics on this port (0: off)")
    metrics_address: str = setting("127.0.0.1", help="address the metrics port binds")


@dataclass(frozen=True)
class AgentConfig:
    """Defaults of ``ghs agent``."""

    host_id: str = setting("", help="this host's id at the manager (default: hostname)")
    outbox: str = setting("~/.local/share/ghs/agent-outbox.sqlite",
                          help="unacknowledged measurements (SQLite)")
    outbox_hold_records: int = setting(
        20000, low=0, high=10_000_000,
        help="records kept in memory while the outbox cannot be written (a full disk), "
             "written when it can be again")
    store: str = setting("~/.local/share/ghs/agent-store.sqlite",
                         help="the sensor's local store of measurements and estimates")
    heartbeat_seconds: float = setting(30.0, low=0.1, high=3600.0, duration=True,
                                       help="a heartbeat when nothing else was sent")
    ack_timeout_seconds: float = setting(5.0, low=0.05, high=600.0, duration=True,
                                         help="resend a batch not acknowledged in this time")
    max_backoff_seconds: float = setting(60.0, low=0.1, high=3600.0, duration=True,
                                         help="longest wait between resends")
    batch_size: int = setting(256, low=1, high=1000, help="measurements per message")
    keys: str = setting("", help="the agent's CurveZMQ secret key file")
    server_key: str = setting("", help="the manager's public key file")
    calibrate_every_seconds: float = setting(
        60.0, low=1.0, high=86400.0, duration=True,
        help="how often the manager brings every host's forecast and calibration up to date")
    metrics_port: int = setting(0, low=0, high=65535,
                                help="serve Prometheus metrics on this port (0: off)")
    metrics_address: str = setting("127.0.0.1", help="address the metrics port binds")


@dataclass(frozen=True)
class AdaptersConfig:
    """Defaults of the Dask adapter, ``ghs worker`` and ``ghs condor-attrs``."""

    check_seconds: float = setting(0.5, low=0.01, high=3600.0, duration=True,
                                   help="how often a Dask run checks for stragglers and "
                                        "lost workers")
    worker_nthreads: int = setting(1, low=1, high=1024, help="threads of a `ghs worker`")
    condor_work_seconds: float = setting(3600.0, low=1.0, duration=True,
                                         help="task size behind GhsP90SecondsPerHourOfWork")
    eta_seconds: float = setting(5.0, low=0.0, high=3600.0, duration=True,
                                 help="least time between two ETAs of a running Dask task "
                                      "(0: after every item)")
    report_completions: bool = setting(True, help="a Dask run reports each host's finished "
                                                  "share to the manager's track record")


@dataclass(frozen=True)
class ClientConfig:
    """Defaults of clients (``ghs status``, ``ghs predict --manager``, ``ghs.Client``)."""

    timeout_seconds: float = setting(30.0, low=0.01, high=3600.0, duration=True,
                                     help="how long to wait for the manager's answer")
    keys: str = setting("", help="the client's CurveZMQ secret key file")
    server_key: str = setting("", help="the manager's public key file")


@dataclass(frozen=True)
class Config:
    """Every setting of ghs, validated."""

    manager: str | None = setting(None, help="manager endpoint, e.g. tcp://pcm:5555")
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    sensor: SensorConfig = field(default_factory=SensorConfig)
    pcm: ManagerConfig = field(default_factory=ManagerConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    adapters: AdaptersConfig = field(default_factory=AdaptersConfig)


def _convert(section: str, f: dataclasses.Field, raw: Any) -> Any:
    name = f"{section}.{f.name}" if section else f.name
    meta = f.metadata
    default = f.default
    value = raw
    try:
        if meta.get("duration"):
            value = parse_duration(raw, what=name)
        elif isinstance(default, bool):
            if isinstance(raw, str):
                lowered = raw.strip().lower()
                if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                value = lowered in ("1", "true", "yes", "on")
            elif isinstance(raw, bool):
                value = raw
            else:
                raise ValueError
        elif isinstance(default, int):
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            value = int(raw)
        elif isinstance(default, float):
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
        elif raw is not None:
            value = str(raw)
    except DurationError as exc:
        raise ConfigError(exc.message, field=name, value=raw) from None
    except (TypeError, ValueError):
        kind = "true/false" if isinstance(default, bool) else type(default).__name__
        raise ConfigError(f"config {name}: expected {kind}, got {raw!r}",
                          field=name, value=raw) from None
    _check_range(name, meta, value)
    return value


def _check_range(name: str, meta: Mapping[str, Any], value: Any) -> None:
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(f"config {name}: {value!r} is not one of {', '.join(choices)}",
                          field=name, value=value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if meta.get("or_zero") and value == 0:
            return
        low, high = meta.get("low"), meta.get("high")
        bad = not math.isfinite(value)
        if low is not None:
            bad = bad or value < low or (meta.get("low_open") and value == low)
        if high is not None:
            bad = bad or value > high or (meta.get("high_open") and value == high)
        if bad:
            left = "(" if meta.get("low_open") else "["
            right = ")" if meta.get("high_open") else "]"
            low_text = "-inf" if low is None else f"{low:g}"
            high_text = "inf" if high is None else f"{high:g}"
            raise ConfigError(
                f"config {name}: {value!r} is outside the allowed range "
                f"{'0 or ' if meta.get('or_zero') else ''}{left}{low_text}, {high_text}{right}",
                field=name, value=value)


def _build_section(cls: type, section: str, values: Mapping[str, Any]) -> Any:
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, raw in values.items():
        f = known.get(key.replace("-", "_"))
        if f is None:
            where = f"[{section}]" if section else "the top level"
            raise ConfigError(f"config: unknown setting {key!r} in {where}", field=key, value=raw)
        if dataclasses.is_dataclass(f.default_factory if f.default_factory is not
                                    dataclasses.MISSING else None):
            if not isinstance(raw, Mapping):
                raise ConfigError(f"config: [{f.name}] must be a table", field=f.name, value=raw)
            kwargs[f.name] = _build_section(f.default_factory, f.name, raw)
        else:
            kwargs[f.name] = _convert(section, f, raw)
    return cls(**kwargs)


def _sections() -> dict[str, type]:
    return {f.name: f.default_factory for f in dataclasses.fields(Config)
            if f.default_factory is not dataclasses.MISSING}


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    known = {"GHS_CONFIG"} | {f"GHS_{f.name.upper()}" for f in dataclasses.fields(Config)
                              if f.name not in _sections()}
    known |= {f"GHS_{section.upper()}_{f.name.upper()}" for section, cls in _sections().items()
              for f in dataclasses.fields(cls)}
    unknown = sorted(key for key in env if key.startswith("GHS_") and key not in known)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]} in the environment (settings are "
                          "GHS_<SECTION>_<FIELD>, e.g. GHS_SCHEDULER_RHO_MAX)",
                          field=unknown[0], value=env[unknown[0]])
    found: dict[str, Any] = {}
    for f in dataclasses.fields(Config):
        if f.name in _sections():
            continue
        key = f"GHS_{f.name.upper()}"
        if env.get(key):
            found[f.name] = env[key]
    for section, cls in _sections().items():
        for f in dataclasses.fields(cls):
            key = f"GHS_{section.upper()}_{f.name.upper()}"
            if env.get(key):
                found.setdefault(section, {})[f.name] = env[key]
    return found


def default_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "ghs" / "config.toml"


def _read_file(path: Path, explicit: bool) -> dict[str, Any]:
    if not path.exists():
        if explicit:
            raise ConfigError(f"config file {str(path)!r} does not exist", field="config",
                              value=str(path))
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r}: {exc}", field="config",
                          value=str(path)) from None
    except RecursionError:  # thousands of nested brackets: no config nests so
        raise ConfigError(f"config file {str(path)!r} nests too deeply to be a config",
                          field="config", value=str(path)) from None


def load_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """Build the validated Config: defaults < file < environment < ``overrides`` (flags).

    ``overrides`` uses the file's shape, e.g. ``{"scheduler": {"rho_max": 0.8}}``; entries
    whose value is None are ignored so unset flags fall through.
    """
    env = os.environ if env is None else env
    explicit = path is not None or bool(env.get("GHS_CONFIG"))
    config_path = Path(path or env.get("GHS_CONFIG") or default_config_path(env))
    values = _read_file(config_path, explicit)
    values = _merge(values, _from_environment(env))
    values = _merge(values, _drop_none(overrides or {}))
    return _build_section(Config, "", values)


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            inner = _drop_none(value)
            if inner:
                cleaned[key] = inner
        elif value is not None:
            cleaned[key] = value
    return cleaned
