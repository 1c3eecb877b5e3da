"""How the report shows numbers and times -- one place, used by the HTML/PDF template (as Jinja2
filters, :data:`FILTERS`) and the CSV writer, so both carry the same digits.

* times: site-local (``Mon 01 Jun 2026 05:12 EDT``, :func:`stormwatch.display.local_time`) in the
  document -- in a table cell a later time of the row's day as ``07:57 EDT``, a narrow column breaking
  a time only between its date and its clock (:func:`cell_time`) -- and ISO 8601 with the local offset in the CSV;
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
from stormwatch.display import duration as duration  # the log book writes lateness and gaps as the desk does
from stormwatch.report.model import DayTotal


def when(t: datetime | None, tz: ZoneInfo) -> str:
    """Site-local time for a person; ``-`` for none."""
    return local_time(t, tz)


def cell_time(t: datetime | None, tz: ZoneInfo, after: datetime | None = None) -> str:
    """Site-local time of ``t`` for a table cell: :func:`when`'s text with no-break spaces inside its
    date and inside its time, so a narrow column breaks it only between the two (``Mon 01 Jun 2026`` /
    ``01:46 EDT``), never inside. A later time of the same local day as ``after`` (the row's earlier
    cell, which gives the date) is only its time, ``07:57 EST``; one past midnight reads whole.
    ``-`` for none."""
    if t is None:
        return when(t, tz)
    local = t.astimezone(tz)
    clock = local.strftime("%H:%M\u00a0%Z")
    if after is not None and after.astimezone(tz).date() == local.date():
        return clock
    return local.strftime("%a\u00a0%d\u00a0%b\u00a0%Y ") + clock


def iso(t: datetime | None, tz: ZoneInfo) -> str:
    """ISO 8601 with the site's local offset (``2026-06-01T05:12:00-04:00``); empty for none."""
    return "" if t is None else t.astimezone(tz).isoformat(timespec="seconds")


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
    """A day's length in hours: whole (``23``, ``24``, ``25``), or a part of a day to 0.01 h, cut
    (``7.5``, ``8.15`` for 8 h 09 min 34 s)."""
    if h == int(h):
        return str(int(h))
    return f"{int(round(h * 100, 6)) / 100:g}"  # round first: 0.29 h is 28.999... hundredths


def day_depth(d: DayTotal) -> str:
    """A day's rain: the exact depth, ``>=`` it when part of the day has no gauge data, ``UNKNOWN``
    when none of it has (never ``>= 0 tips``)."""
    return _bounded(d, d.depth)


def _bounded(d: DayTotal, depth: str) -> str:
    """``depth`` of the day ``d`` as a person reads it: ``UNKNOWN`` when no gauge data all day, ``>=``
    it when part of the day had none."""
    if d.no_data:
        return "UNKNOWN"
    return f">= {depth}" if d.unknown else depth


def day_cell(d: DayTotal) -> str:
    """A day's cell of the rain calendar: ``UNKNOWN`` when the gauge gave no data all day, the depth
    in the gauge's unit (``0.60``), ``>=`` it when part of the day has no gauge data, and the day's
    hours when it is not 24 (``(23 h)``: a daylight-saving change; a day the period cuts)."""
    text = _bounded(d, d.amount)
    return text if d.hours == 24 else f"{text} ({hours(d.hours)} h)"


#: Months side by side in one rain calendar (a year fits the width of a Letter page).
GRID_MONTHS = 12


def month_grid(days: Sequence[DayTotal]) -> list[tuple[list[tuple[str, dict[int, DayTotal]]], list[int]]]:
    """The daily totals as rain calendars -- a column per local month (``"Mar 2025"``), a row per day
    of the month, like a climatological record -- at most :data:`GRID_MONTHS` months each: a list of
    ``(months, day numbers)`` with each month's days by day number (a day outside the period or the
    month is absent) and the day numbers any month of the calendar has."""
    months: dict[tuple[int, int], dict[int, DayTotal]] = {}
    for d in days:
        months.setdefault((d.day.year, d.day.month), {})[d.day.day] = d
    labelled = [(datetime(y, m, 1).strftime("%b %Y"), by_day) for (y, m), by_day in months.items()]
    out = []
    for i in range(0, len(labelled), GRID_MONTHS):
        block = labelled[i:i + GRID_MONTHS]
        out.append((block, sorted({n for _, by_day in block for n in by_day})))
    return out


def order_verdict(o: WorkOrder, as_of: datetime) -> str:
    """``completed on time``, ``completed LATE by ...``, ``OVERDUE by ...`` or the status."""
    if o.completed_at is not None:
        if o.late_by is not None:
            return f"completed LATE by {duration(o.late_by)}"
        return "completed on time"
    if o.is_overdue(as_of):
        assert o.due_at is not None
        return f"{o.status}, OVERDUE by {duration(as_of - o.due_at)}"
    return o.status


FILTERS: dict[str, Callable[..., Any]] = {
    "when": when, "cell_time": cell_time,
    "duration": duration, "pct": pct, "ntu": ntu, "inches": inches, "feet": feet, "hours": hours,
    "day_depth": day_depth, "day_cell": day_cell, "verdict": order_verdict, "month_grid": month_grid,
}
