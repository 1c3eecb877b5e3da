"""The log book's tables: times in cells (report/fmt.cell_time) and the work-order columns.

By hand, America/New_York: 1 Jan 2025 is EST (UTC-5), so 10:00Z is 05:00 EST and 12:57Z is 07:57 EST
the same local day; 2 Nov 2025 is the fall-back day, 05:30Z is 01:30 EDT and 06:30Z is 01:30 EST of
the same date (the zone's abbreviation tells the two apart); 1 Jan 2025 04:30Z is 23:30 EST of
31 Dec 2024, the day before.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from stormwatch.display import local_time
from stormwatch.report.fmt import cell_time
from stormwatch.report.model import Report, StormRow
from stormwatch.report.render import to_html

NY = ZoneInfo("America/New_York")
NBSP = "\u00a0"


def test_a_cell_time_breaks_only_between_its_date_and_its_clock() -> None:
    t = datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
    text = cell_time(t, NY)
    assert text == f"Wed{NBSP}01{NBSP}Jan{NBSP}2025 05:00{NBSP}EST"
    assert text.replace(NBSP, " ") == local_time(t, NY)  # the same words as everywhere else
    assert cell_time(None, NY) == "-"


def test_a_later_time_of_the_rows_day_is_its_clock_alone() -> None:
    start = datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
    assert cell_time(datetime(2025, 1, 1, 12, 57, tzinfo=UTC), NY, start) == f"07:57{NBSP}EST"
    # past local midnight: the whole time, never a clock that reads as the row's day
    after_midnight = cell_time(datetime(2025, 1, 2, 5, 1, tzinfo=UTC), NY, start)
    assert after_midnight == f"Thu{NBSP}02{NBSP}Jan{NBSP}2025 00:01{NBSP}EST"
    # a UTC day boundary is not the site's: 04:30Z on 1 Jan is 23:30 EST on 31 Dec
    evening = datetime(2025, 1, 1, 3, 0, tzinfo=UTC)  # 22:00 EST, 31 Dec 2024
    assert cell_time(datetime(2025, 1, 1, 4, 30, tzinfo=UTC), NY, evening) == f"23:30{NBSP}EST"
    # the fall-back day: 01:30 twice, told apart by the zone's abbreviation
    first = datetime(2025, 11, 2, 5, 30, tzinfo=UTC)
    assert cell_time(first, NY) == f"Sun{NBSP}02{NBSP}Nov{NBSP}2025 01:30{NBSP}EDT"
    assert cell_time(datetime(2025, 11, 2, 6, 30, tzinfo=UTC), NY, first) == f"01:30{NBSP}EST"


def _report(has_orders: bool) -> Report:
    start = datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
    storm = StormRow(id="storm:2025-01-01T10:00:00Z", occurrence="2025-01-01T10:00:00Z", start=start,
                     last_tip=datetime(2025, 1, 1, 12, 57, tzinfo=UTC), tips=60, depth="60 tips = 0.60 in",
                     depth_in=0.6, qualifying=True, ended="confirmed",
                     due_at=datetime(2025, 1, 2, 12, 57, tzinfo=UTC), outcome=None)
    return Report(site_id="s", site_name="Site", timezone="America/New_York", jurisdiction="ch133",
                  pack_title="Ch. 133", permit="", start=datetime(2025, 1, 1, 5, tzinfo=UTC),
                  end=datetime(2025, 1, 3, 5, tzinfo=UTC), as_of=datetime(2025, 1, 3, 5, tzinfo=UTC),
                  as_of_what="wall-clock time", resolution="0.01 in", threshold="0.5 in",
                  citations={"R1": "Ch. 133 §133-7A(2)"},
                  state="no work-order state (--no-work-orders): inspection records not included",
                  has_orders=has_orders, storms=[storm])


def _storm_table(html: str) -> str:
    at = html.index("Rain and storm inspections")
    return html[at:html.index("</table>", at)]


def test_without_a_work_order_book_the_tables_leave_out_its_columns_and_say_why_once() -> None:
    table = _storm_table(to_html(_report(has_orders=False)))
    assert "<th>work order</th>" not in table and "<th>inspection</th>" not in table
    assert "storm:2025-01-01T10:00:00Z" not in table  # the id repeats the start: left out too
    assert "Inspections: no work-order state (--no-work-orders): inspection records not included." in table
    assert f"<td>Wed{NBSP}01{NBSP}Jan{NBSP}2025 05:00{NBSP}EST</td><td>07:57{NBSP}EST</td>" in table
    assert f"<td>Thu{NBSP}02{NBSP}Jan{NBSP}2025 07:57{NBSP}EST</td>" in table  # due 24 h after the last tip


def test_with_a_work_order_book_the_storm_table_has_the_order_and_the_inspection() -> None:
    table = _storm_table(to_html(_report(has_orders=True)))
    assert "<th>work order</th><th>inspection</th>" in table
    assert "Inspections:" not in table


def test_without_a_book_the_log_book_never_says_it_read_one() -> None:
    html = to_html(_report(has_orders=False))
    orders = html[html.index('<section class="part" id="orders">'):html.index('<section id="signature">')]
    assert "Not included: no work-order state (--no-work-orders): inspection records not included." in orders
    assert "No work order of this site touches the period" not in orders  # not "none", but "not looked at"
    assert "stored readings; the rules' own evaluation" in html and "work-order state;" not in html
