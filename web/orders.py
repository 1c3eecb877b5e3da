"""A work order's pages: ``/orders/{id}`` (citation and ordinance text, evidence with its chart, due
time in the site's zone, photos, the full history, and the actions the user may take),
``/orders/{id}/print`` (the same on paper) and its photos. The actions themselves are in
:mod:`stormwatch.web.order_actions`. Design: docs/web.md.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from stormwatch.alerts.evidence import other_items, shortened, tip_summary
from stormwatch.alerts.rules import parse_occurrence
from stormwatch.alerts.rules.registry import EvidenceChart, rule_kinds
from stormwatch.alerts.workorders import WorkOrder, WorkOrderError
from stormwatch.display import local_time, plural
from stormwatch.web import charts
from stormwatch.web.accounts import Session, can_act, can_enforce, can_verify, visible_sites
from stormwatch.web.desk import Desk, desk_of
from stormwatch.web.enforcement import cases_from
from stormwatch.web.excerpts import excerpt
from stormwatch.web.overview import SiteModel, judged_site, site_series
from stormwatch.web.pages import order_of, render
from stormwatch.web.photos import size_text


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def evidence_of(desk: Desk, order: WorkOrder) -> tuple[EvidenceChart | None, str | None]:
    """The chart an order's page shows as evidence and the discharge point or basin it is of
    (its occurrence key's; ``None``: the site's one). The rule kind that opens the order names
    the chart (``EventKindSpec.chart``); an order the book opens after another (an
    ``inspection_report``, ``parent`` set) shows its parent's."""
    which = rule_kinds().evidence_charts().get(order.kind)
    if which is None and order.parent is not None:
        try:
            order = desk.book.get(order.parent)
        except WorkOrderError:
            return None, None
        which = rule_kinds().evidence_charts().get(order.kind)
    try:
        key = parse_occurrence(order.occurrence).key
    except ValueError:  # an occurrence keyed by a day or an order id: the site's one point or basin
        key = None
    return which, key


def evidence_chart(desk: Desk, site: SiteModel, order: WorkOrder, now: datetime) -> Markup | None:
    """The order's evidence chart: from 12 h before its event (or an hour before its first evidence)
    to its due time (at least 6 h after the event), never past now."""
    start = order.event_time - timedelta(hours=12)
    for item in order.evidence:
        if "time" in item:
            start = min(start, parse_time(str(item["time"])) - timedelta(hours=1))
    end = min(max(order.due_at or order.event_time, order.event_time + timedelta(hours=6)), now)
    end = max(end, start + timedelta(hours=6)) + timedelta(microseconds=1)
    series = site_series(site, desk.store.query_readings(site.id, start, end), [], start, end)
    which, key = evidence_of(desk, order)
    point, basin = series.point(key), series.basin(key)
    window = evidence_window(order)
    if which == "rain" and site.cfg.rain_gauge:
        return charts.rain_chart(site, series, now, window)
    if which == "turbidity" and point is not None:
        return charts.turbidity_chart(site, series, point, now, window)
    if which == "basin" and basin is not None:
        return charts.basin_chart(site, series, basin, now, window)
    return None


def evidence_window(order: WorkOrder) -> tuple[datetime, datetime] | None:
    """The stretch the order's evidence covers (its first to its last time: a storm's tips, a
    plume's 5-minute windows, a basin reading); ``None`` without timed evidence."""
    times = [parse_time(str(item[k])) for item in order.evidence
             for k in ("time", "window_start", "window_end") if item.get(k)]
    return (min(times), max(times)) if times else None


def order_context(desk: Desk, session: Session, order: WorkOrder) -> dict[str, Any]:
    """What the order's page and its print view show."""
    now = desk.clock.now()
    site = desk.sites.get(order.site)
    tz = order.timezone or (site.cfg.site.timezone if site else "UTC")
    if site is not None:  # its gaps judged as the portfolio judges its devices
        seen = [desk.sites[i] for i in visible_sites(session.user, list(desk.sites))]
        site = judged_site(site, desk.store, seen, now, desk.clock.run())
    chart = evidence_chart(desk, site, order, now) if site is not None else None
    history = desk.book.history(order.id)
    verified = [c for c in history if c.action == "verified"]
    return {"order": order, "site": site, "tz": tz, "excerpt": excerpt(order.citation),
            "history": history, "photos": desk.book.photos(order.id), "chart": chart,
            "overdue": order.is_overdue(now), "verified": verified[-1] if verified else None,
            "evidence_rows": _evidence_rows(order, tz), "evidence_summary": _evidence_summary(order, tz),
            "can_act": can_act(session.user, order.site),
            "can_verify": can_verify(session.user, order.site), "max_photo": size_text(desk.max_photo_bytes),
            "can_enforce": can_enforce(session.user, order.site) and desk.cases is not None,
            **dict(zip(("cases", "drafts"), cases_from(desk.cases, order.id, order.site), strict=True))}


async def order_page(request: Request, session: Session) -> Response:
    """``GET /orders/{oid}`` (``?done=``: the action just taken, said at the top)."""
    desk = desk_of(request)
    t0 = time.perf_counter()
    order = order_of(desk, session.user, request.path_params["oid"])
    ctx = order_context(desk, session, order)
    ctx["message"] = {"acknowledged": "Acknowledged.", "completed": "Completed.", "photo": "Photo attached.",
                      "verified": "Verified."}.get(request.query_params.get("done", ""), "")
    response = render(request, "order.html", ctx)
    desk.metrics.render_s.labels("order").observe(time.perf_counter() - t0)
    return response


async def order_print(request: Request, session: Session) -> Response:
    """``GET /orders/{oid}/print``."""
    desk = desk_of(request)
    order = order_of(desk, session.user, request.path_params["oid"])
    return render(request, "order_print.html", order_context(desk, session, order))


async def photo_file(request: Request, session: Session) -> Response:
    """``GET /orders/{oid}/photos/{seq}``: a photo as it was uploaded (checked when it was)."""
    desk = desk_of(request)
    order = order_of(desk, session.user, request.path_params["oid"])
    try:
        photo = desk.book.photo(order.id, int(request.path_params["seq"]))
    except WorkOrderError as exc:
        raise HTTPException(404, str(exc)) from None
    return Response(photo.data, media_type=photo.content_type, headers={
        "Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff",
        "Content-Disposition": f'inline; filename="{quote(photo.filename)}"'})


def _evidence_summary(order: WorkOrder, tz: str) -> list[dict[str, str]]:
    """The evidence as the page shows it first: the tip readings counted in one row, then at most a
    few other items (:mod:`stormwatch.alerts.evidence`); the full table is behind a disclosure."""
    tips = tip_summary(order.evidence)
    rows = []
    if tips is not None:
        flagged = f", {tips.flagged} flagged" if tips.flagged else ""
        rows.append({"time": f"{local_time(tips.first, tz)} – {local_time(tips.last, tz)}",
                     "what": plural(tips.readings, "tip reading"), "value": f"{plural(tips.tips, 'tip')}{flagged}"})
    head, left_out, tail = shortened(other_items(order.evidence))
    rows += _item_rows(head, tz)
    if left_out:
        rows.append({"time": "…", "what": f"{left_out} more", "value": ""})
    return rows + _item_rows(tail, tz)


def _evidence_rows(order: WorkOrder, tz: str) -> list[dict[str, str]]:
    """The evidence of an order as rows of text (time in the site's zone, what, value)."""
    return _item_rows(order.evidence, tz)


def _item_rows(evidence: list[dict[str, Any]], tz: str) -> list[dict[str, str]]:
    """Evidence items as rows of text."""

    def when(key: str, item: dict[str, Any]) -> str:
        return local_time(parse_time(str(item[key])), tz) if item.get(key) else "-"

    rows = []
    for item in evidence:
        if "tips" in item:
            rows.append({"time": when("time", item), "what": "tips", "value": str(item["tips"])})
        elif "sediment_depth_ft" in item:
            rows.append({"time": when("time", item), "what": "sediment depth (settled median input)",
                         "value": f"{float(item['sediment_depth_ft']):.2f} ft"})
        elif "downstream_median_ntu" in item:
            rows.append({"time": f"{when('window_start', item)} – {when('window_end', item)}",
                         "what": "5-min medians",
                         "value": f"downstream {float(item['downstream_median_ntu']):.1f} NTU, upstream "
                                  f"{float(item['upstream_median_ntu']):.1f} NTU, allowed "
                                  f"{float(item['allowed_ntu']):.1f} NTU"})
        else:
            rows.append({"time": when("time", item), "what": "", "value": ", ".join(
                f"{k}={v}" for k, v in item.items() if k != "time")})
    return rows
