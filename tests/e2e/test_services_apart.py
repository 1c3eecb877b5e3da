"""The README's wall-paced services recipe -- ``simulate``, ``gateway``, ``ingest`` and ``alerts`` as
four processes on real Mosquitto, one simulated clock handed to all of them through a clock file --
gives the same events as ``stormwatch demo`` (the session's shared run, tests/shared_runs.py: the
default scenario on the lockstep clock) on the same site and scenario.

They are compared on the compliance answer (tests/answers_support.py): event kinds, citations, storm
tips and depth, due times. The expected storm is also derived by hand: the default scenario rains
1.2 in at 0.01 in per tip = 120 tips (hydrology.md), and no work order can be overdue within the
scenario (the earliest deadline, the turbidity review, is 24 h after a violation late on 06-01,
after the scenario's end at 06-02 12:00 UTC; the routine week is due 06-08). An ``alerts`` on the
wall clock instead of the simulated one would log hundreds of "late reading" warnings and announce
an ``inspection_overdue`` at simulated 06-01 for an order due 06-08.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from stormwatch import topics
from stormwatch.contract import parse_readings
from stormwatch.simulators.scenario import load_scenario
from stormwatch.stores.urls import open_store
from tests.answers_support import SLOT_SLACK, answer, assert_same_answer
from tests.demo_support import own_site_file
from tests.shared_runs import DemoRun
from tests.waits import wait_until

#: The services go this fast: 32 simulated hours in 58 s.
SPEED = 2000
STORMWATCH = str(Path(sys.executable).parent / "stormwatch")


class Listener:
    """The test's own MQTT subscriber: the site's events and readings (clean session)."""

    def __init__(self, port: int, site: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.readings: set[tuple[str, str, int]] = set()
        self.lock = threading.Lock()
        self.filters = [topics.events(site), f"{topics.ROOT}/{site}/+/readings"]
        subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"listen-{site}",
                                  protocol=MQTTProtocolVersion.MQTTv311)
        self.client.on_connect = lambda c, *_: c.subscribe([(f, 1) for f in self.filters])
        self.client.on_subscribe = lambda *_: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, keepalive=30)
        self.client.loop_start()
        assert subscribed.wait(10), "subscription not acknowledged"

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            if msg.topic.endswith("/events"):
                self.events.append(json.loads(msg.payload))
            else:
                self.readings.update(r.identity for r in parse_readings(msg.payload))

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.mark.timeout(900)
def test_services_run_apart_give_the_demos_events(mosquitto_server, default_demo: DemoRun, tmp_path: Path) -> None:
    scenario = load_scenario("default")
    broker = mosquitto_server.url
    demo = default_demo.events
    site, site_id = own_site_file(tmp_path, "apart")

    var = tmp_path / "var"
    var.mkdir()
    store = f"sqlite:///{var / 'stormwatch.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_SIM_")}
    env.update({"STORMWATCH_CLOCK_FILE": str(var / "clock.json"), "STORMWATCH_LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1"})
    commands = {  # the README's recipe, in its order: services first, they wait for the clock
        "ingest": ["ingest", "--site", str(site), "--broker", broker, "--store", store,
                   "--client-id", f"ingest-{site_id}"],
        "alerts": ["alerts", "--site", str(site), "--broker", broker, "--store", store,
                   "--state-dir", str(var / "alerts"), "--client-id", f"alerts-{site_id}"],
        # --until: stop where the demo's gateway stops (the recipe's gateway idles after the end)
        "gateway": ["gateway", "--site", str(site), "--broker", broker, "--state-dir", str(var / "gateway"),
                    "--until", scenario.end.isoformat()],
        # the demo's serial line rate (stormwatch.app.pipeline.SIM_SERIAL_LINES_PER_S)
        "simulate": ["simulate", "--site", str(site), "--speed", str(SPEED), "--hrxl-lines-per-s", "50"],
    }
    logs = {name: tmp_path / f"{name}.log" for name in commands}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    listener = Listener(mosquitto_server.port, site_id)

    def log_of(name: str) -> str:
        return logs[name].read_text(errors="replace")

    try:
        for name, args in commands.items():
            procs[name] = subprocess.Popen([STORMWATCH, *args], stdout=logs[name].open("wb"),
                                           stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
            if name != "simulate":
                wait_until(lambda n=name: "waiting for the simulated clock" in log_of(n), 60, f"{name} to wait")
        for name in ("simulate", "gateway"):
            assert procs[name].wait(300) == 0, f"{name}:\n{log_of(name)[-3000:]}"
        # The gateway drained its outbox, then said it stopped (after its last reading, same session).
        wait_until(lambda: "was stopped by its operator" in log_of("alerts"), 60, "alerts to see the gateway stop")
        made = len(listener.readings)
        stored = open_store(store)
        try:
            wait_until(lambda: len(stored.query_readings(site_id)) >= made, 60, f"ingest to store {made} readings")
        finally:
            stored.close()
        for name in ("ingest", "alerts"):
            procs[name].send_signal(signal.SIGTERM)
        for name in ("ingest", "alerts"):
            assert procs[name].wait(60) == 0, f"{name}:\n{log_of(name)[-3000:]}"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
        listener.close()

    alerts_log = log_of("alerts")
    assert f"alert service stopped after {made} readings" in alerts_log, alerts_log[-2000:]
    with listener.lock:
        services = list(listener.events)
    # the last tip falls 24 h after the storm's start at hour 1 (Type II fraction 1.000 at hour 24):
    # 2026-06-02 05:00 UTC; the inspection is due 24 h after it -- in both runs
    due = datetime(2026, 6, 3, 5, 0, tzinfo=UTC)
    for run in (demo, services):
        storm = answer(run)["storm_inspection_due"]
        assert (storm["tips"], storm["depth_in"]) == (120, 1.2)  # 1.2 in / 0.01 in per tip
        assert abs(storm["due_at"] - due) <= SLOT_SLACK
    assert_same_answer(services, demo)
    assert not [e for e in services if e["kind"] == "inspection_overdue"]
    assert not [e for e in services if e.get("late_detection_s")]
    # the alert engine judged lateness in simulated seconds (0.5 real s at 2000x = 1000 s), not 120
    late = alerts_log.count("late reading")
    assert late < 10, f"{late} late-reading warnings:\n{alerts_log[-2000:]}"
