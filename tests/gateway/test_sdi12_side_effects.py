"""A retried SDI-12 request never repeats a side effect: RainVUE10's ``aM!`` resets its tip count.

Three simulated RainVUE10s on three pseudo-terminals, one gateway, real MQTT. Each sensor loses one
answer: a garbled ``aD0!`` answer, every attempt of one ``aD0!`` dropped, a dropped ``aM!``
answer. The tips the gateway publishes are compared with the tips the simulated buckets made
between the measurements the sensors saw, on the lockstep clock (failure-kinds.md, "A retried command repeats its side
effect"; docs/gateway.md, "Commands with side effects").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch import topics
from stormwatch.config import parse_site
from stormwatch.gateway.counter import FLAG_BASELINE, FLAG_RESET
from stormwatch.gateway.service import Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.sdi12_device import RainSinceMeasurement, Sdi12Sim
from tests.gateway_support import Collector, Conductor, LoopThread
from tests.waits import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.mosquitto]

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RUN_S = 8 * 60
# A wet spell: a tip every 7 s from 0:20 to 5:50 -- every minute of it wet.
TIPS = [SIM_START + timedelta(seconds=s) for s in range(20, 351, 7)]


@pytest.fixture()
def loop() -> LoopThread:
    lt = LoopThread()
    yield lt
    lt.close()


def test_lost_answers_never_cost_tips_or_publish_a_dry_minute(loop: LoopThread, mosquitto_server,
                                                             tmp_path: Path) -> None:
    # Commands per poll: aM!, aD0! (five values fit one D answer). #3 is poll 1's aD0!; #5-#8 are
    # every attempt (1 + 3 retries) of poll 2's aD0!; #2 is poll 1's aM!.
    faults = {"a": {"garble": {3}}, "b": {"drop": {5, 6, 7, 8}}, "c": {"drop": {2}}}
    models = {name: RainSinceMeasurement(TIPS) for name in faults}
    end = SIM_START + timedelta(seconds=RUN_S)
    clock = LockstepClock(SIM_START, end)
    sims = {name: Sdi12Sim(str(i + 1), models[name], clock, link=str(tmp_path / f"sdi-{name}"), ready_s=0.05,
                           decimals=2, **fault)
            for i, (name, fault) in enumerate(faults.items())}
    for sim in sims.values():
        loop.run(sim.start())
    site_id = f"se-{uuid.uuid4().hex[:8]}"
    cfg = parse_site({
        "site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t",
        "devices": [{"id": f"rain-{name}", "profile": "campbell_rainvue10", "sdi12_address": sim.address,
                     "poll_interval_s": 60, "transport": {"kind": "serial", "port": sim.link}}
                    for name, sim in sims.items()],
    }, "test-site", ProfileLibrary())
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:
        gw = Gateway(cfg, ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw", confirm="broker")
        conductor = Conductor(clock)
        gw.run(until=end)
        conductor.join()
        wait_until(lambda: len(sub.readings) >= gw.readings_made, 15, "every reading at the subscriber")
    finally:
        clock.stop()
        sub.close()
        for sim in sims.values():
            loop.run(sim.stop())
    assert gw.missed_slots == 0
    got = {name: sorted((r for r in sub.readings if r.device == f"rain-{name}"), key=lambda r: r.time)
           for name in faults}

    for name in ("a", "b"):  # the lost data were read again: every tip published, no gap
        measured = models[name].measured
        assert len(measured) == len(set(measured))
        assert got[name][0].flags == (FLAG_BASELINE,)
        assert all(FLAG_RESET not in r.flags for r in got[name])
        assert sum(r.value for r in got[name]) == models[name].tips_between(measured[0], measured[-1]) > 40
    assert sims["a"].commands[:5] == ["1M!", "1D0!", "1M!", "1D0!", "1D0!"]  # the garbled D0 asked again
    # b: poll 2's data read at poll 3 with aD0!, before its aM! (which would reset them)
    assert sims["b"].commands[4:11] == ["2M!"] + ["2D0!"] * 4 + ["2D0!", "2M!"]

    # c: the aM! whose answer was lost is not sent again (a resend measures a dry instant: 0 tips);
    # its tips are unknown, so the next count is flagged: a data gap, never a dry minute.
    c, measured = got["c"], models["c"].measured
    assert sims["c"].commands[:4] == ["3M!", "3D0!", "3M!", "3M!"]
    lost = models["c"].tips_between(measured[0], measured[1])
    assert lost > 0
    assert c[1].flags == (FLAG_RESET,) and c[1].value == models["c"].tips_between(measured[1], measured[2])
    assert all(FLAG_RESET not in r.flags for r in c[2:])
    assert sum(r.value for r in c) == models["c"].tips_between(measured[0], measured[-1]) - lost
