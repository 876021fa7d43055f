"""Which ghs host each Dask worker runs on.

A worker started by ``ghs worker --host NAME`` carries the resource ``ghs_host:NAME`` (several
workers may share one host); otherwise an explicit mapping decides, else the worker machine's
host name (what the ghs agent uses as its host id by default).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from ghs.adapters.errors import AdapterError

HOST_RESOURCE_PREFIX = "ghs_host:"


@dataclass(frozen=True)
class HostWorkers:
    """The Dask workers (addresses) on one ghs host and their total threads."""

    name: str
    addresses: tuple[str, ...]
    threads: int


def host_resource(host: str) -> str:
    """The worker resource naming ghs host ``host`` (value 1)."""
    if not host or any(c in host for c in ",= \t\n"):
        raise AdapterError(f"bad ghs host name {host!r}: it must be non-empty without spaces, "
                           "commas or '='", field="host", value=host)
    return HOST_RESOURCE_PREFIX + host


def live_workers(client) -> dict[str, dict]:
    """The scheduler's current workers: address -> its info (name, nthreads, resources)."""
    # asked of the scheduler directly: Client.scheduler_info() may return the client's
    # periodically refreshed copy, which carries totals but no workers
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def map_workers(client, worker_hosts: Mapping[str, str] | None = None,
                hostnames: dict[str, str] | None = None) -> dict[str, HostWorkers]:
    """ghs host name -> its workers, for every worker the Dask scheduler knows now.

    ``worker_hosts`` maps a worker address or name to a ghs host and wins over the rest.
    ``hostnames`` caches the host names asked of unlabelled workers (address -> name).
    """
    hostnames = {} if hostnames is None else hostnames
    workers = live_workers(client)
    if not workers:
        raise AdapterError("the Dask cluster has no workers", field="client", value=None)
    mapping = dict(worker_hosts or {})
    host_of: dict[str, str] = {}
    unlabelled = []
    for address, info in workers.items():
        labels = sorted(key[len(HOST_RESOURCE_PREFIX):] for key in info.get("resources") or {}
                        if key.startswith(HOST_RESOURCE_PREFIX))
        name = str(info.get("name"))
        if address in mapping or name in mapping:
            host_of[address] = mapping.get(address, mapping.get(name))
        elif labels:
            if len(labels) > 1:
                raise AdapterError(f"worker {address} names several ghs hosts: "
                                   f"{', '.join(labels)}", field="resources", value=labels)
            host_of[address] = labels[0]
        else:
            unlabelled.append(address)
    missing = [address for address in unlabelled if address not in hostnames]
    if missing:
        # a worker leaving meanwhile is simply not mapped this time
        hostnames.update(client.run(socket.gethostname, workers=missing, on_error="ignore"))
    host_of.update({address: hostnames[address] for address in unlabelled
                    if address in hostnames})
    hosts: dict[str, HostWorkers] = {}
    for address in sorted(host_of):
        host = host_of[address]
        before = hosts.get(host, HostWorkers(host, (), 0))
        hosts[host] = HostWorkers(host, (*before.addresses, address),
                                  before.threads + int(workers[address]["nthreads"]))
    return hosts
