"""How the report shows numbers and times -- one place, used by the HTML/PDF template (as Jinja2
filters, :data:`FILTERS`) and the CSV writer, so both carry the same digits.

* times: site-local (``Mon 01 Jun 2026 05:12 EDT``, :func:`stormwatch.display.local_time`) in the
  document, ISO 8601 with the local offset in the CSV;
* depths: the exact text at the gauge's resolution (``120 tips = 1.20 in``); inches to 2 decimals
  where a number is needed (charts, ``depth_in``);
* turbidity at 0.1 of the probes' unit (:mod:`stormwatch.display`); percentages at 0.1 %;
* durations in whole minutes, cut (``5 h 12 min``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from stormwatch.alerts.workorders import WorkOrder
from stormwatch.display import TURBIDITY_DECIMALS, local_time
from stormwatch.report.model import DayTotal


def when(t: datetime | None, tz: ZoneInfo) -> str:
    """Site-local time for a person; ``-`` for none."""
    return local_time(t, tz)


def iso(t: datetime | None, tz: ZoneInfo) -> str:
    """ISO 8601 with the site's local offset (``2026-06-01T05:12:00-04:00``); empty for none."""
    return "" if t is None else t.astimezone(tz).isoformat(timespec="seconds")


def duration(d: timedelta | None) -> str:
    """``3 d 4 h 05 min``, ``4 h 05 min``, ``12 min``; ``-`` for none."""
    if d is None:
        return "-"
    minutes = int(d.total_seconds() // 60)
    days, rest = divmod(minutes, 1440)
    hrs, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hrs} h {mins:02d} min"
    if hrs:
        return f"{hrs} h {mins:02d} min"
    return f"{mins} min"


def minutes(d: timedelta | None) -> str:
    """Whole minutes of ``d`` (cut), for the CSV."""
    return "" if d is None else str(int(d.total_seconds() // 60))


def pct_number(p: float | None) -> str:
    """``99.8`` (0.1 %); empty for none."""
    return "" if p is None else f"{p:.1f}"


def pct(p: float | None) -> str:
    """``99.8 %``; ``-`` for none."""
    return "-" if p is None else f"{pct_number(p)} %"


def ntu_number(v: float | None) -> str:
    """A turbidity value at display resolution (``48.3``); empty for none."""
    return "" if v is None else f"{v:.{TURBIDITY_DECIMALS}f}"


def ntu(v: float | None, unit: str = "NTU") -> str:
    """``48.3 NTU``; ``-`` for none."""
    return "-" if v is None else f"{ntu_number(v)} {unit}"


def inches(v: float | None) -> str:
    """Inches to 2 decimals (``1.20``)."""
    return "" if v is None else f"{v:.2f}"


def feet(v: float | None) -> str:
    """Feet to 2 decimals (``2.14``)."""
    return "" if v is None else f"{v:.2f}"


def hours(h: float) -> str:
    """A day's length in hours (``23``, ``24``, ``25``, or a part of a day ``7.5``)."""
    return f"{h:g}"


def day_depth(d: DayTotal) -> str:
    """A day's rain: the exact depth, ``>=`` it when part of the day has no gauge data, ``UNKNOWN``
    when none of it has (never ``>= 0 tips``)."""
    if d.no_data:
        return "UNKNOWN"
    return f">= {d.depth}" if d.unknown else d.depth


def month_rows(days: Sequence[DayTotal]) -> list[tuple[str, list[tuple[DayTotal, DayTotal | None]]]]:
    """The daily totals by calendar month, ``("March 2025", rows)``: each month's days in two
    halves side by side (the first half down the left, the rest down the right), a row holding
    one day of each -- the report's two-column table of a month."""
    months: dict[tuple[int, int], list[DayTotal]] = {}
    for d in days:
        months.setdefault((d.day.year, d.day.month), []).append(d)
    out = []
    for month in months.values():
        half = (len(month) + 1) // 2
        left, right = month[:half], month[half:]
        out.append((month[0].day.strftime("%B %Y"),
                    [(a, right[i] if i < len(right) else None) for i, a in enumerate(left)]))
    return out


def order_verdict(o: WorkOrder, as_of: datetime) -> str:
    """``completed on time``, ``completed LATE by ...``, ``OVERDUE by ...`` or the status."""
    if o.completed_at is not None:
        if o.due_at is not None and o.completed_at > o.due_at:
            return f"completed LATE by {duration(o.completed_at - o.due_at)}"
        return "completed on time"
    if o.is_overdue(as_of):
        assert o.due_at is not None
        return f"{o.status}, OVERDUE by {duration(as_of - o.due_at)}"
    return o.status


FILTERS: dict[str, Callable[..., Any]] = {
    "when": when, "duration": duration, "pct": pct, "ntu": ntu, "inches": inches, "feet": feet, "hours": hours,
    "day_depth": day_depth, "verdict": order_verdict, "month_rows": month_rows,
}
