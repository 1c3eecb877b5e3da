"""Import a representative station's precipitation record (``stormwatch station import``).

A site names the record in its site file (``fallback_gauge:``, :class:`stormwatch.config.FallbackGauge`);
R1 uses it ONLY for the periods when the site's own rain gauge has a data gap (rules.md R1,
"Fallback gauge"). Formats: NOAA GHCN-Daily, NOAA hourly precipitation (TD-3240/HPD), or any
delimited file; a missing value is never imported as zero.

The design: docs/importing.md ("The modules", `importers/station.py`).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from stormwatch.config import FallbackGauge, SiteConfig
from stormwatch.contract import Reading
from stormwatch.display import plural
from stormwatch.errors import InputError
from stormwatch.importers.cells import CellError, parse_cell
from stormwatch.importers.detect import open_table
from stormwatch.importers.identity import import_seq
from stormwatch.importers.options import ImportOptions, ZoneSource, zone_note, zone_origin
from stormwatch.importers.table import TableError, logger_local, read_lines
from stormwatch.numbers import parse_int
from stormwatch.physics import envelope_mm
from stormwatch.rain import MM_PER_IN, PRECIPITATION, STATION_GATEWAY
from stormwatch.stores.base import ReadingStore
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

StationFormat = Literal["ghcn-daily", "hpd", "delimited"]
#: The formats and the interval (minutes) one value of each covers (``None``: the user says).
FORMAT_INTERVALS: dict[str, int | None] = {"ghcn-daily": 1440, "hpd": 60, "delimited": None}
#: Flags of a TD-3240 value that make the hour unknown: accumulation start/end (the amount fell
#: over several hours), deleted, missing, incomplete.
HPD_UNKNOWN_FLAGS = frozenset("aA{}[]MI")


class StationImportError(InputError):
    """The station file cannot be imported as asked; nothing was stored. The message says why."""


@dataclass(frozen=True)
class StationValue:
    """One value of a station record: ``value`` ``unit`` of rain in the interval ending at ``end``."""

    end: datetime
    value: Decimal
    unit: Literal["mm", "[in_i]"]
    line: int


@dataclass
class StationRecord:
    """A parsed station file: its values, the station ids it names, and what it could not use."""

    values: list[StationValue] = field(default_factory=list)
    stations: set[str] = field(default_factory=set)
    gaps: int = 0  # missing or unusable values (unknown, never zero)
    rejects: Counter[str] = field(default_factory=Counter)
    first_reject: str | None = None
    lines: int = 0
    local_times: int = 0  # delimited: times without an offset (read in the zone)

    def reject(self, reason: str, where: str) -> None:
        self.rejects[reason] += 1
        if self.first_reject is None:
            self.first_reject = where


@dataclass
class StationImportSummary:
    """The outcome of one ``stormwatch station import``."""

    path: str
    site: str
    station: str
    format: str
    interval_minutes: int
    lines: int = 0
    values: int = 0
    stored: int = 0
    already_stored: int = 0
    gaps: int = 0
    depth_mm: Decimal = Decimal(0)
    rejects: dict[str, int] = field(default_factory=dict)
    first_reject: str | None = None
    first: datetime | None = None
    last: datetime | None = None
    tz: str = "UTC"
    tz_source: str = "site"
    times: str = ""  # how the file's times were read in ``tz``, for a person

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary (times RFC 3339 UTC)."""
        return {"file": self.path, "site": self.site, "station": self.station, "format": self.format,
                "interval_minutes": self.interval_minutes, "lines": self.lines, "values": self.values,
                "stored": self.stored, "already_stored": self.already_stored, "gaps": self.gaps,
                "depth_mm": float(self.depth_mm), "rejected": dict(self.rejects),
                "first_rejected": self.first_reject,
                "first": format_time(self.first) if self.first else None,
                "last": format_time(self.last) if self.last else None,
                "tz": self.tz, "tz_source": self.tz_source, "times": self.times}

    def lines_out(self) -> list[str]:
        """The summary for a person."""
        span = f"{format_time(self.first)} .. {format_time(self.last)}" if self.first and self.last else "no values"
        out = [f"imported {self.path} ({self.format}) as station {self.station} of site {self.site}: {span}",
               f"  lines read:       {self.lines}",
               f"  values:           {self.values} of {self.interval_minutes} min, "
               f"{self.depth_mm.normalize():f} mm in all",
               f"  stored:           {self.stored} new, {self.already_stored} already stored",
               f"  gaps (no value):  {self.gaps}",
               f"  times:            {self.times}"]
        rejected = sum(self.rejects.values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(self.rejects.items()))
        out.append(f"  rejected:         {rejected}" + (f" ({detail})" if rejected else ""))
        if self.first_reject:
            out.append(f"  first rejected:   {self.first_reject}")
        return out


def _day_end(day: date, ends: time | None, zone: tzinfo) -> datetime:
    """The end (UTC) of the observation day ``day``: ``ends`` local time that day, read by the
    file-time rule (:func:`~stormwatch.importers.table.logger_local`: a time the clocks skip that day
    is refused, a repeated one is the first), or the midnight after it -- the start of the next
    local day, which is the instant the clocks jump where they skip midnight itself.

    Raises:
        ValueError: ``ends`` does not exist that day in ``zone``.
    """
    if ends is None:
        return datetime.combine(day + timedelta(days=1), time(0), zone).astimezone(UTC)
    return logger_local(datetime.combine(day, ends), zone).astimezone(UTC)


def parse_ghcn_daily(path: Path, lines: Sequence[str], zone: tzinfo, day_ends: time | None) -> StationRecord:
    """The ``PRCP`` values of a GHCN-Daily ``.dly`` file (see the module docstring)."""
    rec = StationRecord()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec.lines += 1
        where = f"{path}:{n}"
        if len(line) < 21 or not line[11:17].isdigit():
            rec.reject("not_ghcn_daily", f"{where}: not a GHCN-Daily line (ID, year, month, element)")
            continue
        if line[17:21] != "PRCP":
            continue  # other elements (TMAX, SNOW, ...) are not rain
        station, year, month = line[0:11].strip(), int(line[11:15]), int(line[15:17])
        rec.stations.add(station)
        for d in range(31):
            cell = line[21 + 8 * d: 29 + 8 * d]
            if len(cell) < 5:
                break
            raw, mflag, qflag = cell[0:5], cell[5:6], cell[6:7]
            try:
                value = parse_int(raw.strip())  # ASCII digits only (stormwatch.numbers)
            except ValueError:
                rec.reject("bad_value", f"{where}: day {d + 1}: {raw!r} is not a whole number of tenths of mm")
                continue
            if value == -9999:
                try:
                    date(year, month, d + 1)
                except ValueError:
                    continue  # the days a month does not have
                rec.gaps += 1
                continue
            if qflag.strip():
                rec.gaps += 1
                rec.reject("failed_qc", f"{where}: day {d + 1}: QFLAG {qflag!r} (failed a NOAA quality check)")
                continue
            if value < 0:
                rec.reject("negative", f"{where}: day {d + 1}: {value} tenths of mm")
                continue
            if mflag == "T":
                value = 0
            try:
                day = date(year, month, d + 1)
            except ValueError:
                rec.reject("bad_date", f"{where}: day {d + 1} of {year}-{month:02d} does not exist")
                continue
            try:
                end = _day_end(day, day_ends, zone)
            except ValueError as exc:
                rec.reject("bad_time", f"{where}: day {d + 1}: the day's end (--day-ends): {exc}")
                continue
            rec.values.append(StationValue(end, Decimal(value) / 10, "mm", n))
    return rec


def _standard_offset(zone: tzinfo, day: date) -> timedelta:
    """The zone's standard (not daylight) UTC offset on ``day``: TD-3240 hours are local standard time."""
    noon = datetime.combine(day, time(12), zone)
    return (noon.utcoffset() or timedelta(0)) - (noon.dst() or timedelta(0))


def parse_hpd(path: Path, lines: Sequence[str], zone: tzinfo) -> StationRecord:
    """The hourly values of a TD-3240 (HPD) file (see the module docstring)."""
    rec = StationRecord()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec.lines += 1
        where = f"{path}:{n}"
        head = line[0:30]
        if not head.startswith("HPD") or len(head) < 30 or not head[17:30].replace(" ", "0").isdigit():
            rec.reject("not_hpd", f"{where}: not a TD-3240 record (HPD, station, HPCP, units, date, count)")
            continue
        if head[11:15] != "HPCP":
            continue
        units = head[15:17]
        if units not in ("HI", "HT"):
            rec.reject("bad_units", f"{where}: units {units!r} (HI: hundredths of an inch, HT: tenths of a mm)")
            continue
        rec.stations.add(head[3:9])
        try:
            day = date(int(head[17:21]), int(head[21:23]), int(head[25:27]))
        except ValueError:
            rec.reject("bad_date", f"{where}: date {head[17:27]!r} does not exist")
            continue
        count = int(head[27:30])
        local_midnight = datetime.combine(day, time(0)).replace(tzinfo=UTC) - _standard_offset(zone, day)
        for i in range(count):
            group = line[30 + 12 * i: 42 + 12 * i].ljust(12)
            hhmm, raw, flag = group[0:4], group[4:10], group[10]
            if not (hhmm.isascii() and hhmm.isdigit() and raw.strip().isascii() and raw.strip().isdigit()):
                rec.reject("bad_value", f"{where}: value {i + 1}: {group!r} is not HHMM + a 6-digit amount")
                continue
            if hhmm == "2500":
                continue  # the day's total, not an interval
            hour, minute = int(hhmm[:2]), int(hhmm[2:])
            amount = int(raw)
            if amount == 99999 or flag in HPD_UNKNOWN_FLAGS:
                rec.gaps += 1
                continue
            if flag == "T":
                amount = 0
            if not (1 <= hour <= 24 and minute == 0):
                rec.reject("bad_hour", f"{where}: hour {hhmm!r} (hours end at 0100 .. 2400)")
                continue
            end = local_midnight + timedelta(hours=hour)
            value, unit = (Decimal(amount) / 100, "[in_i]") if units == "HI" else (Decimal(amount) / 10, "mm")
            rec.values.append(StationValue(end, value, unit, n))  # type: ignore[arg-type]
    return rec


#: Depth units a delimited station file may be in (as ``--unit`` writes them) -> the stored unit.
DELIMITED_UNITS: dict[str, Literal["mm", "[in_i]"]] = {"mm": "mm", "in": "[in_i]", "[in_i]": "[in_i]"}


def parse_delimited(path: Path, options: ImportOptions, shift: timedelta) -> StationRecord:
    """The values of a delimited file: the time column and ``options.value_columns[0]`` (its unit
    ``mm`` or ``in``); ``shift`` is added to each time (the interval, when times mark its start).

    Raises:
        TableError: unreadable file, no header, or no such column.
        StationImportError: not one depth column in mm or in.
    """
    if len(options.value_columns) != 1:
        raise StationImportError("a delimited station file is read as one depth column (--value-column)")
    spec = options.value_columns[0]
    unit = DELIMITED_UNITS.get(spec.unit or "")
    if spec.quantity != PRECIPITATION or unit is None:
        raise StationImportError(f"--value-column {spec.name}={spec.quantity}:{spec.unit or ''}: a station's depth "
                                 f"column is NAME={PRECIPITATION}:mm or NAME={PRECIPITATION}:in")
    table = open_table(path, options)
    column = table.column(spec.name)
    rec = StationRecord()
    for n, fields in table.lines:
        rec.lines += 1
        where = f"{path}:{n}"
        if max(column, table.time_column) >= len(fields):
            rec.reject("short_row", f"{where}: {plural(len(fields), 'field')}")
            continue
        try:
            end = table.time.parse(fields[table.time_column]) + shift
        except ValueError as exc:
            rec.reject("bad_time", f"{where}: {exc}")
            continue
        try:
            value = parse_cell(fields[column], options.gap_values, decimal_comma=table.delimiter != ",")
        except CellError as exc:
            rec.reject("bad_value", f"{where}: {exc}")
            continue
        if value is None:
            rec.gaps += 1
            continue
        if value < 0:
            rec.reject("negative", f"{where}: {value} {unit}")
            continue
        rec.values.append(StationValue(end, value, unit, n))
    rec.local_times = table.time.local_times
    return rec


def _times_read(fmt: StationFormat, zone: str, source: str, day_ends: time | None, local_times: int,
                options: ImportOptions | None) -> str:
    """How a station file's times were read, for a person (the summary's ``times`` line)."""
    if fmt == "ghcn-daily":
        ends = f"at {day_ends:%H:%M}" if day_ends is not None else "at midnight"
        return f"days end {ends} in {zone} ({zone_origin(source)})"
    if fmt == "hpd":
        return f"hours in the standard time of {zone} (TD-3240; {zone_origin(source)})"
    if options is not None and options.tz is not None:
        return zone_note(options.tz, options.tz_source, local_times)
    return zone_note(zone, source, local_times)


def detect_station_format(lines: Sequence[str]) -> StationFormat:
    """``hpd`` (TD-3240 records), ``ghcn-daily`` (``.dly`` lines) or ``delimited``, from the first line."""
    first = next((line for line in lines if line.strip()), "")
    if first.startswith("HPD") and first[11:15] == "HPCP":
        return "hpd"
    if len(first) >= 29 and first[11:17].isdigit() and first[17:21].isalpha() and first[17:21].isupper():
        return "ghcn-daily"
    return "delimited"


def station_boot(site: str, station: str, unit: str) -> str:
    """The ``boot`` of one station's stored values at a site (stable across imports)."""
    digest = hashlib.sha256("\x00".join((site, station, PRECIPITATION, unit)).encode("utf-8")).hexdigest()
    return f"station-{digest[:16]}"


def _matches(named: str, station: str) -> bool:
    """A file's station id is the site's: equal, or a COOP number the GHCN id ends with."""
    return named == station or (named.isdigit() and len(named) == 6 and station.endswith(named))


def to_readings(rec: StationRecord, site: str, fb: FallbackGauge, path: Path) -> list[Reading]:
    """Readings of the record's values (one per interval end; refusing values beyond the envelope
    and a second value at one time)."""
    span_s = fb.interval_minutes * 60.0
    out: dict[datetime, Reading] = {}
    for v in sorted(rec.values, key=lambda v: v.end):
        mm = v.value if v.unit == "mm" else v.value * Decimal(str(float(MM_PER_IN)))
        if float(mm) > envelope_mm(span_s):
            rec.reject("beyond_envelope", f"{path}:{v.line}: {v.value} {v.unit} in {fb.interval_minutes} min is "
                                          f"more than the world-record envelope ({envelope_mm(span_s):.0f} mm)")
            continue
        if v.end in out:
            if out[v.end].value != float(v.value):
                rec.reject("conflicting_time", f"{path}:{v.line}: a second value for {format_time(v.end)}")
            continue
        out[v.end] = Reading(site=site, device=fb.station, quantity=PRECIPITATION, value=float(v.value), unit=v.unit,
                             time=v.end, gateway=STATION_GATEWAY, boot=station_boot(site, fb.station, v.unit),
                             seq=import_seq(v.end), raw=f"{v.value} {v.unit}")
    return list(out.values())


def import_station(path: Path, cfg: SiteConfig, store: ReadingStore, fmt: StationFormat, *,
                   tz: str | None = None, day_ends: time | None = None, options: ImportOptions | None = None,
                   time_marks: Literal["end", "start"] = "end", batch_size: int = 5000) -> StationImportSummary:
    """Import the station record at ``path`` for ``cfg``'s ``fallback_gauge`` into ``store``.

    Args:
        path: the file.
        cfg: the site (its ``fallback_gauge`` names the station and the interval of its values).
        store: where the readings go.
        fmt: ``ghcn-daily``, ``hpd`` or ``delimited``.
        tz: IANA zone of the file's local times (``--tz``; default: the site's); TD-3240 uses its
            standard time. The summary says which zone was used and how.
        day_ends: GHCN-Daily observation time (``None``: midnight, the calendar day).
        options: delimited only: delimiter, time column and format, skip rows, and the depth column
            (one ``value_columns`` entry whose unit is ``mm`` or ``in``; its zone, when it names
            one, wins over ``tz``).
        time_marks: delimited only: whether a time is the end (default) or the start of its interval.
        batch_size: readings per store write.

    Raises:
        StationImportError: no ``fallback_gauge`` in the site file, a format whose interval is not
            the site's, a file naming another station, or a file with no usable value.
        stormwatch.stores.base.StoreError: the store refused a write (a re-run adds only the rest).
    """
    fb = cfg.fallback_gauge
    if fb is None:
        raise StationImportError(f"site {cfg.site.id!r} has no fallback_gauge in its site file: name the station "
                                 "there first (station, interval_minutes, distance_km; docs/importing.md)")
    fixed = FORMAT_INTERVALS[fmt]
    if fixed is not None and fixed != fb.interval_minutes:
        raise StationImportError(f"a {fmt} file holds {fixed}-minute values but the site's fallback_gauge has "
                                 f"interval_minutes: {fb.interval_minutes}")
    source: ZoneSource = "--tz" if tz else "site"
    zone = ZoneInfo(tz) if tz else cfg.site.tz
    try:
        if fmt == "ghcn-daily":
            rec = parse_ghcn_daily(path, read_lines(path), zone, day_ends)
        elif fmt == "hpd":
            rec = parse_hpd(path, read_lines(path), zone)
        else:
            if options is None:
                raise StationImportError("--format delimited needs --value-column (the depth column) and --unit")
            shift = timedelta(minutes=fb.interval_minutes) if time_marks == "start" else timedelta(0)
            options = options.in_zone(zone.key, source)
            rec = parse_delimited(path, options, shift)
    except TableError as exc:
        raise StationImportError(str(exc)) from exc
    other = sorted(s for s in rec.stations if not _matches(s, fb.station))
    if other:
        raise StationImportError(f"{path} holds station {', '.join(other)}, not the site's fallback_gauge station "
                                 f"{fb.station!r} (nothing imported)")
    readings = to_readings(rec, cfg.site.id, fb, path)
    summary = StationImportSummary(str(path), cfg.site.id, fb.station, fmt, fb.interval_minutes, lines=rec.lines,
                                   values=len(readings), gaps=rec.gaps, rejects=dict(rec.rejects),
                                   first_reject=rec.first_reject, tz=zone.key,
                                   tz_source=source)
    summary.times = _times_read(fmt, summary.tz, source, day_ends, rec.local_times, options)
    if not readings:
        why = f"; first: {rec.first_reject}" if rec.first_reject else ""
        raise StationImportError(f"{path}: no precipitation value to import ({rec.lines} lines, {rec.gaps} gaps, "
                                 f"{sum(rec.rejects.values())} rejected{why}; check --format)")
    summary.first, summary.last = readings[0].time, readings[-1].time
    summary.depth_mm = sum((Decimal(repr(r.value)) * (1 if r.unit == "mm" else Decimal("25.4")) for r in readings),
                           Decimal(0))
    for start in range(0, len(readings), batch_size):
        batch = readings[start:start + batch_size]
        new = store.write_readings(batch)
        summary.stored += new
        summary.already_stored += len(batch) - new
    log.info("station import %s: %s of station %s, %d new, %d already stored, %s, %d rejected", path,
             plural(summary.values, "value"), fb.station, summary.stored, summary.already_stored,
             plural(summary.gaps, "gap"), sum(summary.rejects.values()))
    return summary
