"""Business-day deadlines (Ch. 196 §196-9B: report "within two business days of the date of the
inspection"; rules.md R1: weekends and New York State public holidays excluded).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import holidays


def holiday_calendar(spec: str, years: range) -> holidays.HolidayBase:
    """Public holidays for ``<country>-<subdivision>`` (e.g. ``US-NY``) or ``<country>``.

    Raises:
        NotImplementedError: unknown country/subdivision (from python-holidays).
    """
    country, _, subdiv = spec.partition("-")
    return holidays.country_holidays(country, subdiv=subdiv or None, years=years)


def add_business_days(day: date, n: int, calendar: holidays.HolidayBase) -> date:
    """The ``n``-th business day after ``day`` (Saturday, Sunday and ``calendar`` days skipped)."""
    d = day
    left = n
    while left > 0:
        d += timedelta(days=1)
        if d.weekday() < 5 and d not in calendar:
            left -= 1
    return d


def report_deadline(inspected_at: datetime, business_days: int, tz: str, holiday_spec: str) -> datetime:
    """End of the ``business_days``-th business day after the local date of ``inspected_at`` (UTC).

    The deadline is local midnight starting the following day, converted to UTC (so "within two
    business days" of a Friday inspection ends at Wednesday 00:00 local when Mon/Tue are work days).
    """
    zone = ZoneInfo(tz)
    local_day = inspected_at.astimezone(zone).date()
    calendar = holiday_calendar(holiday_spec, range(local_day.year, local_day.year + 2))
    last = add_business_days(local_day, business_days, calendar)
    return datetime.combine(last + timedelta(days=1), time(0), tzinfo=zone).astimezone(UTC)
