"""The fast path and the full path store the same: generated batches of messages -- valid readings, bad
ones of every kind, redeliveries and conflicting values, in one reading a message and in poll-cycle
batches -- go through :class:`Ingest` once with the fast validator and once with ``fast=False``, each
into its own InfluxDB database: the same rows, the same dead letters (reason, detail, payload), the
same counters. Written the way ``Ingest.run`` writes (each batch checked while the one before is being
written), the fast path stores the same again."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.ingest.consumer import Ingest, _Message
from stormwatch.ingest.validate import Validator
from stormwatch.stores.influx1 import Influx1Store
from tests.ingest.test_fastwire import NOW, REPO, TOPIC, body, rain, wire
from tests.names import run_unique

pytestmark = pytest.mark.influxdb

#: Changes that make a reading bad, each refused for its own reason (or accepted in another form).
_BAD: list[dict[str, object]] = [
    {"value": -1.0}, {"value": "12.5"}, {"device": "turb-9"}, {"unit": "FNU"}, {"site": "elsewhere"},
    {"gateway": "gw-other"}, {"time": "2026-06-01T12:05:01Z"}, {"time": "2026-06-01T11:59:00+00:00"},
    {"time": "2026-06-01T11:59:00.5Z"}, {"seq": -1}, {"extra": 1}, {"quantity": "conductivity"},
    {"tip_size": "0.01 in"}, {"value": 13}, {"raw": "text"}, {"flags": ["spike"]},
]


def _messages(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    sent: list[dict[str, Any]] = []
    out: list[bytes] = []
    seq = 0
    for _ in range(n):
        items: list[dict[str, Any]] = []
        for _ in range(rng.choice((1, 1, 3, 10))):
            seq += 1
            at = (NOW - timedelta(seconds=rng.randrange(1, 7200))).isoformat().replace("+00:00", "Z")
            kind = rng.random()
            if kind < 0.1 and sent:  # a redelivery
                item = dict(rng.choice(sent))
            elif kind < 0.15 and sent:  # the same identity with another value
                item = {**rng.choice(sent), "value": 1.0}
            elif kind < 0.3:
                item = rain(seq=seq, time=at, value=rng.randrange(0, 5), boot="b2",
                            **({} if rng.random() < 0.5 else {"tip_size": None}))
            else:
                item = wire(seq=seq, time=at, value=round(rng.uniform(0, 400), 2),
                            device=rng.choice(("turb-down", "turb-down", "turb-up")))
                if item["device"] == "turb-up":
                    item.update(quantity="temperature", unit="Cel", value=round(rng.uniform(0, 30), 1))
            if rng.random() < 0.15:
                item.update(rng.choice(_BAD))
            items.append({k: v for k, v in item.items() if v is not None or k != "tip_size"})
        sent += items
        out.append(body(*items, batch=len(items) > 1 or rng.random() < 0.3))
    return out


class _Later:
    """An executor that runs a submitted write only when its result is asked for: ``Ingest.run``'s
    order (the next batch checked before the one before is written) in one thread."""

    def __init__(self) -> None:
        self.forced_early = 0

    def submit(self, fn: Callable[[Any], None], arg: Any) -> Any:
        later = self

        class Pending:
            done = False

            def result(self) -> None:
                if not self.done:
                    self.done = True
                    later.forced_early += later.preparing
                    fn(arg)

        return Pending()

    preparing = 0


def _run(url: str, db: str, fast: bool, payloads: list[bytes], *,
         overlapped: bool = False, per_batch: int = 40) -> tuple[Ingest, Influx1Store]:
    from stormwatch.config import load_site
    from stormwatch.profiles import ProfileLibrary

    profiles = ProfileLibrary()
    cfg = load_site(REPO / "examples" / "site.yaml", profiles)
    clock = ManualClock(NOW)
    validator = Validator.for_sites([cfg], profiles, clock, fast=fast)
    store = Influx1Store(url, db, clock=clock)
    ingest = Ingest(validator, store, "mqtt://127.0.0.1:1", client_id=f"pair-{db}", clock=clock)
    later = _Later()
    if overlapped:
        ingest._writer = later  # type: ignore[assignment]
        prepare = ingest._prepare

        def preparing(*args: Any) -> Any:
            later.preparing = 1
            try:
                return prepare(*args)
            finally:
                later.preparing = 0

        ingest._prepare = preparing  # type: ignore[method-assign]
    for i in range(0, len(payloads), per_batch):  # 40 messages: in-batch redeliveries and across batches
        batch = [_Message(TOPIC, p, k + 1, 1, False, 0) for k, p in enumerate(payloads[i:i + per_batch])]
        if overlapped:
            ingest._write_next(batch)
        else:
            ingest._process(batch)
    if overlapped:
        ingest._settle_writing()
        assert later.forced_early > 0  # a message needed the write before it settled: the wait is exercised
    return ingest, store


def _rows(srv: servers.InfluxDB1, db: str, measurement: str) -> list[Any]:
    res = srv.query(f'SELECT * FROM "{measurement}"', db)["results"][0]
    series = res.get("series") or [{"columns": [], "values": []}]
    return [series[0]["columns"], series[0]["values"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fast_and_full_paths_store_the_same_rows_and_dead_letters(influx_server: servers.InfluxDB1,
                                                                  seed: int) -> None:
    payloads = _messages(seed, 160)
    dbs = [run_unique(f"pair_{kind}_{seed}").replace("-", "_") for kind in ("fast", "full")]
    (fast, _), (full, _) = (_run(influx_server.url, db, kind, payloads) for db, kind in zip(dbs, (True, False),
                                                                                           strict=True))
    try:
        assert fast.written > 100 and sum(full.dead_lettered.values()) > 20
        assert (fast.written, fast.late, fast.duplicates, fast.dead_lettered) == (
            full.written, full.late, full.duplicates, full.dead_lettered)
        for measurement in ("readings", "deadletter"):
            assert _rows(influx_server, dbs[0], measurement) == _rows(influx_server, dbs[1], measurement)
    finally:
        for db in dbs:
            influx_server.query(f'DROP DATABASE "{db}"', None)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batches_checked_while_the_one_before_is_written_store_the_same(influx_server: servers.InfluxDB1,
                                                                        seed: int) -> None:
    payloads = _messages(seed, 160)
    dbs = [run_unique(f"overlap_{kind}_{seed}").replace("-", "_") for kind in ("fast", "full")]
    over, _ = _run(influx_server.url, dbs[0], True, payloads, overlapped=True)
    full, _ = _run(influx_server.url, dbs[1], False, payloads)
    try:
        assert (over.written, over.late, over.duplicates, over.dead_lettered, over.acked) == (
            full.written, full.late, full.duplicates, full.dead_lettered, full.acked)
        for measurement in ("readings", "deadletter"):
            assert _rows(influx_server, dbs[0], measurement) == _rows(influx_server, dbs[1], measurement)
    finally:
        for db in dbs:
            influx_server.query(f'DROP DATABASE "{db}"', None)


def test_a_redelivery_of_the_batch_being_written_is_judged_after_its_write(influx_server: servers.InfluxDB1) -> None:
    payloads = [body(wire(seq=1)), body(wire(seq=2)), body(wire(seq=2)), body(wire(seq=3)),
                body(wire(seq=3, value=1.0)), body(wire(seq=4), wire(seq=5)), body(wire(seq=5), batch=True)]
    dbs = [run_unique(f"redelivered_{kind}").replace("-", "_") for kind in ("fast", "full")]
    over, _ = _run(influx_server.url, dbs[0], True, payloads, overlapped=True, per_batch=1)
    full, _ = _run(influx_server.url, dbs[1], False, payloads, per_batch=1)
    try:
        assert over.dead_lettered == full.dead_lettered == {"duplicate": 2, "conflicting_value": 1}
        assert (over.written, over.duplicates, over.acked) == (full.written, full.duplicates, full.acked) == (5, 0, 7)
        for measurement in ("readings", "deadletter"):
            assert _rows(influx_server, dbs[0], measurement) == _rows(influx_server, dbs[1], measurement)
    finally:
        for db in dbs:
            influx_server.query(f'DROP DATABASE "{db}"', None)
