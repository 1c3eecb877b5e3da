"""Issue 19 item 3, ingest side: a reading whose time stamp is implausibly old is dead-lettered
``implausible_time``; a late reading replayed from a gateway's outbox after a long outage is not.

Through a real Mosquitto into a real SQLite store, with ingest's clock standing at 12:10 on
2026-06-01 (``ManualClock``). The bound is 90 days (3 × the gateway outbox's 30-day limit):
1970-01-01 (a box without a real-time clock) and 91 days back are refused, 29 days back (the
oldest reading an outbox can still hold) and a live reading are stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch.app import servers
from stormwatch.clock import ManualClock, WallClock
from stormwatch.stores.sqlite import SqliteStore
from tests.ingest_support import T0, DeadLetterListener, Publisher, Running, wire
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

NOW = T0 + timedelta(minutes=10)


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "sw.db", clock=WallClock())
    yield s
    s.close()


def test_implausible_time_is_dead_lettered_and_an_outage_replay_is_stored(own_mosquitto: servers.Mosquitto,
                                                                         store: SqliteStore) -> None:
    listener = DeadLetterListener(own_mosquitto)
    run = Running(own_mosquitto, store, clock=ManualClock(NOW, on_sleep="wait"), batch_ms=50)
    pub = Publisher(own_mosquitto)
    sent = {
        1: "1970-01-01T00:00:00+00:00",  # the gateway's clock before NTP
        2: (NOW - timedelta(days=91)).isoformat(),  # older than any outbox keeps a reading
        3: (NOW - timedelta(days=29)).isoformat(),  # replayed from the outbox after a 29-day outage
        4: (NOW - timedelta(minutes=1)).isoformat(),  # live
    }
    try:
        for seq, t in sent.items():
            pub.send(wire(seq, 10.0 + seq, time=t))
        wait_until(lambda: run.ingest.written == 2 and len(listener.messages) == 2, what="2 written, 2 dead")
    finally:
        pub.close()
        run.stop()
        listener.close()
    assert dict(run.ingest.dead_lettered) == {"implausible_time": 2}
    assert sorted((m["reason"], m["payload"]) for m in listener.messages) == sorted(
        ("implausible_time", wire(seq, 10.0 + seq, time=sent[seq]).decode()) for seq in (1, 2))
    assert sorted(letter.reason for letter in store.query_deadletters()) == ["implausible_time"] * 2
    stored = store.query_readings("riverside-commons")
    assert [(r.seq, r.value, r.time.isoformat()) for r in stored] == [(3, 13.0, sent[3]), (4, 14.0, sent[4])]
