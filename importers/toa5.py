"""Campbell Scientific TOA5 ``.dat`` files (LoggerNet / CRBasic table output, ASCII).

Layout (Campbell Scientific LoggerNet manual, "TOA5" file format): four header lines, then one
line per record, all comma-separated with quoted text::

    "TOA5","Station","CR1000","1234","CR1000.Std.32","CPU:prog.CR1","4567","Table15"   environment
    "TIMESTAMP","RECORD","BattV_Min","Rain_mm_Tot","Turb_NTU"                          field names
    "TS","RN","Volts","mm","NTU"                                                       units
    "","","Min","Tot","Smp"                                                            processing
    "2024-05-01 00:15:00",0,12.61,0.2,3.4

Timestamps carry no zone: they are read in the site's zone unless ``--tz`` says otherwise -- a
logger clock is often kept in local *standard* time all year (``--tz Etc/GMT+5`` for EST).
``"NAN"`` is a gap.
"""

from __future__ import annotations

from pathlib import Path

from stormwatch.importers.cells import normalise_unit
from stormwatch.importers.options import ImportOptions
from stormwatch.importers.table import ISO, Table, TableError, TimeParser, split_line

#: Data lines start after this many header lines.
HEADER_LINES = 4
#: Bookkeeping columns (record number), never values.
_BOOKKEEPING = ("RECORD",)
#: TOA5 pseudo-units of the timestamp/record columns.
_NOT_UNITS = ("TS", "RN", "")


def is_toa5(lines: list[str]) -> bool:
    """Whether the first line is a TOA5 environment line."""
    return bool(lines) and split_line(lines[0], ",")[:1] == ("TOA5",)


def read_toa5(path: Path, lines: list[str], options: ImportOptions) -> Table:
    """The table of a TOA5 file.

    Raises:
        TableError: not TOA5, or a header line is missing or inconsistent (file and line named).
    """
    if not is_toa5(lines):
        raise TableError(f"{path}:1: not a TOA5 file (the first field of line 1 must be \"TOA5\")")
    if len(lines) < HEADER_LINES:
        raise TableError(f"{path}: a TOA5 file has {HEADER_LINES} header lines; this one has {len(lines)} lines")
    columns = tuple(c.strip() for c in split_line(lines[1], ","))
    units_row = split_line(lines[2], ",")
    if len(units_row) != len(columns):
        raise TableError(f"{path}:3: {len(units_row)} units for {len(columns)} field names")
    units = tuple(None if u.strip() in _NOT_UNITS else normalise_unit(u) for u in units_row)
    zone = options.zone
    formats = [options.time_format] if options.time_format else [ISO]
    table = Table(path, "toa5", columns, units, (), 0, TimeParser(formats, zone, options.tz_source),
                  frozenset(i for i, c in enumerate(columns) if c in _BOOKKEEPING), ",")
    time_column = table.column(options.time_column or "TIMESTAMP")
    data = tuple((n, split_line(line, ",")) for n, line in enumerate(lines[HEADER_LINES:], start=HEADER_LINES + 1))
    return Table(path, "toa5", columns, units, data, time_column, table.time, table.skip_columns, ",")
