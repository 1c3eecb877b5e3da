"""The web application: Starlette + Jinja2 templates, htmx for small interactions, no build step.

Pages (every one needs a session; every one checks the user's right to the site on the server):

* ``/`` -- the portfolio (:mod:`stormwatch.web.portfolio`): each visible site's state now;
  refreshed in place every minute by htmx.
* ``/sites/{site}?hours=N`` -- timeline and charts of the last N hours (:mod:`stormwatch.web.sites`).
* ``/orders/{id}`` -- a work order, ``/orders/{id}/print`` the same on paper (:mod:`stormwatch.web.orders`);
  ``POST /orders/{id}/acknowledge|complete|photos|verify`` -- the actions (:mod:`stormwatch.web.order_actions`),
  each with the session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``).
* ``/lockouts``, ``POST /lockouts/unlock`` -- the SMO's page of login lockouts (:mod:`stormwatch.web.lockouts`).
* ``/enforcement``, ``/enforcement/{case}`` and their actions -- the SMO's enforcement cases
  (:mod:`stormwatch.web.enforcement`; docs/enforcement.md).
* ``/login``, ``POST /logout`` (:mod:`stormwatch.web.login`); ``/metrics`` (Prometheus text), only when
  asked (``Desk.serve_metrics``): served without a login, for a scraper.

Handlers live at module level in those modules and read the :class:`~stormwatch.web.desk.Desk` from
``request.app.state``; :func:`stormwatch.web.pages.page` gives each its session. "Now" is the alert
engine's clock as recorded in the work-order state (:class:`~stormwatch.web.desk.EngineTime`). Design: docs/web.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from stormwatch.resources import builtin_dir
from stormwatch.web import enforcement, lockouts, login, order_actions, orders, portfolio, sites
from stormwatch.web.desk import Desk, desk_of
from stormwatch.web.pages import page
from stormwatch.web.photos import size_text

#: Every route of the desk; ``page(...)``: a logged-in user's, ``post=True``: with the session's CSRF token.
ROUTES: list[BaseRoute] = [
    Route("/login", login.login_form, methods=["GET"]),
    Route("/login", login.login, methods=["POST"]),
    Route("/logout", page(login.logout, post=True), methods=["POST"]),
    Route("/", page(portfolio.home), methods=["GET"]),
    Route("/sites/{site}", page(sites.site_page), methods=["GET"]),
    Route("/sites/{site}/readings", page(sites.add_reading, post=True), methods=["POST"]),
    Route("/orders/{oid}", page(orders.order_page), methods=["GET"]),
    Route("/orders/{oid}/print", page(orders.order_print), methods=["GET"]),
    Route("/orders/{oid}/photos/{seq:int}", page(orders.photo_file), methods=["GET"]),
    Route("/orders/{oid}/acknowledge", page(order_actions.acknowledge, post=True), methods=["POST"]),
    Route("/orders/{oid}/complete", page(order_actions.complete, post=True), methods=["POST"]),
    Route("/orders/{oid}/photos", page(order_actions.add_photo, post=True), methods=["POST"]),
    Route("/orders/{oid}/verify", page(order_actions.verify, post=True), methods=["POST"]),
    Route("/lockouts", page(lockouts.lockouts_page), methods=["GET"]),
    Route("/lockouts/unlock", page(lockouts.unlock, post=True), methods=["POST"]),
    *enforcement.ROUTES,
]


async def metrics(request: Request) -> Response:
    """``GET /metrics``: the desk's Prometheus metrics and those joined to it (the notifier's)."""
    desk = desk_of(request)
    body = b"".join(generate_latest(r) for r in [desk.metrics.registry, *desk.extra_metrics])
    return Response(body, media_type="text/plain; version=0.0.4")


async def upload_limit(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Refuse a POST larger than 8 photos and a form before reading it; frame and referrer headers on every answer."""
    max_photo = desk_of(request).max_photo_bytes
    length = request.headers.get("content-length")
    if request.method == "POST" and length and length.isdigit() and int(length) > 8 * max_photo + 1_048_576:
        return HTMLResponse(f"<p>Request too large: at most {size_text(max_photo)} per photo.</p>", status_code=413)
    response = await call_next(request)
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def create_app(desk: Desk) -> Starlette:
    """The ASGI application serving ``desk`` (kept as ``app.state.desk``)."""
    routes = [*ROUTES, *([Route("/metrics", metrics, methods=["GET"])] if desk.serve_metrics else []),
              Mount("/static", StaticFiles(directory=str(builtin_dir("stormwatch.web", "static"))), name="static")]
    app = Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=upload_limit)])
    app.state.desk = desk
    return app
