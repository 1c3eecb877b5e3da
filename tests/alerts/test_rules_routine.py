"""R1w counts seven LOCAL calendar days (Ch. 133 §133-7A(2) "every seven days"): a week across a
daylight-saving change is 167 or 169 hours, never a UTC 168 that lands an hour off the local time.

Expected instants are written by hand from the US rules (Energy Policy Act of 2005: DST ends the
first Sunday of November at 02:00 local, begins the second Sunday of March at 02:00 local):
New York is UTC-4 (EDT) before 2024-11-03 06:00 UTC and UTC-5 (EST) after; UTC-5 before
2025-03-09 07:00 UTC and UTC-4 after.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import PackError, load_pack
from stormwatch.alerts.rules.routine import add_local_days
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import Feeder, site

NY = ZoneInfo("America/New_York")
HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("start", "due", "hours"),
    [
        # Fri 2024-11-01 00:00 EDT = 04:00 UTC -> Fri 2024-11-08 00:00 EST = 05:00 UTC (fall back: 169 h)
        (datetime(2024, 11, 1, 4, 0, tzinfo=UTC), datetime(2024, 11, 8, 5, 0, tzinfo=UTC), 169),
        # Mon 2024-10-28 09:30 EDT = 13:30 UTC -> Mon 2024-11-04 09:30 EST = 14:30 UTC
        (datetime(2024, 10, 28, 13, 30, tzinfo=UTC), datetime(2024, 11, 4, 14, 30, tzinfo=UTC), 169),
        # Fri 2025-03-07 08:00 EST = 13:00 UTC -> Fri 2025-03-14 08:00 EDT = 12:00 UTC (spring forward: 167 h)
        (datetime(2025, 3, 7, 13, 0, tzinfo=UTC), datetime(2025, 3, 14, 12, 0, tzinfo=UTC), 167),
        # a week with no change: Mon 2024-06-03 08:00 EDT = 12:00 UTC -> 168 h later
        (datetime(2024, 6, 3, 12, 0, tzinfo=UTC), datetime(2024, 6, 10, 12, 0, tzinfo=UTC), 168),
        # Sun 2025-03-02 02:30 EST = 07:30 UTC -> 2025-03-09 02:30 does not exist in New York: the
        # gap's hour later, 03:30 EDT = 07:30 UTC (168 h: the skipped hour is not counted twice)
        (datetime(2025, 3, 2, 7, 30, tzinfo=UTC), datetime(2025, 3, 9, 7, 30, tzinfo=UTC), 168),
        # Sun 2024-10-27 01:30 EDT = 05:30 UTC -> 2024-11-03 01:30 happens twice: the first, EDT = 05:30 UTC
        (datetime(2024, 10, 27, 5, 30, tzinfo=UTC), datetime(2024, 11, 3, 5, 30, tzinfo=UTC), 168),
    ],
)
def test_seven_local_days(start: datetime, due: datetime, hours: int) -> None:
    got = add_local_days(start, 7, NY)
    assert got == due
    assert got - start == hours * HOUR


def test_a_dst_week_is_due_at_the_same_local_time(tmp_path: Path) -> None:
    """The engine's routine order over the week of 2024-11-03 is due at local midnight, not 23:00 the day before."""
    first = datetime(2024, 11, 1, 4, 0, tzinfo=UTC)  # Fri 01 Nov 2024 00:00 EDT
    book = WorkOrders(tmp_path / "wo.db", ManualClock(first))
    engine = Engine(site("ch133"), ProfileLibrary(), load_pack("ch133"), book, lateness_s=0)
    feed = Feeder()
    (opened,) = [e for e in engine.feed(feed.tips(0, first)) if e.rule == "R1w"]
    assert opened.due_at == datetime(2024, 11, 8, 5, 0, tzinfo=UTC)
    assert opened.due_at.astimezone(NY).strftime("%a %d %b %H:%M %Z") == "Fri 08 Nov 00:00 EST"
    order = book.get(opened.work_order)
    assert order.due_at == datetime(2024, 11, 8, 5, 0, tzinfo=UTC)

    # Nobody inspects: the next period starts at the missed deadline and is due a week of local
    # days later (Fri 15 Nov 00:00 EST = 05:00 UTC, 168 h: no change that week).
    later = engine.feed(feed.tips(0, datetime(2024, 11, 8, 5, 30, tzinfo=UTC)))
    (second,) = [e for e in later if e.rule == "R1w"]
    assert second.event_time == datetime(2024, 11, 8, 5, 0, tzinfo=UTC)
    assert second.due_at == datetime(2024, 11, 15, 5, 0, tzinfo=UTC)


def test_a_period_is_counted_in_the_site_zone(tmp_path: Path) -> None:
    """The same instant starts a week due at local midnight in each site's own zone."""
    first = datetime(2024, 11, 1, 4, 0, tzinfo=UTC)  # 00:00 EDT; 21:00 PDT the day before
    book = WorkOrders(tmp_path / "wo.db", ManualClock(first))
    engine = Engine(site("ch133", timezone="America/Los_Angeles"), ProfileLibrary(), load_pack("ch133"), book,
                    lateness_s=0)
    (opened,) = [e for e in engine.feed(Feeder().tips(0, first)) if e.rule == "R1w"]
    # Thu 31 Oct 21:00 PDT + 7 local days = Thu 07 Nov 21:00 PST = Fri 08 Nov 05:00 UTC
    assert opened.due_at == datetime(2024, 11, 8, 5, 0, tzinfo=UTC)


def test_every_days_is_a_whole_number_of_days(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="every_days"):
        load_pack("ch133", {"R1w": {"every_days": 7.5}})
    assert load_pack("ch133", {"R1w": {"every_days": 14}}).routine()[1].every_days == 14
