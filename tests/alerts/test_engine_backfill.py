"""Backfill (``stormwatch evaluate``) reproduces live events; late data is re-evaluated from the
store and flagged; out-of-order data within the lateness bound changes nothing.

Expected values by hand: 60 one-minute tips of 0.01 in from T0 -> qualified at the 50th tip
(T0 + 49 min), last tip T0 + 59 min, inspection due T0 + 59 min + 24 h (§133-7A(2)).
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

import yaml
from typer.testing import CliRunner

from stormwatch.alerts.backfill import evaluate
from stormwatch.alerts.engine import Engine
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.wire import format_time
from tests.alerts_support import HOURS, MIN, T0, Feeder, keys, live, scenario, site, site_doc


def test_evaluate_reproduces_live_events_and_prints_json(tmp_path: Path) -> None:
    doc = site_doc("ch133", rain_poll_s=60)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(doc))
    cfg = site("ch133")
    readings = scenario(Feeder())
    shuffled = list(readings)
    rng = random.Random(3)
    for k in range(0, len(shuffled), 16):  # displaced by < 4 min; lateness 5 min
        block = shuffled[k:k + 16]
        rng.shuffle(block)
        shuffled[k:k + 16] = block
    _, live_events = live(cfg, shuffled, WorkOrders(tmp_path / "wo.db", ManualClock(T0)))
    kinds = {e.kind for e in live_events}
    assert {"storm_inspection_due", "turbidity_contrast", "basin_cleanout_due", "routine_inspection_due"} <= kinds
    due = next(e for e in live_events if e.kind == "storm_inspection_due")
    assert due.due_at == T0 + 59 * MIN + timedelta(hours=24)

    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(readings)
    end = T0 + timedelta(hours=HOURS)
    result = evaluate(cfg, ProfileLibrary(), store, T0, end)
    store.close()
    assert keys(result.events) == keys(live_events)
    assert result.gaps == [] and "data complete" not in result.summary()  # a storm qualified

    out = CliRunner().invoke(app, ["evaluate", "--site", str(tmp_path / "site.yaml"), "--from", format_time(T0),
                                   "--to", format_time(end), "--store", f"sqlite:///{tmp_path / 'store.db'}",
                                   "--json"])
    assert out.exit_code == 0, out.output
    doc_out = json.loads(out.stdout)  # stderr: the WARNING that these readings carry no tip size
    assert doc_out["readings"] == len(readings) and doc_out["qualifying_storms"] == 1
    assert {(e["kind"], e["occurrence"], e.get("due_at")) for e in doc_out["events"]} == {
        (k, o, format_time(d) if d else None) for k, o, d in keys(live_events)}


def test_late_tip_is_reevaluated_from_the_store_and_flagged(tmp_path: Path) -> None:
    cfg = site("ch133", rules={"R2": {"sustained_min": 15}})
    feed = Feeder()
    tips = [feed.tips(1, T0 + i * MIN) for i in range(50)]  # 50 tips: exactly 0.50 in
    held = tips.pop(20)  # the 21st tip is delivered three hours late
    dry = [feed.tips(0, T0 + 49 * MIN + k * timedelta(minutes=10)) for k in range(1, 19)]  # to T0 + 3 h 49 min
    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(tips + dry)
    store.write_readings([held], late=True)  # ingest stored it (late); the engine gets it after the dry polls
    book = WorkOrders(tmp_path / "wo.db", ManualClock(T0))
    engine = Engine.for_site(cfg, ProfileLibrary(), book, 120, store=store, reevaluate_late=True)
    before: list[Event] = []
    for r in tips + dry:
        before += engine.feed(r)
    assert [e.kind for e in before if e.rule == "R1"] == ["storm_started"]  # 49 tips seen: not qualified
    w = engine.watermark
    assert w == dry[-1].time - timedelta(seconds=120)
    found = engine.feed(held)
    (qualified,) = [e for e in found if e.rule == "R1"]
    assert qualified.kind == "storm_qualified" and qualified.tips == 50
    assert qualified.event_time == T0 + 49 * MIN
    assert qualified.late_detection_s == (w - (T0 + 49 * MIN)).total_seconds()
    # the storm now holds 50 tips: its end is announced live, due 24 h after the last tip
    later = [e for k in range(19, 43) for e in engine.feed(feed.tips(0, T0 + 49 * MIN + k * timedelta(minutes=10)))]
    (due,) = [e for e in later if e.kind == "storm_inspection_due"]
    assert due.tips == 50 and due.due_at == T0 + 49 * MIN + timedelta(hours=24) and due.late_detection_s is None
    assert len([o for o in book.list() if o.rule == "R1"]) == 1
    store.close()


def test_reevaluation_with_nothing_new_emits_nothing_and_in_bound_disorder_is_identical(tmp_path: Path) -> None:
    cfg = site("ch133")
    readings = scenario(Feeder(), hours=3)
    _, plain = live(cfg, readings, None)
    engine, again = live(cfg, readings, None, reevaluate_late=True)
    assert [e.to_wire() for e in again] == [e.to_wire() for e in plain]
    # a stale redelivery of a reading the engine already has: no new or changed event
    replayed = readings[101].model_copy(update={"seq": 10**6})  # one more upstream 20 NTU: medians unchanged
    assert engine.feed(replayed) == [] and engine.counts["reevaluated"] == 1


def test_a_window_of_millennia_reads_only_the_stored_days_and_gives_the_same_events(tmp_path: Path) -> None:
    """`evaluate --from 0001-01-01 --until 9999-12-31` over 10 hours of data: the backfill reads the
    chunks that hold readings (here 1 day; by hand: T0 + 10 h stays inside one day-chunk counted from
    its boundary), not 3.65 million empty days, and every event is the narrow window's -- the
    stretches before and after are data gaps, as before (rain UNKNOWN, never dry)."""
    from datetime import UTC, datetime

    cfg = site("ch133")
    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(scenario(Feeder()))
    chunks: list[int] = []
    narrow = evaluate(cfg, ProfileLibrary(), store, T0, T0 + timedelta(hours=HOURS))
    start, end = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)
    wide = evaluate(cfg, ProfileLibrary(), store, start, end, on_rows=lambda rows: chunks.append(1))
    store.close()
    assert len(chunks) <= 2
    assert [e.to_wire() for e in wide.events if e.kind != "data_gap"] == \
        [e.to_wire() for e in narrow.events if e.kind != "data_gap"]
    assert wide.readings == narrow.readings == HOURS * 60 * 4
    assert wide.gaps[0].start == start and wide.gaps[-1].end is None  # before the data, after it: unknown
    assert "rain UNKNOWN" in wide.summary()


def test_catch_up_re_evaluates_missed_readings_together_and_gives_the_undisturbed_answer(tmp_path: Path) -> None:
    """Issue 18: readings the broker never delivered are read back from the store (Engine.catch_up); those
    behind the watermark are re-evaluated in one re-run, not one per reading, and the events then equal
    an undisturbed run's -- the ones found late flagged with late_detection_s (an event emitted before from
incomplete data stays emitted; the corrected one follows)."""
    cfg = site("ch133")
    readings = scenario(Feeder())
    _, undisturbed = live(cfg, readings, None)
    lost = [r for r in readings if T0 + timedelta(hours=5) <= r.time < T0 + timedelta(hours=7)]  # 480 readings
    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(readings)
    engine = Engine.for_site(cfg, ProfileLibrary(), None, 300, store=store, reevaluate_late=True)
    got: list[Event] = []
    for r in readings:
        if r not in lost:
            got += engine.feed(r)
    got += engine.flush()
    assert keys(got) != keys(undisturbed)  # the basin's warning at 6:12 was in the lost stretch
    found = engine.catch_up(store.query_readings("s1", start=T0))
    assert engine.counts["reevaluated"] == 1 and engine.counts["late"] == len(lost)
    # the warning, and the cleanout again: its fill cycle (occurrence) starts at the warning
    assert [e.kind for e in found] == ["basin_capacity_warning", "basin_cleanout_due"]
    assert all(e.late_detection_s is not None and e.late_detection_s > 0 for e in found)
    assert keys(undisturbed) <= keys(got + found)
    assert keys(found) <= keys(undisturbed)  # what was found late is what an undisturbed run said
    assert engine.catch_up(store.query_readings("s1", start=T0)) == []  # all seen now: nothing again
    store.close()
