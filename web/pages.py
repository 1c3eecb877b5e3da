"""The frame every page of the web desk shares: templates and rendering, the session a page needs
(:func:`page` wraps a handler: log in first, a POST's CSRF token checked, refusals and errors
rendered as pages), and access to a site or a work order by the user's rights.

A handler is ``async def handler(request, session) -> Response`` at module level; it reads the
desk from ``request.app.state`` (:func:`stormwatch.web.desk.desk_of`). Design: docs/web.md.
"""

from __future__ import annotations

import functools
import hmac
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from stormwatch.alerts.workorders import WorkOrder, WorkOrderError
from stormwatch.display import duration, local_time
from stormwatch.resources import builtin_dir
from stormwatch.stores.base import StoreError
from stormwatch.web.accounts import Session, User, can_view, visible_sites
from stormwatch.web.desk import Desk, desk_of
from stormwatch.web.forms import read_form
from stormwatch.web.overview import SiteModel

log = logging.getLogger(__name__)

SESSION_COOKIE = "stormwatch_session"
LOGIN_CSRF_COOKIE = "stormwatch_login_csrf"

#: A page's handler: the request and the logged-in user's session.
Handler = Callable[[Request, Session], Awaitable[Response]]


@functools.cache
def templates() -> Jinja2Templates:
    """The desk's Jinja2 templates (package data; one environment per process)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(builtin_dir("stormwatch.web", "templates"))),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["local"] = lambda t, tz=None: local_time(t, tz)
    env.filters["duration"] = duration
    env.filters["kind"] = lambda k: str(k).replace("_", " ")
    return Jinja2Templates(env=env)


class Forbidden(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(403, detail)


#: The template of the refusal and error pages.
ERROR_PAGE = "error.html"
#: At most this many zones in a "Now" line (more: UTC).
MAX_NOW_ZONES = 6


def now_zones(zones: list[str], now: datetime) -> list[str]:
    """The zones a page without a site of its own (the portfolio, an error page) shows "Now" in:
    every zone of the user's sites (an SMO watching sites in several zones reads each site's due
    times in that site's zone), west to east; ``UTC`` alone when there are none or more than
    :data:`MAX_NOW_ZONES`."""
    distinct = sorted(set(zones), key=lambda z: (now.astimezone(ZoneInfo(z)).utcoffset() or timedelta(0), z))
    return distinct if 0 < len(distinct) <= MAX_NOW_ZONES else ["UTC"]


def render(request: Request, name: str, ctx: dict[str, Any], status: int = 200) -> HTMLResponse:
    """Template ``name`` with ``ctx`` and what every page shows (user, CSRF token, "Now" and its
    clock); an error page (403, 404, 400 ...) gives "Now" in its user's sites' zones."""
    desk = desk_of(request)
    session: Session | None = request.state.session if hasattr(request.state, "session") else None
    now = desk.clock.now()
    base: dict[str, Any] = {"user": session.user if session else None, "csrf": session.csrf if session else "",
                            "now": now, "clock_note": desk.clock.current()[1]}
    if name == ERROR_PAGE and "tz" not in ctx:
        ids = visible_sites(session.user, list(desk.sites)) if session else []
        base["now_zones"] = now_zones([desk.sites[i].cfg.site.timezone for i in ids], now)
    return templates().TemplateResponse(request, name, {**base, **ctx}, status_code=status)


def current(request: Request) -> Session | None:
    """The session of the request's cookie, if it is one still open."""
    token = request.cookies.get(SESSION_COOKIE)
    return desk_of(request).accounts.session(token) if token else None


def login_redirect(request: Request, expired: bool) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    url = f"/login?next={quote(target)}" + ("&expired=1" if expired else "")
    return RedirectResponse(url, status_code=303)


def _no_session(request: Request) -> Response:
    had_cookie = SESSION_COOKIE in request.cookies
    if request.headers.get("HX-Request"):
        return Response(status_code=401, headers={"HX-Redirect": "/login?expired=1"})
    response = login_redirect(request, had_cookie)
    if had_cookie:
        response.delete_cookie(SESSION_COOKIE)
    return response


async def _csrf_refusal(request: Request, session: Session) -> Response | None:
    """Read the POST's form into ``request.state.form``; a refusal page if its CSRF token is not the session's."""
    form = await read_form(request, max_files=8, max_fields=20)
    request.state.form = form
    sent = request.headers.get("X-CSRF-Token") or str(form.get("csrf_token") or "")
    if hmac.compare_digest(sent.encode(), session.csrf.encode()):
        return None
    log.warning("refused a POST to %s by %s without a valid CSRF token", request.url.path, session.user.name)
    return render(request, "error.html", {"title": "Refused", "message":
                  "This form is out of date or did not come from this site (missing CSRF token). "
                  "Go back, reload the page and try again."}, 403)


def page(handler: Handler, *, post: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint serving ``handler`` to a logged-in user (else to the login page); ``post``: a form
    with the session's CSRF token. A refusal (:class:`Forbidden`), a missing thing and a store that
    does not answer are rendered as error pages."""

    async def endpoint(request: Request) -> Response:
        session = current(request)
        if session is None:
            return _no_session(request)
        request.state.session = session
        if post and (refused := await _csrf_refusal(request, session)) is not None:
            return refused
        try:
            return await handler(request, session)
        except Forbidden as exc:
            desk_of(request).metrics.denied.inc()
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


def site_of(desk: Desk, user: User, site_id: str) -> SiteModel:
    """The site ``site_id`` if ``user`` may see it.

    Raises:
        HTTPException: 404, no such site.
        Forbidden: not one of the user's sites.
    """
    site = desk.sites.get(site_id)
    if site is None:
        raise HTTPException(404, f"no site {site_id!r}")
    if not can_view(user, site_id):
        raise Forbidden(f"site {site_id} is not one of your sites")
    return site


def order_of(desk: Desk, user: User, oid: str) -> WorkOrder:
    """The work order ``oid`` if ``user`` may see its site.

    Raises:
        HTTPException: 404, no such order.
        Forbidden: its site is not one of the user's sites.
    """
    try:
        order = desk.book.get(oid)
    except WorkOrderError:
        raise HTTPException(404, f"no work order {oid!r}") from None
    if not can_view(user, order.site):
        raise Forbidden(f"work order {oid} belongs to site {order.site}, which is not one of your sites")
    return order
