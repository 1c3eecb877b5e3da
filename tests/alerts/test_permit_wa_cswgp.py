"""Washington CSWGP (``wa-cswgp``): benchmarks and sampling obligations, expected events derived by hand
from the text in hand (docs/reference/permits/wa-cswgp.md).

* Benchmark (S4.C.5.a): turbidity 26-249 NTU or transparency 32-7 cm is above the 25-NTU / 33-cm
  benchmark: 25 NTU and 33 cm are not; 26 NTU and 32 cm are. The SWPPP review is due within 7 days
  of the sample's date, the BMPs within 10 (end of that local day).
* High turbidity (S5.A): 250 NTU or more, or transparency of 6 cm or less: notify Ecology (ERTS)
  within 24 hours.
* Sampling (S4.C.2): every discharge point at least once every calendar week when the site
  discharges; daily while the last sample was above the benchmark, until one at or below it.
* Calendar weeks run Sunday 00:00 to Sunday 00:00 local (America/Los_Angeles: PST = UTC-8,
  PDT = UTC-7). In 2026 daylight saving starts Sun 8 March 02:00 PST, so the week of 8 March lasts
  167 h: 2026-03-08T08:00Z to 2026-03-15T07:00Z.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stormwatch.alerts.engine import Engine, EngineError
from stormwatch.alerts.packs import PackError, load_pack, load_site_pack
from stormwatch.alerts.workorders import ENGINE, WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading
from stormwatch.importers.manual import ManualEntry, manual_readings
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import Feeder, wa_doc

HOUR = timedelta(hours=1)
# Wed 3 June 2026, local midnight = 07:00 UTC (PDT); its calendar week began Sun 31 May 07:00 UTC
JUNE3 = datetime(2026, 6, 3, 7, 0, tzinfo=UTC)
WEEK_MAY31 = datetime(2026, 5, 31, 7, 0, tzinfo=UTC)
INSPECTOR = "R. Okafor"


def wa_engine(tmp_path: Path, doc: dict[str, Any] | None = None, at: datetime = JUNE3,
              ) -> tuple[Engine, WorkOrders]:
    cfg = parse_site(doc or wa_doc(), "wa-site.yaml", ProfileLibrary())
    book = WorkOrders(tmp_path / "wo.db", ManualClock(at))
    return Engine(cfg, ProfileLibrary(), load_site_pack(cfg), book, lateness_s=0), book


def always(**extra: Any) -> dict[str, Any]:
    """A site that discharges every week (options.discharge: always): reminders at each week's start."""
    return wa_doc(options={"discharge": "always"}, **extra)


def manual(point: str, at: datetime, **values: float) -> list[Reading]:
    """What `stormwatch readings add` records: one reading per value, source manual, by the inspector."""
    return manual_readings(ManualEntry(site="s1", point=point, sampled_at=at, inspector=INSPECTOR, values=values))


def sample(engine: Engine, point: str, at: datetime, **values: float) -> list[Event]:
    out: list[Event] = []
    for r in manual(point, at, **values):
        out += engine.feed(r)
    return out


def kinds(events: list[Event], prefix: str) -> list[tuple[str, str]]:
    return [(e.kind, e.occurrence) for e in events if e.kind.startswith(prefix)]


# -- benchmarks (B1, B2) ---------------------------------------------------------------------


def test_25_ntu_meets_the_benchmark_26_ntu_exceeds_it(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path, always())
    assert kinds(sample(engine, "outfall-2", JUNE3 + 9 * HOUR, turbidity=25.0), "benchmark") == []
    events = sample(engine, "outfall-2", JUNE3 + 10 * HOUR, turbidity=26.0)  # 10:00 PDT = 17:00 UTC
    exceeded, review, bmps = [e for e in events if e.kind.startswith("benchmark")]
    assert exceeded.kind == "benchmark_exceeded" and exceeded.rule == "B1"
    d = exceeded.details
    assert (d.discharge_point, d.quantity, d.value, d.unit, d.source) == (  # type: ignore[attr-defined]
        "outfall-2", "turbidity", 26.0, "NTU", "manual")
    assert f"turbidity 26 NTU at Wed 03 Jun 2026 10:00 PDT (sampled by {INSPECTOR})" in exceeded.message
    # 7 and 10 days of the date 3 June: by the end of 10 June and of 13 June (PDT midnight = 07:00 UTC)
    assert (review.details.action, review.due_at) == (  # type: ignore[attr-defined]
        "swppp_review", datetime(2026, 6, 11, 7, tzinfo=UTC))
    assert (bmps.details.action, bmps.due_at) == ("bmps", datetime(2026, 6, 14, 7, tzinfo=UTC))  # type: ignore[attr-defined]
    assert review.occurrence == "B1:outfall-2:swppp_review:2026-06-03"
    assert review.unverified == ["actions=swppp_review within 7 days of the sample's date, bmps within 10 days of "
                                 "the sample's date", "exceeds=turbidity > 25 NTU or transparency < 33 cm"]
    assert "not confirmed by the permit text in hand" in review.message
    orders = [o for o in book.list() if o.rule == "B1"]
    assert sorted((o.kind, o.due_at) for o in orders) == [
        ("benchmark_response", datetime(2026, 6, 11, 7, tzinfo=UTC)),
        ("benchmark_response", datetime(2026, 6, 14, 7, tzinfo=UTC))]
    assert [e for e in events if e.rule == "B2"] == []  # 26 NTU is far below the 250-NTU reporting level


def test_33_cm_meets_the_benchmark_32_cm_exceeds_it(tmp_path: Path) -> None:
    # a transparency tube reads lower when the water is more turbid
    engine, _ = wa_engine(tmp_path, always())
    assert kinds(sample(engine, "outfall-2", JUNE3 + 9 * HOUR, transparency=33.0), "benchmark") == []
    events = sample(engine, "outfall-2", JUNE3 + 10 * HOUR, transparency=32.0)
    assert [(e.kind, e.rule) for e in events if e.kind.startswith("benchmark")] == [
        ("benchmark_exceeded", "B1"), ("benchmark_action_due", "B1"), ("benchmark_action_due", "B1")]
    assert "transparency 32 cm" in events[-1].message


def test_the_high_turbidity_level_asks_for_an_erts_report_within_24_hours(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path, always())
    # 249 NTU and 7 cm: above the benchmark, below the reporting level
    assert [e.rule for e in sample(engine, "outfall-2", JUNE3 + 9 * HOUR, turbidity=249.0)
            if e.kind == "benchmark_action_due"] == ["B1", "B1"]
    assert [e for e in sample(engine, "outfall-2", JUNE3 + 9.5 * HOUR, transparency=7.0) if e.rule == "B2"] == []
    # 6 cm is the level ("less than or equal to 6 cm"): one report, due 24 h after the sample
    events = sample(engine, "outfall-2", JUNE3 + 10 * HOUR, transparency=6.0)
    (erts,) = [e for e in events if e.rule == "B2" and e.kind == "benchmark_action_due"]
    assert erts.due_at == JUNE3 + 34 * HOUR and erts.details.action == "erts_report"  # type: ignore[attr-defined]
    assert erts.citation == "WA CSWGP S4.C.5.b, S5.A"
    # the same excursion: B1's actions are not asked again, B1 says nothing new the same day
    assert [e for e in events if e.rule == "B1"] == []
    # 250 NTU the same day: the day's report is already asked for; the next day's 300 NTU asks again
    assert [e for e in sample(engine, "outfall-2", JUNE3 + 11 * HOUR, turbidity=250.0)
            if e.kind == "benchmark_action_due"] == []
    nxt = sample(engine, "outfall-2", JUNE3 + 33 * HOUR, turbidity=300.0)
    assert [(e.kind, e.rule) for e in nxt if e.kind.startswith("benchmark")] == [
        ("benchmark_exceeded", "B1"), ("benchmark_exceeded", "B2"), ("benchmark_action_due", "B2")]
    assert len([o for o in book.list() if o.rule == "B2"]) == 2


def test_probe_readings_are_samples_of_their_point_flagged_ones_are_not(tmp_path: Path) -> None:
    engine, _ = wa_engine(tmp_path, always())
    feed = Feeder()
    first = engine.feed(feed("turb-1", "turbidity", 80.0, "NTU", JUNE3 + HOUR, ("device_error",)))
    assert kinds(first, "benchmark") == []  # flagged by QC: not a sample
    events = engine.feed(feed("turb-1", "turbidity", 80.0, "NTU", JUNE3 + 2 * HOUR))
    (exceeded,) = [e for e in events if e.kind == "benchmark_exceeded"]
    assert exceeded.details.discharge_point == "outfall-1" and exceeded.details.source == "turb-1"  # type: ignore[attr-defined]
    # a probe every minute above the benchmark: no new event or order that day
    more: list[Event] = []
    for minute in range(1, 30):
        more += engine.feed(feed("turb-1", "turbidity", 90.0, "NTU", JUNE3 + 2 * HOUR + minute * timedelta(minutes=1)))
    assert [e for e in more if e.kind.startswith("benchmark")] == []
    # a probe reading is not a recorded sample: the point's weekly reminder stays open
    assert not [e for e in events + more if e.kind == "sampling_done"]


# -- sampling obligations (S1) ---------------------------------------------------------------


def test_weekly_obligation_across_the_dst_week_on_local_calendar_days(tmp_path: Path) -> None:
    start = datetime(2026, 3, 7, 20, 0, tzinfo=UTC)  # Sat 7 March 12:00 PST, the site's first reading
    engine, book = wa_engine(tmp_path, always(), at=start)
    events = sample(engine, "outfall-1", start, turbidity=12.0)
    # the week of 1 March: outfall-1 has its sample, outfall-2 a reminder due Sun 8 March 00:00 PST
    assert [(e.kind, e.occurrence, e.due_at) for e in events if e.kind.startswith("sampling")] == [
        ("sampling_done", "S1:outfall-1:week:2026-03-01", None),
        ("sampling_due", "S1:outfall-2:week:2026-03-01", datetime(2026, 3, 8, 8, tzinfo=UTC))]
    week = datetime(2026, 3, 8, 8, tzinfo=UTC)  # Sun 8 March 00:00 PST
    events = engine.advance_to(week)
    dues = [e for e in events if e.kind == "sampling_due"]
    assert [(e.occurrence, e.event_time, e.due_at) for e in dues] == [
        ("S1:outfall-1:week:2026-03-08", week, datetime(2026, 3, 15, 7, tzinfo=UTC)),
        ("S1:outfall-2:week:2026-03-08", week, datetime(2026, 3, 15, 7, tzinfo=UTC))]
    assert dues[0].due_at - week == timedelta(hours=167)  # the spring-forward week
    assert dues[0].details.reason == "always"  # type: ignore[attr-defined]
    # Sat 14 March 23:30 PDT is still the week of 8 March; Sun 15 March 00:00 PDT is the next week
    late_sat = datetime(2026, 3, 15, 6, 30, tzinfo=UTC)
    done = sample(engine, "outfall-1", late_sat, turbidity=10.0)
    assert kinds(done, "sampling") == [("sampling_done", "S1:outfall-1:week:2026-03-08")]
    nxt = engine.advance_to(datetime(2026, 3, 15, 7, tzinfo=UTC))
    assert [(e.occurrence, e.due_at) for e in nxt if e.kind == "sampling_due"] == [
        ("S1:outfall-1:week:2026-03-15", datetime(2026, 3, 22, 7, tzinfo=UTC)),  # 168 h
        ("S1:outfall-2:week:2026-03-15", datetime(2026, 3, 22, 7, tzinfo=UTC))]
    orders = {o.occurrence: o for o in book.list() if o.rule == "S1"}
    assert orders["S1:outfall-1:week:2026-03-08"].status == "completed"
    assert orders["S1:outfall-2:week:2026-03-08"].status == "open"
    assert orders["S1:outfall-2:week:2026-03-08"].is_overdue(datetime(2026, 3, 15, 7, 0, 1, tzinfo=UTC))


def test_a_recorded_sample_completes_its_reminder_at_the_sampling_time(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path, always(), at=WEEK_MAY31)
    sample(engine, "outfall-2", WEEK_MAY31 + HOUR, turbidity=5.0)  # the first reading: outfall-1 is reminded
    (order,) = [o for o in book.list() if o.rule == "S1"]
    assert (order.kind, order.occurrence, order.status, order.due_at) == (
        "sampling", "S1:outfall-1:week:2026-05-31", "open", datetime(2026, 6, 7, 7, tzinfo=UTC))
    at = JUNE3 + 10 * HOUR
    events = sample(engine, "outfall-1", at, transparency=45.0)
    (done,) = [e for e in events if e.kind == "sampling_done"]
    assert done.work_order == order.id
    closed = book.get(order.id)
    assert (closed.status, closed.completed_at, closed.inspector) == ("completed", at, ENGINE)
    assert f"transparency 45 cm at Wed 03 Jun 2026 10:00 PDT (sampled by {INSPECTOR})" in (closed.notes or "")
    assert [c.action for c in book.history(order.id)] == ["opened", "completed"]
    # a second sample that week changes nothing
    assert [e for e in sample(engine, "outfall-1", at + HOUR, transparency=50.0) if e.kind.startswith("sampling")] \
        == []


def test_daily_while_above_the_benchmark_then_weekly_again(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path, always(), at=WEEK_MAY31)
    sample(engine, "outfall-2", WEEK_MAY31 + HOUR, turbidity=5.0)  # starts the site's weeks
    # Wed 3 June 10:00 PDT: 40 NTU at outfall-1, above 25: the week is sampled, daily sampling from Thursday
    (done,) = [e for e in sample(engine, "outfall-1", JUNE3 + 10 * HOUR, turbidity=40.0) if e.kind == "sampling_done"]
    assert done.occurrence == "S1:outfall-1:week:2026-05-31" and done.details.daily  # type: ignore[attr-defined]
    assert "daily sampling from tomorrow" in done.message
    thu = JUNE3 + 24 * HOUR  # Thu 4 June 00:00 PDT
    (due,) = [e for e in engine.advance_to(thu) if e.kind == "sampling_due"]
    assert (due.occurrence, due.event_time, due.due_at) == ("S1:outfall-1:day:2026-06-04", thu, thu + 24 * HOUR)
    assert due.details.reason == "daily" and "turbidity 40 NTU" in due.message  # type: ignore[attr-defined]
    # Thursday 30 NTU: still above, Friday is asked for too
    assert kinds(sample(engine, "outfall-1", thu + 9 * HOUR, turbidity=30.0), "sampling") == [
        ("sampling_done", "S1:outfall-1:day:2026-06-04")]
    fri = thu + 24 * HOUR
    assert kinds(engine.advance_to(fri), "sampling_due") == [("sampling_due", "S1:outfall-1:day:2026-06-05")]
    # Friday 25 NTU: at the benchmark, back to weekly -- no reminder on Saturday
    back = sample(engine, "outfall-1", fri + 9 * HOUR, turbidity=25.0)
    (done,) = [e for e in back if e.kind == "sampling_done"]
    assert not done.details.daily and "back to weekly sampling" in done.message  # type: ignore[attr-defined]
    assert kinds(engine.advance_to(fri + 24 * HOUR), "sampling") == []
    # the next calendar week (Sun 7 June 00:00 PDT) asks weekly again, for both points
    sun = datetime(2026, 6, 7, 7, tzinfo=UTC)
    assert kinds(engine.advance_to(sun), "sampling_due") == [
        ("sampling_due", "S1:outfall-1:week:2026-06-07"), ("sampling_due", "S1:outfall-2:week:2026-06-07")]
    daily = sorted((o.occurrence, o.status) for o in book.list() if ":day:" in o.occurrence)
    assert daily == [("S1:outfall-1:day:2026-06-04", "completed"), ("S1:outfall-1:day:2026-06-05", "completed")]


def test_two_discharge_points_have_separate_obligations(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path, always(), at=WEEK_MAY31)
    sample(engine, "outfall-1", WEEK_MAY31 + HOUR, transparency=20.0)  # outfall-1 above: daily from Monday
    events = engine.advance_to(WEEK_MAY31 + 24 * HOUR)
    assert kinds(events, "sampling_due") == [("sampling_due", "S1:outfall-1:day:2026-06-01")]
    open_orders = sorted(o.occurrence for o in book.list(status="open") if o.rule == "S1")
    assert open_orders == ["S1:outfall-1:day:2026-06-01", "S1:outfall-2:week:2026-05-31"]
    # outfall-2's sample closes outfall-2's week only
    sample(engine, "outfall-2", WEEK_MAY31 + 30 * HOUR, turbidity=3.0)
    assert sorted(o.occurrence for o in book.list(status="open") if o.rule == "S1") == ["S1:outfall-1:day:2026-06-01"]


def _polls(engine: Engine, feed: Feeder, start: datetime, end: datetime, tips_at: dict[datetime, int]) -> list[Event]:
    out: list[Event] = []
    t = start
    while t <= end:
        out += engine.feed(feed.tips(tips_at.get(t, 0), t))
        t += timedelta(minutes=10)
    return out


def test_discharge_known_by_rain_a_dry_week_asks_for_no_sample(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path)  # options.discharge: the default, rain
    feed = Feeder()
    mon = WEEK_MAY31 + 24 * HOUR
    # Mon-Tue dry (the gauge reports every 10 minutes): no discharge, no reminder
    assert kinds(_polls(engine, feed, mon, mon + 48 * HOUR, {}), "sampling") == []
    # Wed 3 June 10:00 PDT: one 0.01-in tip -- the week's rain reaches 0.01 in: both points are reminded
    wet = JUNE3 + 10 * HOUR
    events = _polls(engine, feed, mon + 48 * HOUR + timedelta(minutes=10), wet, {wet: 1})
    dues = [e for e in events if e.kind == "sampling_due"]
    assert [(e.occurrence, e.event_time, e.due_at) for e in dues] == [
        ("S1:outfall-1:week:2026-05-31", wet, datetime(2026, 6, 7, 7, tzinfo=UTC)),
        ("S1:outfall-2:week:2026-05-31", wet, datetime(2026, 6, 7, 7, tzinfo=UTC))]
    assert "0.01 in of rain since Sun 31 May 2026 00:00 PDT" in dues[0].message
    assert dues[0].unverified and "discharge_rain_in=0.01" in dues[0].unverified
    assert len([o for o in book.list() if o.rule == "S1"]) == 2


def test_a_silent_gauge_makes_discharge_unknown_and_asks_for_the_sample(tmp_path: Path) -> None:
    engine, _ = wa_engine(tmp_path)
    feed = Feeder()
    mon = WEEK_MAY31 + 24 * HOUR
    _polls(engine, feed, mon, mon + HOUR, {})
    # the gauge's last poll at 01:00 UTC + 1 h; two poll intervals (20 min) later rain is unknown
    events = engine.advance_to(mon + 2 * HOUR)
    dues = [e for e in events if e.kind == "sampling_due"]
    assert [(e.occurrence, e.event_time) for e in dues] == [
        ("S1:outfall-1:week:2026-05-31", mon + HOUR + timedelta(minutes=20)),
        ("S1:outfall-2:week:2026-05-31", mon + HOUR + timedelta(minutes=20))]
    assert dues[0].details.reason == "gauge_silent"  # type: ignore[attr-defined]


def test_a_site_without_a_rain_gauge_must_say_it_discharges_always(tmp_path: Path) -> None:
    doc = wa_doc()
    doc.pop("rain_gauge")
    with pytest.raises(EngineError, match="choose discharge: always"):
        wa_engine(tmp_path, doc)
    engine, _ = wa_engine(tmp_path, {**doc, "options": {"discharge": "always"}})
    assert {r.rule_id for r in engine.rules} == {"B1", "B2", "S1"}


def test_pack_levels_and_their_verification() -> None:
    pack = load_pack("wa-cswgp")
    assert str(pack.rules["B2"].exceeds) == "turbidity >= 250 NTU or transparency <= 6 cm"  # type: ignore[attr-defined]
    assert "exceeds" not in pack.rules["B2"].unverified  # S5.A, read in hand
    with pytest.raises(PackError, match="a comparison like"):
        load_pack("wa-cswgp", {"B1": {"exceeds": {"turbidity_ntu": "25"}}})
    with pytest.raises(PackError, match="not a sample quantity"):
        load_pack("wa-cswgp", {"B1": {"exceeds": {"turbidity_fnu": "> 25"}}})
    mine = load_pack("wa-cswgp", {"S1": {"daily_above": {"turbidity_ntu": ">= 250", "transparency_cm": "<= 6"}}})
    assert "daily_above" not in mine.rules["S1"].unverified  # the site's own permit copy settles it


# -- the same answers live, late and replayed -------------------------------------------------


WEEK_SAMPLES = [("outfall-2", WEEK_MAY31 + HOUR, {"turbidity": 5.0}),
                ("outfall-1", JUNE3 + 10 * HOUR, {"turbidity": 40.0}),
                ("outfall-1", JUNE3 + 33 * HOUR, {"transparency": 20.0}),
                ("outfall-1", JUNE3 + 57 * HOUR, {"turbidity": 300.0}),
                ("outfall-1", JUNE3 + 81 * HOUR, {"transparency": 40.0}),
                ("outfall-2", JUNE3 + 100 * HOUR, {"turbidity": 2.0})]


def _key(e: Event) -> tuple[Any, ...]:
    return (e.kind, e.rule, e.occurrence, e.event_time, e.due_at)


def test_evaluate_over_stored_samples_gives_the_live_events(tmp_path: Path) -> None:
    from stormwatch.alerts.backfill import evaluate
    from stormwatch.stores.sqlite import SqliteStore

    doc = always()
    engine, _ = wa_engine(tmp_path, doc, at=WEEK_MAY31)
    live: list[Event] = []
    store = SqliteStore(tmp_path / "store.db")
    for point, at, values in WEEK_SAMPLES:
        live += sample(engine, point, at, **values)
        store.write_readings(manual(point, at, **values))
    live += engine.flush()
    cfg = parse_site(doc, "wa-site.yaml", ProfileLibrary())
    replayed = evaluate(cfg, ProfileLibrary(), store, WEEK_MAY31, JUNE3 + 101 * HOUR, lateness_s=0).events
    store.close()
    assert sorted(map(_key, replayed)) == sorted(map(_key, live))
    assert {e.kind for e in live} == {"sampling_due", "sampling_done", "benchmark_exceeded", "benchmark_action_due"}


def test_a_sample_entered_late_completes_the_reminder_opened_before_it_arrived(tmp_path: Path) -> None:
    cfg = parse_site(always(), "wa-site.yaml", ProfileLibrary())
    book = WorkOrders(tmp_path / "wo.db", ManualClock(JUNE3))
    engine = Engine(cfg, ProfileLibrary(), load_site_pack(cfg), book, lateness_s=0, reevaluate_late=True)
    sample(engine, "outfall-2", WEEK_MAY31 + HOUR, turbidity=5.0)  # outfall-1's week: reminded
    sample(engine, "outfall-2", JUNE3 + 12 * HOUR, turbidity=4.0)  # event time moves on
    (reminder,) = [o for o in book.list() if o.rule == "S1"]
    assert reminder.status == "open"
    # the inspector enters Monday's sample at outfall-1 on Wednesday: re-evaluated, it completes the reminder
    monday = WEEK_MAY31 + 26 * HOUR
    events = sample(engine, "outfall-1", monday, turbidity=8.0)
    (done,) = [e for e in events if e.kind == "sampling_done"]
    assert done.late_detection_s is not None and done.work_order == reminder.id
    assert (book.get(reminder.id).status, book.get(reminder.id).completed_at) == ("completed", monday)


def test_a_probe_dipping_below_the_benchmark_does_not_restart_the_excursion(tmp_path: Path) -> None:
    engine, book = wa_engine(tmp_path, always())
    feed = Feeder()
    probe = [(JUNE3 + 10 * HOUR, 40.0), (JUNE3 + 11 * HOUR, 20.0),  # a minute's dip below 25 NTU ...
             (JUNE3 + 12 * HOUR, 45.0), (JUNE3 + 33 * HOUR, 20.0),  # ... and the next day's first reading
             (JUNE3 + 34 * HOUR, 60.0)]                             # above again: the same excursion
    events: list[Event] = []
    for t, v in probe:
        events += engine.feed(feed("turb-1", "turbidity", v, "NTU", t))
    assert [(e.kind, e.event_time) for e in events if e.rule == "B1"] == [
        ("benchmark_exceeded", JUNE3 + 10 * HOUR), ("benchmark_action_due", JUNE3 + 10 * HOUR),
        ("benchmark_action_due", JUNE3 + 10 * HOUR), ("benchmark_exceeded", JUNE3 + 34 * HOUR)]
    # a whole local day (5 June) of readings within the benchmark ends it; 6 June's 70 NTU is a new excursion
    quiet = [(JUNE3 + h * HOUR, 10.0) for h in (49, 60, 70)]
    for t, v in [*quiet, (JUNE3 + 75 * HOUR, 70.0)]:
        events += engine.feed(feed("turb-1", "turbidity", v, "NTU", t))
    assert [e.occurrence for e in events if e.kind == "benchmark_action_due"][-2:] == [
        "B1:outfall-1:swppp_review:2026-06-06", "B1:outfall-1:bmps:2026-06-06"]
    assert len([o for o in book.list() if o.rule == "B1"]) == 4
