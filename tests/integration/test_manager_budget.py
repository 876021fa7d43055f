"""A manager's exact selection under its time budget: refused with its code, and the manager
goes on answering."""

from __future__ import annotations

import pytest
from daemons import wait_for

from ghs.client import ManagerError


def test_optimal_past_the_managers_budget_is_refused_and_the_manager_goes_on(daemons):
    # a budget of 1 microsecond: exact selection gives up at its first batch
    _, endpoint = daemons.manager(GHS_SCHEDULER_OPTIMAL_BUDGET_SECONDS="0.000001")
    daemons.agent(endpoint, "--simulate", "3", "--speedup", "3600", "--seed", "5",
                  "--host-id", "ws", outbox="ws.sqlite", log="ws.log")
    with daemons.client(endpoint) as client:
        wait_for(lambda: len([h for h in client.status().hosts if h["usable"]]) == 3, 60,
                 "three hosts with estimates")
        with pytest.raises(ManagerError) as caught:
            client.schedule(3600.0, method="optimal")
        assert caught.value.code == "budget_exceeded"
        assert "passed its time budget" in str(caught.value)
        # the other methods do not read it, and the manager answers on
        assert client.schedule(3600.0, method="auto").hosts
