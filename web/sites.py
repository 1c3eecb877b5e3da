"""The site page (``/sites/{site}``): timeline and charts of the last hours (6..336, default 48, or
before a site-local ``until``), the site's orders, its manual field readings, and the form an
inspector records one with (``POST /sites/{site}/readings``). Design: docs/web.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from stormwatch.config import SiteConfig
from stormwatch.contract import MANUAL_GATEWAY, MANUAL_QUANTITIES
from stormwatch.display import LocalTimeError, amount, local_instant
from stormwatch.importers.manual import ManualEntry, ManualEntryError, Recorded, check_sample_place, sample_places
from stormwatch.numbers import NumberError, parse_float
from stormwatch.stores.base import StoreError
from stormwatch.web import charts
from stormwatch.web.accounts import Session, can_act, visible_sites
from stormwatch.web.desk import desk_of
from stormwatch.web.enforcement import banners
from stormwatch.web.overview import PointSeries, judged_site, site_series
from stormwatch.web.pages import Forbidden, render, site_of

#: Site page windows (hours): the default and the bounds a query may ask.
DEFAULT_HOURS, MIN_HOURS, MAX_HOURS = 48, 6, 336

#: The manual reading form's fields.
FORM_FIELDS = ("point", "sampled_at", "transparency", "turbidity", "ph")


@dataclass(frozen=True)
class Figure:
    """A chart as the site page shows it: its element ``id`` (``chart-turbidity-outfall-1``; a site
    file's one pair or basin: ``chart-turbidity`` / ``chart-basin``, as before points had ids), a
    ``caption`` naming the point or basin and its devices (``""``: none) and the SVG."""

    id: str
    caption: str
    svg: Markup


def _figure(kind: str, key: str, legacy: bool, caption: str, svg: Markup) -> Figure:
    return Figure(f"chart-{kind}" if legacy else f"chart-{kind}-{key}", "" if legacy else caption, svg)


def _probes_caption(point: PointSeries) -> str:
    """``Outfall 1 (outfall-1): upstream turb-up, downstream turb-down-1``."""
    roles = (("upstream", point.upstream_device), ("downstream", point.downstream_device))
    probes = [f"{role} {d}" for role, d in roles if d is not None]
    return f"{point.label}: {', '.join(probes)}"


def window(request: Request, now: datetime, tz: ZoneInfo) -> tuple[datetime, datetime, int, str]:
    """``(start, end, hours, until)``: the last ``hours`` (bounded) before ``until`` -- a site-local
    time of the query (``2026-06-02T08:00``, a date is its midnight) -- or before now."""
    try:
        hours = int(request.query_params.get("hours", DEFAULT_HOURS))
    except ValueError:
        raise HTTPException(400, "hours must be a whole number") from None
    hours = min(max(hours, MIN_HOURS), MAX_HOURS)
    until = request.query_params.get("until", "").strip()
    if until:
        try:
            at = datetime.fromisoformat(until)
        except ValueError:
            raise HTTPException(400, f"until {until[:40]!r}: not a time like 2026-06-02T08:00 "
                                     f"(site-local, {tz.key})") from None
        end = (at if at.tzinfo is not None else at.replace(tzinfo=tz)).astimezone(UTC)
        until = end.astimezone(tz).strftime("%Y-%m-%dT%H:%M")
    else:
        end = now + timedelta(microseconds=1)
    return end - timedelta(hours=hours), end, hours, until


async def site_page(request: Request, session: Session) -> Response:
    """``GET /sites/{site}``."""
    return site_response(request, session)


def site_response(request: Request, session: Session, message: str = "", status: int = 200,
                  form: dict[str, str] | None = None) -> Response:
    """The site page, with ``message`` (and the reading ``form`` as sent) after a refused entry."""
    desk = desk_of(request)
    t0 = time.perf_counter()
    site = site_of(desk, session.user, request.path_params["site"])
    now = desk.clock.now()
    site = judged_site(site, desk.store, [desk.sites[i] for i in visible_sites(session.user, list(desk.sites))],
                       now, desk.clock.run())
    tz = ZoneInfo(site.cfg.site.timezone)
    start, end, hours, until = window(request, now, tz)
    readings = desk.store.query_readings(site.id, start, end)
    series = site_series(site, readings, desk.store.query_site_events(start, end, [site.id]), start, end)
    orders = desk.book.current([site.id], completed_since=start)  # not completed, or since the window's start
    response = render(request, "site.html", {
        "site": site, "series": series, "hours": hours, "until": until, "window_start": start,
        "data_time": site.judged_at(now) if site.data_end is not None else None,
        "orders": orders, "enforcement": banners(desk, session.user, [site.id]),
        "rain_chart": charts.rain_chart(site, series, now) if site.cfg.rain_gauge else None,
        "turbidity_charts": [_figure("turbidity", p.point, p.legacy, _probes_caption(p),
                                     charts.turbidity_chart(site, series, p, now)) for p in series.points],
        "basin_charts": [_figure("basin", b.basin, not b.named, f"{b.basin}: level sensor {b.device}",
                                 charts.basin_chart(site, series, b, now)) for b in series.basins],
        "can_act": can_act(session.user, site.id), "takes_readings": desk.record is not None,
        "manual": [r for r in readings if r.gateway == MANUAL_GATEWAY][::-1],
        "places": sample_places(site.cfg), "quantities": MANUAL_QUANTITIES, "message": message,
        "form": form or {"point": "", "sampled_at": now.astimezone(tz).strftime("%Y-%m-%dT%H:%M"),
                         "transparency": "", "turbidity": "", "ph": ""},
        "done": request.query_params.get("done", "")}, status)
    desk.metrics.render_s.labels("site").observe(time.perf_counter() - t0)
    return response


def _conflicts_text(recorded: Recorded) -> str:
    """A second value for a sample already recorded: refused, the first kept."""
    return "; ".join(f"{c.reading.quantity} {amount(c.reading.value, c.reading.unit)}: this sample is "
                     f"already recorded as {amount(c.stored_value, c.stored_unit)}, which is kept"
                     for c in recorded.conflicts)


async def add_reading(request: Request, session: Session) -> Response:
    """``POST /sites/{site}/readings``: an inspector's manual field reading."""
    desk = desk_of(request)
    site = site_of(desk, session.user, request.path_params["site"])
    if not can_act(session.user, site.id):
        raise Forbidden(f"only an inspector assigned to site {site.id} may enter field readings")
    if desk.record is None:
        raise HTTPException(404, "this desk takes no field readings")
    form = {k: str(request.state.form.get(k) or "").strip() for k in FORM_FIELDS}
    try:
        entry = manual_entry(site.cfg, form, session.user.display_name)
        recorded = desk.record(entry, site.cfg)
    except (ManualEntryError, ValueError) as exc:
        return site_response(request, session, f"Not recorded: {exc}", 400, form)
    except StoreError as exc:
        return site_response(request, session, f"Not recorded, the store failed: {exc}. Enter it again "
                             "(it is recorded once).", 503, form)
    if recorded.conflicts:
        return site_response(request, session, f"Not recorded (conflicting_value): {_conflicts_text(recorded)}. "
                             "A mistyped entry is corrected with `stormwatch readings add --correct`.", 409, form)
    return RedirectResponse(f"/sites/{site.id}?done=reading", status_code=303)


def manual_entry(cfg: SiteConfig, form: dict[str, str], inspector: str) -> ManualEntry:
    """The manual entry of the site page's form (``sampled_at`` local to the site, as a
    ``datetime-local`` input sends it).

    Raises:
        ManualEntryError: no place or not a discharge point of the site, no time, a value that is not a
            number.
    """
    if not form.get("point"):
        raise ManualEntryError("choose where the sample was taken")
    check_sample_place(cfg, form["point"])
    try:
        when = datetime.fromisoformat(form.get("sampled_at", ""))
    except ValueError:
        raise ManualEntryError("give when the sample was taken (date and time)") from None
    try:
        when = local_instant(when, cfg.site.timezone, form.get("sampled_at", ""))
    except (LocalTimeError, OverflowError) as exc:
        raise ManualEntryError(f"sampled at {exc}" if isinstance(exc, LocalTimeError) else
                               "give when the sample was taken (date and time)") from None
    values: dict[str, float] = {}
    for quantity in MANUAL_QUANTITIES:
        text = form.get(quantity, "")
        if text:
            try:
                values[quantity] = parse_float(text.strip().replace(",", "."))
            except NumberError as exc:
                raise ManualEntryError(f"{quantity}: {exc}") from None
    return ManualEntry(cfg.site.id, form["point"], when, inspector, values)
