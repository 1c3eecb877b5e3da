"""Helpers of the end-to-end delivery tests (no tests here; docs/ingest.md, section 1a): stormwatch services run as
processes that the tests SIGKILL, an events listener that rides out a broker crash, readings
published the way a gateway does, and the alert service's state read with SQL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from datetime import datetime
from itertools import groupby
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.contract import Reading, dump_readings
from tests.conftest import REPO
from tests.waits import wait_until

STORMWATCH = str(Path(sys.executable).parent / "stormwatch")
#: Mosquitto saves its state this rarely in these tests: a SIGKILL loses every session and queued
#: message since it started (Mosquitto's own default is 1800 s; deploy/mosquitto.conf says 60 s).
FORGETFUL = "autosave_interval 3600\n"


class Service:
    """One ``stormwatch`` command run as a process, its output in ``log``."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = log
        base = {k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_SIM_")}
        base.update({"PYTHONUNBUFFERED": "1", "STORMWATCH_LOG_LEVEL": "INFO"}, **(env or {}))
        with log.open("ab") as out:
            self.proc = subprocess.Popen([STORMWATCH, *args], stdout=out, stderr=subprocess.STDOUT, env=base,
                                         cwd=REPO)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout_s: float = 60, after: int = 0) -> None:
        """Wait until ``needle`` is in the log after character ``after`` (fail at once if the process died)."""
        def seen() -> bool:
            if needle in self.text()[after:]:
                return True
            assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}:\n{self.text()[-3000:]}"
            return False

        wait_until(seen, timeout_s, f"{self.name}: {needle!r}", every_s=0.05)

    def kill(self) -> None:
        """SIGKILL, the way power loss or the OOM killer ends it."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM and wait: the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def ensure_gone(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class EventListener:
    """The test's own subscriber to a site's events: a clean session that reconnects and subscribes again
    after a broker crash (events published while the broker is down cannot reach anyone)."""

    def __init__(self, port: int, site: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"events-{uuid.uuid4().hex[:8]}",
                                  protocol=MQTTProtocolVersion.MQTTv311)
        self.client.reconnect_delay_set(1, 2)
        self.client.on_connect = lambda c, *_: c.subscribe(topics.events(site), qos=1)
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_disconnect = lambda *_: self.subscribed.clear()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        assert self.subscribed.wait(10), "events subscription not acknowledged"

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.events.append(json.loads(msg.payload))

    def got(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def publish(port: int, readings: list[Reading], site: str = "s1", gateway: str = "gw") -> None:
    """Publish ``readings`` as a gateway with ``--batch`` does (one message per event time), QoS 1,
    and wait until the broker acknowledged each."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"pub-{uuid.uuid4().hex[:8]}",
                         protocol=MQTTProtocolVersion.MQTTv311)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        infos = [client.publish(topics.readings(site, gateway), dump_readings(list(group)), qos=1)
                 for _, group in groupby(readings, key=lambda r: r.time)]
        for info in infos:
            info.wait_for_publish(30)
            assert info.is_published()
    finally:
        client.disconnect()
        client.loop_stop()


def progress(state_db: Path, site: str = "s1") -> datetime | None:
    """The watermark the alert service recorded for ``site`` (SQL on its state file)."""
    if not state_db.exists():
        return None
    con = sqlite3.connect(str(state_db), timeout=5)
    try:
        row = con.execute("SELECT watermark FROM engine_progress WHERE site = ?", (site,)).fetchone()
    except sqlite3.OperationalError:  # not created yet
        return None
    finally:
        con.close()
    return datetime.fromisoformat(row[0].replace("Z", "+00:00")) if row else None


def kept_events(state_db: Path) -> int:
    """Events the alert service keeps for the store (SQL on its state file)."""
    con = sqlite3.connect(str(state_db), timeout=5)
    try:
        return int(con.execute("SELECT COUNT(*) FROM kept_events").fetchone()[0])
    finally:
        con.close()


def stored_events(srv: servers.InfluxDB1, db: str) -> list[dict[str, Any]]:
    """The ``events`` measurement as InfluxQL returns it: each point's wire JSON."""
    res = srv.query('SELECT "wire" FROM "events"', db)["results"][0]
    rows = res["series"][0]["values"] if res.get("series") else []
    return [json.loads(wire) for _, wire in rows if wire]


def event_key(e: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two emitted events the same answer: everything but the prose and the evidence."""
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in e.items()
                        if k not in ("message", "evidence", "work_order")))
