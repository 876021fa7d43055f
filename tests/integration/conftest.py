import pytest
from daemons import Daemons


@pytest.fixture
def daemons(tmp_path):
    """Real ghs daemons with fast heartbeats and staleness, stopped after the test."""
    started = Daemons(tmp_path, GHS_AGENT_HEARTBEAT_SECONDS="0.5",
                      GHS_AGENT_ACK_TIMEOUT_SECONDS="0.5", GHS_AGENT_MAX_BACKOFF_SECONDS="2",
                      GHS_SENSOR_ACCOUNTING="off")
    yield started
    started.stop_all()
