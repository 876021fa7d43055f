import os

import pytest
from daemons import Daemons

from sensors.accounting_control import probe_accounting, switch_accounting


@pytest.fixture
def daemons(tmp_path):
    """Real ghs daemons with fast heartbeats and staleness, stopped after the test."""
    started = Daemons(tmp_path, GHS_AGENT_HEARTBEAT_SECONDS="0.5",
                      GHS_AGENT_ACK_TIMEOUT_SECONDS="0.5", GHS_AGENT_MAX_BACKOFF_SECONDS="2",
                      GHS_SENSOR_ACCOUNTING="off")
    yield started
    started.stop_all()


@pytest.fixture
def free_accounting(tmp_path):
    """Skip unless root and no accounting is active; switch off anything left in tmp_path."""
    if os.geteuid() != 0:
        pytest.skip("needs root: switches kernel process accounting")
    probe = probe_accounting(())
    if probe.active is not None:
        if probe.active.file is not None:
            probe.active.file.close()
        pytest.skip("process accounting is already active on this machine; not touching it")
    if not probe.complete:
        pytest.skip("fanotify unavailable: cannot verify that accounting is free")
    yield tmp_path
    left = probe_accounting(())
    if left.active is not None:
        if left.active.file is not None:
            left.active.file.close()
        switch_accounting(None)  # ours: it was free when the test started
