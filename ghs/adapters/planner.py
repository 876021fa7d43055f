"""Where an adapter's plans come from: a manager (``ghs.Client.schedule``) or a host file.

Both answer the same two questions: which host names can be planned on, and how should
``work_seconds`` reference-CPU-seconds be placed over some of them (a ``scheduler.Plan``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ghs.adapters.errors import AdapterError
from ghs.config import Config
from ghs.eta import Eta, local_eta
from ghs.hostfile import HostList, load_hosts
from ghs.planning import schedule_hosts
from scheduler import Plan, predict


class PlanSource:
    """Plans over named hosts, from a manager or a host file (exactly one of them).

    ``manager``: an endpoint string or an open ``ghs.Client`` (left open: the caller owns it).
    ``hosts_file``: a path to a JSON host file, or a ``HostList``.
    """

    def __init__(self, config: Config, *, manager: Any = None, hosts_file: Any = None,
                 method: str | None = None) -> None:
        if (manager is None) == (hosts_file is None):
            raise AdapterError("give exactly one of manager= (endpoint or ghs.Client) and "
                               "hosts_file= (path or HostList)", field="manager", value=manager)
        self.config = config
        self.method = method
        self._client = None
        self._own_client = False
        self._host_list: HostList | None = None
        # the manager's track-record id of the latest plan it served (None: made here)
        self.last_prediction_id: int | None = None
        if hosts_file is not None:
            self._host_list = (hosts_file if isinstance(hosts_file, HostList)
                               else load_hosts(Path(hosts_file)))
        elif isinstance(manager, str):
            from ghs.remote import open_client

            self._client = open_client(config, manager)
            self._own_client = True
        else:
            self._client = manager

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()

    def known_hosts(self) -> set[str]:
        """Names of the hosts the source can plan on now."""
        if self._host_list is not None:
            return {host.name for host in self._host_list.hosts}
        return {host.name for host in self._client.hosts()}

    def plan(self, work_seconds: float, names: Sequence[str],
             speed_factors: Mapping[str, float] | None = None) -> Plan:
        """The chosen hosts among ``names`` and their shares of ``work_seconds``.

        ``speed_factors`` scale hosts' tau by what a run observed (a host that ran items at
        half its predicted pace gets 0.5); such a plan is made here, on the source's current
        host parameters, instead of by the manager.
        """
        if not names:
            raise AdapterError("no hosts left to plan on", field="hosts", value=())
        factors = {name: f for name, f in (speed_factors or {}).items() if f != 1.0}
        self.last_prediction_id = None
        if not factors:
            if self._host_list is not None:
                return schedule_hosts(self._host_list, work_seconds, self.config,
                                      names=tuple(names), method=self.method).result
            answer = self._client.schedule_answer(work_seconds, self.method, hosts=tuple(names))
            self.last_prediction_id = answer.prediction_id
            return answer.result
        hosts = (self._host_list.select(tuple(names)).hosts if self._host_list is not None
                 else tuple(h for h in self._client.hosts() if h.name in set(names)))
        corrected = tuple(replace(h, tau=h.tau * factors.get(h.name, 1.0)) for h in hosts)
        return schedule_hosts(HostList(corrected, ()), work_seconds, self.config,
                              method=self.method).result


    def eta(self, shares: Mapping[str, float], fractions: Mapping[str, float]) -> Eta:
        """The remaining-time law of ``shares`` (reference-CPU-seconds per host) with the
        ``fractions`` done: the manager's (hosts' current state) or the host file's."""
        if self._host_list is not None:
            return local_eta(self._host_list.hosts, dict(shares), fractions,
                             dist=self.config.scheduler.distribution)
        return self._client.eta(dict(shares), fractions)

    def report(self, prediction_id: int, finished_epoch_seconds: float,
               host: str | None) -> dict[str, Any]:
        """Tell the manager when ``host``'s share of a served prediction finished."""
        if self._client is None:
            raise AdapterError("reports go to a manager; this run plans from a host file",
                               field="manager", value=None)
        return self._client.report(prediction_id, finished_epoch_seconds, host)


def host_p90_seconds(plan: Plan, units: dict[str, int], work_per_item: float
                     ) -> dict[str, float]:
    """Each chosen host's own p90 completion time (s) for its ``units`` items alone."""
    dist = plan.prediction.distribution
    return {host.name: predict([host], units[host.name] * work_per_item, dist).quantiles["p90"]
            for host in plan.hosts if units.get(host.name, 0) > 0}
