"""Assemble the web desk from command-line settings and serve it with uvicorn.

:func:`open_desk` opens the store, the work-order book and the accounts of a state directory and
loads the site files; :class:`WebServer` runs uvicorn in a thread (``stormwatch demo --web``, the
browser tests) or in the foreground (``stormwatch web``).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import uvicorn

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import WallClock
from stormwatch.config import SiteConfig
from stormwatch.enforcement.cases import CASES_FILE, EnforcementBook
from stormwatch.importers.manual import ManualEntry, Recorded, record_manual
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.runtime.sitedir import SiteChanges, SiteDirectory
from stormwatch.stores.base import OverviewStore
from stormwatch.stores.urls import open_store, redact
from stormwatch.web.accounts import Accounts
from stormwatch.web.app import create_app
from stormwatch.web.desk import Desk, EngineTime
from stormwatch.web.notify import Notifier, SmtpSettings
from stormwatch.web.overview import SiteModel, load_sites, site_model
from stormwatch.web.photos import DEFAULT_MAX_BYTES

log = logging.getLogger(__name__)

#: The files of a state directory the desk uses.
ALERTS_FILE = "alerts.db"
WEB_FILE = "web.db"


class DeskSetupError(ValueError):
    """Settings the desk cannot start with (one line for the user)."""


@dataclass(frozen=True)
class DeskSettings:
    """What ``stormwatch web`` is told: site files, store URL, state directory and limits."""

    sites: Sequence[Path]
    store_url: str
    state_dir: Path
    wall_time: bool = False
    max_photo_bytes: int = DEFAULT_MAX_BYTES
    secure_cookies: bool = False
    idle_minutes: float = 480.0
    create_store: bool = False
    sites_dir: Path | None = None
    #: where the site page's manual field readings go: published to this broker (the live path), else
    #: written to the store
    manual_broker: BrokerSettings | None = None
    #: serve ``/metrics`` (Prometheus text, without a login; ``stormwatch web --metrics``)
    metrics: bool = False
    #: a simulated run about to start (``demo --web``): its first instant (:class:`EngineTime`)
    starting: datetime | None = None


def open_desk(settings: DeskSettings, profiles: ProfileLibrary | None = None) -> Desk:
    """Open everything the application reads and writes.

    Raises:
        DeskSetupError: a bad site file, a store that cannot summarise many sites, an unusable state file.
    """
    from stormwatch.alerts.workorders import WorkOrderError
    from stormwatch.enforcement.actions import CaseError
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError
    from stormwatch.web.accounts import AccountError
    from stormwatch.web.overview import SiteSetupError

    profiles = profiles or ProfileLibrary()
    try:
        sites = load_sites(settings.sites, profiles)
    except SiteSetupError as exc:
        raise DeskSetupError(str(exc)) from None
    fixed = set(sites)  # --site files: loaded once
    directory = None
    if settings.sites_dir is not None:
        directory = _site_directory(settings.sites_dir, profiles)
        sites = {**_models(directory, directory.sites, profiles), **sites}  # a --site file wins over the directory
    try:  # the desk reads what the services stored: a store that is not there is refused, never created
        store = open_store(settings.store_url, existing=not settings.create_store)
    except (StoreUrlError, StoreError) as exc:
        raise DeskSetupError(f"--store {redact(settings.store_url)}: {exc}") from None
    if not all(hasattr(store, m) for m in ("summarize", "query_tips", "query_site_events")):
        store.close()
        raise DeskSetupError(f"--store {redact(settings.store_url)}: this store cannot answer many sites in one "
                             "query (use sqlite://, influx1:// or influx2://)")
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        book = WorkOrders(settings.state_dir / ALERTS_FILE, WallClock())
        accounts = Accounts(settings.state_dir / WEB_FILE, idle_minutes=settings.idle_minutes)
        clock = EngineTime(book, settings.wall_time, settings.starting)
        cases = EnforcementBook(settings.state_dir / CASES_FILE, clock)
    except (WorkOrderError, AccountError, CaseError) as exc:
        store.close()
        raise DeskSetupError(str(exc)) from None
    book.clock = clock
    desk = Desk(sites=sites, store=cast(OverviewStore, store), book=book, accounts=accounts, clock=clock,
                max_photo_bytes=settings.max_photo_bytes, secure_cookies=settings.secure_cookies,
                serve_metrics=settings.metrics, cases=cases)
    broker = settings.manual_broker

    def record(entry: ManualEntry, cfg: SiteConfig) -> Recorded:
        if broker is not None:
            return record_manual(entry, cfg, profiles, clock, broker=broker)
        return record_manual(entry, cfg, profiles, clock, store=store)

    desk.record = record
    if directory is not None:
        directory.watch(lambda changes: _follow(desk, directory, changes, fixed, profiles), threading.Event())
    return desk


def _site_directory(path: Path, profiles: ProfileLibrary) -> SiteDirectory:
    """The ``--sites`` directory, loaded (a broken file is refused and logged; the desk shows the others).

    Raises:
        DeskSetupError: ``path`` is not a directory.
    """
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.errors import InputError

    directory = SiteDirectory(path, lambda p: load_site_file(p, profiles))
    try:
        directory.load()
    except InputError as exc:
        raise DeskSetupError(str(exc)) from None
    return directory


def _models(directory: SiteDirectory, configs: dict[str, SiteConfig], profiles: ProfileLibrary) -> dict[str, SiteModel]:
    from stormwatch.web.overview import SiteSetupError

    out: dict[str, SiteModel] = {}
    for sid, cfg in configs.items():
        try:
            out[sid] = site_model(cfg, profiles, str(directory.path_of(sid)))
        except SiteSetupError as exc:
            log.error("%s: %s; not shown", directory.path_of(sid), exc)
    return out


def _follow(desk: Desk, directory: SiteDirectory, changes: SiteChanges, fixed: set[str],
            profiles: ProfileLibrary) -> None:
    """Apply a change of the ``--sites`` directory to the desk's sites (in place: the notifier shares the dict)."""
    for sid in changes.removed:
        if sid not in fixed:
            desk.sites.pop(sid, None)
    updated = _models(directory, {c.site.id: c for c in [*changes.added, *changes.changed] if c.site.id not in fixed},
                      profiles)
    desk.sites.update(updated)


def start_notifier(desk: Desk, state_dir: Path, smtp_url: str, sender: str, *, ca_file: Path | None = None,
                   password_file: Path | None = None,
                   due_soon_hours: float = 6.0, base_url: str = "", interval_s: float = 30.0) -> Notifier:
    """Start the e-mail notifier of ``desk`` in a background thread (its metrics join ``/metrics``).

    Raises:
        SmtpUrlError: a bad ``smtp_url``.
    """
    settings = SmtpSettings.from_url(smtp_url, sender, ca_file=str(ca_file) if ca_file else None,
                                     password_file=password_file)
    book = WorkOrders(state_dir / ALERTS_FILE, WallClock())  # its own connections: used from another thread
    cases = EnforcementBook(state_dir / CASES_FILE, desk.clock)
    notifier = Notifier(book, desk.sites, state_dir / WEB_FILE, settings, desk.clock.now,
                        due_soon=timedelta(hours=due_soon_hours), base_url=base_url, cases=cases)
    desk.extra_metrics.append(notifier.metrics.registry)
    threading.Thread(target=notifier.run, args=(interval_s,), name="notify", daemon=True).start()
    return notifier


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class WebServer:
    """uvicorn serving a desk on ``host:port``.

    Args:
        desk: what to serve.
        host, port: where (port 0: a free port, see :attr:`url`).
        sock: a socket already listening there, served instead of binding again.
    """

    def __init__(self, desk: Desk, host: str = "127.0.0.1", port: int = 8080,
                 sock: socket.socket | None = None) -> None:
        self.desk = desk
        self.host = host
        self.sock = sock  # already listening (stormwatch.runtime.cliutil.listen_socket): its port wins
        self.port = int(sock.getsockname()[1]) if sock is not None else port or free_port(host)
        config = uvicorn.Config(create_app(desk), host=host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off", server_header=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def serve(self) -> None:
        """Serve in the foreground until interrupted (Ctrl-C / SIGTERM)."""
        self.server.run(sockets=[self.sock] if self.sock is not None else None)

    def start(self, timeout_s: float = 15.0) -> None:
        """Serve in a background thread; returns once it accepts connections.

        Raises:
            RuntimeError: it did not start within ``timeout_s``.
        """
        self._thread = threading.Thread(target=self.serve, name="web", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the web desk did not start on {self.url}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def close(self) -> None:
        """Stop serving and close the store, book and accounts."""
        self.stop()
        self.desk.store.close()
        self.desk.book.close()
        self.desk.accounts.close()
        if self.desk.cases is not None:
            self.desk.cases.close()
