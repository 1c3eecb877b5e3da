"""Counting a code's days: the deadline each clock of a pack's enforcement section sets.

A clock runs ``days`` calendar or business days from the day of its starting action; the first day
counted is the day after (served Tue 2026-06-30 + 7 days = Tue 2026-07-07). Business days skip
Saturdays, Sundays and the public holidays of the section's ``holidays`` (python-holidays, observed
days included: Fri 2026-07-03 for Independence Day). Where two sections set two clocks for one
thing (Ch. 133: an appeal within seven days of service, §133-10A(6), and within seven calendar days
of issuance, §133-11) the earlier date is tracked and both are cited. A deadline that falls on a
weekend or holiday is kept as the code counts it and carries a note (New York's General
Construction Law §25-a(1) may move the act to the next business day). Design: docs/enforcement.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache

import holidays

from stormwatch.alerts.business_days import add_business_days, holiday_calendar
from stormwatch.alerts.enforcement_pack import Clock, ClockStart

#: Where a period ending on a non-business day may be extended (New York; docs/enforcement.md).
NY_GCL_25A = "N.Y. Gen. Constr. Law §25-a(1)"


@cache
def calendar_of(spec: str, first_year: int, last_year: int) -> holidays.HolidayBase:
    """The public holidays of ``spec`` (``US-NY``) for the years ``first_year``..``last_year``."""
    return holiday_calendar(spec, range(first_year, last_year + 1))


def is_business_day(day: date, spec: str) -> bool:
    """Not a Saturday, Sunday or public holiday of ``spec``."""
    return day.weekday() < 5 and day not in calendar_of(spec, day.year, day.year)


def count_days(start: date, days: int, unit: str, spec: str) -> date:
    """The ``days``-th calendar or business day after ``start``."""
    if unit == "calendar":
        return start + timedelta(days=days)
    return add_business_days(start, days, calendar_of(spec, start.year, start.year + days // 200 + 1))


def next_business_day(day: date, spec: str) -> date:
    """The first business day after ``day``."""
    return count_days(day, 1, "business", spec)


@dataclass(frozen=True)
class Term:
    """One clock run from its start: ``due`` is its last day."""

    clock: Clock
    start: date
    due: date


@dataclass(frozen=True)
class Due:
    """A deadline: the earliest of the clocks that run (``terms[0]`` governs; all are cited).

    Attributes:
        due: the last day.
        terms: every clock that runs, earliest first.
        note: what a person should know about the day (it is not a business day), or "".
    """

    due: date
    terms: tuple[Term, ...]
    note: str = ""

    @property
    def citations(self) -> list[str]:
        """Each clock's citation, once, earliest first."""
        return list(dict.fromkeys(t.clock.citation for t in self.terms))

    @property
    def quotes(self) -> list[str]:
        return list(dict.fromkeys(t.clock.quote for t in self.terms))


def non_business_note(day: date, spec: str) -> str:
    """Why ``day`` is not a business day and where that may matter, or "" when it is one."""
    if is_business_day(day, spec):
        return ""
    name = calendar_of(spec, day.year, day.year).get(day) or day.strftime("%A")
    note = f"{day.strftime('%a %Y-%m-%d')} is not a business day ({name})"
    if spec.upper().startswith("US-NY"):
        note += (f"; {NY_GCL_25A} lets an act due on such a day be done on the next business day, "
                 f"{next_business_day(day, spec).strftime('%a %Y-%m-%d')}")
    return note


def due_of(clocks: Sequence[Clock], starts: Mapping[ClockStart, date], spec: str) -> Due | None:
    """The deadline ``clocks`` set, given the days their starting actions happened (``starts``);
    ``None`` when none of them has started."""
    terms = sorted((Term(c, starts[c.start], count_days(starts[c.start], c.days, c.unit, spec))
                    for c in clocks if c.start in starts), key=lambda t: t.due)
    if not terms:
        return None
    return Due(terms[0].due, tuple(terms), non_business_note(terms[0].due, spec))
