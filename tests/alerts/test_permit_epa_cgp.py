"""EPA 2022 CGP (``epa-cgp-2022``): expected events derived by hand from the permit text
(docs/reference/permits/epa-cgp-2022.md).

* Part 4.2: "within 24 hours of the occurrence of a storm event that produces 0.25 inches or more of
  rain within a 24-hour period": on a 0.01-in gauge 0.25 in is 25 tips -- 25 tips within 24 h
  qualify, 24 do not; 25 tips spread over more than 24 h do not either.
* Part 4.2 "at least once every 7 calendar days", Part 4.2 "once every 14 calendar days":
  calendar days of the site's zone, so a week across the daylight-saving change is 167 or 169 h.
  US rules (Energy Policy Act of 2005): in 2026 DST begins Sun 8 March 02:00 local and ends
  Sun 1 November 02:00 local; New York is UTC-5 (EST) / UTC-4 (EDT).
* The schedule is the site's choice (site file ``options: {inspection_frequency: ...}``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import PackError, load_site_pack
from stormwatch.alerts.rules.storm import StormRule
from stormwatch.alerts.sitefile import load_site_file
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site_doc

MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def epa_engine(tmp_path: Path, choice: str | None = None, timezone: str = "America/New_York",
               start: datetime = T0) -> tuple[Engine, WorkOrders]:
    doc: dict[str, Any] = site_doc("epa-cgp-2022", timezone=timezone)
    if choice is not None:
        doc["options"] = {"inspection_frequency": choice}
    cfg = parse_site(doc, "epa-site.yaml", ProfileLibrary())
    book = WorkOrders(tmp_path / "wo.db", ManualClock(start))
    return Engine(cfg, ProfileLibrary(), load_site_pack(cfg), book, lateness_s=0), book


def feed_all(engine: Engine, readings: list) -> list[Event]:
    out: list[Event] = []
    for r in readings:
        out += engine.feed(r)
    return out + engine.flush()


def one_tip_polls(feed: Feeder, tips: int, every: timedelta, start: datetime = T0) -> list:
    """``tips`` polls of one tip each, ``every`` apart, then 7 h of dry 10-min polls."""
    out = [feed.tips(1, start + i * every) for i in range(tips)]
    last = start + (tips - 1) * every
    return out + [feed.tips(0, last + k * timedelta(minutes=10)) for k in range(1, 43)]


@pytest.mark.parametrize(("tips", "qualifies"), [(25, True), (24, False)])
def test_25_tips_of_001_in_qualify_24_do_not(tmp_path: Path, tips: int, qualifies: bool) -> None:
    engine, book = epa_engine(tmp_path, "14-day-and-storm")
    events = [e for e in feed_all(engine, one_tip_polls(Feeder(), tips, 10 * MIN)) if e.rule == "R1"]
    kinds = [e.kind for e in events]
    if not qualifies:
        assert kinds == ["storm_started", "storm_ended_below_threshold"]
        assert [o for o in book.list() if o.rule == "R1"] == []
        return
    # the 25th tip (24 x 10 min after the first) brings the 24-hour total to 0.25 in: the storm event
    # has occurred; the inspection is due 24 h later and asked for at once (order_opens: threshold)
    crossing = T0 + 24 * 10 * MIN
    assert kinds == ["storm_started", "storm_qualified", "storm_inspection_due"]
    due = events[2]
    assert (due.event_time, due.due_at, due.tips, due.depth_in) == (crossing, crossing + 24 * HOUR, 25, 0.25)
    assert due.citation == "EPA CGP 2022 Part 4.2"
    (order,) = [o for o in book.list() if o.rule == "R1"]
    assert (order.kind, order.due_at) == ("storm_inspection", crossing + 24 * HOUR)
    # the storm's end (6 h dry) asks for nothing more: one inspection per storm event
    assert sum(1 for e in events if e.kind == "storm_inspection_due") == 1


def test_25_tips_over_more_than_24_hours_do_not_qualify(tmp_path: Path) -> None:
    # one tip per hour: any 24-hour window (t - 24 h, t] holds at most 24 tips = 0.24 in (never dry
    # for 6 h, so it is one storm of 0.30 in -- a storm event of 0.25 in "within a 24-hour period" never occurs)
    engine, _ = epa_engine(tmp_path, "14-day-and-storm")
    feed = Feeder()
    polls = [feed.tips(1 if k % 6 == 0 else 0, T0 + k * 10 * MIN) for k in range(30 * 6)]  # 10-min polls
    events = [e for e in feed_all(engine, polls) if e.rule == "R1"]
    assert [e.kind for e in events] == ["storm_started"]


def test_unconfirmed_parameters_are_named_in_every_event(tmp_path: Path) -> None:
    engine, book = epa_engine(tmp_path, "14-day-and-storm")
    events = [e for e in feed_all(engine, one_tip_polls(Feeder(), 25, 10 * MIN)) if e.rule == "R1"]
    for e in events:
        assert e.unverified == ["clock_from=threshold", "dry_gap_hours=6", "order_opens=threshold"]
        assert "not confirmed by the permit text in hand: clock_from=threshold" in e.message
        assert e.to_wire()["unverified"] == e.unverified
    (order,) = [o for o in book.list() if o.rule == "R1"]
    assert "not confirmed by the permit text in hand" in order.message
    routine = [e for e in engine.flush() + events if e.rule == "R1w"]
    assert all(e.unverified in (None, ["storm_inspection_counts=False"]) for e in routine)


def test_a_site_that_sets_an_unconfirmed_parameter_takes_it_over(tmp_path: Path) -> None:
    doc = site_doc("epa-cgp-2022", rules={"R1": {"dry_gap_hours": 8}})
    doc["options"] = {"inspection_frequency": "14-day-and-storm"}
    pack = load_site_pack(parse_site(doc, "epa-site.yaml", ProfileLibrary()))
    storm = pack.first(StormRule)
    assert storm is not None
    assert storm[1].dry_gap_hours == 8 and storm[1].unverified_values() == ["clock_from=threshold",
                                                                            "order_opens=threshold"]


@pytest.mark.parametrize(
    ("choice", "first", "due", "hours"),
    [
        # Part 4.2: Thu 5 Mar 2026 09:00 EST = 14:00 UTC + 7 calendar days = Thu 12 Mar 09:00 EDT = 13:00 UTC
        ("7-day", datetime(2026, 3, 5, 14, 0, tzinfo=UTC), datetime(2026, 3, 12, 13, 0, tzinfo=UTC), 167),
        # Part 4.2: Mon 26 Oct 2026 09:00 EDT = 13:00 UTC + 14 calendar days = Mon 9 Nov 09:00 EST = 14:00 UTC
        ("14-day-and-storm", datetime(2026, 10, 26, 13, 0, tzinfo=UTC), datetime(2026, 11, 9, 14, 0, tzinfo=UTC),
         14 * 24 + 1),
        # Part 4.3.1 (the default of a site that has not chosen): 7 days, fall back in the week
        (None, datetime(2026, 10, 30, 13, 0, tzinfo=UTC), datetime(2026, 11, 6, 14, 0, tzinfo=UTC), 169),
    ],
)
def test_a_dst_week_inspection_schedule(tmp_path: Path, choice: str | None, first: datetime, due: datetime,
                                        hours: int) -> None:
    engine, book = epa_engine(tmp_path, choice, start=first)
    (opened,) = [e for e in engine.feed(Feeder().tips(0, first)) if e.rule == "R1w"]
    assert opened.due_at == due and due - first == hours * HOUR
    assert opened.due_at.astimezone(engine.cfg.site.tz).strftime("%H:%M") == "09:00"
    assert book.get(opened.work_order).kind == "routine_inspection"
    # nobody inspects: the next period starts at the missed deadline, the same local time
    nxt = [e for e in engine.feed(Feeder(boot="b2").tips(0, due + MIN)) if e.rule == "R1w"]
    assert [e.event_time for e in nxt] == [due]


def test_the_7_day_choice_watches_no_storm(tmp_path: Path) -> None:
    engine, book = epa_engine(tmp_path, "7-day")
    events = feed_all(engine, one_tip_polls(Feeder(), 60, MIN))
    assert [e for e in events if e.rule == "R1"] == []
    assert {o.kind for o in book.list()} == {"routine_inspection"}
    assert {o.citation for o in book.list()} == {"EPA CGP 2022 Part 4.2"}


def test_a_site_that_has_not_chosen_is_held_to_both_schedules(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    engine, book = epa_engine(tmp_path)
    assert "does not choose options.inspection_frequency" in caplog.text
    feed_all(engine, one_tip_polls(Feeder(), 25, 10 * MIN))
    assert {(o.kind, o.citation) for o in book.list()} == {("routine_inspection", "EPA CGP 2022 Part 4.3.1"),
                                                          ("storm_inspection", "EPA CGP 2022 Part 4.3.1")}
    routine = next(o for o in book.list() if o.kind == "routine_inspection")
    assert routine.due_at == T0 + 7 * 24 * HOUR  # June: no DST change that week


def test_an_unknown_choice_in_a_site_file_is_refused_with_the_file_named(tmp_path: Path) -> None:
    doc = site_doc("epa-cgp-2022")
    doc["options"] = {"inspection_frequency": "weekly"}
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(PackError, match=r"site\.yaml: options\.inspection_frequency: 'weekly' is not a choice of "
                                        r"pack epa-cgp-2022 \(choices: 7-day, 14-day-and-storm, 7-day-and-storm\)"):
        load_site_file(path)


def test_the_tharandt_golden_case_by_hand() -> None:
    """tests/cases/tharandt-epa-cgp-2022 holds exactly the storm events found here from the CSV: storms
    split by 6 h without a tip; within each, the first tip at which the tips of the trailing 24 hours
    (t - 24 h, t] reach 32 (0.25 in = 6.35 mm; 32 x 0.2 mm = 6.4 mm, 31 = 6.2 mm)."""
    from tests.importers_support import golden, tharandt_tips, z

    expected = []
    storm: list[tuple[datetime, int]] = []

    def close(tips: list[tuple[datetime, int]]) -> None:
        for i, (t, _) in enumerate(tips):
            if sum(n for when, n in tips[:i + 1] if when > t - 24 * HOUR) >= 32:
                expected.append({"storm_start": z(tips[0][0]), "event_time": z(t), "due_at": z(t + 24 * HOUR)})
                return

    for when, n in sorted(tharandt_tips()):
        if n == 0:
            continue
        if storm and when - storm[-1][0] >= 6 * HOUR:
            close(storm)
            storm = []
        storm.append((when, n))
    close(storm)  # a storm still going on at the end of the file has had its inspection asked for too
    got = [{k: e[k] for k in ("storm_start", "event_time", "due_at")} for e in golden("tharandt-epa-cgp-2022")]
    assert len(expected) == 24 and got == expected
