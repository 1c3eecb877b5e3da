"""A reading stamped in the future is refused by ingest AND the alert engine, with one bound
(stormwatch.timebounds): it never moves the engine's watermark, so no later live reading looks late
and no event is stamped later than the engine's clock.

Found in the field: with `stormwatch alerts` running live, one rain_tips reading stamped now + 1 h
was dead-lettered by ingest as future_time, but the alert engine took it: its watermark jumped an
hour ahead, it published data_gap events stamped in the future and logged every later live reading
as "late ... re-evaluating".

Here, on a real Mosquitto, ingest (SQLite store) and the alert service share one ManualClock that
moves with the readings, as a live site's clock does: the example site's rain gauge (polled every
60 s) reports a dry reading every minute, 12:00 to 12:30, each published at its own time. At 12:10
a reading of 5 tips stamped 13:10 arrives (3,600 s ahead, beyond the 300 s bound); at 12:30 one
stamped 12:34 (240 s ahead: within the bound, so it is taken, but it may not carry the watermark
past the clock).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.service import AlertService
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.timebounds import DEFAULT_MAX_FUTURE_S, TimeBounds
from tests.alerts_support import Feeder
from tests.ingest_support import REPO, SITE, T0, DeadLetterListener, Publisher, Running, ids, wire
from tests.waits import wait_until

MIN = timedelta(minutes=1)


def rain(seq: int, tips: int, at: object) -> bytes:
    """The example site's gauge's reading, as its gateway sends it, stamped ``at``."""
    return wire(seq, tips, device="rain-1", quantity="rain_tips", unit="{tip}", raw=1000 + seq, tip_size="0.01 in",
                time=at.isoformat())  # type: ignore[attr-defined]


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "sw.db")
    yield s
    s.close()


@pytest.mark.mosquitto
def test_a_reading_from_the_future_is_refused_by_ingest_and_the_engine_alike(
        mosquitto_server: servers.Mosquitto, store: SqliteStore, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="stormwatch.alerts")
    clock = ManualClock(T0, on_sleep="wait")
    profiles = ProfileLibrary()
    cfg = load_site(REPO / "examples" / "site.yaml", profiles)
    emitted: list[tuple[Event, object]] = []  # each event with the clock's time when it was published
    service = AlertService([cfg], profiles, mosquitto_server.url, store, tmp_path / "state.db", clock,
                           client_id=f"future-alerts-{next(ids)}", on_event=lambda e: emitted.append((e, clock.now())),
                           overdue_check_s=0.1)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    listener = DeadLetterListener(mosquitto_server)
    ingest = Running(mosquitto_server, store, clock=clock, batch_ms=20)
    pub = Publisher(mosquitto_server)
    future = rain(100, 5, T0 + 70 * MIN)  # sent at 12:10, stamped 13:10
    ahead = rain(101, 0, T0 + 34 * MIN)   # sent at 12:30, stamped 12:34
    try:
        assert service.connected.wait(10)
        sent = 0

        def send(payload: bytes) -> None:  # and wait until both services have judged it at this clock time
            nonlocal sent
            pub.send(payload)
            sent += 1
            wait_until(lambda: service.messages_handled >= sent and ingest.ingest.acked >= sent, 10, "both verdicts")

        for m in range(31):
            clock.set(T0 + m * MIN)  # a live gateway: each reading is published when it is measured
            send(rain(m, 0, clock.now()))
            if m == 10:
                send(future)
        send(ahead)
        wait_until(lambda: ingest.ingest.written == 32 and len(listener.messages) == 1, 20, "ingest's verdicts")
        engine = service.engines[SITE]
        watermark = engine.watermark
    finally:
        pub.close()
        ingest.stop()
        listener.close()
        service.stop()
        runner.join(10)

    # ingest: the one reading 3,600 s ahead is a future_time dead letter; the 240 s one is stored
    assert dict(ingest.ingest.dead_lettered) == {"future_time": 1}
    assert listener.messages[0]["reason"] == "future_time" and listener.messages[0]["payload"] == future.decode()
    assert "3600s ahead of the clock" in str(listener.messages[0]["detail"])
    assert sorted(r.seq for r in store.query_readings(SITE, device="rain-1")) == [*range(31), 101]

    # the engine: the same reading refused by the same bound, counted, the watermark never past the clock
    assert engine.counts["future_time"] == 1 and engine.counts["late"] == 0 and engine.counts["reevaluated"] == 0
    assert watermark is not None and watermark <= T0 + 30 * MIN  # the clock stood at 12:30
    messages = [r.getMessage() for r in caplog.records]
    assert sum("ignored: future_time" in m for m in messages) == 1
    assert not [m for m in messages if "late reading" in m or "late detection" in m or "re-evaluating" in m]
    # nothing stamped in the future: every event at or before the clock when it was published, no gap
    # (the gauge never fell silent), and the 5 tips of 13:10 counted nowhere
    assert all(e.event_time <= now for e, now in emitted), [(e.kind, e.event_time, now) for e, now in emitted]
    assert not [e for e, _ in emitted if e.kind == "data_gap"]
    assert not [e for e, _ in emitted if e.rule == "R1" and e.kind.startswith("storm")]


def test_the_engine_bound_is_ingests_bound_and_holds_the_watermark_at_the_clock() -> None:
    """The engine alone, on a ManualClock: the default bound is ingest's (300 s); a reading 240 s
    ahead is buffered, not released, until the clock reaches it; one 301 s ahead is refused."""
    from tests.alerts_support import site

    assert TimeBounds().max_future_s == DEFAULT_MAX_FUTURE_S == 300.0
    clock = ManualClock(T0)
    engine = Engine.for_site(site("ch133"), ProfileLibrary(), None, 120, clock=clock)
    feed = Feeder()
    assert engine.feed(feed.tips(0, T0 - 5 * MIN)) == []
    assert engine.watermark == T0 - 7 * MIN  # newest event time minus the 120 s lateness
    engine.feed(feed.tips(0, T0 + 301 * timedelta(seconds=1)))  # beyond the bound: ignored
    assert engine.counts["future_time"] == 1 and engine.watermark == T0 - 7 * MIN
    engine.feed(feed.tips(0, T0 + 240 * timedelta(seconds=1)))  # within it: taken ...
    assert engine.watermark == T0  # ... but the watermark stops at the clock (12:02 would be past it)
    clock.set(T0 + 10 * MIN)
    engine.feed(feed.tips(0, T0 + 10 * MIN))
    assert engine.watermark == T0 + 8 * MIN
    old = feed.tips(0, T0 - timedelta(days=91))  # behind the 90-day bound: implausible_time
    assert engine.feed(old) == [] and engine.counts["implausible_time"] == 1
    assert all(e.event_time <= clock.now() for e in engine.flush())
    assert engine.watermark == T0 + 10 * MIN  # flushed up to the newest reading, which is the clock
