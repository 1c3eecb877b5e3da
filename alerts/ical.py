"""An iCalendar (RFC 5545) feed of work-order due dates (``stormwatch workorders ical``).

One ``VEVENT`` per order that has a due date: ``UID`` ``<order id>@stormwatch``, ``DTSTART`` the
deadline (UTC) lasting 30 minutes, ``SUMMARY`` "<kind> due -- <site> (<status>)", ``DESCRIPTION``
the order's message and citation, ``CATEGORIES`` the rule. ``DTSTAMP`` is the clock's now, so the
same book and clock give the same bytes. Built with the ``icalendar`` package.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from icalendar import Calendar
from icalendar import Event as CalendarEvent

from stormwatch.alerts.workorders import WorkOrder

#: Length of the calendar entry of a deadline.
ENTRY = timedelta(minutes=30)


def calendar_of(orders: list[WorkOrder], now: datetime) -> bytes:
    """The ``.ics`` bytes of ``orders``' due dates (orders without ``due_at`` are left out)."""
    cal = Calendar()
    cal.add("prodid", "-//stormwatch//work orders//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", "stormwatch inspection deadlines")
    for o in orders:
        if o.due_at is None:
            continue
        entry = CalendarEvent()
        entry.add("uid", f"{o.id}@stormwatch")
        entry.add("dtstamp", now)
        entry.add("dtstart", o.due_at)
        entry.add("dtend", o.due_at + ENTRY)
        entry.add("summary", f"{o.kind.replace('_', ' ')} due -- {o.site} ({o.status})")
        entry.add("description", f"{o.message}\n{o.citation}; work order {o.id}")
        entry.add("categories", [o.rule])
        cal.add_component(entry)
    ical: bytes = cal.to_ical()
    return ical
