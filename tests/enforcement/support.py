"""A case book on a stopped clock and a complete draft, for the enforcement tests.

Dates in the tests are derived by hand from the codes' words (each test says how); the clock stands
at :data:`TODAY` (noon in New York) unless a test moves it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from stormwatch.clock import ManualClock
from stormwatch.enforcement.cases import Case, EnforcementBook

#: The day the clock stands on (a Monday; after every date the tests record).
TODAY = date(2026, 7, 20)
ZONE = "America/New_York"


def book(root: Path, today: date = TODAY) -> EnforcementBook:
    """An empty book in ``root`` whose clock stands at noon of ``today`` in New York (16:00 UTC)."""
    return EnforcementBook(root / "enforcement.db", ManualClock(datetime(today.year, today.month, today.day, 16,
                                                                         tzinfo=UTC)))


def draft(b: EnforcementBook, jurisdiction: str, found_on: date, *, party: str = "Acme Builders LLC",
          correct_by: date | None = None, site: str = "riverside-commons") -> Case:
    """A case with every required content filled in (the notice can be issued)."""
    return b.open(site=site, jurisdiction=jurisdiction, timezone=ZONE, by="Sam SMO", found_on=found_on,
                  party=party, address="12 Mill Road, Springfield, NY 11000",
                  location="Riverside Commons, Phase 2, 400 River Road (outfall-1)",
                  nature="Turbid discharge downstream of the site.", violated="the turbidity standard",
                  remedy="Repair the silt fence at outfall-1 and stabilise the exposed slope.",
                  correct_by=correct_by or found_on + timedelta(days=14))


def served(b: EnforcementBook, case: Case, on: date, issued: date | None = None) -> None:
    """Issue (``issued``, default ``on``) and serve the notice by hand on ``on``."""
    b.record(case.id, "nov_issued", issued or on, "Sam SMO")
    b.record(case.id, "nov_served", on, "Sam SMO", method="hand")


def in_order(text: str, parts: list[str]) -> None:
    """Each of ``parts`` in ``text``, one after the other (a letter's contents in the code's order)."""
    at = 0
    for part in parts:
        found = text.find(part, at)
        assert found >= 0, f"{part!r} not found after position {at}: {text[at:at + 300]!r}"
        at = found + len(part)
