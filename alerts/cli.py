"""``stormwatch alerts`` (the live service) and ``stormwatch workorders`` (list/show/ack/complete)."""

from __future__ import annotations

import json
import logging
import math
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from stormwatch.alerts.sitefile import load_site_file
from stormwatch.alerts.workorders import STATUSES, Change, WorkOrder, WorkOrderError, WorkOrders
from stormwatch.clock import CLOCK_FILE_ENV, Clock, ClockFileError, WallClock, service_clock
from stormwatch.display import LocalTimeError, describe_event, local_instant, local_time, turbidity

if TYPE_CHECKING:
    from stormwatch.alerts.service import AlertService
    from stormwatch.config import SiteConfig
from stormwatch.runtime.cliutil import check_site_ids, fail, max_age_option, max_future_option, progress, use_state_dir
from stormwatch.runtime.signals import stop_on_signals

log = logging.getLogger(__name__)

#: The work-order file inside a state directory (the alert service's and the demo's).
STATE_FILE = "alerts.db"
DEFAULT_STATE_DIR = "./var/alerts"




_STATE_DIR_OPT = typer.Option(Path(DEFAULT_STATE_DIR), "--state-dir", metavar="DIR",
                              help=f"State directory of the alert service or the demo (holds {STATE_FILE}).")
_STATE_FILE_OPT = typer.Option(None, "--state", hidden=True, metavar="FILE",
                               help="The work-order file itself (older name; use --state-dir).")
_WALL_OPT = typer.Option(False, "--wall-time",
                         help="Judge due dates against today's wall-clock time instead of the clock of the alert "
                              "engine that wrote the state (simulated time after a demo).")
_TZ_OPT = typer.Option(None, "--tz", metavar="ZONE",
                       help="Show times in this IANA zone (default: each order's site zone).")
_JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of text.")
_BY_OPT = typer.Option(..., "--by", metavar="NAME", help="Who does it (recorded in the order's history).")


def alerts_cmd(
    site: list[Path] = typer.Option([], "--site", metavar="FILE",
                                    help="The site's YAML file (repeat for several sites)."),
    sites_dir: Path | None = typer.Option(None, "--sites", metavar="DIR", file_okay=False,
                                          help="A directory of site files: every *.yaml in it, watched (a file "
                                               "added, changed or removed is picked up within seconds; a broken "
                                               "one is refused with its error, the others keep running)."),
    partition: str | None = typer.Option(None, "--partition", metavar="PART",
                                         help="Watch part K of N of the sites, written K/N (e.g. 2/4): run N "
                                              "alert services with 1/N ... N/N and each site is watched by exactly "
                                              "one (a stable hash of its id; docs/scaling.md)."),
    site_ids: list[str] = typer.Option([], "--site-id", metavar="SITE_ID",
                                       help="Watch only this site of --site/--sites (repeatable): an explicit "
                                            "partition."),
    broker: str = typer.Option("mqtt://127.0.0.1:1883", "--broker", envvar="STORMWATCH_BROKER", metavar="URL",
                               help="The MQTT broker: mqtt://[USER:PASS@]HOST:PORT (mqtts:// for TLS)."),
    store: str | None = typer.Option(None, "--store", envvar="STORMWATCH_STORE", metavar="URL",
                                     help="Record events in this store and recover a restart from its readings "
                                          "(sqlite:///FILE, influx1://..., influx2://...)."),
    state_dir: Path = typer.Option(Path(DEFAULT_STATE_DIR), "--state-dir", metavar="DIR",
                                   help=f"Keep the work orders here ({STATE_FILE}); created if missing, in a "
                                        "directory that exists."),
    state: Path | None = _STATE_FILE_OPT,
    lateness_s: float | None = typer.Option(
        None, "--lateness-s", min=0, metavar="SECONDS",
        help="How late a reading may arrive and still be judged in order (event-time seconds; default 120, "
             "on a simulated clock 0.5 real seconds of it)."),
    clock_file: Path | None = typer.Option(
        None, "--clock-file", envvar=CLOCK_FILE_ENV, metavar="FILE",
        help="Run on the simulated clock `stormwatch simulate` writes (waits for it); default: the wall clock."),
    lockstep: bool = typer.Option(False, "--lockstep",
                                  help="Run on the lockstep clock `stormwatch simulate --lockstep` conducts over "
                                       "MQTT (waits for it; the simulator waits for this engine)."),
    webhook: str | None = typer.Option(None, "--webhook", envvar="STORMWATCH_WEBHOOK", metavar="URL",
                                       help="Also POST every event (JSON) to this http(s) URL, with retries."),
    client_id: str = typer.Option("stormwatch-alerts", "--client-id", metavar="ID",
                                  help="MQTT client id; keep it fixed so readings queued while the service is "
                                       "down are delivered when it returns."),
    max_future_s: float = max_future_option(),
    max_age_s: float = max_age_option(),
) -> None:
    """Watch sites live and apply their village code: ordinance events and inspection work orders.

    Each event (a storm that requires an inspection, turbidity in contrast to upstream, a basin to
    clean out, a data gap) cites the section it enforces. Events are published on
    stormwatch/v1/<site>/events and, as configured, written to the store, POSTed to a webhook and
    added to Grafana as annotations (STORMWATCH_GRAFANA_URL and STORMWATCH_GRAFANA_TOKEN). Work
    orders are kept in --state-dir (see `stormwatch workorders`).
    """
    from stormwatch.alerts.engine import EngineError, lateness_for
    from stormwatch.alerts.grafana import GrafanaAnnotations
    from stormwatch.alerts.packs import PackError
    from stormwatch.alerts.service import AlertService
    from stormwatch.config import ConfigError
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.runtime.partition import Partition
    from stormwatch.runtime.sitedir import ServiceSites
    from stormwatch.timebounds import TimeBounds

    profiles = ProfileLibrary()
    try:
        watched = ServiceSites(site, sites_dir, lambda p: load_site_file(p, profiles),
                               Partition.parse(partition, site_ids))
        sites = list(watched.load().values())
    except (ConfigError, PackError, ValueError) as exc:
        fail(str(exc), 2)
    try:
        clock = _follower(broker, sites, "alerts") if lockstep else service_clock(clock_file)
    except ClockFileError as exc:
        fail(str(exc), 2)
    from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url

    try:
        parse_broker_url(broker)  # before anything is opened or created: a typo starts nothing
    except BrokerUrlError as exc:
        fail(f"--broker: {exc}", 2)
    opened = None
    if store:
        from stormwatch.stores.base import StoreError
        from stormwatch.stores.urls import StoreUrlError, open_store, redact  # lazily: optional for the engine

        try:
            opened = open_store(store)
        except (StoreUrlError, StoreError) as exc:
            fail(f"--store {redact(store)}: {exc}", 2)
    try:
        if state is None:
            use_state_dir(state_dir, create=True)
        service = AlertService(sites, profiles, broker, opened, state_file(state_dir, state), clock, client_id,
                               lateness_s=lateness_for(clock) if lateness_s is None else lateness_s,
                               webhook_url=webhook, grafana=GrafanaAnnotations.from_env(os.environ),
                               bounds=TimeBounds(max_future_s, max_age_s),
                               overdue_check_s=math.inf if lockstep else 60.0)
    except (PackError, EngineError, ValueError, OSError) as exc:
        fail(str(exc), 2)
    if lockstep:
        _engine_joins(clock, service)
    stop_on_signals(service.stop, "the alert service")
    log.info("alerts: %d sites (%s)", len(sites), watched.describe())
    watched.watch(lambda current, _changes: service.apply_sites(current))
    try:
        service.run()
    except KeyboardInterrupt:
        service.stop()
    finally:
        watched.stop()
        if opened is not None:
            opened.close()


def _follower(broker: str, sites: list[SiteConfig], name: str) -> Clock:
    """The lockstep clock over MQTT of the one site watched (stormwatch.runtime.mqttclock)."""
    from stormwatch.runtime.mqttclock import FollowerClock

    if len(sites) != 1:
        fail(f"--lockstep: watch exactly one site (got {len(sites)})", 2)
    return FollowerClock(broker, sites[0].site.id, name)


def _engine_joins(clock: Clock, service: AlertService) -> None:
    """The engine as a participant of the lockstep clock: done with an instant once it has taken every
    reading the gateway made (live or, after a restart, from the store); its overdue check runs on the
    clock's 60-s grid."""
    import threading

    from stormwatch.alerts.lockstep import EngineParticipant
    from stormwatch.runtime.mqttclock import FollowerClock

    assert isinstance(clock, FollowerClock)
    # Per gateway boot, not a count of deliveries: a restarted engine has the readings made before
    # it died from the store (warm-up), and they are not delivered to it again.
    clock.seen = service.readings_taken
    clock.add(EngineParticipant(service, lambda: service.readings_seen + clock.not_taken(service.readings_taken()),
                                clock.sim_start))

    def follow() -> None:
        service.connected.wait()  # ready only once subscribed: no reading made before it listens
        clock.run()

    threading.Thread(target=follow, name="lockstep", daemon=True).start()


workorders_app = typer.Typer(
    help="Inspection work orders the alert service opened: list them, show one with its history, acknowledge, "
         "complete, or export their due dates as a calendar.",
    no_args_is_help=True,
)

def state_file(state_dir: Path, state: Path | None) -> Path:
    """The work-order file: ``--state FILE`` (older option) or ``<--state-dir>/alerts.db``."""
    return state if state is not None else state_dir / STATE_FILE


def _book(state_dir: Path, state: Path | None, wall_time: bool = False) -> tuple[WorkOrders, str]:
    """The work-order book read at the engine's clock, and a line saying which time that is."""
    path = state_file(state_dir, state)
    if not path.is_file():
        where = f"--state {path}" if state is not None else f"--state-dir {state_dir}: no {STATE_FILE} there"
        fail(f"no work-order state file ({where}); give the --state-dir of the alert service or the demo")
    if path.stat().st_size == 0:  # SQLite would take it for a new database and write one into it
        fail(f"{path}: not a work-order state file (an empty file); give the --state-dir of the alert service "
             "or the demo")
    try:
        book = WorkOrders(path, WallClock())
    except WorkOrderError as exc:
        fail(str(exc))
    engine = book.engine_clock()
    if engine is None:
        book.clock, what = WallClock(), "wall-clock time (no alert engine recorded its clock here)"
    else:
        book.clock, what = engine.reader_clock(wall_time)
    return book, what


def _check_site(site: str | None, state_dir: Path, state: Path | None) -> None:
    """Refuse a ``--site-id`` the state directory (or ``--state`` file) does not record."""
    import sqlite3

    from stormwatch.alerts.workorders import recorded_sites, state_dir_sites

    if site is None:
        return
    path = state_file(state_dir, state)
    try:
        known = recorded_sites(path) if state is not None else state_dir_sites(state_dir, path)
    except sqlite3.Error as exc:
        fail(f"{path}: not readable ({exc})")
    check_site_ids([site], known, f"--state {state}" if state is not None else f"--state-dir {state_dir}")


def _zone(tz: str | None, order: WorkOrder) -> ZoneInfo:
    name = tz or order.timezone or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        fail(f"--tz {name!r}: unknown IANA time zone (e.g. America/New_York)")


def _line(o: WorkOrder, now: datetime, tz: str | None) -> str:
    due = local_time(o.due_at, _zone(tz, o))
    overdue = "overdue" if o.is_overdue(now) else ""
    return f"{o.id}  {o.status:<12} {overdue:<7}  {o.site:<16} {o.kind:<19} due {due:<25}  {o.citation}"


def _evidence_line(item: dict[str, Any], zone: ZoneInfo) -> str:
    """One evidence item for a person: times site-local, turbidity at display resolution in its unit."""
    unit = item.get("unit") if isinstance(item.get("unit"), str) else "NTU"
    parts = []
    for key, value in item.items():
        if key == "unit" or value is None:
            continue
        label = key.replace("_", " ")
        if isinstance(value, list) and not value:
            parts.append(f"{label} none")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts.append(f"{label} {', '.join(value)}")  # e.g. flags: device_error, out_of_range
        elif isinstance(value, list):
            parts.append(f"{label}: {len(value)} values")
        elif isinstance(value, float) and key.endswith("_ntu"):
            parts.append(f"{label.removesuffix(' ntu')} {turbidity(value, str(unit))}")
        elif isinstance(value, float):
            parts.append(f"{label} {value:g}")
        elif isinstance(value, str) and value.endswith("Z") and value[:4].isdigit():
            try:
                parts.append(f"{label} {local_time(datetime.fromisoformat(value), zone)}")
            except ValueError:
                parts.append(f"{label} {value}")
        else:
            parts.append(f"{label} {value}")
    return ", ".join(parts)


def _evidence_lines(o: WorkOrder, zone: ZoneInfo, full: bool) -> list[str]:
    """The order's evidence, each item a line (``full``), else summarized: the tip readings counted,
    at most a few other items, and where the rest is."""
    from stormwatch.alerts.evidence import other_items, shortened, tip_summary

    pad = " " * 15
    if full:
        return [pad + _evidence_line(item, zone) for item in o.evidence]
    tips = tip_summary(o.evidence)
    lines = []
    if tips is not None:
        flagged = f", {tips.flagged} flagged" if tips.flagged else ""
        lines.append(f"{pad}{tips.readings} tip reading{'' if tips.readings == 1 else 's'} ({tips.tips} tips"
                     f"{flagged}) from {local_time(tips.first, zone)} to {local_time(tips.last, zone)}")
    head, left_out, tail = shortened(other_items(o.evidence))
    lines += [pad + _evidence_line(item, zone) for item in head]
    if left_out:
        lines.append(f"{pad}... {left_out} more ...")
    lines += [pad + _evidence_line(item, zone) for item in tail]
    if tips is not None or left_out:
        lines.append(f"{pad}(every item: --evidence full; as CSV: --evidence csv)")
    return lines


def _order_text(o: WorkOrder, history: list[Change], now: datetime, tz: str | None,
                full: bool = False) -> list[str]:
    zone = _zone(tz, o)
    status = o.status + (" (overdue)" if o.is_overdue(now) else "")
    rows = [("order", f"{o.id}: {o.kind.replace('_', ' ')} at {o.site}"), ("status", status),
            ("due", local_time(o.due_at, zone)), ("citation", o.citation), ("why", o.message),
            ("opened", local_time(o.opened_at, zone))]
    if o.acknowledged_at is not None:
        rows.append(("acknowledged", f"{local_time(o.acknowledged_at, zone)} by {o.acknowledged_by}"))
    if o.overdue_at is not None:
        rows.append(("found overdue", local_time(o.overdue_at, zone)))
    if o.completed_at is not None:
        rows.append(("completed", f"{local_time(o.completed_at, zone)} by {o.inspector}: {o.notes}"))
    if o.parent:
        rows.append(("report of", o.parent))
    lines = [f"{k:>13}: {v}" for k, v in rows]
    if o.evidence:
        lines.append(f"{'evidence':>13}:")
        lines += _evidence_lines(o, zone, full)
    lines.append(f"{'history':>13}:")
    for c in history:
        note = f"  {c.notes}" if c.notes else ""
        lines.append(f"{'':>15}{local_time(c.at, zone)}  {c.action:<12} by {c.by}{note}")
    return lines


@workorders_app.command("list")
def list_cmd(
    state_dir: Path = _STATE_DIR_OPT, state: Path | None = _STATE_FILE_OPT,
    site: str | None = typer.Option(None, "--site-id", metavar="SITE_ID", help="Only this site's orders (its id)."),
    status: str | None = typer.Option(None, "--status", metavar="STATUS",
                                      help="Only orders with this status: open, acknowledged or completed."),
    overdue: bool = typer.Option(False, "--overdue", help="Only orders past their due time and not completed."),
    wall_time: bool = _WALL_OPT, tz: str | None = _TZ_OPT, as_json: bool = _JSON_OPT,
) -> None:
    """List work orders, oldest first: status, whether overdue, site, kind, due time (site-local), citation."""
    if status is not None and status not in STATUSES:
        hint = "; overdue is not a status: use --overdue" if status == "overdue" else ""
        fail(f"--status {status!r}: expected one of {', '.join(STATUSES)}{hint}")
    book, what = _book(state_dir, state, wall_time)
    _check_site(site, state_dir, state)
    now = book.clock.now()
    orders = book.list(site=site, status=status, overdue_at=now if overdue else None)
    if as_json:
        typer.echo(json.dumps([o.to_json(now) for o in orders], indent=2, ensure_ascii=False))
        return
    zone = tz or next((o.timezone for o in orders if o.timezone), None)
    typer.echo(f"as of {local_time(now, _zone(zone, orders[0]) if orders else None)} ({what}); "
               f"{len(orders)} work order{'' if len(orders) == 1 else 's'}")
    for o in orders:
        typer.echo(_line(o, now, tz))


@workorders_app.command("show")
def show_cmd(order_id: str = typer.Argument(..., metavar="ORDER_ID", help="The work order's id (WO-...)."),
             state_dir: Path = _STATE_DIR_OPT, state: Path | None = _STATE_FILE_OPT, wall_time: bool = _WALL_OPT,
             tz: str | None = _TZ_OPT, as_json: bool = _JSON_OPT,
             evidence: str = typer.Option("summary", "--evidence", metavar="HOW",
                                          help="summary (the tip readings counted, a few other items), full "
                                               "(every item, a line each) or csv (every item as CSV, alone).")
             ) -> None:
    """Show one work order: why it was opened, its evidence (summarized) and its history (who did what, when)."""
    from stormwatch.alerts.evidence import to_csv

    if evidence not in ("summary", "full", "csv"):
        fail(f"--evidence {evidence!r}: summary, full or csv")
    book, _what = _book(state_dir, state, wall_time)
    try:
        order = book.get(order_id)
        history = book.history(order_id)
    except WorkOrderError as exc:
        fail(str(exc))
    now = book.clock.now()
    if as_json:
        data = order.to_json(now)
        data["history"] = [c.to_json() for c in history]
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    if evidence == "csv":
        typer.echo(to_csv(order.evidence), nl=False)
        return
    typer.echo("\n".join(_order_text(order, history, now, tz, evidence == "full")))


@workorders_app.command("ack")
def ack_cmd(order_id: str = typer.Argument(..., metavar="ORDER_ID", help="The work order's id (WO-...)."),
            by: str = _BY_OPT,
            notes: str = typer.Option("", "--notes", metavar="TEXT", help="A note kept in the history (optional)."),
            state_dir: Path = _STATE_DIR_OPT, state: Path | None = _STATE_FILE_OPT, wall_time: bool = _WALL_OPT,
            tz: str | None = _TZ_OPT, as_json: bool = _JSON_OPT) -> None:
    """Acknowledge a work order: someone has it in hand. A second acknowledgement is kept in the history."""
    book, _what = _book(state_dir, state, wall_time)
    try:
        order = book.acknowledge(order_id, by, notes)
        acks = [c for c in book.history(order_id) if c.action == "acknowledged"]
    except WorkOrderError as exc:
        fail(str(exc))
    now = book.clock.now()
    if as_json:
        typer.echo(json.dumps(order.to_json(now), ensure_ascii=False))
        return
    typer.echo(_line(order, now, tz))
    if len(acks) > 1:
        typer.echo(f"already acknowledged by {order.acknowledged_by} at "
                   f"{local_time(order.acknowledged_at, _zone(tz, order))}; yours is kept in its history")


@workorders_app.command("complete")
def complete_cmd(order_id: str = typer.Argument(..., metavar="ORDER_ID", help="The work order's id (WO-...)."),
                 by: str = _BY_OPT,
                 notes: str = typer.Option(..., "--notes", metavar="TEXT",
                                           help="Completion note (required): what was inspected, found and done."),
                 state_dir: Path = _STATE_DIR_OPT, state: Path | None = _STATE_FILE_OPT,
                 wall_time: bool = _WALL_OPT, tz: str | None = _TZ_OPT, as_json: bool = _JSON_OPT) -> None:
    """Complete a work order (an inspection done, a cleanout made): who did it and what they found."""
    book, _what = _book(state_dir, state, wall_time)
    try:
        order = book.complete(order_id, by, notes)
    except WorkOrderError as exc:
        fail(str(exc))
    now = book.clock.now()
    typer.echo(json.dumps(order.to_json(now), ensure_ascii=False) if as_json else _line(order, now, tz))


@workorders_app.command("ical")
def ical_cmd(state_dir: Path = _STATE_DIR_OPT, state: Path | None = _STATE_FILE_OPT,
             site: str | None = typer.Option(None, "--site-id", metavar="SITE_ID",
                                             help="Only this site's orders (its id)."),
             output: Path | None = typer.Option(None, "--output", "-o", metavar="FILE",
                                                help="Write the calendar to this file instead of stdout."),
             wall_time: bool = _WALL_OPT) -> None:
    """Print the work orders' due dates as an iCalendar (.ics) feed for a calendar app."""
    from stormwatch.alerts.ical import calendar_of

    book, _what = _book(state_dir, state, wall_time)
    _check_site(site, state_dir, state)
    data = calendar_of(book.list(site=site), book.clock.now())
    if output is not None:
        try:
            output.write_bytes(data)
        except OSError as exc:
            fail(f"--output {output}: {exc.strerror or exc}")
    else:
        typer.echo(data.decode("utf-8"), nl=False)


def parse_when(text: str, tz: str, option: str) -> datetime:
    """An ISO 8601 time; without an offset it is local time of the site's zone ``tz``
    (:func:`stormwatch.display.local_instant`: a local time the clocks skip, or show twice without
    an offset, is refused).

    Raises:
        typer.BadParameter: not ISO 8601, a skipped or repeated local time, or a time beyond what a
            date holds (names ``option``).
    """
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        why = str(exc)
        if "out of range" in why or "must be in" in why:  # ISO-shaped, but no such day or hour
            raise typer.BadParameter(f"{text!r}: no such time ({why})", param_hint=option) from exc
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 time (e.g. 2026-06-01T00:00:00Z)",
                                 param_hint=option) from exc
    try:
        return local_instant(value, tz, text)
    except OverflowError:
        raise typer.BadParameter(f"{text!r} is beyond the dates a time can hold (years 1 to 9999 in UTC)",
                                 param_hint=option) from None
    except LocalTimeError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def evaluate_cmd(
    site: Path = typer.Option(..., "--site", metavar="FILE", help="The site's YAML file."),
    start: str = typer.Option(..., "--from", metavar="TIME",
                              help="Start of the window, ISO 8601 (without an offset: the site's local time)."),
    end: str = typer.Option(..., "--until", metavar="TIME",
                            help="End of the window (exclusive), ISO 8601 (without an offset: local time)."),
    store: str = typer.Option("sqlite:///./var/stormwatch.db", "--store", envvar="STORMWATCH_STORE", metavar="URL",
                              help="The store holding the readings (sqlite:///FILE, influx1://..., influx2://...)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """What the village code required over a past window: the events the rules find in the stored readings.

    The same rules as the live service, run over the store (after an import, an outage, or a rule
    change). Prints each event, storms still in progress at the end, and a summary.
    """
    from stormwatch.alerts.backfill import GAPS_LISTED, evaluate
    from stormwatch.alerts.engine import EngineError
    from stormwatch.alerts.packs import PackError
    from stormwatch.config import ConfigError
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.runtime.gcbatch import fewer_collections
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    profiles = ProfileLibrary()
    try:
        cfg = load_site_file(site, profiles)
    except (ConfigError, PackError) as exc:
        fail(str(exc), 2)
    t1, t2 = parse_when(start, cfg.site.timezone, "--from"), parse_when(end, cfg.site.timezone, "--until")
    if t1 >= t2:
        fail(f"--from {start} is not before --until {end}: the window is empty")
    try:
        opened = open_store(store, existing=True)  # evaluate reads stored readings: never "0 readings" of nothing
    except (StoreUrlError, StoreError) as exc:
        fail(f"--store {redact(store)}: {exc}", 2)
    try:
        with progress(f"evaluate {cfg.site.id}") as report, fewer_collections():
            result = evaluate(cfg, profiles, opened, t1, t2, progress=report)
    except (PackError, EngineError, ValueError, StoreError) as exc:
        fail(str(exc), 2)
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    tz = cfg.site.tz
    typer.echo(f"{result.site}: {result.readings} readings from {local_time(t1, tz)} to {local_time(t2, tz)}")
    for e in result.events:
        typer.echo(describe_event(e, tz))
    for line in result.in_progress_lines(tz):
        typer.echo(line)
    typer.echo(result.summary(tz))
    for line in result.gap_lines(tz) if len(result.gaps) > GAPS_LISTED else ():
        log.info("%s", line)  # -v: each gap the summary counts


def register(app: typer.Typer) -> None:
    """Add ``alerts``, ``evaluate`` and ``workorders`` to the ``stormwatch`` command."""
    app.command("alerts")(alerts_cmd)
    app.command("evaluate")(evaluate_cmd)
    app.add_typer(workorders_app, name="workorders")
