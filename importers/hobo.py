"""Onset HOBOware CSV exports.

Layout (as HOBOware writes it with its default export settings): an optional title line, then a
header whose time column carries the UTC offset the times were exported in, then one line per
sample::

    "Plot Title: 20631045"
    "#","Date Time, GMT-04:00","Temp, °C (LGR S/N: 20631045, SEN S/N: 20631045)","Coupler Attached (LGR S/N: ...)"
    1,06/21/24 11:00:00 AM,21.544,
    2,06/21/24 11:15:00 AM,21.448,Logged

``GMT-04:00`` means local = UTC − 4 h, so UTC = the time + 4 h. Units come from the column name
(``Temp, °C (...)`` -> ``Cel``). Event columns (``Coupler Attached``, ``End Of File``...) are
ignored unless named by ``--value-column``. The date order is HOBOware's preference; month first
(its default) is tried first, ``--time-format`` overrides.
"""

from __future__ import annotations

import re
from datetime import timedelta, timezone
from pathlib import Path

from stormwatch.importers.cells import normalise_unit
from stormwatch.importers.options import ImportOptions
from stormwatch.importers.table import ISO, Table, TableError, TimeParser, split_line

_OFFSET = re.compile(r"GMT\s*(?P<sign>[+-])(?P<h>\d{1,2}):?(?P<m>\d{2})?", re.IGNORECASE)
_UNIT = re.compile(r"^[^,]*,\s*(?P<unit>[^(]+?)\s*(\(|$)")

#: HOBOware's date/time export forms, month first (its default preference) before day first.
HOBO_FORMATS = (
    "%m/%d/%y %I:%M:%S %p", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%y %I:%M %p", "%m/%d/%Y %I:%M %p",
    "%m/%d/%y %H:%M:%S", "%m/%d/%Y %H:%M:%S", "%m/%d/%y %H:%M", "%m/%d/%Y %H:%M",
    "%y/%m/%d %H:%M:%S", ISO,
)


def _header_index(lines: list[str]) -> int | None:
    for i, line in enumerate(lines[:2]):
        if "date time" in line.lower():
            return i
    return None


def is_hobo(lines: list[str]) -> bool:
    """Whether the file starts like a HOBOware export (a ``Date Time`` column in line 1 or 2)."""
    return _header_index(lines) is not None and ("plot title" in lines[0].lower() or "GMT" in "".join(lines[:2]))


def column_offset(name: str) -> timezone | None:
    """The fixed zone of ``Date Time, GMT-04:00`` (``None`` when the name carries no offset)."""
    m = _OFFSET.search(name)
    if not m:
        return None
    delta = timedelta(hours=int(m.group("h")), minutes=int(m.group("m") or 0))
    return timezone(-delta if m.group("sign") == "-" else delta)


def read_hobo(path: Path, lines: list[str], options: ImportOptions) -> Table:
    """The table of a HOBOware CSV export.

    Raises:
        TableError: no ``Date Time`` header in the first two lines (file named).
    """
    at = _header_index(lines)
    if at is None:
        raise TableError(f"{path}: not a HOBOware export (no 'Date Time' column in the first two lines)")
    delimiter = options.delimiter or ("\t" if "\t" in lines[at] and "," not in lines[at].split("\t")[0] else ",")
    columns = tuple(c.strip() for c in split_line(lines[at], delimiter))
    units = tuple(normalise_unit(m.group("unit")) if (m := _UNIT.match(c)) and not c.lower().startswith("date time")
                  else None for c in columns)
    time_name = options.time_column
    if time_name is None:
        time_name = next((c for c in columns if c.lower().startswith("date time")), "Date Time")
    probe = Table(path, "hobo", columns, units, (), 0, TimeParser([ISO], options.zone))
    time_column = probe.column(time_name)
    offset = column_offset(columns[time_column])  # HOBOware writes the offset in the header: it wins over --tz
    zone, source = (offset, "header") if offset is not None else (options.zone, options.tz_source)
    formats = [options.time_format] if options.time_format else list(HOBO_FORMATS)
    skip = frozenset(i for i, c in enumerate(columns) if c == "#")
    data = tuple((n, split_line(line, delimiter)) for n, line in enumerate(lines[at + 1:], start=at + 2))
    return Table(path, "hobo", columns, units, data, time_column, TimeParser(formats, zone, source), skip, delimiter)
