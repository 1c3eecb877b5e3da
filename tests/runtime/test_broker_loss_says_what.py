"""A broker that goes away is logged as what it is -- "connection lost" -- not paho's bare
"Unspecified error" (stormwatch.runtime.mqttsession): a real Mosquitto stopped under a session."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stormwatch.app import servers
from stormwatch.stores.sqlite import SqliteStore
from tests.ingest_support import Running
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto


def test_a_stopped_broker_is_a_connection_lost(own_mosquitto: servers.Mosquitto, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteStore(tmp_path / "sw.db")
    run = Running(own_mosquitto, store)
    try:
        with caplog.at_level(logging.WARNING, logger="stormwatch"):
            own_mosquitto.kill()
            wait_until(lambda: any("disconnected from" in r.getMessage() for r in caplog.records),
                       what="the loss logged")
    finally:
        run.stop()
        store.close()
    (line,) = [r.getMessage() for r in caplog.records if "disconnected from" in r.getMessage()]
    assert "connection lost" in line and "Unspecified error" not in line, line
