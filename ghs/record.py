"""The one definition of a measurement and of a host's hello.

The agent's wire fields, the manager's SQL columns and the conversions between the sensors'
record (``sensors.measurement.Measurement``), the protocol's and a stored row all derive from
``MEASUREMENT`` and ``HostIdentity`` below, so a new field is one edit here (plus its
validation in ``protocol``, which stays independent; tests/unit/test_record.py holds the two
equal).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol import Hello
from sensors.measurement import Measurement as SensorMeasurement


@dataclass(frozen=True)
class Column:
    """One measurement field: ``wire`` is its protocol name and the manager's column;
    ``sensor`` the attribute of the sensors' Measurement it comes from (None: not a sensor
    field); ``sql`` the column's Python type; ``required`` whether the wire always has it."""

    wire: str
    sensor: str | None
    sql: type
    required: bool = True


MEASUREMENT: tuple[Column, ...] = (
    Column("start_epoch_seconds", "start_time", float),
    Column("end_epoch_seconds", "end_time", float),
    Column("lam_per_second", "lam", float),
    Column("rho", "rho", float),
    Column("tau", None, float, required=False),
    Column("service_count", "service_count", int),
    Column("service_cpu_seconds_sum", "service_sum_seconds", float),
    Column("service_cpu_seconds_sum_squares", "service_sum_squares", float),
    Column("busy_cpu_seconds", "busy_cpu_seconds", float),
    Column("jobs_started", "jobs_started", int),
    Column("jobs_between", "jobs_between", int),
    Column("running_processes", "running", int),
    Column("lambda_source", "lambda_source", str, required=False),
    Column("rho_source", "rho_source", str, required=False),
    Column("quality", "quality", str, required=False),
)
"""Every measurement field but ``seq``, in wire order."""

# sensor fields the wire does not carry: derived from the others or from the hello
_SENSOR_ONLY = {"interval_seconds", "cores"}
_DEFAULT_SOURCES = {"lambda_source": "accounting", "rho_source": "kernel"}


def measurement_columns() -> dict[str, type]:
    """The manager's ``measurements`` table: host, seq, every field, time received."""
    columns: dict[str, type] = {"host_id": str, "seq": int}
    columns.update((column.wire, column.sql) for column in MEASUREMENT)
    columns["received_epoch_seconds"] = float
    return columns


def wire_fields(measurement: SensorMeasurement, tau: float) -> dict[str, Any]:
    """A sensor measurement as the protocol's measurement fields (without ``seq``)."""
    fields = {column.wire: getattr(measurement, column.sensor)
              for column in MEASUREMENT if column.sensor is not None}
    fields["tau"] = tau
    fields["rho"] = min(max(measurement.rho, 0.0), 1.0)
    # the wire carries flag names only; details such as "name:0.40" stay in the agent's store
    fields["quality"] = list(dict.fromkeys(flag.split(":", 1)[0]
                                           for flag in measurement.quality))
    return fields


def stored_rows(host_id: str, measurements: Iterable[Any], received_epoch_seconds: float
                ) -> list[dict[str, Any]]:
    """Manager rows from protocol Measurement objects."""
    # one C-level itemgetter call per measurement instead of a getattr per field: this runs
    # for every stored measurement on the manager's ingest path
    wire = operator.attrgetter(*(column.wire for column in MEASUREMENT))
    names = tuple(column.wire for column in MEASUREMENT)
    rows = []
    for m in measurements:
        row = dict(zip(names, wire(m)))
        row["host_id"] = host_id
        row["seq"] = m.seq
        row["quality"] = ",".join(m.quality or ())
        row["received_epoch_seconds"] = received_epoch_seconds
        rows.append(row)
    return rows


def sensor_measurement(row: Mapping[str, Any], cores: int) -> SensorMeasurement:
    """A stored row as the sensors' Measurement, so the sensors' estimator serves here too."""
    values = {column.sensor: row[column.wire] for column in MEASUREMENT
              if column.sensor is not None}
    for name, default in _DEFAULT_SOURCES.items():
        values[name] = values[name] or default
    values["quality"] = tuple(flag for flag in (row["quality"] or "").split(",") if flag)
    values["interval_seconds"] = row["end_epoch_seconds"] - row["start_epoch_seconds"]
    values["cores"] = cores
    return SensorMeasurement(**values)


@dataclass(frozen=True)
class HostIdentity:
    """What an agent says about a host in its hello; the manager stores the same fields.

    ``replay_zero_epoch_seconds``: for a replayed log, the epoch its time 0 is mapped to.
    """

    host_id: str
    hostname: str
    cores: int
    tau: float
    os: str
    agent_version: str
    simulated: bool = False
    replay_zero_epoch_seconds: float | None = None

    def hello(self, request_id: int) -> Hello:
        return Hello(request_id=request_id, **dataclasses.asdict(self))

    @classmethod
    def from_hello(cls, hello: Hello) -> HostIdentity:
        values = {name: getattr(hello, name) for name in identity_fields()}
        values["simulated"] = bool(values["simulated"])
        return cls(**values)

    def row(self) -> dict[str, Any]:
        """The manager's ``hosts`` columns for this identity."""
        values = dataclasses.asdict(self)
        values["simulated"] = int(self.simulated)
        return values


def identity_fields() -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(HostIdentity))


def identity_columns() -> dict[str, type]:
    """The manager's ``hosts`` table: the identity plus when the host was first/last heard."""
    kinds = {"str": str, "int": int, "float": float, "bool": int, "float | None": float}
    columns = {field.name: kinds[str(field.type)] for field in dataclasses.fields(HostIdentity)}
    columns.update(first_seen=float, last_seen=float)
    return columns


def sensor_only_fields() -> set[str]:
    """Sensor Measurement fields that are not on the wire (checked by the tests)."""
    return set(_SENSOR_ONLY)
