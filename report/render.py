"""Write a :class:`~stormwatch.report.model.Report` as HTML, PDF or CSV.

HTML comes from one Jinja2 template (``templates/report.html``, autoescaped); the PDF is that same
HTML laid out by WeasyPrint (print CSS: Letter pages, running header, page numbers), so the two can
never disagree. The CSV carries the same numbers, one row per item with a ``section`` column
(``not_yet``: the part of the period after the state's clock, ``sensor``, ``sensor_gap``, ``storm``,
``day``, ``turbidity``, ``basin``, ``unknown``,
``work_order``, ``photo``, ``history``) and, on a site with several discharge points or basins,
the ``point`` (or basin) a turbidity, basin or unknown row is of: the same depth texts, the same
percentages and turbidity values at the same decimals (:mod:`stormwatch.report.fmt`), times as
ISO 8601 in the site's zone.
"""

from __future__ import annotations

import csv
import io
import logging
from datetime import timedelta
from typing import Any

from stormwatch.display import plural
from stormwatch.report import fmt
from stormwatch.report.model import Report

FORMATS = ("pdf", "html", "csv")


def to_html(report: Report) -> str:
    """The report as one self-contained HTML document (charts inline as SVG)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("stormwatch.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(fmt.FILTERS)
    css = env.loader.get_source(env, "report.css")[0]  # type: ignore[union-attr]
    return env.get_template("report.html").render(r=report, css=css, tz=report.tz, zero=timedelta(0))


def to_pdf(report: Report) -> bytes:
    """The report as PDF: :func:`to_html` laid out by WeasyPrint."""
    import weasyprint

    # its INFO is one line per page, its warnings are CSS properties of the SVG charts it does not use
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    pdf = weasyprint.HTML(string=to_html(report)).write_pdf()
    assert pdf is not None
    return bytes(pdf)


CSV_COLUMNS = ("section", "id", "item", "start", "end", "duration_min", "duration", "tips", "depth", "depth_in",
               "qualifying", "status", "due", "done_at", "done_by", "verdict", "upstream", "downstream",
               "allowed", "peak_downstream", "unit", "expected", "received", "percent", "note", "point")


def to_csv(report: Report) -> str:
    """The report's numbers as CSV (module docstring)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="raise", lineterminator="\n")
    w.writeheader()
    tz = report.tz

    def row(section: str, **values: Any) -> None:
        w.writerow({"section": section, **{k: "" if v is None else v for k, v in values.items()}})

    def iso(t: Any) -> str:
        return fmt.iso(t, tz)

    row("report", id=report.site_id, item=report.site_name, start=iso(report.start), end=iso(report.end),
        status=report.jurisdiction, note=f"as of {iso(report.as_of)} ({report.as_of_what}); {report.state}")
    if report.not_yet is not None:
        row("not_yet", start=iso(report.not_yet.start), end=iso(report.not_yet.end),
            duration_min=fmt.minutes(report.not_yet.duration), duration=fmt.duration(report.not_yet.duration),
            note=report.not_yet_text())
    for c in report.coverage:
        row("sensor", id=c.device, item=c.role, unit=c.model, expected=c.expected, received=c.received,
            percent=fmt.pct_number(c.percent), note=f"poll {c.poll_s:g} s; {plural(len(c.gaps), 'gap')}")
        for g in c.gaps:
            row("sensor_gap", id=c.device, start=iso(g.start), end=iso(g.end),
                duration_min=fmt.minutes(g.duration), duration=fmt.duration(g.duration))
    for s in report.storms:
        o = s.outcome
        row("storm", id=s.id, item=s.occurrence, start=iso(s.start), end=iso(s.last_tip), tips=s.tips, depth=s.depth,
            depth_in=fmt.inches(s.depth_in), qualifying="yes" if s.qualifying else "no", status=s.ended,
            due=iso(s.due_at), done_at=iso(o.order.completed_at) if o and o.order else "", done_by=o.done if o else "",
            verdict=o.verdict if o else "", note="; ".join(s.notes))
    for d in report.days:
        row("day", id=d.day.isoformat(), item=f"{fmt.hours(d.hours)} h", tips="" if d.no_data else d.tips,
            depth=fmt.day_depth(d), depth_in="" if d.no_data else fmt.inches(d.depth_in),
            duration_min=fmt.minutes(d.unknown) if d.unknown else "",
            duration=fmt.duration(d.unknown) if d.unknown else "", status="UNKNOWN" if d.no_data else "",
            note="no rain-gauge data all day: rain UNKNOWN" if d.no_data
            else "rain UNKNOWN for part of the day: total is a lower bound" if d.unknown else "")
    for t in report.turbidity:
        o = t.outcome
        row("turbidity", id=o.order.id if o and o.order else t.occurrence, item=t.occurrence, start=iso(t.start),
            end=iso(t.cleared_at), duration_min=fmt.minutes(t.duration) if t.duration else "",
            duration=fmt.duration(t.duration) if t.duration else "not cleared in the data",
            upstream=fmt.ntu_number(t.upstream), downstream=fmt.ntu_number(t.downstream),
            allowed=fmt.ntu_number(t.allowed), peak_downstream=fmt.ntu_number(t.peak_downstream), unit=t.unit,
            due=iso(o.order.due_at) if o and o.order else "",
            done_at=iso(o.order.completed_at) if o and o.order else "", done_by=o.done if o else "",
            verdict=o.verdict if o else "", note=f"detected {iso(t.detected_at)}", point=t.point)
    for b in report.basin:
        o = b.outcome
        row("basin", id=o.order.id if o and o.order else "", item=b.kind, start=iso(b.at),
            depth=f"{fmt.feet(b.depth_ft)} ft" if b.depth_ft is not None else "",
            percent=fmt.pct_number(b.lost_percent), due=iso(b.due_at),
            done_at=iso(o.order.completed_at) if o and o.order else "", done_by=o.done if o else "",
            verdict=o.verdict if o else "", point=b.basin)
    for u in report.unknown:
        row("unknown", id=u.device, item=u.what, start=iso(u.interval.start), end=iso(u.interval.end),
            duration_min=fmt.minutes(u.interval.duration), duration=fmt.duration(u.interval.duration),
            status="UNKNOWN", note=u.why, point=u.point)
    for r in report.orders:
        wo = r.order
        row("work_order", id=wo.id, item=wo.kind, start=iso(wo.event_time), status=wo.status, due=iso(wo.due_at),
            done_at=iso(wo.completed_at), done_by=wo.inspector or "", verdict=fmt.order_verdict(wo, report.as_of),
            note=f"{wo.citation}; {wo.notes or wo.message}")
        for seq, name, _uri in r.photos:
            row("photo", id=wo.id, item=name, note=f"photo {seq}")
        for ch in r.history:
            row("history", id=wo.id, item=ch.action, start=iso(ch.at), status=ch.status, done_by=ch.by,
                note=ch.notes)
    return buf.getvalue()
