"""The web application: Starlette + Jinja2 templates, htmx for small interactions, no build step.

Pages (every one needs a session; every one checks the user's right to the site on the server):

* ``/`` -- the portfolio: each visible site's state now (:func:`stormwatch.web.overview.portfolio`);
  refreshed in place every minute by htmx.
* ``/sites/{site}?hours=N`` -- timeline and charts of the last N hours (6..336, default 48).
* ``/orders/{id}`` -- a work order: citation and ordinance text, evidence with its chart, due time
  in the site's zone, photos, the full history, and the actions the user may take;
  ``/orders/{id}/print`` is the same on paper.
* ``POST /orders/{id}/acknowledge|complete|photos|verify`` -- the actions; every POST carries the
  session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``).
* ``/login``, ``POST /logout``; ``/metrics`` (Prometheus text: notifications, page renders), only when
  asked (``Desk.serve_metrics``, ``stormwatch web --metrics``): it is served without a login, for a scraper.

"Now" is the alert engine's clock as it recorded it in the work-order state
(:meth:`stormwatch.alerts.workorders.EngineClock.reader_clock`): the wall clock for a live
service, the simulated time a demo reached (``wall_time=True`` reads a demo's state at today's
date). Acknowledgements and completions are stamped with the same clock, so due times and the
times people acted compare in one time base.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import jinja2
from markupsafe import Markup
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from stormwatch.alerts.rules import parse_occurrence
from stormwatch.alerts.rules.registry import EvidenceChart, rule_kinds
from stormwatch.alerts.workorders import WorkOrder, WorkOrderError, WorkOrders
from stormwatch.clock import Clock, WallClock
from stormwatch.config import SiteConfig
from stormwatch.contract import MANUAL_GATEWAY, MANUAL_QUANTITIES
from stormwatch.display import LocalTimeError, amount, local_instant, local_time
from stormwatch.importers.manual import (
    ManualEntry,
    ManualEntryError,
    Recorded,
    check_sample_place,
    sample_places,
)
from stormwatch.numbers import NumberError, parse_float
from stormwatch.resources import builtin_dir
from stormwatch.stores.base import OverviewStore, StoreError
from stormwatch.web import charts
from stormwatch.web.accounts import Accounts, Session, User, can_act, can_verify, can_view, visible_sites
from stormwatch.web.excerpts import excerpt
from stormwatch.web.forms import read_form
from stormwatch.web.overview import GatewayStatus, PointSeries, SiteModel, portfolio, site_series
from stormwatch.web.photos import DEFAULT_MAX_BYTES, PhotoError, check_photo, size_text

log = logging.getLogger(__name__)

SESSION_COOKIE = "stormwatch_session"
LOGIN_CSRF_COOKIE = "stormwatch_login_csrf"

#: Site page windows (hours): the default and the bounds a query may ask.
DEFAULT_HOURS, MIN_HOURS, MAX_HOURS = 48, 6, 336

class EngineTime:
    """A :class:`~stormwatch.clock.Clock` that reads the alert engine's recorded clock at each call.

    Args:
        book: the work-order book whose ``engine_clock`` table says which clock the engine runs on.
        wall_time: use the wall clock whatever the engine recorded.
    """

    def __init__(self, book: WorkOrders, wall_time: bool = False) -> None:
        self.book = book
        self.wall_time = wall_time

    def current(self) -> tuple[Clock, str]:
        """The clock to use now and a few words saying which it is."""
        recorded = self.book.engine_clock()
        if recorded is None:
            return WallClock(), "wall-clock time (no alert engine has recorded its clock here)"
        return recorded.reader_clock(self.wall_time)

    def now(self) -> datetime:
        return self.current()[0].now()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(seconds)


@dataclass
class DeskMetrics:
    """Prometheus metrics of the web process (its own registry, exposed on ``/metrics``)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.render_s = Histogram("stormwatch_web_render_seconds", "Page render time", ["page"],
                                  registry=self.registry)
        self.denied = Counter("stormwatch_web_denied_total", "Requests refused (403) by per-site authorization",
                              registry=self.registry)


@dataclass
class Desk:
    """What the application serves: sites, store, work-order book, accounts.

    Attributes:
        sites: the site models by id.
        store: the readings store (shared with ingest; read here).
        book: the alert service's work-order book (``alerts.db``).
        accounts: users and sessions (``web.db``).
        max_photo_bytes: upload limit of a photo.
        secure_cookies: mark cookies ``Secure`` (behind HTTPS).
        gateways: the last gateway statuses, if a broker is watched (``(site, gateway)`` →
            status), else ``None``.
        record: how the site page's manual field readings are recorded.
        serve_metrics: serve ``/metrics`` (Prometheus text, without a login: a scraper has no session);
            off by default, so a desk on a network answers nothing to a stranger but its login page.
    """

    sites: dict[str, SiteModel]
    store: OverviewStore
    book: WorkOrders
    accounts: Accounts
    clock: EngineTime
    max_photo_bytes: int = DEFAULT_MAX_BYTES
    secure_cookies: bool = False
    gateways: Callable[[], dict[tuple[str, str], GatewayStatus]] | None = None
    metrics: DeskMetrics = field(default_factory=DeskMetrics)
    extra_metrics: list[CollectorRegistry] = field(default_factory=list)
    #: records a manual field reading of a site (:func:`stormwatch.importers.manual.record_manual`: into
    #: the store, or published to the broker); ``None``: the desk takes no readings
    record: Callable[[ManualEntry, SiteConfig], Recorded] | None = None
    serve_metrics: bool = False


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(builtin_dir("stormwatch.web", "templates"))),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["local"] = lambda t, tz=None: local_time(t, tz)
    env.filters["kind"] = lambda k: str(k).replace("_", " ")
    return Jinja2Templates(env=env)


#: At most this many zones in the portfolio's "Now" line (more: UTC, and a note).
MAX_NOW_ZONES = 6


def now_zones(zones: list[str], now: datetime) -> list[str]:
    """The zones the portfolio shows "Now" in: every zone of the sites on it (an SMO watching sites
    in several zones reads each site's due times in that site's zone), west to east; ``UTC`` alone
    when there are none or more than :data:`MAX_NOW_ZONES`."""
    distinct = sorted(set(zones), key=lambda z: (now.astimezone(ZoneInfo(z)).utcoffset() or timedelta(0), z))
    return distinct if 0 < len(distinct) <= MAX_NOW_ZONES else ["UTC"]


class Forbidden(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(403, detail)


def create_app(desk: Desk) -> Starlette:
    """The ASGI application serving ``desk``."""
    templates = _templates()

    def render(request: Request, name: str, ctx: dict[str, Any], status: int = 200) -> HTMLResponse:
        session: Session | None = request.state.session if hasattr(request.state, "session") else None
        base = {"user": session.user if session else None, "csrf": session.csrf if session else "",
                "now": desk.clock.now(), "clock_note": desk.clock.current()[1]}
        return templates.TemplateResponse(request, name, {**base, **ctx}, status_code=status)

    # -- sessions and CSRF -----------------------------------------------------------------

    def current(request: Request) -> Session | None:
        token = request.cookies.get(SESSION_COOKIE)
        return desk.accounts.session(token) if token else None

    def login_redirect(request: Request, expired: bool) -> RedirectResponse:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        url = f"/login?next={quote(target)}" + ("&expired=1" if expired else "")
        return RedirectResponse(url, status_code=303)

    Handler = Callable[[Request, Session], Awaitable[Response]]

    def page(handler: Handler, *, post: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = current(request)
            if session is None:
                had_cookie = SESSION_COOKIE in request.cookies
                if request.headers.get("HX-Request"):
                    return Response(status_code=401, headers={"HX-Redirect": "/login?expired=1"})
                response = login_redirect(request, had_cookie)
                if had_cookie:
                    response.delete_cookie(SESSION_COOKIE)
                return response
            request.state.session = session
            if post:
                form = await read_form(request, max_files=8, max_fields=20)
                request.state.form = form
                sent = request.headers.get("X-CSRF-Token") or str(form.get("csrf_token") or "")
                if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                    log.warning("refused a POST to %s by %s without a valid CSRF token", request.url.path,
                                session.user.name)
                    return render(request, "error.html", {"title": "Refused", "message":
                                  "This form is out of date or did not come from this site (missing CSRF token). "
                                  "Go back, reload the page and try again."}, 403)
            try:
                return await handler(request, session)
            except Forbidden as exc:
                desk.metrics.denied.inc()
                log.warning("%s denied %s %s: %s", session.user.name, request.method, request.url.path, exc.detail)
                return render(request, "error.html", {"title": "Not allowed", "message": exc.detail}, 403)
            except HTTPException as exc:
                return render(request, "error.html", {"title": "Not found" if exc.status_code == 404 else "Error",
                                                      "message": exc.detail}, exc.status_code)
            except StoreError as exc:
                log.error("%s %s: the readings store did not answer: %s", request.method, request.url.path, exc)
                return render(request, "error.html", {"title": "Store unavailable", "message":
                              "The readings store did not answer; try again in a minute. "
                              "(The server's log has the details.)"}, 503)
        return endpoint

    # -- login -----------------------------------------------------------------------------

    async def login_form(request: Request) -> Response:
        token = request.cookies.get(LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(24)
        message = "Your session has ended; log in again." if request.query_params.get("expired") else ""
        response = templates.TemplateResponse(request, "login.html", {
            "user": None, "csrf": token, "message": message, "next": request.query_params.get("next", "/"),
            "now": None, "clock_note": ""})
        response.set_cookie(LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict", secure=desk.secure_cookies)
        return response

    async def login(request: Request) -> Response:
        form = await read_form(request, max_files=0, max_fields=5)
        token = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        sent = str(form.get("csrf_token") or "")
        target = str(form.get("next") or "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"
        if not token or not hmac.compare_digest(sent.encode(), token.encode()):
            return templates.TemplateResponse(request, "login.html", {
                "user": None, "csrf": token, "next": target, "now": None, "clock_note": "",
                "message": "The login form was out of date (missing CSRF token); try again."}, status_code=403)
        user = desk.accounts.authenticate(str(form.get("username") or ""), str(form.get("password") or ""))
        if user is None:
            log.warning("failed login for %r from %s", str(form.get("username") or ""),
                        request.client.host if request.client else "?")
            return templates.TemplateResponse(request, "login.html", {
                "user": None, "csrf": token, "next": target, "now": None, "clock_note": "",
                "message": "Unknown user name or wrong password."}, status_code=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, desk.accounts.start_session(user), httponly=True, samesite="lax",
                            secure=desk.secure_cookies)
        response.delete_cookie(LOGIN_CSRF_COOKIE)
        log.info("%s (%s) logged in", user.name, user.role)
        return response

    async def logout(request: Request, session: Session) -> Response:
        desk.accounts.end_session(request.cookies.get(SESSION_COOKIE, ""))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response

    # -- pages -----------------------------------------------------------------------------

    def site_of(user: User, site_id: str) -> SiteModel:
        site = desk.sites.get(site_id)
        if site is None:
            raise HTTPException(404, f"no site {site_id!r}")
        if not can_view(user, site_id):
            raise Forbidden(f"site {site_id} is not one of your sites")
        return site

    def order_of(user: User, oid: str) -> WorkOrder:
        try:
            order = desk.book.get(oid)
        except WorkOrderError:
            raise HTTPException(404, f"no work order {oid!r}") from None
        if not can_view(user, order.site):
            raise Forbidden(f"work order {oid} belongs to site {order.site}, which is not one of your sites")
        return order

    async def home(request: Request, session: Session) -> Response:
        t0 = time.perf_counter()
        now = desk.clock.now()
        ids = visible_sites(session.user, list(desk.sites))
        week = now - timedelta(days=7)
        # the orders not completed and those completed in the last week: what the page shows (an
        # index-backed query, not the whole book of every year)
        orders = desk.book.current(ids, completed_since=week)
        result = portfolio([desk.sites[i] for i in ids], desk.store, orders, now,
                           clock_note=desk.clock.current()[1], gateways=desk.gateways() if desk.gateways else None)
        name = "_portfolio_table.html" if request.headers.get("HX-Request") else "portfolio.html"
        recent = [o for o in orders if o.status != "completed" or (o.completed_at and o.completed_at >= week)]
        recent.sort(key=lambda o: (o.status == "completed", o.due_at or o.event_time))
        response = render(request, name, {"portfolio": result, "recent_orders": recent,
                                          "now_zones": now_zones([desk.sites[i].cfg.site.timezone for i in ids], now)})
        desk.metrics.render_s.labels("portfolio").observe(time.perf_counter() - t0)
        return response

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
        return site_response(request, session)

    def site_response(request: Request, session: Session, message: str = "", status: int = 200,
                      form: dict[str, str] | None = None) -> Response:
        t0 = time.perf_counter()
        site = site_of(session.user, request.path_params["site"])
        now = desk.clock.now()
        tz = ZoneInfo(site.cfg.site.timezone)
        start, end, hours, until = window(request, now, tz)
        readings = desk.store.query_readings(site.id, start, end)
        series = site_series(site, readings, desk.store.query_site_events(start, end, [site.id]), start, end)
        orders = desk.book.current([site.id], completed_since=start)  # not completed, or since the window's start
        response = render(request, "site.html", {
            "site": site, "series": series, "hours": hours, "until": until, "window_start": start,
            "orders": orders,
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

    async def add_reading(request: Request, session: Session) -> Response:
        site = site_of(session.user, request.path_params["site"])
        if not can_act(session.user, site.id):
            raise Forbidden(f"only an inspector assigned to site {site.id} may enter field readings")
        if desk.record is None:
            raise HTTPException(404, "this desk takes no field readings")
        form = {k: str(request.state.form.get(k) or "").strip()
                for k in ("point", "sampled_at", "transparency", "turbidity", "ph")}
        try:
            entry = manual_entry(site.cfg, form, session.user.display_name)
            recorded = desk.record(entry, site.cfg)
        except (ManualEntryError, ValueError) as exc:
            return site_response(request, session, f"Not recorded: {exc}", 400, form)
        except StoreError as exc:
            return site_response(request, session, f"Not recorded, the store failed: {exc}. Enter it again "
                                 "(it is recorded once).", 503, form)
        if recorded.conflicts:  # a second value for a sample already recorded: refused, the first kept
            refused = "; ".join(f"{c.reading.quantity} {amount(c.reading.value, c.reading.unit)}: this sample is "
                                f"already recorded as {amount(c.stored_value, c.stored_unit)}, which is kept"
                                for c in recorded.conflicts)
            return site_response(request, session, f"Not recorded (conflicting_value): {refused}. A mistyped "
                                 "entry is corrected with `stormwatch readings add --correct`.", 409, form)
        return RedirectResponse(f"/sites/{site.id}?done=reading", status_code=303)

    def evidence_of(order: WorkOrder) -> tuple[EvidenceChart | None, str | None]:
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

    def order_context(session: Session, order: WorkOrder) -> dict[str, Any]:
        now = desk.clock.now()
        site = desk.sites.get(order.site)
        tz = order.timezone or (site.cfg.site.timezone if site else "UTC")
        chart = None
        if site is not None:
            start = order.event_time - timedelta(hours=12)
            for item in order.evidence:
                if "time" in item:
                    start = min(start, parse_time(str(item["time"])) - timedelta(hours=1))
            end = min(max(order.due_at or order.event_time, order.event_time + timedelta(hours=6)), now)
            end = max(end, start + timedelta(hours=6)) + timedelta(microseconds=1)
            series = site_series(site, desk.store.query_readings(site.id, start, end), [], start, end)
            which, key = evidence_of(order)
            point, basin = series.point(key), series.basin(key)
            if which == "rain" and site.cfg.rain_gauge:
                chart = charts.rain_chart(site, series, now)
            elif which == "turbidity" and point is not None:
                chart = charts.turbidity_chart(site, series, point, now)
            elif which == "basin" and basin is not None:
                chart = charts.basin_chart(site, series, basin, now)
        history = desk.book.history(order.id)
        verified = [c for c in history if c.action == "verified"]
        return {"order": order, "site": site, "tz": tz, "excerpt": excerpt(order.citation),
                "history": history, "photos": desk.book.photos(order.id), "chart": chart,
                "overdue": order.is_overdue(now), "verified": verified[-1] if verified else None,
                "evidence_rows": _evidence_rows(order, tz), "can_act": can_act(session.user, order.site),
                "can_verify": can_verify(session.user, order.site), "max_photo": size_text(desk.max_photo_bytes)}

    async def order_page(request: Request, session: Session) -> Response:
        t0 = time.perf_counter()
        order = order_of(session.user, request.path_params["oid"])
        ctx = order_context(session, order)
        ctx["message"] = {"acknowledged": "Acknowledged.", "completed": "Completed.", "photo": "Photo attached.",
                          "verified": "Verified."}.get(request.query_params.get("done", ""), "")
        response = render(request, "order.html", ctx)
        desk.metrics.render_s.labels("order").observe(time.perf_counter() - t0)
        return response

    async def order_print(request: Request, session: Session) -> Response:
        order = order_of(session.user, request.path_params["oid"])
        return render(request, "order_print.html", order_context(session, order))

    async def photo_file(request: Request, session: Session) -> Response:
        order = order_of(session.user, request.path_params["oid"])
        try:
            photo = desk.book.photo(order.id, int(request.path_params["seq"]))
        except WorkOrderError as exc:
            raise HTTPException(404, str(exc)) from None
        return Response(photo.data, media_type=photo.content_type, headers={
            "Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff",
            "Content-Disposition": f'inline; filename="{quote(photo.filename)}"'})

    # -- actions ---------------------------------------------------------------------------

    def refuse(request: Request, session: Session, order: WorkOrder, message: str, status: int) -> Response:
        ctx = order_context(session, order)
        ctx["error"] = message
        ctx["message"] = ""
        return render(request, "order.html", ctx, status)

    async def read_photos(request: Request, session: Session,
                          order: WorkOrder) -> list[tuple[str, bytes, str]] | Response:
        out = []
        for item in request.state.form.getlist("photo"):
            if not isinstance(item, UploadFile) or not item.filename:
                continue
            data = await item.read(desk.max_photo_bytes + 1)
            try:
                checked = check_photo(data, item.filename, desk.max_photo_bytes)
            except PhotoError as exc:
                status = 413 if len(data) > desk.max_photo_bytes else 415
                return refuse(request, session, order, f"Photo refused: {exc}.", status)
            out.append((item.filename, checked.data, checked.content_type))
        return out

    def acting(session: Session, oid: str) -> WorkOrder:
        order = order_of(session.user, oid)
        if not can_act(session.user, order.site):
            raise Forbidden(f"only an inspector assigned to site {order.site} may change work order {oid}")
        return order

    async def acknowledge(request: Request, session: Session) -> Response:
        order = acting(session, request.path_params["oid"])
        try:
            desk.book.acknowledge(order.id, session.user.display_name, str(request.state.form.get("notes") or ""))
        except WorkOrderError as exc:
            return refuse(request, session, order, str(exc), 409)
        return RedirectResponse(f"/orders/{order.id}?done=acknowledged", status_code=303)

    async def complete(request: Request, session: Session) -> Response:
        order = acting(session, request.path_params["oid"])
        photos = await read_photos(request, session, order)
        if isinstance(photos, Response):
            return photos
        notes = str(request.state.form.get("notes") or "")
        if not notes.strip():
            return refuse(request, session, order, "Write what was inspected, found and done before completing.", 400)
        try:
            for name, data, ctype in photos:
                desk.book.attach_photo(order.id, session.user.display_name, name, ctype, data)
            desk.book.complete(order.id, session.user.display_name, notes)
        except WorkOrderError as exc:
            return refuse(request, session, order, str(exc), 409)
        return RedirectResponse(f"/orders/{order.id}?done=completed", status_code=303)

    async def add_photo(request: Request, session: Session) -> Response:
        order = acting(session, request.path_params["oid"])
        photos = await read_photos(request, session, order)
        if isinstance(photos, Response):
            return photos
        if not photos:
            return refuse(request, session, order, "Choose a photo to upload.", 400)
        for name, data, ctype in photos:
            desk.book.attach_photo(order.id, session.user.display_name, name, ctype, data)
        return RedirectResponse(f"/orders/{order.id}?done=photo", status_code=303)

    async def verify(request: Request, session: Session) -> Response:
        order = order_of(session.user, request.path_params["oid"])
        if not can_verify(session.user, order.site):
            raise Forbidden("only the SMO may verify a completed inspection")
        try:
            desk.book.verify(order.id, session.user.display_name, str(request.state.form.get("notes") or ""))
        except WorkOrderError as exc:
            return refuse(request, session, order, str(exc), 409)
        return RedirectResponse(f"/orders/{order.id}?done=verified", status_code=303)

    async def metrics(request: Request) -> Response:
        body = b"".join(generate_latest(r) for r in [desk.metrics.registry, *desk.extra_metrics])
        return Response(body, media_type="text/plain; version=0.0.4")

    async def upload_limit(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if request.method == "POST" and length and length.isdigit() and \
                int(length) > 8 * desk.max_photo_bytes + 1_048_576:
            return HTMLResponse(f"<p>Request too large: at most {size_text(desk.max_photo_bytes)} per photo.</p>",
                                status_code=413)
        response = await call_next(request)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    routes = [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", page(logout, post=True), methods=["POST"]),
        Route("/", page(home), methods=["GET"]),
        Route("/sites/{site}", page(site_page), methods=["GET"]),
        Route("/sites/{site}/readings", page(add_reading, post=True), methods=["POST"]),
        Route("/orders/{oid}", page(order_page), methods=["GET"]),
        Route("/orders/{oid}/print", page(order_print), methods=["GET"]),
        Route("/orders/{oid}/photos/{seq:int}", page(photo_file), methods=["GET"]),
        Route("/orders/{oid}/acknowledge", page(acknowledge, post=True), methods=["POST"]),
        Route("/orders/{oid}/complete", page(complete, post=True), methods=["POST"]),
        Route("/orders/{oid}/photos", page(add_photo, post=True), methods=["POST"]),
        Route("/orders/{oid}/verify", page(verify, post=True), methods=["POST"]),
        *([Route("/metrics", metrics, methods=["GET"])] if desk.serve_metrics else []),
        Mount("/static", StaticFiles(directory=str(builtin_dir("stormwatch.web", "static"))), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=upload_limit)])
    app.state.desk = desk
    return app


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


def _evidence_rows(order: WorkOrder, tz: str) -> list[dict[str, str]]:
    """The evidence of an order as rows of text (time in the site's zone, what, value)."""

    def when(key: str, item: dict[str, Any]) -> str:
        return local_time(parse_time(str(item[key])), tz) if item.get(key) else "-"

    rows = []
    for item in order.evidence:
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


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def state_paths(state_dir: Path) -> tuple[Path, Path]:
    """``(alerts.db, web.db)`` of a state directory."""
    return state_dir / "alerts.db", state_dir / "web.db"
