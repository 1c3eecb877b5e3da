"""An unreachable broker is reported (failure-kinds.md #8, "Broker away", seen from the consumers):
``Ingest`` and ``AlertService`` pointed at a closed port log ONE ERROR "cannot reach broker <url
without password>: <reason>; retrying" within seconds, the further attempts at DEBUG, and INFO
"connected" once the broker answers (paho 2.x ``on_connect_fail``, stormwatch.runtime.mqtt.ConnectFailureLog).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from stormwatch.alerts.service import AlertService
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.ingest.consumer import Ingest
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import T0, site
from tests.ingest_support import INGEST_NOW, make_validator
from tests.waits import wait_until

LOGGERS = ("stormwatch.ingest.consumer", "stormwatch.alerts.service")


class _Both:
    """An Ingest and an AlertService, each running in its own thread, on ``url``."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.store = SqliteStore(tmp_path / "store.db")
        clock = ManualClock(INGEST_NOW, on_sleep="wait")
        self.ingest = Ingest(make_validator(clock), self.store, url, client_id="unreach-ingest", clock=clock)  # type: ignore[arg-type]
        self.alerts = AlertService([site("ch133")], ProfileLibrary(), url, None, tmp_path / "state.db", ManualClock(T0),
                                   client_id="unreach-alerts", overdue_check_s=0.2)
        self.threads = [threading.Thread(target=x.run, daemon=True) for x in (self.ingest, self.alerts)]
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.ingest.stop(10)
        self.alerts.stop()
        for t in self.threads:
            t.join(10)
        self.store.close()
        assert not any(t.is_alive() for t in self.threads)


def _records(caplog: pytest.LogCaptureFixture, name: str, level: int, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name and r.levelno == level and text in r.getMessage()]


def test_closed_port_is_reported_once_per_outage_without_the_password(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="stormwatch.ingest")
    caplog.set_level(logging.DEBUG, logger="stormwatch.alerts")
    port = servers.free_port()  # nothing listens there
    both = _Both(f"mqtt://watcher:s3cret-pw@127.0.0.1:{port}", tmp_path)
    try:
        # paho retries after 1 s, then 2 s...: two attempts within about 1 s
        wait_until(lambda: all(_records(caplog, n, logging.DEBUG, "cannot reach broker") for n in LOGGERS), 5.0,
                   "DEBUG repeats of both services")
    finally:
        both.stop()
    safe = f"mqtt://watcher@127.0.0.1:{port}"
    for name in LOGGERS:
        (error,) = _records(caplog, name, logging.ERROR, "cannot reach broker")
        assert error.getMessage().startswith(f"cannot reach broker {safe}: ConnectionRefusedError: ")
        assert "; retrying" in error.getMessage()
        assert _records(caplog, name, logging.DEBUG, f"cannot reach broker {safe} (2 attempts)")
        assert not _records(caplog, name, logging.INFO, "connected to")
    assert all("s3cret-pw" not in r.getMessage() for r in caplog.records)


@pytest.mark.mosquitto
def test_broker_coming_up_later_is_connected_and_said_once(
        own_mosquitto: servers.Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="stormwatch.ingest")
    caplog.set_level(logging.DEBUG, logger="stormwatch.alerts")
    own_mosquitto.stop()  # the broker's port is closed when both start
    both = _Both(own_mosquitto.url, tmp_path)
    try:
        wait_until(lambda: all(_records(caplog, n, logging.ERROR, "cannot reach broker") for n in LOGGERS), 5.0,
                   "an ERROR of both services")
        own_mosquitto.start()
        assert both.ingest.wait_connected(10) and both.alerts.connected.wait(10)
    finally:
        both.stop()
    for name in LOGGERS:
        assert len(_records(caplog, name, logging.ERROR, "cannot reach broker")) == 1
        (info,) = _records(caplog, name, logging.INFO, "connected to")
        assert info.getMessage().startswith(f"connected to {own_mosquitto.url} as ")
        assert "after " in info.getMessage() and " failed attempts" in info.getMessage()
