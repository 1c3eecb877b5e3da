"""The portfolio page (``/``): each site the user may see, its state now, the open orders and those
completed in the last week; htmx refreshes its table in place every minute. The state itself is
computed by :func:`stormwatch.web.overview.portfolio`. Design: docs/web.md.
"""

from __future__ import annotations

import time
from datetime import timedelta

from starlette.requests import Request
from starlette.responses import Response

from stormwatch.web.accounts import Session, visible_sites
from stormwatch.web.desk import desk_of
from stormwatch.web.enforcement import banners
from stormwatch.web.overview import portfolio
from stormwatch.web.pages import now_zones, render


async def home(request: Request, session: Session) -> Response:
    """``GET /``: the portfolio (its table alone to an htmx refresh)."""
    desk = desk_of(request)
    t0 = time.perf_counter()
    now = desk.clock.now()
    ids = visible_sites(session.user, list(desk.sites))
    week = now - timedelta(days=7)
    # the orders not completed and those completed in the last week: what the page shows (an
    # index-backed query, not the whole book of every year)
    orders = desk.book.current(ids, completed_since=week)
    result = portfolio([desk.sites[i] for i in ids], desk.store, orders, now,
                       clock_note=desk.clock.current()[1], gateways=desk.gateways() if desk.gateways else None,
                       run=desk.clock.run())
    name = "_portfolio_table.html" if request.headers.get("HX-Request") else "portfolio.html"
    recent = [o for o in orders if o.status != "completed" or (o.completed_at and o.completed_at >= week)]
    recent.sort(key=lambda o: (o.status == "completed", o.due_at or o.event_time))
    response = render(request, name, {"portfolio": result, "recent_orders": recent,
                                      "enforcement": banners(desk, session.user, ids),
                                      "now_zones": now_zones([desk.sites[i].cfg.site.timezone for i in ids], now)})
    desk.metrics.render_s.labels("portfolio").observe(time.perf_counter() - t0)
    return response
