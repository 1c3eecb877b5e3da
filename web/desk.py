"""What the web desk serves, kept on the application as ``app.state.desk``: the sites, the readings
store, the work-order book, the accounts, the clock pages show "Now" by and the desk's own metrics.

Handlers read it with :func:`desk_of` (Starlette's ``request.app.state``); :func:`stormwatch.web.app.create_app`
puts it there. Design: docs/web.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.requests import Request

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import Clock, ManualClock, WallClock
from stormwatch.config import SiteConfig
from stormwatch.enforcement.cases import EnforcementBook
from stormwatch.importers.manual import ManualEntry, Recorded
from stormwatch.stores.base import OverviewStore
from stormwatch.web.accounts import Accounts
from stormwatch.web.overview import GatewayStatus, RunClock, SiteModel
from stormwatch.web.photos import DEFAULT_MAX_BYTES

#: What "Now" is on a demo's desk before its engine has recorded its clock.
STARTING = "the simulated run's start: its alert engine is starting"


class EngineTime:
    """A :class:`~stormwatch.clock.Clock` that reads the alert engine's recorded clock at each call.

    Args:
        book: the work-order book whose ``engine_clock`` table says which clock the engine runs on.
        wall_time: use the wall clock whatever the engine recorded.
        starting: the first instant of a simulated run about to start here (``stormwatch demo --web``):
            the time shown, and the start of every poll grid, until its engine records its clock.
    """

    def __init__(self, book: WorkOrders, wall_time: bool = False, starting: datetime | None = None) -> None:
        self.book = book
        self.wall_time = wall_time
        self.starting = None if wall_time else starting

    def current(self) -> tuple[Clock, str]:
        """The clock to use now and a few words saying which it is."""
        recorded = self.book.engine_clock()
        if recorded is None and self.starting is not None:
            return ManualClock(self.starting), STARTING
        if recorded is None:
            return WallClock(), "wall-clock time (no alert engine has recorded its clock here)"
        return recorded.reader_clock(self.wall_time)

    def now(self) -> datetime:
        return self.current()[0].now()

    def run(self) -> RunClock:
        """What the pages judge devices by: a simulated engine clock (running or stopped) and its
        run's start, or the wall clock's ``RunClock()``."""
        recorded = self.book.engine_clock()
        if recorded is None and self.starting is not None:
            return RunClock(simulated=True, start=self.starting, live=True)
        if recorded is None or self.wall_time or recorded.kind == "wall":
            return RunClock()
        return RunClock(simulated=True, start=recorded.run_start, live=not recorded.stopped,
                        watermark=self.book.watermark())

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
        cases: the SMO's enforcement cases (``enforcement.db``); ``None``: the desk keeps none.
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
    cases: EnforcementBook | None = None


def desk_of(request: Request) -> Desk:
    """The desk the application serving ``request`` was made with."""
    desk: Desk = request.app.state.desk
    return desk
