"""A client's query answered: each request type to the library call that answers it.

Runs on the manager's worker threads; the loop only decodes and routes.
"""

from __future__ import annotations

from typing import Any

from ghs.manager.counters import Counters
from ghs.manager.history import host_history
from ghs.manager.queries import TRACKING_REQUESTS, QueryService
from ghs.manager.store import ManagerStore
from protocol import (
    BacktestReply,
    BacktestRequest,
    HistoryReply,
    HistoryRequest,
    PredictReply,
    PredictRequest,
    ScheduleReply,
    StatusReply,
    StatusRequest,
)


def reply_to(message: Any, queries: QueryService, store: ManagerStore,
             counters: Counters) -> Any:
    """The reply to a decoded client request (a schedule request if no other type matches)."""
    if isinstance(message, StatusRequest):
        seen = {**counters.snapshot(), "lifetime": store.totals()}
        return StatusReply(request_id=message.request_id, body=queries.status(seen))
    if isinstance(message, PredictRequest):
        return PredictReply(request_id=message.request_id, body=queries.predict(
            message.work_seconds, message.hosts, message.distribution, message.partition,
            message.processes_per_host, message.pinned))
    if isinstance(message, BacktestRequest):
        return BacktestReply(request_id=message.request_id, body=queries.backtest(
            message.hosts, message.work_seconds, message.launch_every_seconds,
            message.start_seconds))
    if isinstance(message, HistoryRequest):
        return HistoryReply(request_id=message.request_id, body=host_history(
            store, store.streams, message.host_id, message.since_seconds))
    if isinstance(message, TRACKING_REQUESTS):
        return queries.tracking_reply(message)
    return ScheduleReply(request_id=message.request_id, body=queries.schedule(
        message.work_seconds, message.hosts, message.distribution, message.partition,
        message.method, message.units, message.rho_max, message.processes_per_host,
        message.pinned))
