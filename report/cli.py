"""``stormwatch report``: the site log book as PDF, HTML or CSV (``archive`` and
``import-archive``: the site's records as a portable bundle, :mod:`stormwatch.report.archive`)."""

from __future__ import annotations

import logging
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stormwatch.display import plural
from stormwatch.runtime.cliutil import fail, output_path, use_state_dir

if TYPE_CHECKING:
    from stormwatch.alerts.workorders import WorkOrders
    from stormwatch.config import SiteConfig
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.report.build import Sources
    from stormwatch.report.model import Report, StormRow

log = logging.getLogger(__name__)

_DEFAULT_STORE = "sqlite:///./var/stormwatch.db"
_DEFAULT_STATE = Path("./var/alerts")
_NO_WORK_ORDERS = typer.Option(False, "--no-work-orders",
                               help="No work-order state: the readings alone, without inspection records "
                                    "(imported logger files, no alert service); said on the cover.")
#: No reading is older: event times start at the Unix epoch (an imported reading's ``seq`` is its time
#: in microseconds since 1970, importers/identity.py; a gateway stamp before it is implausible_time).
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
#: How far past the state's clock (the alert engine's as-of time) a period may end: a year. Beyond
#: it nothing can be known, a log book of its days would be millions of empty pages, and dates near
#: 9999-12-31 overflow.
MAX_AHEAD = timedelta(days=366)


def check_period(start: datetime, end: datetime, as_of: datetime, as_of_what: str, tz: str,
                 texts: tuple[str, str]) -> None:
    """Refuse (exit 2, one line) a period starting before :data:`EARLIEST` or ending more than
    :data:`MAX_AHEAD` after ``as_of`` (``texts``: ``--from`` and ``--until`` as given)."""
    from zoneinfo import ZoneInfo

    from stormwatch.display import local_time

    if start < EARLIEST:
        fail(f"--from {texts[0]}: before 1970-01-01, when event times begin (no reading can be "
             "older): give --from 1970-01-01 or later")
    latest = as_of + MAX_AHEAD
    if end > latest:
        fail(f"--until {texts[1]}: more than a year after the state's clock ({as_of_what}: "
             f"{local_time(as_of, ZoneInfo(tz))}); nothing after it has happened yet: give --until "
             f"{latest.astimezone(ZoneInfo(tz)).date().isoformat()} or earlier")


#: Around the time named by ``--storm``, where the storm is looked for.
STORM_SEARCH = timedelta(days=2)


def _book(state_dir: Path, wall_time: bool, without: bool = False) -> tuple[WorkOrders | None, datetime, str, str]:
    """The work-order book of ``state_dir``, the time to judge orders at (the alert engine's clock,
    as ``stormwatch workorders`` does), which clock that is, and a line for the cover saying where
    the orders come from. A state directory without a book is refused (a typo never gives a log
    book with 0 work orders); ``without`` (``--no-work-orders``): no book, said on the cover."""
    from stormwatch.alerts.cli import STATE_FILE
    from stormwatch.alerts.workorders import WorkOrderError, WorkOrders
    from stormwatch.clock import Clock, WallClock

    if without:
        return None, datetime.now(UTC), "wall-clock time", "no work-order state (--no-work-orders): " \
            "inspection records not included"
    path = state_dir / STATE_FILE
    if not path.is_file():
        where = "no such directory" if not state_dir.is_dir() else f"no work-order book ({STATE_FILE}) there"
        fail(f"--state-dir {state_dir}: {where}: give the --state-dir of the alert service or the demo, or "
             "--no-work-orders for the readings alone (no inspection records)")
    try:
        book = WorkOrders(path, WallClock())
    except WorkOrderError as exc:
        fail(str(exc))
    engine = book.engine_clock()
    clock: Clock
    if engine is None:
        clock, what = WallClock(), "wall-clock time"
    else:
        clock, what = engine.reader_clock(wall_time)
    book.clock = clock
    return book, clock.now(), what, "the alert engine's work-order records"


def _open_store(url: str, book: WorkOrders | None = None):  # type: ignore[no-untyped-def]
    """The store the report reads (it must be there: a missing one is never read as "no data");
    ``book`` is closed when it cannot be opened."""
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    try:
        return open_store(url, existing=True)
    except (StoreUrlError, StoreError) as exc:
        if book is not None:
            book.close()
        fail(f"--store {redact(url)}: {exc}")


def _format(fmt: str | None, output: Path | None) -> str:
    """The report's format: ``--format``, else the ``--output`` file's suffix (``june.html``), else
    pdf. A suffix that is not a report format (``x.docx``) without ``--format``, or one that
    names another format than ``--format`` (``--format pdf -o x.html``), is refused: a file's name
    never lies about what it holds."""
    from stormwatch.report.render import FORMATS

    suffix = output.suffix.lower().lstrip(".") if output is not None and str(output) != "-" else ""
    if fmt is None:
        if suffix and suffix not in FORMATS:
            fail(f"--output {output}: .{suffix} is not a report format: name the file .pdf, .html or .csv (the "
                 "format follows the name), or give --format")
        fmt = suffix or "pdf"
    fmt = fmt.lower()
    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if suffix in FORMATS and suffix != fmt:
        fail(f"--output {output}: the name says {suffix}, --format says {fmt}: make them agree")
    return fmt


def _find_storm(report: Report, t: datetime) -> StormRow | None:
    for s in report.storms:
        if s.start <= t <= s.last_tip:
            return s
    return None


def storm_report(cfg: SiteConfig, profiles: ProfileLibrary, sources: Sources, storm: str) -> Report:
    """The report of one storm (the Ch. 196 §196-9B report to the SMO): the storm from its first
    tip until its inspection was due or done, whichever is later.

    ``storm`` is the storm's inspection work order (``WO-...``) or a time within the storm
    (ISO 8601; no offset: the site's zone).

    Raises:
        typer.Exit: no such storm (a one-line error).
    """
    from stormwatch.alerts.cli import parse_when
    from stormwatch.alerts.rules import parse_occurrence
    from stormwatch.alerts.workorders import WorkOrderError
    from stormwatch.report.build import build_report

    if storm.upper().startswith("WO-"):
        if sources.book is None:
            fail(f"--storm {storm}: a work-order id needs the work-order state (--state-dir)")
        try:
            order = sources.book.get(storm)
        except WorkOrderError as exc:
            fail(f"--storm {storm}: {exc}")
        try:
            occurrence = parse_occurrence(order.occurrence)
        except ValueError:
            occurrence = None
        if occurrence is None or occurrence.kind != "storm":
            fail(f"--storm {storm}: work order {order.id} is a {order.kind.replace('_', ' ')}, not a storm inspection")
        at = occurrence.time
    else:
        try:
            at = parse_when(storm, cfg.site.timezone, "--storm").astimezone(UTC)
        except typer.BadParameter as exc:
            fail(f"--storm: {exc.message} (or a storm inspection's work-order id, WO-...)")
    search = build_report(cfg, profiles, sources, at - STORM_SEARCH, at + STORM_SEARCH, charts=False)
    found = _find_storm(search, at)
    if found is None:
        fail(f"--storm {storm}: no storm in the stored rain data at {at.astimezone(cfg.site.tz).isoformat()} "
             "(a time between a storm's first and last tip, or its inspection's work-order id)")
    ends = [found.last_tip + timedelta(minutes=1)]
    if found.due_at is not None:
        ends.append(found.due_at)
    inspection = found.outcome.order if found.outcome else None
    if inspection is not None and inspection.completed_at is not None:
        ends.append(inspection.completed_at + timedelta(minutes=1))
    report = build_report(cfg, profiles, sources, found.start, max(ends))
    row = next((s for s in report.storms if s.occurrence == found.occurrence), found)
    report.storm = row
    report.storms = [row]
    if inspection is not None and sources.book is not None:
        child = [o for o in sources.book.list(site=cfg.site.id) if o.parent == inspection.id]
        report.report_due = child[0].due_at if child else None
    return report


def _load_renderers(kind: str) -> None:
    """Import matplotlib (charts) and, for a PDF, WeasyPrint in a background thread while the rules run
    (about a second of imports): the evaluation mostly waits for the process reading the store ahead
    (:mod:`stormwatch.stores.sqlite_reader`), and an import finished meanwhile is not paid after it."""
    def load() -> None:
        try:
            import matplotlib.backends.backend_svg
            import matplotlib.figure  # noqa: F401

            if kind == "pdf":
                import weasyprint  # noqa: F401
        except Exception:  # the same import in the main thread says what is wrong
            return

    threading.Thread(target=load, name="report-renderers", daemon=True).start()


def report_cmd(
    site: Path = typer.Option(..., "--site", metavar="FILE", help="The site's YAML file."),
    start: str | None = typer.Option(None, "--from", metavar="TIME",
                                     help="Start of the period, ISO 8601 (a date is local midnight of the site)."),
    end: str | None = typer.Option(None, "--until", metavar="TIME",
                                   help="End of the period, exclusive (--until 2026-07-01 ends with June 30)."),
    storm: str | None = typer.Option(None, "--storm", metavar="ID",
                                     help="Report one storm (the Ch. 196 two-business-day report): its inspection's "
                                          "work-order id (WO-...) or a time within it. --from/--until not needed."),
    fmt: str | None = typer.Option(None, "--format", metavar="FORMAT",
                                   help="pdf, html or csv (default: the --output file's suffix, else pdf; a "
                                        "suffix of another format is refused)."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="FILE",
                                       help="Write here ('-': stdout); default report-<site>-<from>-<until>.<format>."),
    store: str = typer.Option(_DEFAULT_STORE, "--store", metavar="URL", envvar="STORMWATCH_STORE",
                              help="Store URL with the site's readings (sqlite:///FILE, influx1://..., influx2://...)."),
    state_dir: Path = typer.Option(_DEFAULT_STATE, "--state-dir", metavar="DIR",
                                   help="State directory of the alert service or the demo (its work orders)."),
    wall_time: bool = typer.Option(False, "--wall-time",
                                   help="Judge work orders against today's wall clock instead of the alert "
                                        "engine's clock (simulated time after a demo)."),
    no_work_orders: bool = _NO_WORK_ORDERS,
) -> None:
    """Write the site log book of a period: cover with data completeness, storms and their inspections,
    daily rain on local days, turbidity contrasts, the sediment basin, every UNKNOWN interval, the work
    orders with their history, and a signature block for the qualified inspector.

    The rules are re-run over the stored readings (the same code as the alert engine); work orders come
    from the alert service's state. Example:

        stormwatch report --site site.yaml --from 2026-06-01 --until 2026-07-01 -o june.pdf
    """
    from stormwatch.alerts.cli import parse_when
    from stormwatch.alerts.engine import EngineError
    from stormwatch.alerts.packs import PackError
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.config import ConfigError
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.report.build import Sources, build_report
    from stormwatch.report.render import to_csv, to_html, to_pdf
    from stormwatch.runtime.gcbatch import fewer_collections
    from stormwatch.stores.base import StoreError

    kind = _format(fmt, output)
    if output is not None and str(output) != "-":
        output_path(output)  # before the report is built: a long build never ends in "no such directory"
    profiles = ProfileLibrary()
    try:
        cfg = load_site_file(site, profiles)
    except (ConfigError, PackError) as exc:
        fail(str(exc))
    if storm is not None and (start is not None or end is not None):
        fail("--storm gives the report's period (the storm and its inspection): leave out --from and --until")
    if storm is None and (start is None or end is None):
        fail("give the period with --from and --until (or one storm with --storm)")
    try:
        t1 = parse_when(start, cfg.site.timezone, "--from") if start else None
        t2 = parse_when(end, cfg.site.timezone, "--until") if end else None
    except typer.BadParameter as exc:
        fail(exc.format_message())
    if t1 is not None and t2 is not None and t2 <= t1:
        fail(f"--until ({t2.isoformat()}) must be after --from ({t1.isoformat()})")
    book, as_of, what, state_text = _book(state_dir, wall_time, no_work_orders)
    if t1 is not None and t2 is not None:
        assert start is not None and end is not None
        check_period(t1, t2, as_of, what, cfg.site.timezone, (start, end))
    opened = _open_store(store, book)
    sources = Sources(opened, book, as_of, what, state_text)
    if kind != "csv":
        _load_renderers(kind)
    # the evaluation and the layout make millions of short-lived objects (fewer_collections: their
    # cyclic collections were seconds of CPU over a year's report)
    with fewer_collections():
        try:
            if storm is not None:
                report = storm_report(cfg, profiles, sources, storm)
            else:
                assert t1 is not None and t2 is not None
                report = build_report(cfg, profiles, sources, t1.astimezone(UTC), t2.astimezone(UTC),
                                      charts=kind != "csv")
        except (PackError, EngineError, ValueError) as exc:
            fail(str(exc))
        except StoreError as exc:
            fail(str(exc), 1)
        finally:
            opened.close()
            if book is not None:
                book.close()
        data: bytes = (to_pdf(report) if kind == "pdf" else
                       (to_html(report) if kind == "html" else to_csv(report)).encode("utf-8"))
    if output is not None and str(output) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    if output is None:
        tz = cfg.site.tz
        output = Path(f"report-{cfg.site.id}-{report.start.astimezone(tz):%Y%m%d}-"
                      f"{report.end.astimezone(tz):%Y%m%d}.{kind}")
    try:
        output.write_bytes(data)
    except OSError as exc:
        fail(f"--output {output}: {exc.strerror or exc}", 1)
    typer.echo(f"{output}: {kind} report of {cfg.site.id}, {plural(len(report.storms), 'storm')}, "
               f"{plural(len(report.turbidity), 'turbidity contrast')}, "
               f"{plural(len(report.unknown), 'UNKNOWN interval')}, "
               f"{plural(len(report.orders), 'work order')}"
               + (f"; {report.not_yet_text()}" if report.not_yet is not None else ""))


def archive_cmd(
    site: Path = typer.Option(..., "--site", metavar="FILE", help="The site's YAML file."),
    start: str = typer.Option(..., "--from", metavar="TIME", help="Start, ISO 8601 (a date: local midnight)."),
    end: str = typer.Option(..., "--until", metavar="TIME", help="End, exclusive, ISO 8601."),
    output: Path = typer.Option(..., "--output", "-o", metavar="FILE", help="The bundle to write (a .zip file)."),
    store: str = typer.Option(_DEFAULT_STORE, "--store", metavar="URL", envvar="STORMWATCH_STORE",
                              help="Store URL with the site's readings and events."),
    state_dir: Path = typer.Option(_DEFAULT_STATE, "--state-dir", metavar="DIR",
                                   help="State directory of the alert service or the demo (its work orders)."),
    no_work_orders: bool = _NO_WORK_ORDERS,
) -> None:
    """Write a site's records of a period -- readings, ordinance events, work orders with their history
    and photos, enforcement cases with their register -- to one portable bundle (ZIP: CSV + JSON, a
    manifest and SHA-256 checksums) to keep for five years. `stormwatch import-archive` loads it back,
    losslessly.
    """
    from stormwatch.alerts.cli import parse_when
    from stormwatch.alerts.packs import PackError
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.config import ConfigError
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.report.archive import write_bundle
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import redact

    try:
        cfg = load_site_file(site, ProfileLibrary())
        t1, t2 = parse_when(start, cfg.site.timezone, "--from"), parse_when(end, cfg.site.timezone, "--until")
    except (ConfigError, PackError) as exc:
        fail(str(exc))
    except typer.BadParameter as exc:
        fail(exc.format_message())
    if t2 <= t1:
        fail(f"--until ({t2.isoformat()}) must be after --from ({t1.isoformat()})")
    output_path(output)
    book = _book(state_dir, wall_time=False, without=no_work_orders)[0]
    cases = _cases(state_dir, book)
    opened = _open_store(store, book)
    try:
        counts = write_bundle(output, cfg, site, opened, book, t1.astimezone(UTC), t2.astimezone(UTC),
                              store_name=redact(store), cases=cases)
    except StoreError as exc:
        fail(str(exc), 1)
    except OSError as exc:
        fail(f"--output {output}: {exc.strerror or exc}", 1)
    finally:
        opened.close()
        for held in (book, cases):
            if held is not None:
                held.close()
    typer.echo(f"{output}: {plural(counts.readings, 'reading')}, {plural(counts.events, 'event')}, "
               f"{plural(counts.orders, 'work order')}, {plural(counts.cases, 'enforcement case')} of {cfg.site.id} "
               f"from {t1.isoformat()} until {t2.isoformat()}")


def _cases(state_dir: Path, book: WorkOrders | None):  # type: ignore[no-untyped-def]
    """The enforcement cases of ``state_dir`` (``None`` when no case was ever opened there), on the
    work-order book's clock. ``book`` is closed when the file cannot be opened."""
    from stormwatch.clock import WallClock
    from stormwatch.enforcement.actions import CaseError
    from stormwatch.enforcement.cases import CASES_FILE, EnforcementBook

    path = state_dir / CASES_FILE
    if not path.is_file():
        return None
    try:
        return EnforcementBook(path, book.clock if book is not None else WallClock())
    except CaseError as exc:
        if book is not None:
            book.close()
        fail(str(exc))


def import_archive_cmd(
    bundle: Path = typer.Argument(..., metavar="FILE", help="A bundle written by `stormwatch archive`."),
    store: str = typer.Option(_DEFAULT_STORE, "--store", metavar="URL", envvar="STORMWATCH_STORE",
                              help="Store URL to load the readings and events into (created if new)."),
    state_dir: Path = typer.Option(_DEFAULT_STATE, "--state-dir", metavar="DIR",
                                   help="Load the work orders into this state directory (created if missing, in a "
                                        "directory that exists)."),
) -> None:
    """Load a bundle written by `stormwatch archive` back into a store and a work-order state, after
    checking every SHA-256 checksum. Loading the same bundle twice adds nothing."""
    from stormwatch.alerts.cli import STATE_FILE
    from stormwatch.alerts.workorders import WorkOrderError, WorkOrders
    from stormwatch.clock import WallClock
    from stormwatch.enforcement.actions import CaseError
    from stormwatch.enforcement.cases import CASES_FILE, EnforcementBook
    from stormwatch.report.archive import ArchiveError, load_bundle
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    if not bundle.is_file():
        fail(f"{bundle}: no such file")
    use_state_dir(state_dir, create=True)  # before the store: a typo creates nothing
    try:
        opened = open_store(store)
    except (StoreUrlError, StoreError) as exc:
        fail(f"--store {redact(store)}: {exc}")
    try:
        book = WorkOrders(state_dir / STATE_FILE, WallClock())
        cases = EnforcementBook(state_dir / CASES_FILE, WallClock())
    except (OSError, WorkOrderError, CaseError) as exc:
        opened.close()
        fail(f"--state-dir {state_dir}: {exc}")
    try:
        manifest, counts = load_bundle(bundle, opened, book, cases)
    except (ArchiveError, WorkOrderError, CaseError) as exc:
        fail(f"{bundle}: {exc}")
    except StoreError as exc:
        fail(str(exc), 1)
    finally:
        opened.close()
        book.close()
        cases.close()
    members = manifest["members"]
    events = (f"{plural(counts.events, 'new event')} (of {members['events.jsonl']['rows']})" if counts.events_known
              else f"{plural(counts.events, 'event')} written (this store cannot tell which were new)")
    typer.echo(f"{bundle}: site {manifest['site']['id']} from {manifest['from']} until {manifest['until']}: "
               f"{plural(counts.readings, 'new reading')} (of {members['readings.csv']['rows']}), {events}, "
               f"{plural(counts.orders, 'work order')} added (of {members['workorders.jsonl']['rows']})"
               + (f", {plural(counts.cases, 'enforcement case')} added (of {members['enforcement.jsonl']['rows']})"
                  if "enforcement.jsonl" in members else ""))


def register(app: typer.Typer) -> None:
    """Add ``report``, ``archive`` and ``import-archive`` to the ``stormwatch`` command."""
    app.command("report")(report_cmd)
    app.command("archive")(archive_cmd)
    app.command("import-archive")(import_archive_cmd)
