"""Protocol messages: every type round-trips through the codec, helpers behave."""

from __future__ import annotations

import dataclasses
import math

import msgpack
import numpy as np
import pytest

from protocol import (
    DEFAULT_LIMITS,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    REPLY_TYPES,
    REQUEST_TYPES,
    AccuracyReply,
    AccuracyRequest,
    Ack,
    BacktestReply,
    BacktestRequest,
    ErrorReply,
    EtaReply,
    EtaRequest,
    Heartbeat,
    Hello,
    HistoryReply,
    HistoryRequest,
    InvalidFieldError,
    Limits,
    Measurement,
    MeasurementBatch,
    PingReply,
    PingRequest,
    PredictReply,
    PredictRequest,
    ProtocolError,
    RecordBatch,
    ReportReply,
    ReportRequest,
    ScheduleReply,
    ScheduleRequest,
    StatusReply,
    StatusRequest,
    UnknownTypeError,
    decode,
    encode,
    seq_ranges_of,
)


def measurement(seq: int = 0, **changes: object) -> Measurement:
    base = Measurement(
        seq=seq, start_epoch_seconds=1_700_000_000.0, end_epoch_seconds=1_700_000_060.0,
        lam_per_second=0.05, rho=0.25, tau=1.3, service_count=3,
        service_cpu_seconds_sum=6.0, service_cpu_seconds_sum_squares=14.0,
        busy_cpu_seconds=30.0, jobs_started=2, jobs_between=1, running_processes=212,
        lambda_source="fork_counter", rho_source="kernel", quality=("fork_counter",))
    return dataclasses.replace(base, **changes)


PREDICT_BODY = {
    "work": 36000.0, "mean": 9000.5, "std": 120.25, "cov": 0.0134, "criterion": 9120.75,
    "quantiles": {"p50": 8990.0, "p90": 9150.0, "p95": 9200.0, "p99": 9300.0},
    "distribution": "gamma",
    "hosts": [{"name": "ws1", "share": 18000.0, "dedicated_seconds": 9000.0, "mean": 9000.0,
               "std": 100.0}],
}

EXAMPLES = [
    Hello(request_id=1, host_id="ws1", hostname="ws1.lab.example", cores=8, tau=1.25,
          os="Linux 6.1.0 x86_64", agent_version="0.1.0"),
    Hello(request_id=2, host_id="sim-03", hostname="demo", cores=1, tau=0.5, os="Linux",
          agent_version="0.1.0", simulated=True),
    MeasurementBatch(request_id=3, host_id="ws1",
                     measurements=(
                         measurement(0),
                         measurement(1, quality=(), tau=None, lambda_source=None),
                         measurement(7, service_count=0, service_cpu_seconds_sum=0.0,
                                     service_cpu_seconds_sum_squares=0.0, rho=1.0))),
    Heartbeat(request_id=4, host_id="ws1", sent_epoch_seconds=1_700_000_100.5,
              outbox_pending=12),
    Ack(request_id=3, host_id="ws1", acked=((0, 1), (7, 7))),
    Ack(request_id=1, host_id="ws1"),
    StatusRequest(request_id=5),
    PingRequest(request_id=9),
    PingReply(request_id=9, body={"uptime_seconds": 12.5, "version": "0.1.0"}),
    PredictRequest(request_id=6, work_seconds=36000.0),
    PredictRequest(request_id=7, work_seconds=1.5, hosts=("ws1", "ws2"),
                   distribution="weibull", partition="equal-load"),
    ScheduleRequest(request_id=8, work_seconds=28800.0, method="optimal", partition="speed",
                    distribution="auto", units=1000, hosts=("ws1",)),
    StatusReply(request_id=5, body={
        "hosts": [{"name": "ws1", "lam": 0.05, "mu": 0.5, "sigma": 1.0, "rho": 0.25,
                   "tau": 1.3, "cores": 8, "stale": False, "measurements": 3,
                   "last_seen": 1_700_000_060.0}],
        "counters": {"received": 10, "duplicates": 1, "rejected": {"malformed": 2}}}),
    PredictReply(request_id=6, body=PREDICT_BODY),
    ScheduleReply(request_id=8, body={**PREDICT_BODY, "method": "optimal", "evaluations": 255,
                                      "elapsed_seconds": 0.004, "units": [1000]}),
    ErrorReply(code="invalid_field", reason="work_seconds: must be > 0", request_id=6),
    ErrorReply(code="malformed", reason="not one valid msgpack value"),
    Hello(request_id=9, host_id="lcg-3", hostname="lcg-3", cores=1, tau=1.0, os="replay",
          agent_version="0.2.0", simulated=True, replay_zero_epoch_seconds=1.7e9),
    RecordBatch(request_id=10, host_id="ws1", stream="capacity", records=(
        {"seq": 0, "start_epoch_seconds": 0.0, "end_epoch_seconds": 60.0,
         "available_cpu_seconds": 70.0, "per_core_available_cpu_seconds": [40.0, 30.0]},)),
    RecordBatch(request_id=11, host_id="ws1", stream="running", records=(
        {"seq": 0, "epoch_seconds": 60.0, "run_queue_length": 1, "jobs_omitted": 0,
         "jobs": [{"cpu_seconds": 1.0, "wall_seconds": 2.0, "command": "cc", "user": "a"}]},
        {"seq": 1, "epoch_seconds": 120.0, "run_queue_length": 0, "jobs": []})),
    RecordBatch(request_id=12, host_id="ws1", stream="templates", records=(
        {"seq": 0, "as_of_epoch_seconds": 60.0, "scope": "pooled", "bins": [[5, 2]],
         "count": 2, "cpu_seconds_sum": 2.0, "cpu_seconds_sum_squares": 2.5},)),
    Ack(request_id=10, host_id="ws1", acked=((0, 0),), stream="capacity"),
    HistoryRequest(request_id=13, host_id="ws1", since_seconds=86400.0),
    HistoryReply(request_id=13, body={"host": "ws1", "replay_zero_epoch": None,
                                      "capacity": [[60.0, 70.0]], "measurements": [],
                                      "running": None}),
    BacktestRequest(request_id=15, hosts=("ws1",), work_seconds=(900.0, 3600.0),
                    launch_every_seconds=7200.0, start_seconds=0.0),
    BacktestReply(request_id=15, body={"launches": [{"predictor": "calibrated", "mean": 1.0}],
                                       "summary": []}),
    EtaRequest(request_id=14, hosts=("ws1", "ws2"), shares_seconds=(18000.0, 0.0),
               fraction_done=(0.5, 1.0), elapsed_seconds=3600.0, distribution="gamma"),
    EtaReply(request_id=14, body={**PREDICT_BODY, "fraction_done": {"ws1": 0.5}}),
    ReportRequest(request_id=15, prediction_id=7, finished_epoch_seconds=1_700_009_000.0,
                  host="ws1"),
    ReportRequest(request_id=16, prediction_id=7, finished_epoch_seconds=1_700_009_500.0),
    ReportReply(request_id=15, body={"prediction_id": 7, "host": "ws1",
                                     "realised_seconds": 9000.0}),
    AccuracyRequest(request_id=17, since_epoch_seconds=1_699_000_000.0),
    AccuracyReply(request_id=17, body={"overall": {"reports": 2, "p90_coverage": 1.0},
                                       "hosts": [{"name": "ws1", "reports": 1}],
                                       "task": {"reports": 1}}),
]


def test_eta_needs_one_share_and_fraction_per_host_and_some_work() -> None:
    good = {"v": 2, "type": "eta", "request_id": 1, "hosts": ["a", "b"],
            "shares_seconds": [1.0, 2.0], "fraction_done": [0.0, 1.0]}
    assert decode(msgpack.packb(good)).fraction_done == (0.0, 1.0)
    for change, where in (({"shares_seconds": [1.0]}, "shares_seconds"),
                          ({"fraction_done": [0.5, 1.5]}, "fraction_done"),
                          ({"shares_seconds": [0.0, 0.0]}, "shares_seconds"),
                          ({"v": 1}, "type")):
        with pytest.raises(ProtocolError) as caught:
            decode(msgpack.packb({**good, **change}))
        assert caught.value.field.startswith(where)
    with pytest.raises(ProtocolError):
        decode(msgpack.packb({"v": 2, "type": "report", "request_id": 1, "prediction_id": 0,
                              "finished_epoch_seconds": 5.0}))


def test_examples_cover_every_message_type() -> None:
    assert {type(m).TYPE for m in EXAMPLES} == set(MESSAGE_TYPES)
    assert set(MESSAGE_TYPES) == REQUEST_TYPES | REPLY_TYPES
    assert not REQUEST_TYPES & REPLY_TYPES


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).TYPE)
def test_round_trip(message: object) -> None:
    data = encode(message)
    assert isinstance(data, bytes)
    raw = msgpack.unpackb(data)
    assert raw["v"] == PROTOCOL_VERSION
    assert raw["type"] == type(message).TYPE
    assert decode(data) == message
    assert type(message).from_dict(message.to_dict()) == message


def test_optional_fields_are_left_out_and_may_be_nil() -> None:
    wire = PredictRequest(request_id=6, work_seconds=10.0).to_dict()
    assert wire == {"v": PROTOCOL_VERSION, "type": "predict", "request_id": 6,
                    "work_seconds": 10.0}
    nil = msgpack.packb({**wire, "hosts": None, "method": None} | {"type": "schedule"})
    assert decode(nil) == ScheduleRequest(request_id=6, work_seconds=10.0)


def test_whole_numbers_become_floats_and_numpy_values_are_accepted() -> None:
    message = Heartbeat(request_id=np.int64(9), host_id="ws1",  # type: ignore[arg-type]
                        sent_epoch_seconds=1_700_000_000, outbox_pending=np.int32(3))
    decoded = decode(encode(message))
    assert decoded.sent_epoch_seconds == 1.7e9
    assert type(decoded.sent_epoch_seconds) is float
    assert type(decoded.outbox_pending) is int
    body = {"hosts": [], "mean": np.float64(2.5), "std": np.float32(0.5),
            "shares": (np.int64(1), 2), "flag": np.bool_(True)}
    reply = decode(encode(PredictReply(request_id=1, body=body)))
    assert reply.body == {"hosts": [], "mean": 2.5, "std": 0.5, "shares": [1, 2],
                          "flag": True}
    # arrays are the manager's to convert (.tolist()): the protocol sends plain data only
    with pytest.raises(InvalidFieldError, match=r"body\.shares: must be plain data"):
        encode(PredictReply(request_id=1, body={**body, "shares": np.arange(3)}))


def test_encode_refuses_what_decode_would() -> None:
    with pytest.raises(InvalidFieldError, match=r"measurements\[1\]\.rho"):
        encode(MeasurementBatch(request_id=1, host_id="ws1",
                                measurements=(measurement(0), measurement(1, rho=1.5))))
    with pytest.raises(InvalidFieldError, match=r"body\.mean"):
        encode(PredictReply(request_id=1, body={"hosts": [], "mean": math.nan, "std": 1.0}))
    with pytest.raises(UnknownTypeError):
        encode({"v": 1, "type": "status", "request_id": 1})  # type: ignore[arg-type]


def test_batch_with_repeated_sequence_numbers_is_refused() -> None:
    batch = MeasurementBatch(request_id=1, host_id="ws1",
                             measurements=(measurement(4), measurement(4)))
    with pytest.raises(InvalidFieldError, match="distinct seq"):
        encode(batch)


def test_service_statistics_must_be_consistent() -> None:
    # three jobs of 2 s each: sum 6, sum of squares 12 is the least possible, 36 the most
    assert decode(encode(MeasurementBatch(
        request_id=1, host_id="h", measurements=(
            measurement(0, service_cpu_seconds_sum_squares=12.0),
            measurement(1, service_cpu_seconds_sum_squares=36.0))))).measurements[0]
    for squares in (11.9, 36.1):
        with pytest.raises(InvalidFieldError, match="service_cpu_seconds_sum_squares"):
            encode(MeasurementBatch(request_id=1, host_id="h", measurements=(
                measurement(0, service_cpu_seconds_sum_squares=squares),)))
    with pytest.raises(InvalidFieldError, match="must be 0 when service_count is 0"):
        encode(MeasurementBatch(request_id=1, host_id="h", measurements=(
            measurement(0, service_count=0),)))


def test_interval_must_move_forward() -> None:
    with pytest.raises(InvalidFieldError, match="end_epoch_seconds"):
        encode(MeasurementBatch(request_id=1, host_id="h", measurements=(
            measurement(0, end_epoch_seconds=1_700_000_000.0),)))
    assert measurement().interval_seconds == 60.0


def test_seq_ranges_of_and_ack_membership() -> None:
    assert seq_ranges_of([7, 1, 2, 3, 3, 9, 8, 20]) == ((1, 3), (7, 9), (20, 20))
    assert seq_ranges_of([]) == ()
    ack = Ack(request_id=1, host_id="h", acked=seq_ranges_of([5, 6, 10]))
    assert list(ack.seqs()) == [5, 6, 10]
    assert 6 in ack and 10 in ack
    assert 7 not in ack and 4 not in ack
    with pytest.raises(InvalidFieldError):
        seq_ranges_of([-1])


def test_ack_ranges_must_ascend_without_overlap() -> None:
    for acked in (((5, 9), (9, 12)), ((5, 9), (1, 2)), ((3, 2),)):
        with pytest.raises(InvalidFieldError, match="acked"):
            encode(Ack(request_id=1, host_id="h", acked=acked))


def test_error_reply_from_exception() -> None:
    error = InvalidFieldError("rho: must be in [0, 1]", field="rho")
    error.request_id = 42
    reply = ErrorReply.from_exception(error)
    assert reply == ErrorReply(code="invalid_field", reason="rho: must be in [0, 1]",
                               request_id=42)

    class SchedulerLike(Exception):
        code = "no_usable_hosts"

    assert ErrorReply.from_exception(SchedulerLike("all saturated"), request_id=3) == \
        ErrorReply(code="no_usable_hosts", reason="all saturated", request_id=3)
    internal = ErrorReply.from_exception(KeyError("secret detail"))
    assert internal.code == "internal" and "secret" not in internal.reason
    long = ErrorReply.from_exception(InvalidFieldError("x" * 5000))
    assert len(long.reason) == DEFAULT_LIMITS.max_reason_chars
    decode(encode(long))


def test_limits_must_be_positive_whole_numbers() -> None:
    with pytest.raises(InvalidFieldError, match="max_text_chars"):
        Limits(max_text_chars=0)
    with pytest.raises(InvalidFieldError, match="max_depth"):
        Limits(max_depth=2.5)  # type: ignore[arg-type]


def test_every_protocol_error_has_a_distinct_code() -> None:
    import protocol.errors as errors

    classes = [c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, ProtocolError)]
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)) >= 12
