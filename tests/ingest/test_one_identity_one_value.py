"""One identity, one measurement (failure-kinds.md #27: "the store keeps both or refuses one with a
reason"), a batch judged reading by reading, and every dead letter through one place -- end to end
on real Mosquitto, SQLite and InfluxDB 1.x.

Found by a newcomer:

* ``readings add ... --turbidity-ntu 50`` after 41.5 was entered for the same sample printed
  "stored: 0 new, 1 already recorded" and kept 41.5; a second file with 55 at a timestamp holding 12
  said "0 new, 1 already stored" (the identity of manual and imported readings is made from the time,
  so a different value under it was taken for a duplicate);
* ``{"readings": [7.5 NTU seq 103, Infinity seq 104]}`` dead-lettered the whole message: seq 103 was
  never stored;
* a rain_tips of 10**30 got InfluxDB's HTTP 400 and landed in the deadletter measurement, but was
  neither published on stormwatch/v1/deadletter nor counted.
"""

# Expected values are by hand: the stored value is the first one written; a conflict's detail names
# both values; 2**32 - 1 is the range of the widest (32-bit) counter, 10**30 far beyond it.

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch.app import servers
from stormwatch.app.cli import app
from stormwatch.physics import MAX_TIPS
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.stores.urls import open_store
from tests.ingest_support import (
    REPO,
    SITE,
    T0,
    DeadLetterListener,
    Publisher,
    Running,
    ids,
    influx_count,
    tip_wire,
    wire,
)
from tests.waits import wait_until

EXAMPLE = REPO / "examples" / "site.yaml"


@pytest.fixture(params=["sqlite", pytest.param("influx1", marks=pytest.mark.influxdb)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sw.db'}"
    srv: servers.InfluxDB1 = request.getfixturevalue("influx_server")
    return srv.store_url(f"ident_{next(ids)}")


def _deadletters(url: str) -> list[tuple[str, str, dict[str, object]]]:
    store = open_store(url, existing=True)
    try:
        if isinstance(store, SqliteStore):
            letters = [(d.reason, d.detail, d.payload) for d in store.query_deadletters()]
        else:
            assert isinstance(store, Influx1Store)
            res = store._query('SELECT "reason", "detail", "payload" FROM deadletter')
            letters = [(v[1], v[2], v[3].encode()) for s in res for v in s.get("values", [])]
    finally:
        store.close()
    return [(reason, detail, json.loads(payload)) for reason, detail, payload in letters]


def _values(url: str, device: str) -> list[tuple[str, float]]:
    store = open_store(url, existing=True)
    try:
        return [(r.time.isoformat(), r.value) for r in store.query_readings(SITE, device=device)]
    finally:
        store.close()


# -- manual entries ------------------------------------------------------------------------------


def _add(url: str, value: str, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["readings", "add", "--site", str(EXAMPLE), "--point", "turbidity_pair", "--by",
                                      "J. Rivera", "--sampled-at", "2026-06-01T10:30", "--turbidity-ntu", value,
                                      "--store", url, *extra])
    return result.exit_code, result.stdout, result.stderr


def test_readings_add_refuses_a_second_value_and_corrects_it_explicitly(store_url: str) -> None:
    # 10:30 EDT on 2026-06-01 is 14:30 UTC (New York is UTC-4 in June)
    assert _add(store_url, "41.5")[0] == 0
    code, out, err = _add(store_url, "50")
    assert code == 2
    assert "already recorded" not in out.replace("0 already recorded", "")
    assert "stored: 0 new, 0 already recorded, 1 refused" in out
    assert err.strip().splitlines() == [
        "error: --turbidity-ntu 50: refused (conflicting_value): turbidity_pair turbidity sampled 2026-06-01 10:30 EDT "
        "by J. Rivera is already recorded as 41.5 NTU, which is kept; if that was mistyped, enter the right value "
        "with --correct"]
    assert _values(store_url, "turbidity_pair") == [("2026-06-01T14:30:00+00:00", 41.5)]
    code, out, _ = _add(store_url, "41.5")  # the same value again: an idempotent duplicate
    assert code == 0 and "stored: 0 new, 1 already recorded" in out

    code, out, err = _add(store_url, "50", "--correct")
    assert code == 0, err
    assert "corrected: turbidity 41.5 -> 50 NTU" in out
    assert _values(store_url, "turbidity_pair") == [("2026-06-01T14:30:00+00:00", 50.0)]
    ((reason, detail, payload),) = _deadletters(store_url)
    assert reason == "superseded"
    assert payload["value"] == 41.5 and payload["raw"] == "J. Rivera" and payload["gateway"] == "manual"
    assert "41.5 NTU" in detail and "corrected to 50 NTU by J. Rivera" in detail


# -- imports -------------------------------------------------------------------------------------


def test_a_second_file_with_another_value_at_a_stored_time_is_a_rejected_row(store_url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("time,turb\n2026-06-01T12:00:00Z,12\n2026-06-01T12:05:00Z,13\n", encoding="utf-8")
    second.write_text("time,turb\n2026-06-01T12:00:00Z,55\n2026-06-01T12:05:00Z,13\n2026-06-01T12:10:00Z,14\n",
                      encoding="utf-8")

    def run(path: Path) -> dict[str, object]:
        result = CliRunner().invoke(app, ["import", str(path), "--site", str(EXAMPLE), "--device", "turb-down",
                                          "--value-column", "turb=turbidity:NTU", "--store", store_url, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    assert run(first)["readings_stored"] == 2
    summary = run(second)
    assert (summary["readings_stored"], summary["already_stored"]) == (1, 1)  # 14 new, 13 the same
    assert summary["rejected_rows"] == {"conflicting_value": 1}
    assert summary["rejects"] == [f"{second}:2: turbidity 55 NTU at 2026-06-01T12:00:00Z: the store already holds "
                                  "12 NTU for this time (imported before from another file?); the stored value is kept"]
    assert _values(store_url, "turb-down") == [("2026-06-01T12:00:00+00:00", 12.0), ("2026-06-01T12:05:00+00:00", 13.0),
                                               ("2026-06-01T12:10:00+00:00", 14.0)]


# -- live ingest -----------------------------------------------------------------------------------


@pytest.mark.mosquitto
def test_a_gateway_replay_with_another_value_is_conflicting_value(mosquitto_server: servers.Mosquitto,
                                                                   store_url: str) -> None:
    """seq 3 is stored with 12.5; the same identity with 99.0 is refused by ingest's memory of what it
    committed, and after a restart (memory empty) by the store; 12.5 again is a duplicate."""
    store = open_store(store_url)
    listener = DeadLetterListener(mosquitto_server)
    pub = Publisher(mosquitto_server)
    try:
        run = Running(mosquitto_server, store, batch_ms=20)
        pub.send(wire(3, 12.5))
        wait_until(lambda: run.ingest.written == 1, what="seq 3 written")
        pub.send(wire(3, 99.0))
        pub.send(wire(3, 12.5))
        wait_until(lambda: len(listener.messages) == 2, what="2 dead letters")
        run.stop()
        assert dict(run.ingest.dead_lettered) == {"conflicting_value": 1, "duplicate": 1}
        again = Running(mosquitto_server, store, batch_ms=20)  # a fresh ingest: only the store remembers
        pub.send(wire(3, 77.0))
        pub.send(wire(3, 12.5))
        wait_until(lambda: len(listener.messages) == 3 and again.ingest.acked == 2, what="the store's verdicts")
        again.stop()
        assert dict(again.ingest.dead_lettered) == {"conflicting_value": 1}
        assert again.ingest.duplicates == 1 and again.ingest.written == 0
    finally:
        pub.close()
        listener.close()
        store.close()
    conflicts = [m for m in listener.messages if m["reason"] == "conflicting_value"]
    assert [json.loads(str(m["payload"]))["value"] for m in conflicts] == [99.0, 77.0]
    assert all("stored with 12.5 NTU; this reading (turb-down turbidity)" in str(m["detail"]) for m in conflicts)
    assert _values(store_url, "turb-down") == [("2026-06-01T12:03:00+00:00", 12.5)]
    assert sorted(r for r, _d, _p in _deadletters(store_url)) == ["conflicting_value", "conflicting_value",
                                                                   "duplicate"]


@pytest.mark.mosquitto
def test_a_batch_is_judged_reading_by_reading(mosquitto_server: servers.Mosquitto, store_url: str) -> None:
    store = open_store(store_url)
    listener = DeadLetterListener(mosquitto_server)
    pub = Publisher(mosquitto_server)
    run = Running(mosquitto_server, store, batch_ms=20)
    at = (T0 + timedelta(minutes=1)).isoformat()  # ingest's clock stands at 12:10
    good = json.loads(wire(103, 7.5, time=at))
    bad = json.loads(wire(104, 0.0, time=at).replace(b'"value": 0.0', b'"value": Infinity'))
    try:
        pub.send(json.dumps({"readings": [good, bad]}).encode())
        pub.send(json.dumps({"readings": [good], "extra": 1}).encode())  # malformed as a whole
        wait_until(lambda: run.ingest.acked == 2 and len(listener.messages) == 2, what="both messages handled")
    finally:
        run.stop()
        pub.close()
        listener.close()
        store.close()
    assert run.ingest.written == 1 and dict(run.ingest.dead_lettered) == {"schema": 2}
    assert _values(store_url, "turb-down") == [("2026-06-01T12:01:00+00:00", 7.5)]
    one, whole = listener.messages
    assert one["detail"] == "readings.1: value: must be finite, got inf"
    assert json.loads(str(one["payload"]).replace("Infinity", "1e999"))["seq"] == 104  # its own JSON, as sent
    assert "Infinity" in str(one["payload"]) and '"seq":103' not in str(one["payload"])
    assert whole["detail"].startswith("extra: Extra inputs are not permitted")  # type: ignore[union-attr]


@pytest.mark.mosquitto
@pytest.mark.influxdb
def test_every_dead_letter_is_stored_published_and_counted_whatever_refused_it(
        mosquitto_server: servers.Mosquitto, influx_server: servers.InfluxDB1) -> None:
    """10**30 tips no counter can produce: refused before the write (impossible_value). A line InfluxDB
    itself refuses (a field type conflict: this shard holds ``tips`` as a float, so a rain line's
    integer ``tips`` is refused) is store_rejected -- published and counted like the validator's
    refusals, stored once."""
    db = f"dl_{next(ids)}"
    store = Influx1Store(influx_server.url, db)
    ns = 1_780_315_200_000_000_005  # 2026-06-01T12:00:00Z, another site's point
    assert store.write_lines([f"readings,site=other tips=1.5 {ns}"]) == []
    listener = DeadLetterListener(mosquitto_server)
    pub = Publisher(mosquitto_server)
    run = Running(mosquitto_server, store, batch_ms=20)
    try:
        pub.send(tip_wire(1, 10**30))
        pub.send(tip_wire(2, MAX_TIPS + 1))
        pub.send(tip_wire(3, 0))  # a good rain reading: InfluxDB refuses its integer tips in this shard
        pub.send(wire(4, 12.5))
        pub.send(json.dumps({"readings": [json.loads(wire(5, 1e308)), json.loads(wire(6, 13.0))]}).encode())
        wait_until(lambda: run.ingest.acked == 5 and len(listener.messages) == 4, 20, what="5 messages handled")
    finally:
        run.stop()
        pub.close()
        listener.close()
    assert dict(run.ingest.dead_lettered) == {"impossible_value": 3, "store_rejected": 1}
    assert run.ingest.written == 2  # seq 4 and 6, the turbidity readings
    by_seq = {json.loads(str(m["payload"]))["seq"]: (m["reason"], str(m["detail"])) for m in listener.messages}
    assert by_seq[1][0] == by_seq[2][0] == "impossible_value" and by_seq[5][0] == "impossible_value"
    assert "4294967295" in by_seq[1][1] and "32-bit" in by_seq[1][1]
    assert by_seq[5][1].startswith("readings.0: turb-down: turbidity 1e+308 is above 10000")
    assert by_seq[3][0] == "store_rejected" and "field type conflict" in by_seq[3][1]
    stored = influx_count(influx_server, db, 'SELECT "reason", "payload" FROM deadletter')
    assert sorted(row[1] for row in stored) == ["impossible_value"] * 3 + ["store_rejected"]
    assert sorted(json.loads(row[2])["seq"] for row in stored) == [1, 2, 3, 5]  # each once
    assert [r.seq for r in store.query_readings(SITE)] == [4, 6]
    store.close()
