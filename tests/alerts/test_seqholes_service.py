"""The live alert service waits for readings a gateway made that the broker did not deliver (issue 18),
on real Mosquitto with a SQLite store.

The readings are the alert tests' 10-hour scenario (tests/alerts/test_engine_backfill.py) with the rain
gauge polled every 60 s: one tip a minute for minutes 0-59 (60 tips, 0.60 in; Ch. 133 R1 qualifies at
50 tips = 0.50 in, the storm ends 6 h after its last tip at 0:59, inspection due 24 h after it), a
turbidity plume downstream at 0:30-1:00, sediment rising from 1 to 3 ft. The readings of minutes
20-29 (10 tips) never reach the service over MQTT, as when the broker lost what it held: their
seq numbers are missing between minute 19 and minute 30.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading
from tests.alerts_support import T0, Feeder, keys, live, live_service, scenario, site_doc
from tests.delivery_support import publish
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

MIN = timedelta(minutes=1)
LAST_TIP = T0 + 59 * MIN


def _parts() -> tuple[list[Reading], list[Reading], list[Reading]]:
    readings = scenario(Feeder())
    before = [r for r in readings if r.time < T0 + 20 * MIN]
    hole = [r for r in readings if T0 + 20 * MIN <= r.time < T0 + 30 * MIN]
    after = [r for r in readings if r.time >= T0 + 30 * MIN]
    return before, hole, after


def _storms(seen: list[Event]) -> list[Event]:
    return [e for e in seen if e.kind == "storm_inspection_due"]


def test_readings_the_broker_lost_are_waited_for_and_read_back_from_the_store(mosquitto_server, tmp_path) -> None:
    cfg = parse_site(site_doc("ch133", rain_poll_s=60), "test-site.yaml")
    before, hole, after = _parts()
    with live_service(cfg, mosquitto_server.url, tmp_path, ManualClock(T0 + timedelta(hours=11)),
                      "holes-svc") as (svc, seen, store):
        publish(mosquitto_server.port, before)
        publish(mosquitto_server.port, after)
        wait_until(lambda: svc.readings_seen >= len(before) + len(after), 30, "the readings published")
        store.write_readings([*before, *after])  # ingest's part
        # the jump from minute 19 to minute 30 holds the rules: the storm is not decided without them
        assert svc.engines["s1"].held_at == T0 + 19 * MIN
        assert not _storms(seen)
        store.write_readings(hole)  # the gateway's re-send reached ingest, not this service
        wait_until(lambda: _storms(seen), 30, "the storm inspection, once the store has the readings")
        wait_until(lambda: "basin_cleanout_due" in {e.kind for e in seen}, 30, "the last event of the scenario")
    _, undisturbed = live(cfg, [*before, *hole, *after], None)
    assert keys(seen) == keys(undisturbed) and len(seen) == len(undisturbed)
    (storm,) = _storms(seen)
    assert (storm.tips, storm.depth_in, storm.due_at) == (60, 0.6, LAST_TIP + timedelta(hours=24))
    assert "at least" not in storm.message
    assert not [e for e in seen if e.late_detection_s or e.kind == "data_gap"]


def test_readings_that_never_come_are_given_up_and_the_storm_is_a_lower_bound(
        mosquitto_server, tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """Held for 1.5 s (``hole_hold_s``), then decided without minutes 20-29: a data gap from 0:19 to
    0:30 inside the storm, 50 tips (0.50 in, still qualifying) *at least*. When the readings come
    after all they are late data: the storm is re-evaluated to 60 tips, emitted as a late detection."""
    caplog.set_level(logging.INFO, logger="stormwatch.alerts")
    cfg = parse_site(site_doc("ch133", rain_poll_s=60), "test-site.yaml")
    before, hole, after = _parts()
    with live_service(cfg, mosquitto_server.url, tmp_path, ManualClock(T0 + timedelta(hours=11)),
                      "holes-gone", hole_hold_s=1.5) as (_svc, seen, store):
        publish(mosquitto_server.port, before)
        publish(mosquitto_server.port, after)
        store.write_readings([*before, *after])
        wait_until(lambda: _storms(seen), 30, "the storm inspection, decided without the lost readings")
        (first,) = _storms(seen)
        assert (first.tips, first.depth_in) == (50, 0.5)
        assert first.details is not None and first.details.model_dump()["depth_lower_bound"] is True
        assert "storm of at least 0.50 in (50 tips of 0.01 in); rain unknown in the rain gauge's data gap" \
            in first.message
        assert [(e.gap_start, e.gap_end) for e in seen if e.kind == "data_gap" and e.gap_end] == \
            [(T0 + 19 * MIN, T0 + 30 * MIN)]
        given_up = [r.getMessage() for r in caplog.records if "did not arrive within 2 s" in r.getMessage()]
        assert len(given_up) == 1 and "gw/b1 seq 81-120 (40 of 40 readings" in given_up[0], given_up
        store.write_readings(hole)
        publish(mosquitto_server.port, hole)  # late after all
        wait_until(lambda: len(_storms(seen)) == 2, 30, "the re-evaluated storm")
    again = _storms(seen)[1]
    assert (again.tips, again.depth_in, again.due_at) == (60, 0.6, LAST_TIP + timedelta(hours=24))
    assert again.late_detection_s and "at least" not in again.message
