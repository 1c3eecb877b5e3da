"""``stormwatch alerts`` (the live service) and ``stormwatch workorders`` (list/show/ack/complete)."""

from __future__ import annotations

import json
import logging
import os
import signal
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import typer

from stormwatch.alerts.workorders import WorkOrder, WorkOrderError, WorkOrders
from stormwatch.cliutil import fail
from stormwatch.clock import Clock, ScenarioClock, WallClock

if TYPE_CHECKING:
    from stormwatch.config import SiteConfig
    from stormwatch.profiles import ProfileLibrary

log = logging.getLogger(__name__)

DEFAULT_STATE = "stormwatch-alerts.db"


def _load_site(path: Path, profiles: ProfileLibrary) -> SiteConfig:
    """The site file at ``path``, with its rule overrides checked against its pack here, so an
    error names the site file (docs/rules.md).

    Raises:
        stormwatch.config.ConfigError: an invalid site file.
        stormwatch.alerts.packs.PackError: an unknown pack, or an override naming an unknown rule or parameter.
    """
    from stormwatch.alerts.packs import load_pack
    from stormwatch.config import load_site

    cfg = load_site(path, profiles)
    load_pack(cfg.site.jurisdiction, cfg.rules, source=str(path))
    return cfg


def _clock() -> Clock:
    """The scenario clock when ``STORMWATCH_SIM_*`` is set (simulation), else the wall clock."""
    return ScenarioClock.from_env(dict(os.environ)) or WallClock()


def _line(o: WorkOrder) -> str:
    due = o.due_at.isoformat() if o.due_at else "-"
    return f"{o.id}  {o.status:<12} {o.site:<16} {o.kind:<20} due {due}  {o.citation}"


def alerts_cmd(
    site: list[Path] = typer.Option(..., "--site", help="site YAML file (repeat for several sites)"),
    broker: str = typer.Option("mqtt://127.0.0.1:1883", "--broker", envvar="STORMWATCH_BROKER"),
    store: str | None = typer.Option(None, "--store", envvar="STORMWATCH_STORE",
                                     help="store URL (sqlite:///path, influx1://..., influx2://...) for events"),
    state: Path = typer.Option(Path(DEFAULT_STATE), "--state", help="work-order SQLite file"),
    lateness_s: float = typer.Option(120.0, "--lateness-s", help="allowed lateness of readings (s)"),
    webhook: str | None = typer.Option(None, "--webhook", envvar="STORMWATCH_WEBHOOK",
                                       help="also POST every event (JSON) to this http(s) URL, with retries"),
    client_id: str = typer.Option("stormwatch-alerts", "--client-id"),
) -> None:
    """Watch sites live: readings from MQTT -> ordinance events (stormwatch/v1/<site>/events) + work orders.

    Events also go to the store (--store), a webhook (--webhook) and, when STORMWATCH_GRAFANA_URL and
    STORMWATCH_GRAFANA_TOKEN are set, Grafana annotations.
    """
    from stormwatch.alerts.engine import EngineError
    from stormwatch.alerts.grafana import GrafanaAnnotations
    from stormwatch.alerts.packs import PackError
    from stormwatch.alerts.service import AlertService
    from stormwatch.config import ConfigError
    from stormwatch.profiles import ProfileLibrary

    profiles = ProfileLibrary()
    try:
        sites = [_load_site(p, profiles) for p in site]
    except (ConfigError, PackError) as exc:
        fail(str(exc), 2)
    opened = None
    if store:
        from stormwatch.ingest.stores import StoreUrlError, open_store, redact  # lazily: optional for the engine
        from stormwatch.store import StoreError

        try:
            opened = open_store(store)
        except (StoreUrlError, StoreError) as exc:
            fail(f"--store {redact(store)}: {exc}", 2)
    try:
        service = AlertService(sites, profiles, broker, opened, state, _clock(), client_id, lateness_s=lateness_s,
                               webhook_url=webhook, grafana=GrafanaAnnotations.from_env(os.environ))
    except (PackError, EngineError, ValueError) as exc:
        fail(str(exc), 2)
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    try:
        service.run()
    except KeyboardInterrupt:
        service.stop()
    finally:
        if opened is not None:
            opened.close()


workorders_app = typer.Typer(help="Inspection work orders: list, show, acknowledge, complete.", no_args_is_help=True)

_STATE_OPT = typer.Option(Path(DEFAULT_STATE), "--state", help="work-order SQLite file of the alert service")


def _book(state: Path) -> WorkOrders:
    if not state.is_file():
        fail(f"no work-order state file {state}", 2)
    try:
        return WorkOrders(state, _clock())
    except WorkOrderError as exc:
        fail(str(exc), 2)


@workorders_app.command("list")
def list_cmd(
    state: Path = _STATE_OPT,
    site: str | None = typer.Option(None, "--site"),
    status: str | None = typer.Option(None, "--status", help="open, acknowledged, completed, overdue"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List work orders (oldest first)."""
    book = _book(state)
    book.mark_overdue()
    orders = book.list(site=site, status=status)
    if as_json:
        typer.echo(json.dumps([o.to_json() for o in orders], indent=2, ensure_ascii=False))
    else:
        for o in orders:
            typer.echo(_line(o))


@workorders_app.command("show")
def show_cmd(order_id: str = typer.Argument(...), state: Path = _STATE_OPT,
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Show one work order with its evidence."""
    book = _book(state)
    try:
        order = book.get(order_id)
    except WorkOrderError as exc:
        fail(str(exc), 1)
    data = order.to_json()
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    for key, value in data.items():
        if key != "evidence":
            typer.echo(f"{key:>16}: {value}")
    typer.echo(f"{'evidence':>16}: {json.dumps(data['evidence'], ensure_ascii=False)}")


@workorders_app.command("ack")
def ack_cmd(order_id: str = typer.Argument(...), by: str = typer.Option(..., "--by"), state: Path = _STATE_OPT,
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Acknowledge a work order."""
    try:
        order = _book(state).acknowledge(order_id, by)
    except WorkOrderError as exc:
        fail(str(exc), 1)
    typer.echo(json.dumps(order.to_json(), ensure_ascii=False) if as_json else _line(order))


@workorders_app.command("complete")
def complete_cmd(order_id: str = typer.Argument(...), by: str = typer.Option(..., "--by"),
                 notes: str = typer.Option("", "--notes"), state: Path = _STATE_OPT,
                 as_json: bool = typer.Option(False, "--json")) -> None:
    """Complete a work order (an inspection: record who and what was found)."""
    try:
        order = _book(state).complete(order_id, by, notes)
    except WorkOrderError as exc:
        fail(str(exc), 1)
    typer.echo(json.dumps(order.to_json(), ensure_ascii=False) if as_json else _line(order))


@workorders_app.command("ical")
def ical_cmd(state: Path = _STATE_OPT, site: str | None = typer.Option(None, "--site"),
             output: Path | None = typer.Option(None, "--output", "-o", help="write here instead of stdout")) -> None:
    """Print an iCalendar (.ics) feed of the work orders' due dates."""
    from stormwatch.alerts.ical import calendar_of

    book = _book(state)
    data = calendar_of(book.list(site=site), book.clock.now())
    if output is not None:
        output.write_bytes(data)
    else:
        typer.echo(data.decode("utf-8"), nl=False)


def parse_when(text: str, tz: str) -> datetime:
    """An ISO 8601 time; without an offset it is local time of the site's zone ``tz``.

    Raises:
        typer.BadParameter: not ISO 8601.
    """
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 time (e.g. 2026-06-01T00:00:00Z)") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=ZoneInfo(tz))


def evaluate_cmd(
    site: Path = typer.Option(..., "--site", help="site YAML file"),
    start: str = typer.Option(..., "--from", help="window start, ISO 8601 (no offset: the site's time zone)"),
    end: str = typer.Option(..., "--to", help="window end (exclusive), ISO 8601"),
    store: str = typer.Option("sqlite:///./var/stormwatch.db", "--store", envvar="STORMWATCH_STORE",
                              help="store URL with the readings (sqlite:///path, influx1://..., influx2://...)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """Re-run the ordinance rules over stored readings and print the events (backfill)."""
    from stormwatch.alerts.backfill import evaluate
    from stormwatch.alerts.engine import EngineError
    from stormwatch.alerts.packs import PackError
    from stormwatch.config import ConfigError
    from stormwatch.ingest.stores import StoreUrlError, open_store, redact
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.store import StoreError

    profiles = ProfileLibrary()
    try:
        cfg = _load_site(site, profiles)
    except (ConfigError, PackError) as exc:
        fail(str(exc), 2)
    t1, t2 = parse_when(start, cfg.site.timezone), parse_when(end, cfg.site.timezone)
    try:
        missing = _missing_sqlite(store)
    except StoreUrlError as exc:
        fail(f"--store {redact(store)}: {exc}", 2)
    if missing is not None:
        fail(f"no store at {missing} (--store {redact(store)}): evaluate reads stored readings, "
             "import or ingest them first", 2)
    try:
        opened = open_store(store)
    except (StoreUrlError, StoreError) as exc:
        fail(f"--store {redact(store)}: {exc}", 2)
    try:
        result = evaluate(cfg, profiles, opened, t1, t2)
    except (PackError, EngineError, ValueError, StoreError) as exc:
        fail(str(exc), 2)
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo(f"{result.site}: {result.readings} readings from {t1.isoformat()} to {t2.isoformat()}")
    for e in result.events:
        typer.echo(f"{e.event_time.isoformat()}  {e.kind:<24} {e.citation:<22} {e.message}")
    for s in result.in_progress:
        typer.echo(f"in progress: storm since {s.start.isoformat()}, {result.depth(s.tips)}, qualified={s.qualified}")
    typer.echo(result.summary())


def _missing_sqlite(url: str) -> Path | None:
    """The file of a ``sqlite:`` store URL (or bare path) when it does not exist, else ``None``.

    Opening a missing SQLite file would create an empty store; a read-only command must say the
    store is not there instead of reporting "0 readings".

    Raises:
        stormwatch.ingest.stores.StoreUrlError: a malformed SQLite URL.
    """
    import urllib.parse

    from stormwatch.ingest.stores import sqlite_path

    if urllib.parse.urlsplit(url).scheme.lower() not in ("sqlite", ""):
        return None
    path = sqlite_path(url)
    if path == ":memory:" or Path(path).is_file():
        return None
    return Path(path)


def register(app: typer.Typer) -> None:
    """Add ``alerts``, ``evaluate`` and ``workorders`` to the ``stormwatch`` command."""
    app.command("alerts")(alerts_cmd)
    app.command("evaluate")(evaluate_cmd)
    app.add_typer(workorders_app, name="workorders")
