"""The canonical record: the wire schema, the manager's columns and the sensors' record agree."""

from __future__ import annotations

import dataclasses

from ghs.manager.store import MEASUREMENT_COLUMNS, HostFacts, ManagerStore
from ghs.record import (
    MEASUREMENT,
    HostIdentity,
    identity_fields,
    sensor_measurement,
    sensor_only_fields,
    stored_rows,
    wire_fields,
)
from protocol import Hello, Measurement, decode, encode
from protocol.messages import MeasurementBatch
from sensors.measurement import Measurement as SensorMeasurement


def test_the_record_is_the_protocol_schema() -> None:
    assert {c.wire for c in MEASUREMENT} | {"seq"} == set(Measurement.SCHEMA.fields)
    for column in MEASUREMENT:
        assert Measurement.SCHEMA.fields[column.wire].required == column.required, column.wire
    assert set(identity_fields()) | {"request_id"} == set(Hello.SCHEMA.fields)


def test_every_sensor_field_is_carried_or_derived() -> None:
    sensor = {f.name for f in dataclasses.fields(SensorMeasurement)}
    carried = {c.sensor for c in MEASUREMENT if c.sensor is not None}
    assert carried <= sensor
    assert sensor - carried == sensor_only_fields()


def sample() -> SensorMeasurement:
    return SensorMeasurement(
        start_time=1_700_000_000.0, end_time=1_700_000_060.0, interval_seconds=60.0, lam=0.05,
        rho=0.25, jobs_started=2, jobs_between=1, service_count=3, service_sum_seconds=6.0,
        service_sum_squares=14.0, busy_cpu_seconds=30.0, running=7, cores=2,
        lambda_source="accounting", rho_source="kernel",
        quality=("accounting_cpu_rescaled:0.40", "fork_counter"))


def test_a_measurement_survives_agent_wire_store_and_back() -> None:
    original = sample()
    fields = wire_fields(original, tau=1.25)
    batch = decode(encode(MeasurementBatch(request_id=1, host_id="ws1", measurements=(
        Measurement.from_dict({"seq": 4, **fields}),))))
    store = ManagerStore(None)
    store.add_measurements(stored_rows("ws1", batch.measurements, 5.0))
    row = store.measurements("ws1")[0]
    assert set(row) == set(MEASUREMENT_COLUMNS)
    assert (row["seq"], row["tau"], row["received_epoch_seconds"]) == (4, 1.25, 5.0)
    back = sensor_measurement(row, cores=2)
    # the wire keeps flag names only
    assert back == dataclasses.replace(original, quality=("accounting_cpu_rescaled",
                                                          "fork_counter"))


def test_a_hello_becomes_the_stored_host_and_back() -> None:
    identity = HostIdentity(host_id="lcg-1", hostname="lcg-1", cores=1, tau=1.0, os="replay",
                            agent_version="0.2.0", simulated=True,
                            replay_zero_epoch_seconds=1.7e9)
    hello = decode(encode(identity.hello(3)))
    assert HostIdentity.from_hello(hello) == identity
    store = ManagerStore(None)
    store.upsert_host(HostFacts(**identity.__dict__, first_seen=1.0, last_seen=2.0))
    assert store.host("lcg-1") == HostFacts(**identity.__dict__, first_seen=1.0, last_seen=2.0)
