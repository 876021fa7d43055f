"""decode fed tens of thousands of random and mutated messages: it may accept or refuse, but
it only ever raises ProtocolError subclasses, and whatever it accepts re-encodes to itself."""

from __future__ import annotations

import math
import random

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import MESSAGE_TYPES, ProtocolError, decode, encode

pytestmark = pytest.mark.slow

# Structured strategies cost far more per example than bytes do; the seeded loops at the end
# add volume cheaply, hypothesis adds the nasty corners and shrinking.
FUZZ = settings(max_examples=3000, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
FUZZ_STRUCTURED = settings(FUZZ, max_examples=800)

MEASUREMENT = {
    "seq": 1, "start_epoch_seconds": 1_700_000_000.0, "end_epoch_seconds": 1_700_000_060.0,
    "lam_per_second": 0.05, "rho": 0.25, "tau": 1.3, "service_count": 3,
    "service_cpu_seconds_sum": 6.0, "service_cpu_seconds_sum_squares": 14.0,
    "busy_cpu_seconds": 30.0,
    "jobs_started": 2, "jobs_between": 1, "running_processes": 212, "quality": ["x"],
}
VALID = [
    {"v": 1, "type": "hello", "request_id": 7, "host_id": "ws1", "hostname": "ws1.lab",
     "cores": 4, "tau": 1.0, "os": "Linux", "agent_version": "0.1.0", "simulated": False},
    {"v": 1, "type": "measurements", "request_id": 8, "host_id": "ws1",
     "measurements": [MEASUREMENT, {**MEASUREMENT, "seq": 2}]},
    {"v": 1, "type": "heartbeat", "request_id": 1, "host_id": "a", "sent_epoch_seconds": 5.0,
     "outbox_pending": 0},
    {"v": 1, "type": "ack", "request_id": 8, "host_id": "ws1", "acked": [[1, 2], [5, 9]]},
    {"v": 1, "type": "status", "request_id": 2},
    {"v": 1, "type": "schedule", "request_id": 9, "work_seconds": 3600.0, "hosts": ["a", "b"],
     "distribution": "auto", "partition": "speed", "method": "prefix", "units": 10},
    {"v": 1, "type": "status_reply", "request_id": 2,
     "body": {"hosts": [{"name": "a", "rho": 0.1}], "counters": {"received": 3}}},
    {"v": 1, "type": "error", "code": "malformed", "reason": "bad", "request_id": 3},
    {"v": 2, "type": "records", "request_id": 11, "host_id": "ws1", "stream": "capacity",
     "records": [{"seq": 0, "start_epoch_seconds": 0.0, "end_epoch_seconds": 60.0,
                  "available_cpu_seconds": 70.0, "per_core_available_cpu_seconds": [40.0, 30.0]}]},
    {"v": 2, "type": "records", "request_id": 12, "host_id": "ws1", "stream": "running",
     "records": [{"seq": 3, "epoch_seconds": 60.0, "run_queue_length": 2, "jobs": [
         {"cpu_seconds": 4.5, "wall_seconds": 9.0, "command": "make", "user": "ann"}]}]},
    {"v": 2, "type": "records", "request_id": 13, "host_id": "ws1", "stream": "templates",
     "records": [{"seq": 1, "as_of_epoch_seconds": 60.0, "scope": "command", "user": "ann",
                  "command": "make", "bins": [[3, 2], [40, 1]], "count": 3,
                  "cpu_seconds_sum": 7.0, "cpu_seconds_sum_squares": 25.0}]},
    {"v": 2, "type": "ack", "request_id": 11, "host_id": "ws1", "acked": [[0, 0]],
     "stream": "capacity"},
    {"v": 2, "type": "history", "request_id": 14, "host_id": "ws1", "since_seconds": 3600.0},
    {"v": 2, "type": "eta", "request_id": 15, "hosts": ["a", "b"],
     "shares_seconds": [3600.0, 0.0], "fraction_done": [0.25, 1.0], "elapsed_seconds": 60.0,
     "distribution": "gamma"},
    {"v": 2, "type": "report", "request_id": 16, "prediction_id": 3,
     "finished_epoch_seconds": 1_700_000_000.5, "host": "a"},
    {"v": 2, "type": "accuracy", "request_id": 17, "since_epoch_seconds": 1_699_000_000.0},
    {"v": 2, "type": "eta_reply", "request_id": 15,
     "body": {"hosts": [{"name": "a", "share": 2700.0}], "mean": 900.0,
              "quantiles": {"p90": 1500.0}}},
    {"v": 2, "type": "report_reply", "request_id": 16,
     "body": {"prediction_id": 3, "host": "a", "realised_seconds": 812.5}},
    {"v": 2, "type": "accuracy_reply", "request_id": 17,
     "body": {"overall": {"reports": 1}, "hosts": [{"name": "a", "reports": 1}]}},
]
VALID_BYTES = [msgpack.packb(m) for m in VALID]
FIELD_NAMES = sorted({key for m in VALID for key in m} | set(MEASUREMENT) | {"body", "mean"})

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.binary(max_size=8), st.sampled_from([0, 1, -1, 0.0, 1.0, math.nan, math.inf, "", "a"]))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=5),
                                            inner, max_size=5)),
    max_leaves=6)


def check(data: bytes) -> None:
    try:
        message = decode(data)
    except ProtocolError:
        return
    # anything accepted must be valid by encode's rules too, and survive a round trip
    assert decode(encode(message)) == message


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    check(data)


@FUZZ
@given(st.sampled_from(VALID_BYTES), st.lists(
    st.tuples(st.sampled_from(["flip", "cut", "insert", "delete"]),
              st.integers(min_value=0, max_value=10_000), st.integers(0, 255)), max_size=6))
def test_mutated_bytes(data: bytes, edits: list[tuple[str, int, int]]) -> None:
    buffer = bytearray(data)
    for kind, where, byte in edits:
        spot = where % (len(buffer) + 1)
        if kind == "flip" and spot < len(buffer):
            buffer[spot] ^= byte or 1
        elif kind == "cut":
            del buffer[spot:]
        elif kind == "insert":
            buffer.insert(spot, byte)
        elif kind == "delete" and spot < len(buffer):
            del buffer[spot]
    check(bytes(buffer))


@FUZZ_STRUCTURED
@given(st.sampled_from(range(len(VALID))), st.sampled_from(FIELD_NAMES), values,
       st.booleans())
def test_one_field_replaced(index: int, name: str, value: object, nested: bool) -> None:
    message = {k: (list(v) if isinstance(v, list) else v) for k, v in VALID[index].items()}
    if nested and message["type"] == "measurements":
        message["measurements"][0] = {**MEASUREMENT, name: value}
    elif nested and "body" in message:
        message["body"] = {**message["body"], name: value}
    else:
        message[name] = value
    check(msgpack.packb(message, use_bin_type=True))


@settings(FUZZ_STRUCTURED, max_examples=600)
@given(st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), values,
                       max_size=6),
       st.sampled_from([*MESSAGE_TYPES, "nope", 1]), st.sampled_from([1, 1, 2, "1", None]))
def test_random_maps_of_known_types(fields: dict, message_type: object,
                                    version: object) -> None:
    check(msgpack.packb({**fields, "type": message_type, "v": version}, use_bin_type=True))


def test_seeded_byte_mutations() -> None:
    """Cheap volume beside hypothesis: 30,000 seeded single and double byte mutations."""
    rng = random.Random(1234)
    accepted = 0
    for _ in range(30_000):
        buffer = bytearray(rng.choice(VALID_BYTES))
        for _ in range(rng.choice((1, 2))):
            buffer[rng.randrange(len(buffer))] = rng.randrange(256)
        try:
            message = decode(bytes(buffer))
        except ProtocolError:
            continue
        accepted += 1
        assert decode(encode(message)) == message
    # some mutations land in values and still make valid messages; most must not
    assert 0 < accepted < 30_000 * 0.5


def random_value(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if depth < 3 and roll < 0.25:
        return {rng.choice(FIELD_NAMES): random_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return rng.choice([
        None, True, False, 0, 1, -1, 2**63, 2**64 - 1, -(2**63), 0.0, -0.0, 0.5, 1.0, 1.5,
        -1.0, 1e300, 5e-324, math.nan, math.inf, -math.inf, "", "a", "ws1", " a", "é",
        "x" * 300, b"", b"x", rng.randrange(-10, 10), rng.uniform(-2, 2)])


def test_seeded_structured_mutations() -> None:
    """20,000 valid messages with one to three fields (top-level or nested) replaced."""
    rng = random.Random(99)
    outcomes = set()
    for _ in range(20_000):
        message = msgpack.unpackb(rng.choice(VALID_BYTES))
        for _ in range(rng.randrange(1, 4)):
            target = message
            batch = message.get("measurements")
            inner = [m for m in batch if isinstance(m, dict)] if isinstance(batch, list) else []
            if isinstance(message.get("body"), dict):
                inner.append(message["body"])
            if inner and rng.random() < 0.6:
                target = rng.choice(inner)
            key = rng.choice([*target, *FIELD_NAMES])
            if rng.random() < 0.1:
                target.pop(key, None)
            else:
                target[key] = random_value(rng)
        try:
            accepted = decode(msgpack.packb(message, use_bin_type=True))
        except ProtocolError as exc:
            outcomes.add(exc.code)
            assert exc.reason and len(exc.reason) < 2000
            continue
        outcomes.add("accepted")
        assert decode(encode(accepted)) == accepted
    assert {"accepted", "invalid_field", "missing_field", "unknown_field", "malformed",
            "unknown_version", "unknown_type"} <= outcomes
