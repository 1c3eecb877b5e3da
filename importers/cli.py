"""``stormwatch import`` and ``stormwatch replay``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stormwatch.alerts.rules.storm import MAX_DRY_GAP_HOURS
from stormwatch.alerts.sitefile import load_site_file
from stormwatch.display import counts, plural
from stormwatch.importers.options import (
    ImportOptions,
    OptionsError,
    TipSpec,
    ValueColumn,
    parse_gap_values,
    parse_select,
    zone_note,
)
from stormwatch.runtime.cliutil import fail, progress

if TYPE_CHECKING:
    from stormwatch.importers.load import ImportSummary
    from stormwatch.stores.base import ReadingStore

log = logging.getLogger(__name__)

_FORMAT = typer.Option("auto", "--format", metavar="FORMAT",
                       help="auto (recognises Campbell TOA5, HOBOware CSV and rtl_433 JSON Lines), generic, toa5, "
                            "hobo or rtl433.")
_DELIMITER = typer.Option(None, "--delimiter", metavar="CHAR",
                          help="Field delimiter of delimited text (default: ',', or ';'/tab when the header has "
                               "one and no comma; '\\t' for tab).")
_TIME_COLUMN = typer.Option(None, "--time-column", metavar="COLUMN",
                            help="The time column: header name or 0-based index (default: the first).")
_TIME_FORMAT = typer.Option(None, "--time-format", metavar="FORMAT",
                            help="strptime format of the times, e.g. '%d.%m.%Y %H:%M' (default: ISO 8601 and "
                                 "year-first forms; day/month order is never guessed).")
_TZ = typer.Option(None, "--tz", metavar="ZONE",
                   help="IANA time zone of the file's times written without an offset (default: the site's "
                        "timezone; HOBOware's GMT offset wins). The summary says which zone was used.")
_REPLAY_TZ = typer.Option(None, "--tz", metavar="ZONE",
                          help="IANA time zone of the file's times written without an offset (default: UTC -- a "
                               "replay has no site; said in its output). Daily totals and due times are in it.")
_VALUE_COLUMN = typer.Option([], "--value-column", metavar="NAME=QUANTITY[:UNIT]",
                             help="A column to import as a quantity, e.g. 'turb_FNU=turbidity:FNU' (repeatable).")
_TIP_MM = typer.Option(None, "--tip-mm", metavar="MM",
                       help="The file holds rain: the gauge's tip size in mm (e.g. 0.2).")
_TIP_IN = typer.Option(None, "--tip-in", metavar="IN",
                       help="The file holds rain: the gauge's tip size in inches (e.g. 0.01).")
_TIPS_COLUMN = typer.Option(None, "--tips-column", metavar="COLUMN",
                            help="The rain column: header name or 0-based index (default: rtl_433's rain_mm/rain_in, "
                                 "else the first data column).")
_TIPS_PER_ROW = typer.Option(None, "--tips-per-row", metavar="HOW",
                             help="depth (default): a cell is rain depth (0.2 = one 0.2 mm tip); count: a tip count; "
                                  "row: every row is one tip; cumulative: running totals of depth (consoles, "
                                  "rtl_433 rain_mm/rain_in -- the default for rtl_433); cumulative-count: running "
                                  "totals of tips. A total that does not change is no rain; a drop is a reset (a "
                                  "data gap), never rain.")
_COUNTER_BITS = typer.Option(None, "--counter-bits", metavar="N",
                             help="A running total wraps at 2^N (e.g. 16); default: it never wraps.")
_SELECT = typer.Option([], "--select", metavar="KEY=VALUE",
                       help="JSON Lines: only messages with KEY=VALUE, repeatable "
                            "(e.g. --select model=Acurite-5n1 --select id=3844).")
_SKIP_ROWS = typer.Option(0, "--skip-rows", metavar="N", help="Lines before the header line (generic files).")
_GAP_VALUE = typer.Option([], "--gap-value", metavar="NUMBER",
                          help="Another number meaning 'no value' (besides -9999 and -99999; repeatable).")


def build_options(fmt: str, delimiter: str | None, time_column: str | None, time_format: str | None, tz: str | None,
                  value_column: list[str], tip_mm: str | None, tip_in: str | None, tips_column: str | None,
                  tips_per_row: str | None, skip_rows: int, gap_value: list[str], counter_bits: int | None = None,
                  select: list[str] | None = None) -> ImportOptions:
    """The command-line format options as one :class:`ImportOptions`.

    Raises:
        OptionsError: an option that cannot work.
    """
    if fmt not in ("auto", "generic", "toa5", "hobo", "rtl433"):
        raise OptionsError(f"--format {fmt!r}: expected auto, generic, toa5, hobo or rtl433")
    if delimiter == "\\t":
        delimiter = "\t"
    return ImportOptions(
        format=fmt,  # type: ignore[arg-type]
        delimiter=delimiter, time_column=time_column, time_format=time_format, tz=tz,
        value_columns=tuple(ValueColumn.parse(v) for v in value_column),
        tips=TipSpec.parse(tip_mm, tip_in, tips_column, tips_per_row, counter_bits),
        skip_rows=skip_rows, gap_values=parse_gap_values(gap_value), select=parse_select(select or []),
    )


def _store(url: str) -> ReadingStore:
    """The store an import writes to (created if new, in a directory that exists): a bad URL is bad
    input (exit 2, ``--store URL: why``), a store that cannot be opened a failure (exit 1)."""
    from stormwatch.clock import WallClock
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    try:
        return open_store(url, WallClock())
    except StoreUrlError as exc:
        fail(f"--store {redact(url)}: {exc}")
    except StoreError as exc:
        fail(f"--store {redact(url)}: {exc}", 1)


def import_command(
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The logger file (TOA5, HOBOware CSV, rtl_433 JSON Lines or delimited text).",
                                exists=True, dir_okay=False),
    site: Path = typer.Option(..., "--site", metavar="FILE",
                              help="The site's YAML file (the device is one of its devices)."),
    device: str = typer.Option(..., "--device", metavar="DEVICE_ID",
                               help="The device (its id in the site file) whose data the file holds."),
    store: str = typer.Option("sqlite:///./var/stormwatch.db", "--store", envvar="STORMWATCH_STORE", metavar="URL",
                              help="Where the readings go: sqlite:///FILE, influx1://HOST:PORT/DB or influx2://..."),
    fmt: str = _FORMAT, delimiter: str | None = _DELIMITER, time_column: str | None = _TIME_COLUMN,
    time_format: str | None = _TIME_FORMAT, tz: str | None = _TZ, value_column: list[str] = _VALUE_COLUMN,
    tip_mm: str | None = _TIP_MM, tip_in: str | None = _TIP_IN, tips_column: str | None = _TIPS_COLUMN,
    tips_per_row: str | None = _TIPS_PER_ROW, counter_bits: int | None = _COUNTER_BITS,
    skip_rows: int = _SKIP_ROWS, gap_value: list[str] = _GAP_VALUE, select: list[str] = _SELECT,
    silence: str = typer.Option("gap", "--silence", metavar="dry|gap",
                                help="gap (default): only the file's rows are stored, a stretch without rows is a "
                                     "data gap -- for loggers that write a row every interval (TOA5, HOBO). dry: a "
                                     "rain event log (one row per tip, e.g. a Davis or HOBO event file) -- no row "
                                     "means no tip, and zero-tip readings are stored every poll interval of the "
                                     "device between its rows (a year at 60 s: ~500,000 readings)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a logger file into the store as readings of one device of a site.

    The readings are checked like live data (quality flags, duplicates): re-importing a file adds
    nothing. Malformed rows are skipped and reported with their line. Prints what was read, stored
    and skipped, and the zone the file's times without an offset were read in: the site's, unless
    --tz names the logger's clock (e.g. Etc/GMT+5 for a logger on EST all year).

    Silence between rows: import cannot tell a logger that writes every interval from a rain event
    log, and a wrong "dry" is worse than an honest "unknown", so it stores only the rows (--silence
    gap) unless told the file is an event log (--silence dry). `stormwatch replay`, which reads rain
    event logs only, assumes dry. Example (a tip log; its gauge's profile has the 0.2 mm tip):

      stormwatch import tests/data/tharandt_davis_tips_Sensor1.csv --site site.yaml --device rain-1
      --delimiter ';' --time-format '%d.%m.%Y %H:%M' --tz Europe/Berlin --tip-mm 0.2 --silence dry
    """
    from stormwatch.alerts.packs import PackError
    from stormwatch.clock import WallClock
    from stormwatch.config import ConfigError
    from stormwatch.importers.load import ImportFailed, import_file
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import redact

    try:
        if silence not in ("dry", "gap"):
            raise OptionsError(f"--silence {silence!r}: expected dry or gap")
        options = build_options(fmt, delimiter, time_column, time_format, tz, value_column, tip_mm, tip_in,
                                tips_column, tips_per_row, skip_rows, gap_value, counter_bits, select)
        profiles = ProfileLibrary()
        cfg = load_site_file(site, profiles)
    except (OptionsError, ConfigError, PackError) as exc:
        fail(str(exc))
    opened = _store(store)
    try:
        with progress(f"import {file.name}") as report:
            summary = import_file(file, cfg, device, profiles, opened, options, WallClock(), report,
                                  silence=silence)  # type: ignore[arg-type]
    except ImportFailed as exc:
        fail(str(exc))
    except StoreError as exc:
        fail(f"store {redact(store)}: {exc} (re-run the import: nothing will be duplicated)", 1)
    finally:
        opened.close()
    _print_summary(summary.to_json() if as_json else None, summary.lines(), redact(store))
    problem = nothing_stored(summary)
    if problem:
        fail(problem, 1)


def _print_summary(as_json: dict[str, object] | None, lines: list[str], store: str) -> None:
    """An import's summary: one JSON object (``--json``), else its lines and the store (redacted)."""
    if as_json is not None:
        typer.echo(json.dumps(as_json, ensure_ascii=False))
    else:
        typer.echo("\n".join([*lines, f"  store:            {store}"]))


def nothing_stored(summary: ImportSummary) -> str | None:
    """Why an import that stored nothing failed (rows or readings rejected), or ``None``."""
    rejected = sum(summary.rejected_rows.values())
    dead = sum(summary.dead_lettered.values())
    if summary.readings_stored or summary.already_stored or not (rejected or dead):
        return None
    first = f"; first: {summary.rejects[0].detail}" if summary.rejects else ""
    what = [f"{rejected} of {plural(summary.rows_read, 'row')} rejected ({counts(summary.rejected_rows)})"] \
        if rejected else []
    if dead:
        what.append(f"{plural(dead, 'reading')} dead-lettered ({counts(summary.dead_lettered)})")
    hint = ("the gateway's readings already cover these rows: nothing to add"
            if set(summary.rejected_rows) == {"overlaps_stored"} and not dead
            else "check --format, --delimiter, --time-format")
    return f"{summary.path}: nothing stored: {', '.join(what)}{first} ({hint})"


def replay_command(
    file: Path = typer.Argument(..., metavar="FILE", help="The rain file (TOA5, HOBOware CSV or delimited text).",
                                exists=True, dir_okay=False),
    fmt: str = _FORMAT, delimiter: str | None = _DELIMITER, time_column: str | None = _TIME_COLUMN,
    time_format: str | None = _TIME_FORMAT, tz: str | None = _REPLAY_TZ, value_column: list[str] = _VALUE_COLUMN,
    tip_mm: str | None = _TIP_MM, tip_in: str | None = _TIP_IN, tips_column: str | None = _TIPS_COLUMN,
    tips_per_row: str | None = _TIPS_PER_ROW, counter_bits: int | None = _COUNTER_BITS,
    skip_rows: int = _SKIP_ROWS, gap_value: list[str] = _GAP_VALUE, select: list[str] = _SELECT,
    jurisdiction: str = typer.Option("ch133", "--jurisdiction", metavar="PACK",
                                     help="The village code's or permit's rule pack (ch133, ch196, epa-cgp-2022, ...; "
                                          "`stormwatch packs list`)."),
    pack_option: list[str] = typer.Option([], "--option", metavar="NAME=CHOICE",
                                          help="A choice among the pack's options, as a site file's 'options:' "
                                               "(e.g. inspection_frequency=14-day-and-storm under epa-cgp-2022); "
                                               "repeatable. Default: the pack's default (said on stderr)."),
    dry_gap_hours: float | None = typer.Option(None, "--dry-gap-hours", min=0.01, max=MAX_DRY_GAP_HOURS,
                                               metavar="HOURS",
                                               help="Dry hours that end a storm (default: the pack's, 6; at most "
                                                    "168, a week: docs/rules.md R1)."),
    silence: str = typer.Option("dry", "--silence", metavar="dry|gap",
                                help="dry: no row = no tip (event loggers); gap: rows are polls, a missing "
                                     "stretch is a data gap."),
    all_events: bool = typer.Option(False, "--all-events",
                                    help="Also print storm_started, storm_qualified and routine events."),
    as_json: bool = typer.Option(False, "--json", help="One JSON event object per line (as `demo --json`)."),
) -> None:
    """What would this rain file have triggered under a village code?

    Runs the storm rule over the file as one rain gauge and prints each inspection it requires
    (storm_inspection_due, and data_gap with --silence gap); smaller storms print nothing. A storm
    still open at the end of the file is listed as in progress.
    """
    from stormwatch.alerts.engine import EngineError
    from stormwatch.alerts.packs import PackError
    from stormwatch.clock import WallClock
    from stormwatch.display import describe_event
    from stormwatch.importers.load import ImportFailed
    from stormwatch.importers.replay import ReplayError, replay_file

    try:
        if silence not in ("dry", "gap"):
            raise OptionsError(f"--silence {silence!r}: expected dry or gap")
        options = build_options(fmt, delimiter, time_column, time_format, tz, value_column, tip_mm, tip_in,
                                tips_column, tips_per_row, skip_rows, gap_value, counter_bits, select)
        chosen: dict[str, str] = {}
        for item in pack_option:
            name, eq, choice = item.partition("=")
            if not eq or not name.strip() or not choice.strip():
                raise OptionsError(f"--option {item!r}: expected NAME=CHOICE (e.g. inspection_frequency=7-day)")
            chosen[name.strip()] = choice.strip()
        with progress(f"replay {file.name}") as report:
            result = replay_file(file, options, WallClock(), jurisdiction=jurisdiction, dry_gap_hours=dry_gap_hours,
                                 silence=silence, progress=report, pack_options=chosen)  # type: ignore[arg-type]
    except (OptionsError, ImportFailed, ReplayError, PackError, EngineError) as exc:
        fail(str(exc))
    events = result.events if all_events else result.triggered()
    tz_info = result.site.site.tz
    for e in events:
        typer.echo(json.dumps(e.to_wire(), ensure_ascii=False) if as_json else describe_event(e, tz_info))
    depth = result.evaluation.depth
    notes = [f"pack {jurisdiction}: options.{name} = {choice}"
             + ("" if name in chosen else f" (the pack's default; --option {name}=CHOICE to choose)")
             for name, choice in result.site.options.items()]
    notes.append(f"times: {zone_note(result.summary.tz, result.summary.tz_source, result.summary.local_times)}")
    notes += result.evaluation.in_progress_lines(tz_info, "the file")
    rejected = sum(result.summary.rejected_rows.values())
    rows_rejected = f"{plural(rejected, 'row')} rejected"
    missing = [rows_rejected] if rejected else []
    missing += [f"{plural(result.summary.gaps, 'cell')} without a value"] if result.summary.gaps else []
    lacking = f"{' and '.join(missing)}: the rain then is unknown" if missing else ""
    notes.append(f"{plural(result.summary.rows_read, 'row')}, {depth(result.summary.tips)}, {rows_rejected}; "
                 f"{result.evaluation.summary(tz_info, lacking)}")
    for note in notes:
        typer.echo(note, err=as_json)


def station_import_command(
    file: Path = typer.Argument(..., metavar="FILE", exists=True, dir_okay=False,
                                help="The station's record: a GHCN-Daily .dly file, a TD-3240 (HPD) hourly file, "
                                     "or delimited text."),
    site: Path = typer.Option(..., "--site", metavar="FILE",
                              help="The site's YAML file; its fallback_gauge names the station and its interval."),
    store: str = typer.Option("sqlite:///./var/stormwatch.db", "--store", envvar="STORMWATCH_STORE", metavar="URL",
                              help="Where the values go: sqlite:///FILE, influx1://HOST:PORT/DB or influx2://..."),
    fmt: str = typer.Option("auto", "--format", metavar="FORMAT",
                            help="auto (recognises GHCN-Daily and TD-3240 lines), ghcn-daily, hpd or delimited."),
    tz: str | None = typer.Option(None, "--tz", metavar="ZONE",
                                  help="IANA zone of the file's local times (default: the site's). TD-3240 hours "
                                       "are read in its standard time."),
    day_ends: str | None = typer.Option(None, "--day-ends", metavar="HH:MM",
                                        help="GHCN-Daily: the station's observation time, which ends its day "
                                             "(e.g. 07:00; default: midnight, the calendar day)."),
    value_column: str | None = typer.Option(None, "--value-column", metavar="NAME=QUANTITY[:UNIT]",
                                            help="Delimited: the depth column as NAME=precipitation:mm (or :in)."),
    time_marks: str = typer.Option("end", "--time-marks", metavar="end|start",
                                   help="Delimited: whether a row's time is the end (default) or the start of "
                                        "the interval its depth fell in."),
    delimiter: str | None = _DELIMITER, time_column: str | None = _TIME_COLUMN,
    time_format: str | None = _TIME_FORMAT, skip_rows: int = _SKIP_ROWS, gap_value: list[str] = _GAP_VALUE,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a weather station's precipitation record as the site's fallback gauge.

    The site file names the station first (``fallback_gauge: {station: USC00304174,
    interval_minutes: 1440, distance_km: 3.2}``). Its values are stored as readings of the station
    and used by the storm rule ONLY for periods when the site's own gauge has a data gap; every
    storm and gap event that counts them says ``source: station <ID>`` (and the distance).
    Missing values are gaps, never zero; re-importing adds nothing.

    Examples:

      stormwatch station import USC00304174.dly --site site.yaml

      stormwatch station import pluvio.csv --site site.yaml --format delimited --delimiter ';'
      --time-format '%d.%m.%Y %H:%M' --value-column pluvio=precipitation:mm
    """
    from datetime import time as clock_time

    from stormwatch.alerts.packs import PackError
    from stormwatch.config import ConfigError
    from stormwatch.importers.station import StationImportError, detect_station_format, import_station
    from stormwatch.importers.table import TableError, read_lines
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import redact

    try:
        if fmt == "auto":
            fmt = detect_station_format(read_lines(file))
        if fmt not in ("ghcn-daily", "hpd", "delimited"):
            raise OptionsError(f"--format {fmt!r}: expected auto, ghcn-daily, hpd or delimited")
        if time_marks not in ("end", "start"):
            raise OptionsError(f"--time-marks {time_marks!r}: expected end or start")
        ends = None
        if day_ends is not None:
            try:
                ends = clock_time.fromisoformat(day_ends)
            except ValueError:
                raise OptionsError(f"--day-ends {day_ends!r}: expected HH:MM (e.g. 07:00)") from None
        cfg = load_site_file(site)
        options = None
        if fmt == "delimited":
            if value_column is None:
                raise OptionsError("--format delimited needs --value-column NAME=precipitation:mm (or :in)")
            options = build_options("generic", delimiter, time_column, time_format, tz, [value_column], None,
                                    None, None, None, skip_rows, gap_value)
    except (OptionsError, ConfigError, PackError, TableError) as exc:
        fail(str(exc))
    opened = _store(store)
    try:
        summary = import_station(file, cfg, opened, fmt,  # type: ignore[arg-type]
                                 tz=tz, day_ends=ends, options=options,
                                 time_marks=time_marks)  # type: ignore[arg-type]
    except (StationImportError, OptionsError) as exc:
        fail(str(exc))
    except StoreError as exc:
        fail(f"store {redact(store)}: {exc} (re-run the import: nothing will be duplicated)", 1)
    finally:
        opened.close()
    _print_summary(summary.to_json() if as_json else None, summary.lines_out(), redact(store))


def register(app: typer.Typer) -> None:
    """Add ``stormwatch import``, ``replay``, ``station import`` and ``readings add``."""
    app.command("import")(import_command)
    app.command("replay")(replay_command)
    station = typer.Typer(help="A weather station's record as the site's fallback gauge (used only in the "
                               "gauge's data gaps).", no_args_is_help=True)
    station.command("import")(station_import_command)
    app.add_typer(station, name="station")
    from stormwatch.importers.manual_cli import readings_app

    app.add_typer(readings_app, name="readings")
