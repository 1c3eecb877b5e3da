"""An iCalendar (RFC 5545) feed of enforcement deadlines (``stormwatch enforce ical``, the desk's feed).

One all-day ``VEVENT`` per deadline not yet met of a case not resolved (the appeal window closing,
the hearing due, the decision to be mailed, the correction due, ...): ``UID``
``<case>-<deadline>@stormwatch``, ``DTSTART`` the last day (a date: deadlines are days),
``SUMMARY`` "<deadline> -- <case> at <site>" (with OVERDUE when it has passed), ``DESCRIPTION`` the
basis, citations and the code's words. ``DTSTAMP`` is the clock's now, so the same cases and clock
give the same bytes. Built with the ``icalendar`` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from icalendar import Calendar
from icalendar import Event as CalendarEvent

from stormwatch.enforcement.view import CaseView


def calendar_of(views: Sequence[CaseView], now: datetime, only: str | None = None) -> bytes:
    """The ``.ics`` bytes of the open deadlines of ``views`` (``only``: of that deadline name)."""
    cal = Calendar()
    cal.add("prodid", "-//stormwatch//enforcement//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", "stormwatch enforcement deadlines")
    for view in views:
        if not view.open:
            continue
        for d in view.deadlines:
            if d.state not in ("open", "overdue") or (only is not None and d.name != only):
                continue
            entry = CalendarEvent()
            entry.add("uid", f"{view.case.id}-{d.name}@stormwatch")
            entry.add("dtstamp", now)
            entry.add("dtstart", d.due)
            entry.add("dtend", d.due + timedelta(days=1))
            flag = " (OVERDUE)" if d.overdue else ""
            entry.add("summary", f"{d.label} -- {view.case.id} at {view.case.site}{flag}")
            words = "\n".join(f'"{q}"' for q in d.quotes)
            entry.add("description", f"{d.basis}; {'; '.join(d.citations)}\n{words}" + (f"\n{d.note}" if d.note
                                                                                         else ""))
            entry.add("categories", [view.case.jurisdiction])
            cal.add_component(entry)
    ical: bytes = cal.to_ical()
    return ical
