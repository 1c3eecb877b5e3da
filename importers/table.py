"""A logger file parsed into a table: columns, units, data lines with their line numbers, times.

The readers (:mod:`stormwatch.importers.toa5`, :mod:`stormwatch.importers.hobo`,
:mod:`stormwatch.importers.rtl433`,
:mod:`stormwatch.importers.generic`) each
turn a file's header into a :class:`Table`; everything after that is format-independent.
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stormwatch.errors import InputError
from stormwatch.importers.options import TipsPerRow
from stormwatch.numbers import parse_float

log = logging.getLogger(__name__)

#: ``name [unit]`` or ``name (unit)`` at the end of a column name (e.g. ``Range [cm]``).
_BRACKET_UNIT = re.compile(r"^(?P<name>.*?)\s*[\[(](?P<unit>[^\])]*)[\])]\s*$")

#: Pseudo time format meaning ISO 8601 (``datetime.fromisoformat``: ``2019-12-18 13:35:00``,
#: ``2022-08-25T07:05:10Z``, fractional seconds, offsets).
ISO = "iso"
#: Pseudo time format meaning Unix seconds (``1676098711``, ``1676098711.25``; always UTC).
UNIX = "unix"


class TableError(InputError):
    """A file whose header cannot be understood; the message names the file (and line)."""


#: Bytes looked at for NUL bytes (a binary file) -- the same heuristic as ``git`` and ``grep``.
BINARY_PROBE_BYTES = 8192


def read_lines(path: Path) -> list[str]:
    """The file's lines (UTF-8, with or without BOM; UTF-16 with a BOM; Windows-1252 as a fallback
    for old exports).

    Raises:
        TableError: unreadable file, or a binary file (a NUL byte in the first 8 KiB of a file
            without a UTF-16 BOM).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TableError(f"{path}: cannot read: {exc}") from exc
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16").lstrip("\ufeff").splitlines()
        except UnicodeDecodeError as exc:
            raise TableError(f"{path}: starts with a UTF-16 byte-order mark but is not UTF-16: {exc}") from exc
    if b"\x00" in data[:BINARY_PROBE_BYTES]:
        raise TableError(f"{path}: binary file, not a delimited text/TOA5/HOBO export")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        log.info("%s is not UTF-8: reading it as Windows-1252", path)
        text = data.decode("cp1252", errors="replace")
    return text.splitlines()


def split_line(line: str, delimiter: str) -> tuple[str, ...]:
    """The fields of one CSV line (quotes removed, surrounding space kept for cells)."""
    return tuple(next(csv.reader([line], delimiter=delimiter), []))


def header_unit(name: str) -> tuple[str, str | None]:
    """``("Range", "cm")`` for ``"Range [cm]"``; ``(name, None)`` when the name carries no unit."""
    m = _BRACKET_UNIT.match(name)
    if m and m.group("unit").strip():
        return m.group("name").strip(), m.group("unit").strip()
    return name.strip(), None


#: A fixed offset as headers write it: ``GMT-04:00``, ``UTC+1``, ``UTC+0530``.
_HEADER_OFFSET = re.compile(r"^(?:GMT|UTC)\s*(?P<sign>[+-])(?P<h>\d{1,2})(?::?(?P<m>\d{2}))?$", re.IGNORECASE)


def header_zone(column: str) -> tzinfo | None:
    """The zone a time column's header names in brackets -- ``Time [UTC]``, ``Time (GMT-04:00)``,
    ``Zeit [Europe/Berlin]`` -- or ``None`` when it names none (the file says how its clock ran,
    and that wins over a default or ``--tz``, as HOBOware's ``Date Time, GMT-04:00`` does)."""
    unit = header_unit(column)[1]
    if unit is None:
        return None
    if unit.upper() in ("UTC", "GMT", "Z"):
        return UTC
    m = _HEADER_OFFSET.match(unit)
    if m:
        delta = timedelta(hours=int(m.group("h")), minutes=int(m.group("m") or 0))
        return timezone(-delta if m.group("sign") == "-" else delta)
    if "/" in unit:
        try:
            return ZoneInfo(unit)
        except (ZoneInfoNotFoundError, ValueError):
            return None
    return None


class TimeParser:
    """Parses one file's time column into UTC.

    Args:
        formats: candidate :func:`~datetime.datetime.strptime` formats (or :data:`ISO`); the first
            one that parses a row is then used for the whole file (a file has one format).
        zone: the zone of times that carry no offset (an IANA zone, or a fixed offset such as
            HOBOware's ``GMT-04:00``).

    Local times at a daylight-saving change (times without an offset, in a zone with DST):

    * the repeated hour when clocks go back (01:30 twice in New York on the first Sunday of
      November) is the first occurrence, unless that would put the row before the one read just
      before it -- a logger writing in order has gone on into the second occurrence (01:59 EDT,
      then 01:00 is 01:00 EST, an hour later, not an hour earlier);
    * a time in the hour skipped when clocks go forward (02:30 in New York on the second Sunday of
      March) never happened on that clock: it is refused (``ValueError``; an import rejects the row
      ``bad_time``) rather than shifted to a time the logger never wrote.
    """

    def __init__(self, formats: Sequence[str], zone: tzinfo, source: str = "--tz") -> None:
        if not formats:
            raise ValueError("at least one time format is needed")
        self.formats = list(formats)
        self.zone = zone
        #: where ``zone`` came from (:data:`stormwatch.importers.options.ZoneSource`)
        self.source = source
        #: times read without an offset, so in ``zone`` (the summary says how many, and the zone)
        self.local_times = 0
        self._locked: str | None = None
        self._previous: datetime | None = None  # the UTC instant of the row parsed before

    @property
    def zone_name(self) -> str:
        """The zone as a person names it (``America/New_York``, ``UTC-04:00``)."""
        return str(getattr(self.zone, "key", None) or self.zone)

    @property
    def format(self) -> str | None:
        """The format in use (after the first parsed row)."""
        return self._locked

    def _one(self, text: str, fmt: str) -> datetime:
        if fmt == UNIX:
            try:
                return datetime.fromtimestamp(parse_float(text), UTC)
            except (OverflowError, OSError) as exc:
                raise ValueError(f"time {text!r}: {exc}") from None
        return datetime.fromisoformat(text) if fmt == ISO else datetime.strptime(text, fmt)

    def parse(self, text: str) -> datetime:
        """The UTC instant of ``text``.

        Raises:
            ValueError: ``text`` does not match the file's format.
        """
        cell = text.strip().strip('"').strip()
        if self._locked is not None:
            when = self._one(cell, self._locked)
        else:
            for fmt in self.formats:
                try:
                    when = self._one(cell, fmt)
                except ValueError:
                    continue
                self._locked = fmt
                break
            else:
                tried = ", ".join(repr(f) for f in self.formats)
                raise ValueError(f"time {text!r} matches none of the formats {tried}")
        if when.tzinfo is None:
            when = logger_local(when, self.zone, self._previous, cell)
            self.local_times += 1
        utc = when.astimezone(UTC)
        self._previous = utc
        return utc


def logger_local(naive: datetime, zone: tzinfo, previous: datetime | None = None, cell: str | None = None) -> datetime:
    """``naive`` read on a logger's clock in ``zone`` -- the one rule of every file row and file
    time (:class:`TimeParser`'s docstring): in the hour repeated when clocks go back, the first
    occurrence unless that puts it before ``previous`` (the UTC instant of the row before); a time
    in the hour skipped when they go forward is refused.

    Raises:
        ValueError: a time the zone's clocks skip (names the zone).
    """
    first = naive.replace(tzinfo=zone, fold=0)
    second = naive.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first  # no DST change at this time (or a fixed-offset zone)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive:
        shown = repr(cell) if cell is not None else naive.isoformat(sep=" ")
        raise ValueError(f"time {shown} does not exist in {getattr(zone, 'key', zone)}: the clocks went forward "
                         "over it (daylight saving time); a logger on that clock never wrote it")
    if previous is not None and first.astimezone(UTC) < previous <= second.astimezone(UTC):
        return second
    return first


@dataclass(frozen=True)
class Table:
    """A parsed file.

    Attributes:
        path: the file.
        format: ``toa5``, ``hobo`` or ``generic``.
        columns: column names as the header writes them.
        units: each column's unit from the file (normalised by the reader), or ``None``.
        lines: ``(line number, fields)`` of every data line (1-based line numbers of the file).
        time_column: index of the time column.
        time: the time parser of this file.
        skip_columns: indexes that are bookkeeping, never data (``RECORD``, HOBO ``#``).
        delimiter: the field delimiter.
        rain_column: the column a rain import reads by default (rtl_433's ``rain_mm``/``rain_in``),
            ``None``: the first data column.
        rain_per_row: how that column is read by default (``--tips-per-row``).
        duplicate_lines: lines the reader dropped as repeats of an earlier line (rtl_433 sends every
            message up to three times).
        ignored_lines: lines that are not data of the imported device (other sensors, other
            message types, rtl_433 statistics).
    """

    path: Path
    format: str
    columns: tuple[str, ...]
    units: tuple[str | None, ...]
    lines: tuple[tuple[int, tuple[str, ...]], ...]
    time_column: int
    time: TimeParser
    skip_columns: frozenset[int] = frozenset()
    delimiter: str = ","
    rain_column: int | None = None
    rain_per_row: TipsPerRow = "depth"
    duplicate_lines: int = 0
    ignored_lines: int = 0

    def column(self, name: str) -> int:
        """Index of the column ``name``: the exact header text, the name without its unit
        (``Range`` for ``Range [cm]``, ``Temp`` for HOBO's ``Temp, °C (LGR S/N: ...)``) or a 0-based
        index.

        Raises:
            TableError: no such column, or the short name matches several (the columns are listed).
        """
        wanted = name.strip()
        stripped = [c.strip() for c in self.columns]
        if wanted in stripped:
            return stripped.index(wanted)
        short = [i for i, c in enumerate(stripped) if _short_name(c) == wanted]
        if len(short) == 1:
            return short[0]
        if wanted.isdigit() and int(wanted) < len(self.columns):
            return int(wanted)
        if wanted.isdigit() and not short:
            raise TableError(f"{self.path}: no column {name!r}: the file has {len(self.columns)} columns, indexes "
                             f"0 to {len(self.columns) - 1} (columns: {', '.join(stripped)})")
        what = "several columns" if short else "no column"
        raise TableError(f"{self.path}: {what} named {name!r} (columns: {', '.join(stripped)})")

    def data_columns(self) -> list[int]:
        """Indexes of the columns that may hold values (not the time, not bookkeeping, named)."""
        return [i for i, c in enumerate(self.columns)
                if i != self.time_column and i not in self.skip_columns and c.strip()]


def _short_name(column: str) -> str:
    name = column.split(",", 1)[0]
    return header_unit(name)[0].strip()
