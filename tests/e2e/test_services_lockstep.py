"""The services run apart on the lockstep clock over MQTT (``--lockstep``) give exactly the events
``stormwatch demo --json`` gives for the same scenario: the same kinds, times, depths, percentages
and due times, no ``data_gap`` -- also with a service paused (SIGSTOP) for 5 s mid-storm, and with
the gateway killed mid-run (the simulator says, in one line, that it waits for the gateway) and
started again (its last will opens no data gap: the clock waited for it, no poll slot was missed).

The scenario is the default storm cut to the first 13.5 simulated hours from its start: the span
that still holds the turbidity violation at the storm's peak (about hour 12 of a Type II storm)
and the basin crossing 50 % after 0.5 in of rain (docs/simulators.md, "The lockstep clock").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stormwatch.stores.urls import open_store
from tests.conftest import REPO
from tests.demo_support import own_site_file
from tests.e2e.test_services_apart import Listener
from tests.waits import wait_until

STORMWATCH = str(Path(sys.executable).parent / "stormwatch")
DEFAULT = REPO / "stormwatch" / "simulators" / "scenarios" / "default.yaml"


def _scenario(tmp: Path) -> Path:
    doc = yaml.safe_load(DEFAULT.read_text())
    doc.update(name="lockstep-apart", duration_h=13.5)
    doc["rain"]["storm"]["start_offset_h"] = 0
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _same(events: list[dict[str, Any]], site_id: str) -> list[str]:
    """Each event as compared: everything but the site's id and the work order's id (derived from it)."""
    out = []
    for e in events:
        kept = {k: v for k, v in e.items() if k not in ("site", "work_order")}
        out.append(json.dumps(kept, sort_keys=True).replace(site_id, "SITE"))
    return out


@pytest.fixture(scope="module")
def demo(mosquitto_server, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    tmp = tmp_path_factory.mktemp("demo")
    scenario = _scenario(tmp)
    site, site_id = own_site_file(tmp, "demo")
    proc = subprocess.run(
        [STORMWATCH, "demo", "--json", "--site", str(site), "--scenario", str(scenario),
         "--broker", mosquitto_server.url, "--workdir", str(tmp / "work")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "STORMWATCH_LOG_LEVEL": "WARNING"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"turbidity_contrast", "basin_cleanout_due", "storm_qualified"} <= kinds, kinds
    assert "data_gap" not in kinds
    return _same(events, site_id), scenario


class Services:
    """simulate, gateway, ingest and alerts as four processes on one lockstep clock over MQTT."""

    def __init__(self, broker: str, port: int, tmp: Path, scenario: Path, wait_s: float = 30.0) -> None:
        self.tmp = tmp
        self.site, self.site_id = own_site_file(tmp, "apart")
        var = tmp / "var"
        var.mkdir()
        self.store = f"sqlite:///{var / 'stormwatch.db'}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_SIM_")}
        self.env.update({"STORMWATCH_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"})
        self.env.pop("STORMWATCH_CLOCK_FILE", None)
        site = str(self.site)
        self.commands = {
            "ingest": ["ingest", "--lockstep", "--site", site, "--broker", broker, "--store", self.store,
                       "--client-id", f"ingest-{self.site_id}", "--batch-ms", "0"],
            "alerts": ["alerts", "--lockstep", "--site", site, "--broker", broker, "--store", self.store,
                       "--state-dir", str(var / "alerts"), "--client-id", f"alerts-{self.site_id}"],
            "gateway": ["gateway", "--lockstep", "--site", site, "--broker", broker,
                        "--state-dir", str(var / "gateway")],
            "simulate": ["simulate", "--lockstep", "--site", site, "--scenario", str(scenario), "--broker", broker,
                         "--hrxl-lines-per-s", "50", "--lockstep-wait-s", str(wait_s)],
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: dict[str, int] = {}
        self.listener = Listener(port, self.site_id)

    def log(self, name: str) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob(f"{name}*.log")))

    def start(self, name: str) -> None:
        n = self.starts[name] = self.starts.get(name, 0) + 1
        out = (self.tmp / f"{name}{n}.log").open("wb")
        self.procs[name] = subprocess.Popen([STORMWATCH, *self.commands[name]], stdout=out,
                                            stderr=subprocess.STDOUT, env=self.env, cwd=self.tmp)

    def run(self, during: Callable[[Services], None] | None = None) -> list[str]:
        try:
            for name in self.commands:
                self.start(name)
            if during is not None:
                during(self)
            assert self.procs["simulate"].wait(600) == 0, self.log("simulate")[-3000:]
            assert self.procs["gateway"].wait(120) == 0, self.log("gateway")[-3000:]
            made = len(self.listener.readings)
            stored = open_store(self.store)
            try:
                wait_until(lambda: len(stored.query_readings(self.site_id)) >= made, 60, "every reading stored")
            finally:
                stored.close()
            wait_until(lambda: "was stopped by its operator" in self.log("alerts"), 60, "alerts to see the end")
            for name in ("ingest", "alerts"):
                self.procs[name].send_signal(signal.SIGTERM)
            for name in ("ingest", "alerts"):
                assert self.procs[name].wait(60) == 0, self.log(name)[-3000:]
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            self.listener.close()
        with self.listener.lock:
            return _same(list(self.listener.events), self.site_id)


def _mid_storm(s: Services) -> None:
    """Once the storm has qualified (0.5 in: the basin's crossing and the peak still to come)."""
    wait_until(lambda: any(json.loads(x)["kind"] == "storm_qualified" for x in _listened(s)), 600, "mid-storm")


def _listened(s: Services) -> list[str]:
    with s.listener.lock:
        return [json.dumps(e) for e in s.listener.events]


@pytest.mark.timeout(1200)
def test_services_apart_in_lockstep_give_the_demos_events(demo, mosquitto_server, tmp_path: Path) -> None:
    expected, scenario = demo
    got = Services(mosquitto_server.url, mosquitto_server.port, tmp_path, scenario).run()
    assert got == expected


@pytest.mark.timeout(1200)
def test_a_service_paused_5_s_mid_storm_changes_nothing(demo, mosquitto_server, tmp_path: Path) -> None:
    expected, scenario = demo

    def pause_ingest(s: Services) -> None:
        _mid_storm(s)
        s.procs["ingest"].send_signal(signal.SIGSTOP)
        try:
            _pause(5)
        finally:
            s.procs["ingest"].send_signal(signal.SIGCONT)

    got = Services(mosquitto_server.url, mosquitto_server.port, tmp_path, scenario).run(pause_ingest)
    assert got == expected


def _pause(seconds: float) -> None:
    """The pause itself is the point (a process held still for ``seconds`` of real time)."""
    import time
    time.sleep(seconds)


def _restart(name: str) -> Callable[[Services], None]:
    """Kill ``name`` (SIGKILL: no goodbye, the broker publishes its last wills) mid-storm; once the
    simulator's line names it as gone, start it again. (The line may name others still busy with
    the instant -- the gateway, whose readings the dead ingest does not confirm stored.)"""
    gone = f"{name} (gone: its last will; owes done up to "

    def kill_and_start(s: Services) -> None:
        _mid_storm(s)
        s.procs[name].kill()
        s.procs[name].wait(10)
        wait_until(lambda: any("the simulated clock stopped at" in x and gone in x
                               for x in s.log("simulate").splitlines()), 60, f"the simulator to name {name}")
        s.start(name)

    return kill_and_start


@pytest.mark.timeout(1200)
def test_killing_the_gateway_stops_the_clock_and_a_restart_continues(demo, mosquitto_server, tmp_path: Path) -> None:
    expected, scenario = demo
    s = Services(mosquitto_server.url, mosquitto_server.port, tmp_path, scenario, wait_s=5)
    got = s.run(_restart("gateway"))
    assert "the simulated clock moves on" in s.log("simulate")
    # The gateway's last will reached the engine, but the clock waited for the gateway: no poll slot
    # was missed, so no data gap -- the events are the uninterrupted demo's.
    alerts = s.log("alerts")
    assert "is offline" in alerts and "is online (restarted" in alerts, alerts[-3000:]
    assert got == expected


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", ["alerts", "ingest"])
def test_a_killed_engine_or_ingest_restarted_catches_up_to_the_same_events(
        demo, mosquitto_server, tmp_path: Path, name: str) -> None:
    """The alert engine rebuilds from the store and its state file (events it emitted before are not
    emitted again); ingest stores what its session kept and acknowledges it: the run goes on."""
    expected, scenario = demo
    s = Services(mosquitto_server.url, mosquitto_server.port, tmp_path, scenario, wait_s=5)
    got = s.run(_restart(name))
    assert "the simulated clock moves on" in s.log("simulate")
    assert s.starts[name] == 2
    assert got == expected
