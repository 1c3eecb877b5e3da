"""An integer no store can hold (``seq`` beyond 2^63-1) is refused at the door with its reason, and a
reading the store fails on anyway is dead-lettered alone while the rest of its batch is stored: on
real Mosquitto into SQLite (docs/reference/failure-kinds.md, "Integers a store cannot hold")."""

from __future__ import annotations

import logging
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from stormwatch.app import servers
from stormwatch.contract import parse_readings, trusted_reading
from stormwatch.ingest.validate import ValidationResult, Validator
from stormwatch.stores.sqlite import SqliteStore
from tests.ingest_support import DeadLetterListener, Publisher, Running, wire
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

HUGE = 99999999999999999999999


def _stored(db: Path) -> tuple[list[int], list[tuple[str, str]]]:
    with sqlite3.connect(db) as conn:
        seqs = [s for (s,) in conn.execute("SELECT seq FROM readings ORDER BY seq")]
        dead = conn.execute("SELECT reason, detail FROM deadletter ORDER BY id").fetchall()
    return seqs, dead


def test_a_seq_beyond_64_bits_is_refused_and_ingest_keeps_storing(
        own_mosquitto: servers.Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteStore(tmp_path / "sw.db")
    listener = DeadLetterListener(own_mosquitto)
    run = Running(own_mosquitto, store, batch_ms=50)
    pub = Publisher(own_mosquitto)
    try:
        with caplog.at_level(logging.WARNING):
            pub.send(wire(1))
            pub.send(wire(2).replace(b'"seq": 2', b'"seq": %d' % HUGE))
            pub.send(wire(3))
            wait_until(lambda: run.ingest.written == 2 and len(listener.messages) == 1, what="2 written, 1 dead")
    finally:
        pub.close()
        run.stop()
        listener.close()
        store.close()
    assert [m["reason"] for m in listener.messages] == ["schema"]
    assert f"seq: {HUGE} is beyond a 64-bit integer" in str(listener.messages[0]["detail"])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    seqs, dead = _stored(tmp_path / "sw.db")
    assert seqs == [1, 3] and [r for r, _ in dead] == ["schema"]


class _GapValidator:
    """The real validator, but one payload yields a good reading and one with a seq no store holds (a gap
    in validation: what the store does when a reading it cannot hold gets through)."""

    def __init__(self, inner: Validator) -> None:
        self.inner = inner

    def validate(self, topic: str, payload: bytes, *, retained: bool = False,
                 received_at: datetime | None = None) -> ValidationResult:
        if payload == b'{"trigger": "gap"}':
            (good,) = parse_readings(wire(4))
            bad = trusted_reading({**parse_readings(wire(5))[0].__dict__, "seq": HUGE})
            return ValidationResult(accepted=[good, bad])
        return self.inner.validate(topic, payload, retained=retained, received_at=received_at)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_reading_the_store_fails_on_is_dead_lettered_alone(
        own_mosquitto: servers.Mosquitto, tmp_path: Path) -> None:
    # Before: SQLite's OverflowError failed the whole batch every retry, nothing acknowledged, for ever.
    store = SqliteStore(tmp_path / "sw.db")
    listener = DeadLetterListener(own_mosquitto)
    run = Running(own_mosquitto, store, batch_ms=50, retry_backoff_s=0.05, max_backoff_s=0.1)
    run.ingest.validator = _GapValidator(run.ingest.validator)  # type: ignore[assignment]
    pub = Publisher(own_mosquitto)
    try:
        pub.send(b'{"trigger": "gap"}')
        wait_until(lambda: run.ingest.written == 1 and len(listener.messages) == 1, what="1 written, 1 dead")
        pub.send(wire(6))
        # the count moves at the commit, the acknowledgements go out just after it
        wait_until(lambda: run.ingest.written == 2 and run.ingest.unacked == 0,
                   what="the next message stored and every message acknowledged")
    finally:
        pub.close()
        run.stop()
        listener.close()
        store.close()
    (letter,) = listener.messages
    assert letter["reason"] == "store_rejected" and "OverflowError" in str(letter["detail"])
    seqs, dead = _stored(tmp_path / "sw.db")
    assert seqs == [4, 6] and [r for r, _ in dead] == ["store_rejected"]
