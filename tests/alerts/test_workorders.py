"""Work orders: one per (site, rule, occurrence), persisted, ack/complete, overdue, Ch. 196 report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.business_days import report_deadline
from stormwatch.alerts.packs import load_pack
from stormwatch.alerts.workorders import WorkOrderError, WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from tests.alerts_support import T0, storm_due


def test_dedupe_and_persistence_across_objects(tmp_path: Path) -> None:
    clock = ManualClock(T0 + timedelta(hours=7))
    book = WorkOrders(tmp_path / "state.db", clock)
    first, created = book.open_for(storm_due())
    assert created and first.status == "open" and first.due_at == T0 + timedelta(hours=25)
    again, created2 = book.open_for(storm_due())
    assert not created2 and again.id == first.id
    book.acknowledge(first.id, "ann")
    book.close()

    reopened = WorkOrders(tmp_path / "state.db", clock)
    _, created3 = reopened.open_for(storm_due())
    assert not created3
    (only,) = reopened.list()
    assert only.id == first.id and only.status == "acknowledged" and only.acknowledged_by == "ann"
    assert only.evidence == [{"time": "2026-06-01T12:00:00Z", "tips": 50}]
    other, created4 = reopened.open_for(storm_due("storm:2026-06-02T12:00:00Z"))
    assert created4 and other.id != first.id


def test_complete_and_overdue(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    book = WorkOrders(tmp_path / "state.db", clock)
    a, _ = book.open_for(storm_due("a"))
    b, _ = book.open_for(storm_due("b"))
    clock.set(T0 + timedelta(hours=26))
    assert {o.id for o in book.mark_overdue()} == {a.id, b.id}
    assert {o.status for o in book.list()} == {"open"}  # overdue is a flag, never a status
    done = book.complete(a.id, "bob", notes="silt fence repaired")
    assert done.status == "completed" and done.inspector == "bob" and done.notes == "silt fence repaired"
    assert done.completed_at == clock.now() and not done.is_overdue(clock.now())
    with pytest.raises(WorkOrderError):
        book.complete(a.id, "bob", "again")
    with pytest.raises(WorkOrderError):
        book.get("WO-nope")
    assert book.mark_overdue() == []


def test_ch196_completion_opens_report_due_in_two_business_days(tmp_path: Path) -> None:
    # Inspection Friday 2026-07-03 (NY: Independence Day observed, a holiday itself) 15:00 New York:
    # business days after it: Mon 07-06, Tue 07-07 -> due at Wed 2026-07-08 00:00 EDT = 04:00 UTC.
    inspected = datetime(2026, 7, 3, 19, 0, tzinfo=UTC)
    clock = ManualClock(inspected)
    book = WorkOrders(tmp_path / "state.db", clock)
    report_rule = load_pack("ch196").report()[1]
    order, _ = book.open_for(storm_due(), report=report_rule, timezone="America/New_York")
    book.complete(order.id, "cy", "inspected; no findings")
    (report,) = [o for o in book.list() if o.kind == "inspection_report"]
    assert report.parent == order.id and report.citation == "Ch. 196 §196-9B"
    assert report.due_at == datetime(2026, 7, 8, 4, 0, tzinfo=UTC)


def test_report_deadline_skips_weekend_and_holiday() -> None:
    # Thursday 2026-11-26 is Thanksgiving; inspection Wed 11-25: Fri 11-27, Mon 11-30 -> Tue 12-01 00:00 EST
    due = report_deadline(datetime(2026, 11, 25, 15, 0, tzinfo=UTC), 2, "America/New_York", "US-NY")
    assert due == datetime(2026, 12, 1, 5, 0, tzinfo=UTC)


def test_non_opening_event_is_rejected(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "state.db", ManualClock(T0))
    ev = storm_due().model_copy(update={"kind": "storm_started"})
    with pytest.raises(WorkOrderError):
        book.open_for(ev)


def test_current_orders_are_the_pending_and_the_recently_completed(tmp_path: Path) -> None:
    # Three sites, two rules each; per site an order completed two days ago, one completed ten days
    # ago, one open and one acknowledged. By hand, with completed_since = now - 7 d: per site the
    # open, the acknowledged and the one completed two days ago; without it, the two pending only.
    clock = ManualClock(T0)
    book = WorkOrders(tmp_path / "state.db", clock)
    expected: dict[str, set[str]] = {"pending": set(), "recent": set()}
    for site in ("s1", "s2", "s3"):
        orders = []
        for k, (rule, kind) in enumerate((("R1", "storm_inspection_due"), ("R1", "storm_inspection_due"),
                                          ("R3", "basin_cleanout_due"), ("R3", "basin_cleanout_due"))):
            e = Event(kind=kind, site=site, event_time=T0 + timedelta(hours=k), rule=rule,  # type: ignore[arg-type]
                      citation="Ch. 133 §133-7A(2)", occurrence=f"{kind}:{k}", due_at=T0 + timedelta(days=1))
            orders.append(book.open_for(e)[0])
        old, recent, pending, acked = orders
        clock.set(T0 + timedelta(days=2))
        book.complete(old.id, "ann", "done early")
        clock.set(T0 + timedelta(days=10))
        book.complete(recent.id, "ann", "done late")
        book.acknowledge(acked.id, "bob")
        clock.set(T0)
        expected["pending"] |= {pending.id, acked.id}
        expected["recent"] |= {recent.id}
    now = T0 + timedelta(days=12)
    got = book.current(["s1", "s2", "s3"], completed_since=now - timedelta(days=7))
    assert {o.id for o in got} == expected["pending"] | expected["recent"]
    assert [o.event_time for o in got] == sorted(o.event_time for o in got)  # oldest event first
    assert {o.id for o in book.current(None, completed_since=now - timedelta(days=7))} == {o.id for o in got}
    assert {o.id for o in book.current(["s2", "s2"])} == {o.id for o in got if o.site == "s2"
                                                          and o.status != "completed"}
    assert {o.status for o in book.current()} == {"open", "acknowledged"}
    assert book.current([]) == [] and book.current(["nowhere"]) == []
    # the same as the whole book filtered
    every = book.list()
    assert {o.id for o in got} == {o.id for o in every
                                   if o.completed_at is None or o.completed_at >= now - timedelta(days=7)}
