"""decode rejects every kind of bad input with the right error code and a reason naming it."""

from __future__ import annotations

import math
import random

import msgpack
import pytest

from protocol import (
    PROTOCOL_VERSION,
    REPLY_TYPES,
    REQUEST_TYPES,
    Limits,
    MalformedMessageError,
    ProtocolError,
    UnknownTypeError,
    decode,
    encode,
)
from protocol.codec import unpack
from protocol.messages import Ack, Hello

MEASUREMENT = {
    "seq": 1, "start_epoch_seconds": 1_700_000_000.0, "end_epoch_seconds": 1_700_000_060.0,
    "lam_per_second": 0.05, "rho": 0.25, "tau": 1.3, "service_count": 3,
    "service_cpu_seconds_sum": 6.0, "service_cpu_seconds_sum_squares": 14.0,
    "busy_cpu_seconds": 30.0,
    "jobs_started": 2, "jobs_between": 1, "running_processes": 212, "quality": [],
}
HELLO = {"v": 1, "type": "hello", "request_id": 7, "host_id": "ws1", "hostname": "ws1.lab",
         "cores": 4, "tau": 1.0, "os": "Linux", "agent_version": "0.1.0"}
BATCH = {"v": 1, "type": "measurements", "request_id": 8, "host_id": "ws1",
         "measurements": [MEASUREMENT]}
RECORDS = {"v": 2, "type": "records", "request_id": 10, "host_id": "ws1", "stream": "capacity",
           "records": [{"seq": 0, "start_epoch_seconds": 0.0, "end_epoch_seconds": 60.0,
                        "available_cpu_seconds": 30.0,
                        "per_core_available_cpu_seconds": [30.0]}]}
PREDICT = {"v": 1, "type": "predict", "request_id": 9, "work_seconds": 3600.0}
REPLY = {"v": 1, "type": "predict_reply", "request_id": 9,
         "body": {"hosts": [], "mean": 1.0, "std": 0.0}}


def pack(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def changed(base: dict, **fields: object) -> bytes:
    return pack({**base, **fields})


def without(base: dict, name: str) -> bytes:
    return pack({k: v for k, v in base.items() if k != name})


def batch_with(**fields: object) -> bytes:
    return pack({**BATCH, "measurements": [{**MEASUREMENT, **fields}]})


def deep(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


CASES = [
    # malformed: not one msgpack map
    ("empty", b"", "malformed", "empty"),
    ("truncated", pack(HELLO)[:-3], "malformed", "msgpack"),
    ("reserved byte", b"\xc1", "malformed", "msgpack"),
    ("trailing bytes", pack(HELLO) + b"\x00", "malformed", "msgpack"),
    ("a list", pack([1, 2]), "malformed", "must be a msgpack map, got list"),
    ("an int", pack(5), "malformed", "got int"),
    ("a string", pack("hello"), "malformed", "got str"),
    ("nil", pack(None), "malformed", "got NoneType"),
    ("int map key", pack({1: 2}), "malformed", "map key"),
    ("binary value", changed(HELLO, host_id=b"ws1"), "malformed", "max_bin_len"),
    ("extension type", pack({"v": msgpack.ExtType(5, b"x")}), "malformed", "ext"),
    ("timestamp", changed(HELLO, tau=msgpack.Timestamp(1, 0)), "malformed", "ext"),
    ("bad utf-8", b"\x81\xa1v\xa2\xff\xfe", "malformed", "utf-8"),
    ("duplicate key", b"\x82\xa1v\x01\xa1v\x02", "malformed", "repeats a key"),
    ("huge declared array", b"\xdd\xff\xff\xff\xff", "malformed", "max_array_len"),
    ("overlong string", changed(HELLO, os="x" * 5000), "malformed", "max_str_len"),
    # version and type
    ("missing v", without(HELLO, "v"), "missing_field", "v: required"),
    ("v 3", changed(HELLO, v=3), "unknown_version", "version 3"),
    ("records in v 1", changed(RECORDS, v=1), "unknown_type", "needs protocol version 2"),
    ("v 0", changed(HELLO, v=0), "unknown_version", "supported: 1"),
    ("v as string", changed(HELLO, v="1"), "invalid_field", "v: must be a whole number"),
    ("missing type", without(HELLO, "type"), "missing_field", "type: required"),
    ("unknown type", changed(HELLO, type="launch"), "unknown_type", "'launch'"),
    ("type not a string", changed(HELLO, type=3), "invalid_field", "type: must be"),
    # fields present or not
    ("missing cores", without(HELLO, "cores"), "missing_field", "cores: required"),
    ("nil cores", changed(HELLO, cores=None), "invalid_field", "cores: must be present"),
    ("unknown field", changed(HELLO, colour="blue"), "unknown_field", "colour: unknown"),
    ("unknown nested", batch_with(extra=1), "unknown_field", "measurements[0].extra"),
    ("missing nested", pack({**BATCH, "measurements": [
        {k: v for k, v in MEASUREMENT.items() if k != "rho"}]}),
     "missing_field", "measurements[0].rho: required"),
    # wrong types
    ("request id as string", changed(HELLO, request_id="7"), "invalid_field", "request_id"),
    ("request id float", changed(HELLO, request_id=7.0), "invalid_field", "whole number"),
    ("cores bool", changed(HELLO, cores=True), "invalid_field", "cores"),
    ("host id int", changed(HELLO, host_id=5), "invalid_field", "host_id: must be a non-empty"),
    ("tau string", changed(HELLO, tau="1.0"), "invalid_field", "tau: must be a finite number"),
    ("simulated int", changed(HELLO, simulated=1), "invalid_field", "true or false"),
    ("measurements map", changed(BATCH, measurements={"a": 1}), "invalid_field",
     "measurements: must be a list"),
    ("measurement not a map", changed(BATCH, measurements=[3]), "invalid_field",
     "measurements[0]: must be a map"),
    ("hosts with int", changed(PREDICT, hosts=["a", 2]), "invalid_field", "hosts[1]"),
    ("quality flag", batch_with(quality=["Bad Flag"]), "invalid_field", "quality[0]"),
    ("distribution", changed(PREDICT, distribution="gama"), "invalid_field",
     "one of gamma, weibull, lognormal, auto"),
    ("body not map", changed(REPLY, body=[1]), "invalid_field", "body: must be a map"),
    ("body mean string", changed(REPLY, body={"hosts": [], "mean": "1", "std": 0.0}),
     "invalid_field", "body.mean"),
    ("body missing key", changed(REPLY, body={"hosts": [], "mean": 1.0}), "invalid_field",
     "body.std"),
    ("body too deep", changed(REPLY, body={"hosts": [], "mean": 1.0, "std": 0.0,
                                           "x": deep(20)}), "invalid_field", "nested deeper"),
    # not finite
    ("rho nan", batch_with(rho=math.nan), "invalid_field", "measurements[0].rho"),
    ("lam inf", batch_with(lam_per_second=math.inf), "invalid_field", "lam_per_second"),
    ("work -inf", changed(PREDICT, work_seconds=-math.inf), "invalid_field", "work_seconds"),
    ("tau nan", changed(HELLO, tau=math.nan), "invalid_field", "tau"),
    ("body nan", changed(REPLY, body={"hosts": [], "mean": 1.0, "std": math.inf}),
     "invalid_field", "body.std: must be a finite number"),
    # out of range
    ("negative rate", batch_with(lam_per_second=-0.1), "invalid_field", "[0, inf)"),
    ("negative rho", batch_with(rho=-0.01), "invalid_field", "rho: must be a finite number"),
    ("rho above 1", batch_with(rho=1.01), "invalid_field", "[0, 1]"),
    ("tau zero", batch_with(tau=0.0), "invalid_field", "[1e-06, 1e+06]"),
    ("tau past any machine", batch_with(tau=1e308), "invalid_field", "[1e-06, 1e+06]"),
    ("cores zero", changed(HELLO, cores=0), "invalid_field", "cores"),
    ("negative seq", batch_with(seq=-1), "invalid_field", "measurements[0].seq"),
    ("request id 2**63", changed(HELLO, request_id=2**63), "invalid_field", "request_id"),
    ("negative count", batch_with(jobs_between=-2), "invalid_field", "jobs_between"),
    ("negative busy", batch_with(busy_cpu_seconds=-1.0), "invalid_field", "busy_cpu_seconds"),
    ("source not identifier", batch_with(lambda_source="Fork Counter"), "invalid_field",
     "measurements[0].lambda_source: must be an identifier"),
    ("zero work", changed(PREDICT, work_seconds=0.0), "invalid_field", "work_seconds"),
    ("zero units", changed(PREDICT, type="schedule", units=0), "invalid_field", "units"),
    ("backwards interval", batch_with(end_epoch_seconds=1.0), "invalid_field",
     "end_epoch_seconds: must be after"),
    # sizes
    ("long host id", changed(HELLO, host_id="h" * 257), "invalid_field", "at most 256"),
    ("empty host id", changed(HELLO, host_id=""), "invalid_field", "host_id"),
    ("control character", changed(HELLO, hostname="ws1\n"), "invalid_field", "printable"),
    ("padded name", changed(HELLO, hostname=" ws1"), "invalid_field", "leading or trailing"),
    ("empty batch", changed(BATCH, measurements=[]), "invalid_field", "non-empty"),
    ("batch of 1001", pack({**BATCH, "measurements": [
        {**MEASUREMENT, "seq": i} for i in range(1001)]}), "invalid_field",
     "at most 1000 items"),
    ("too many flags", batch_with(quality=[f"f{i}" for i in range(17)]), "invalid_field",
     "quality: at most 16"),
    ("duplicate hosts", changed(PREDICT, hosts=["a", "a"]), "invalid_field", "distinct"),
    ("too large", pack({**HELLO, "os": "x" * 4000, "pad": ["y" * 4000] * 300}), "too_large",
     "1048576"),
]


@pytest.mark.parametrize(("payload", "code", "words"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_rejection_code_and_reason(payload: bytes, code: str, words: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(payload)
    assert caught.value.code == code, caught.value.reason
    assert words in caught.value.reason


def test_the_base_cases_are_valid() -> None:
    for base in (HELLO, BATCH, PREDICT, REPLY, RECORDS):
        assert decode(pack(base)).to_dict() == {k: v for k, v in base.items()}


def test_a_message_re_encodes_in_the_version_it_came_in() -> None:
    old = decode(pack(HELLO))
    assert (old.wire_version, decode(encode(old)).wire_version) == (1, 1)
    reply = Ack(request_id=7, host_id="ws1").in_version(old.wire_version)
    assert unpack(encode(reply))["v"] == 1
    assert Ack(request_id=7, host_id="ws1").wire_version == PROTOCOL_VERSION == 2
    with pytest.raises(ProtocolError, match="needs protocol version 2"):
        decode(encode(decode(pack(RECORDS)))).in_version(1)


def test_errors_carry_the_request_id_and_type_when_readable() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(batch_with(rho=2.0))
    assert (caught.value.request_id, caught.value.message_type) == (8, "measurements")
    assert caught.value.field == "measurements[0].rho"
    with pytest.raises(ProtocolError) as caught:
        decode(changed(HELLO, v=9))
    assert caught.value.request_id == 7
    with pytest.raises(ProtocolError) as caught:
        decode(changed(HELLO, request_id=-1))
    assert caught.value.request_id is None


def test_every_truncation_of_a_valid_message_is_malformed() -> None:
    data = pack(BATCH)
    for length in range(len(data)):
        with pytest.raises(MalformedMessageError):
            decode(data[:length])


def test_random_bytes_only_raise_protocol_errors() -> None:
    rng = random.Random(20240601)
    codes = set()
    for _ in range(3000):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 64)))
        with pytest.raises(ProtocolError) as caught:
            decode(data)
        codes.add(caught.value.code)
    assert "malformed" in codes


def test_not_bytes_is_malformed() -> None:
    with pytest.raises(MalformedMessageError):
        decode("not bytes")  # type: ignore[arg-type]
    assert decode(memoryview(pack(PREDICT))).TYPE == "predict"
    assert decode(bytearray(pack(PREDICT))).TYPE == "predict"


def test_expect_restricts_the_accepted_types() -> None:
    with pytest.raises(UnknownTypeError, match="expected one of"):
        decode(pack(REPLY), expect=REQUEST_TYPES)
    with pytest.raises(UnknownTypeError):
        decode(pack(HELLO), expect=REPLY_TYPES)
    assert decode(pack(REPLY), expect=REPLY_TYPES).TYPE == "predict_reply"


def test_smaller_limits_apply_per_direction() -> None:
    limits = Limits(max_request_bytes=200, max_reply_bytes=5000, max_query_hosts=3,
                    max_container_items=50)
    big_reply = changed(REPLY, body={"hosts": [], "mean": 1.0, "std": 0.0, "x": "y" * 300})
    assert decode(big_reply, limits=limits).TYPE == "predict_reply"
    with pytest.raises(ProtocolError) as caught:
        decode(changed(HELLO, os="y" * 200), limits=limits)
    assert caught.value.code == "too_large"
    with pytest.raises(ProtocolError) as caught:
        decode(changed(PREDICT, hosts=["a", "b", "c", "d"]), limits=limits)
    assert caught.value.code == "invalid_field"
    with pytest.raises(ProtocolError) as caught:
        decode(changed(REPLY, body={"hosts": [], "mean": 1.0, "std": 0.0,
                                    "x": list(range(51))}), limits=limits)
    assert caught.value.code == "malformed"
    with pytest.raises(ProtocolError) as caught:
        encode(Hello(request_id=1, host_id="a", hostname="b", cores=1, tau=1.0, os="y" * 200,
                     agent_version="1"), limits=limits)
    assert caught.value.code == "too_large"
