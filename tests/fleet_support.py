"""Helpers of the fleet tests: the services as processes, a simulated fleet, an event listener."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from stormwatch import topics
from stormwatch.runtime.mqtt import parse_broker_url
from tests.ingest_support import ids

START = datetime(2026, 6, 1, 4, tzinfo=UTC)
STORMWATCH = [sys.executable, "-m", "stormwatch"]


def service(args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """``stormwatch ARGS`` as a process logging to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen([*STORMWATCH, *args], stdout=out, stderr=subprocess.STDOUT)


def fleet(n: int, sites: Path, broker: str, speed: float, hours: float, clock: Path, log: Path,
          *extra: str) -> subprocess.Popen[bytes]:
    """``stormwatch simulate --fleet N`` (seed 7, starting at :data:`START`) as a process; the summary JSON
    is its stdout's last line (:func:`summary`)."""
    return subprocess.Popen(
        [*STORMWATCH, "simulate", "--fleet", str(n), "--sites", str(sites), "--broker", broker, "--speed", str(speed),
         "--duration-h", str(hours), "--start", START.isoformat(), "--seed", "7", "--clock-file", str(clock),
         "--start-delay-s", "3", "--progress-every", "5", *extra],
        stdout=subprocess.PIPE, stderr=open(log, "wb"))


def summary(proc: subprocess.Popen[bytes], timeout_s: float) -> dict[str, Any]:
    """The fleet's summary line, once it has ended (exit status 0 required)."""
    out, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, f"fleet exited with {proc.returncode}"
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def stop(*procs: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """SIGTERM each process and wait for it (a service flushes first); SIGKILL the ones that hang."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


class EventListener:
    """A clean-session QoS 1 subscriber to every site's events (``stormwatch/v1/+/events``) on one broker node."""

    def __init__(self, broker_url: str) -> None:
        broker = parse_broker_url(broker_url)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        ready = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"events-{next(ids)}",
                                  protocol=MQTTProtocolVersion.MQTTv311)
        self.client.on_connect = lambda c, *_: c.subscribe(topics.EVENTS_FILTER, qos=1)
        self.client.on_subscribe = lambda *_: ready.set()
        self.client.on_message = self._message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        if not ready.wait(20):
            raise TimeoutError(f"no subscription on {broker_url}")

    def _message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.events.append(json.loads(msg.payload))

    def keys(self) -> list[tuple[str, str, str]]:
        """``(site, kind, occurrence)`` of every event received, in arrival order."""
        with self._lock:
            return [(e["site"], e["kind"], e["occurrence"]) for e in self.events]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()

