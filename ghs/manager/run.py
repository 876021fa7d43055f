"""Building a manager from the Config and running it until stopped."""

from __future__ import annotations

import logging
import threading
import time

import zmq

from ghs.config import Config
from ghs.daemon import expand
from ghs.errors import GhsError
from ghs.manager.estimates import EstimateCache
from ghs.manager.identity import HostBindings
from ghs.manager.queries import QueryService
from ghs.manager.service import Manager
from ghs.manager.store import ManagerStore
from ghs.manager.streams import Retention
from protocol import load_allow_list, read_keypair

LOG = logging.getLogger("ghs.manager")


def build_manager(config: Config, *, context: zmq.Context, endpoint: str | None = None,
                  client_endpoint: str | None = None, database: str | None = None,
                  insecure: bool | None = None) -> Manager:
    """A bound manager (flags override the ``[pcm]`` settings)."""
    settings = config.pcm
    store = ManagerStore(expand(database or settings.database), Retention(
        capacity_days=settings.retention_days, hourly_days=settings.hourly_retention_days),
        exclusive=True)
    cache = EstimateCache(store, window_seconds=config.sensor.window_hours * 3600.0)
    queries = QueryService(cache, config.scheduler,
                           stale_after_seconds=settings.stale_after_seconds, clock=time.time,
                           snapshot_fresh_seconds=settings.snapshot_fresh_seconds)
    try:
        server_keys = read_keypair(expand(settings.keys)) if settings.keys else None
        allow_list = load_allow_list(expand(settings.allow)) if settings.allow else None
    except BaseException:
        store.close()
        raise
    if allow_list is not None and server_keys is None:
        store.close()
        raise GhsError("an allow-list (pcm.allow) needs the manager's keys (pcm.keys)",
                       field="pcm.allow", value=settings.allow)
    allowed = None if allow_list is None else frozenset(allow_list)
    second = client_endpoint if client_endpoint is not None else settings.client_endpoint
    try:
        return Manager(context=context, store=store, queries=queries,
                       agent_endpoint=endpoint or settings.endpoint,
                       client_endpoint=second or None, server_keys=server_keys,
                       allowed_keys=allowed,
                       insecure=settings.insecure if insecure is None else insecure,
                       workers=settings.workers,
                       max_pending_queries=settings.max_pending_queries,
                       retention_seconds=settings.retention_days * 86400.0,
                       host_bindings=None if allow_list is None else HostBindings(allow_list))
    except BaseException:
        store.close()
        raise


def serve(manager: Manager, stop: threading.Event, *, retention_seconds: float,
          prune_every_seconds: float = 3600.0, calibrate_every_seconds: float = 60.0) -> None:
    """Run ``manager`` until ``stop``; prune old measurements now and then, and keep every
    host's forecast and calibration current (so a query only tops them up)."""
    pruner = threading.Thread(target=_prune, daemon=True, name="ghs-prune",
                              args=(manager, stop, retention_seconds, prune_every_seconds))
    pruner.start()
    calibrator = threading.Thread(target=_calibrate, daemon=True, name="ghs-calibrate",
                                  args=(manager, stop, calibrate_every_seconds))
    calibrator.start()
    try:
        manager.run(stop)
    finally:
        manager.close()
        manager.store.close()  # releases the database lock too


def _prune(manager: Manager, stop: threading.Event, retention_seconds: float,
           every_seconds: float) -> None:
    while not stop.wait(every_seconds):
        manager.store.prune(retention_seconds)


def _calibrate(manager: Manager, stop: threading.Event, every_seconds: float) -> None:
    made = 0
    # a pass takes a few hours of each host's record; passes follow at once while catching up
    while not stop.wait(0.0 if made else every_seconds):
        try:
            made = manager.queries.refresh()
        except Exception:  # a bad host's records must not end the refreshes of the others
            LOG.exception("calibration refresh failed")
            made = 0
            continue
        if made:
            LOG.info("calibration: %d shadow launches made", made)
