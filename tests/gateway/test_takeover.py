"""Two gateways with one client id settle (docs/runtime.md, `runtime/mqtttakeover.py`; failure-kinds.md):
on a real Mosquitto, with the back-off scaled down (settled after 4 s, then one reconnect every 8 s
instead of a minute and five minutes), the broker's own log shows the takeovers thinning out to one
per settled delay, and each gateway logs ONE ERROR naming both processes (boot, host, pid) from the
retained status and last will on the gateway's status topic."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest

from stormwatch.app import servers
from stormwatch.clock import ScenarioClock
from stormwatch.config import parse_site
from stormwatch.gateway.service import Gateway
from stormwatch.profiles import ProfileLibrary
from tests.gateway_support import RegisterServer
from tests.waits import wait_until

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SETTLE_S = 4.0
SETTLED_S = 8
#: Settled takeovers the test sees: three settled delays measured.
SETTLED_ROUNDS = 4
#: Mosquitto's line (log_type notice, epoch-second timestamps) when a client id's second connection
#: takes the session from the first.
TAKEOVER_LINE = re.compile(r"^(\d+): Client (\S+) already connected, closing old connection\.", re.MULTILINE)


def _takeovers(broker: servers.Mosquitto, client_id: str) -> list[int]:
    text = (broker.data_dir / "mosquitto.log").read_text(errors="replace")
    return [int(t) for t, cid in TAKEOVER_LINE.findall(text) if cid == client_id]


def _settled(times: list[int]) -> list[int]:
    """The takeovers once the last pre-settle delay has run out."""
    return [t for t in times if times and t >= times[0] + SETTLE_S + SETTLED_S]


@pytest.mark.parametrize("protocol", [4, 5], ids=["mqtt311", "mqtt5"])
def test_two_gateways_with_one_client_id_settle_and_each_names_both_sides_once(
        own_mosquitto: servers.Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture, protocol: int) -> None:
    caplog.set_level(logging.INFO)
    device = RegisterServer(unit_ids=(1,)).start()
    device.dynamic[1] = lambda address, n: 1000 + n if address == 0 else None
    site_id = f"twin-{protocol}-{os.getpid()}"
    cfg = parse_site(
        {"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-twin",
         "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
                      "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": device.port}}]},
        "copied-site.yaml", ProfileLibrary(),
    )
    clock = ScenarioClock(sim_start=T0, speed=10.0, wall_start=time.time())
    url = own_mosquitto.url + ("?protocol=5" if protocol == 5 else "")
    gateways = [Gateway(cfg, ProfileLibrary(), clock, url, tmp_path / f"gw{i}", confirm="broker",
                        takeover_settle_s=SETTLE_S, takeover_max_s=SETTLED_S) for i in (1, 2)]
    client_id = gateways[0].publisher.client_id
    workers = [threading.Thread(target=gw.run, daemon=True) for gw in gateways]
    try:
        workers[0].start()
        wait_until(lambda: gateways[0].publisher.connected, 20, "the first gateway connected")
        workers[1].start()
        # the fight's first seconds, then settled rounds: waited for as they happen, no longer
        wait_until(lambda: len(_settled(_takeovers(own_mosquitto, client_id))) >= SETTLED_ROUNDS, 120,
                   f"{SETTLED_ROUNDS} settled takeovers")
    finally:
        for gw in gateways:
            gw.stop()
        device.stop()
    times = _takeovers(own_mosquitto, client_id)
    settled = _settled(times)
    gaps = [b - a for a, b in pairwise(settled)]
    assert len(settled) >= SETTLED_ROUNDS and min(gaps) >= SETTLED_S - 1, times  # one per settled delay (1-s stamps)
    for gw in gateways:  # ONE ERROR each, naming this process and the other
        other = next(g for g in gateways if g is not gw)
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR
                  and r.name == "stormwatch.gateway.publisher" and "session taken over" in r.getMessage()
                  and f"This gateway: boot {gw.boot} " in r.getMessage()]
        assert len(errors) == 1, errors
        assert f"with client id {client_id!r}" in errors[0]
        assert f"the other: boot {other.boot} on host {socket.gethostname()}, pid {os.getpid()}" in errors[0]
