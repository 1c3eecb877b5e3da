"""Messages an SMO reads (issue 12 item 5): dates are readable, with the year, in the site's own
zone as the demo prints them (``Mon 01 Jun 2026 08:59 EDT``, stormwatch/display.py) -- in the
events' messages (and so a work order's reason), the work-order history, the overdue event and
the refusals. The machine fields (``event_time``, ``due_at``, details, evidence) stay ISO UTC.

The storm is hand-made: 60 tips of 0.01 in, one a minute from 12:00 UTC on 1 June 2026 (08:00 EDT,
UTC-4 in summer) on the test site in America/New_York under Ch. 133 (0.5 in threshold, 6 h dry
gap, inspection within 24 h of the last tip, alerts/packs/ch133.yaml): the last tip falls at
12:59 UTC = 08:59 EDT, the storm is over at 18:59 UTC, the inspection is due at 12:59 UTC the next
day = Tue 02 Jun 2026 08:59 EDT."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from stormwatch.alerts.cli import _evidence_line
from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.alerts.service import overdue_event
from stormwatch.alerts.workorders import WorkOrderError, WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site

MIN = timedelta(minutes=1)
NEW_YORK = ZoneInfo("America/New_York")


def storm_events(tmp_path: Path) -> tuple[list[Event], WorkOrders, ManualClock]:
    clock = ManualClock(T0)
    book = WorkOrders(tmp_path / "alerts.db", clock)
    engine = Engine(site("ch133"), ProfileLibrary(), load_pack("ch133"), book, lateness_s=300)
    feed = Feeder()
    events: list[Event] = []
    for i in range(8 * 60):
        events += engine.feed(feed.tips(1 if i < 60 else 0, T0 + i * MIN))
    return events + engine.flush(), book, clock


def test_the_storm_message_and_the_work_orders_reason_are_site_local_with_the_year(tmp_path: Path) -> None:
    events, book, clock = storm_events(tmp_path)
    (due,) = [e for e in events if e.kind == "storm_inspection_due"]
    assert due.message == ("storm of 0.60 in (60 tips of 0.01 in) ended at Mon 01 Jun 2026 08:59 EDT: "
                           "inspection due by Tue 02 Jun 2026 08:59 EDT")
    wire = due.to_wire()  # the machine fields keep ISO UTC
    assert (wire["event_time"], wire["due_at"]) == ("2026-06-01T18:59:00Z", "2026-06-02T12:59:00Z")
    assert wire["occurrence"] == "storm:2026-06-01T12:00:00Z"
    (started,) = [e for e in events if e.kind == "storm_started"]
    assert started.message == "rain started at Mon 01 Jun 2026 08:00 EDT"
    (qualified,) = [e for e in events if e.kind == "storm_qualified"]
    assert "0.50 in (50 tips of 0.01 in) since Mon 01 Jun 2026 08:00 EDT" in qualified.message
    (routine,) = [e for e in events if e.kind == "routine_inspection_due"]
    assert routine.message.endswith("due by Mon 08 Jun 2026 08:00 EDT")  # 7 local days after the first reading

    (order,) = [o for o in book.list() if o.kind == "storm_inspection"]
    assert order.message == due.message  # the order's reason is the event's message
    assert order.timezone == "America/New_York"
    opened = book.history(order.id)[0]
    assert (opened.action, opened.notes) == ("opened", "due Tue 02 Jun 2026 08:59 EDT")

    # overdue: the history note and the event an SMO gets, both site-local; due_at stays UTC
    late = T0 + timedelta(hours=25)
    clock.set(late)
    (marked,) = [o for o in book.mark_overdue(late) if o.id == order.id]
    assert book.history(order.id)[-1].notes == "due Tue 02 Jun 2026 08:59 EDT passed"
    event = overdue_event(marked, late)
    assert event.message == (f"work order {order.id} (storm inspection) is overdue: it was due "
                             "Tue 02 Jun 2026 08:59 EDT")
    assert event.to_wire()["due_at"] == "2026-06-02T12:59:00Z"

    # refusals name the time the same way
    clock.set(T0 + timedelta(hours=26, minutes=30))
    book.complete(order.id, "ann", "inspected, silt fence mended")
    try:
        book.acknowledge(order.id, "bob")
    except WorkOrderError as exc:
        assert str(exc) == (f"work order {order.id} was completed at Tue 02 Jun 2026 10:30 EDT by ann: "
                            "nothing to acknowledge")
    else:
        raise AssertionError("a completed order was acknowledged")
    book.close()


def test_workorders_show_evidence_reads_as_words() -> None:
    """An empty list is "none", a list of flags is the flags -- not "flags: 0 values"."""
    item = {"time": "2026-06-01T12:00:00Z", "tips": 1, "gateway": "gw", "boot": "b1", "seq": 7, "flags": []}
    assert _evidence_line(item, NEW_YORK) == "time Mon 01 Jun 2026 08:00 EDT, tips 1, gateway gw, boot b1, seq 7, " \
                                             "flags none"
    flagged = {**item, "flags": ["counter_reset", "suspect"]}
    assert _evidence_line(flagged, NEW_YORK).endswith("flags counter_reset, suspect")
    window = {"window_start": "2026-06-01T12:00:00Z", "upstream": [["2026-06-01T12:00:00Z", 20.0]] * 3}
    assert _evidence_line(window, NEW_YORK) == "window start Mon 01 Jun 2026 08:00 EDT, upstream: 3 values"
