"""Generic delimited text: ``--skip-rows`` lines, a header line, then one line per sample.

Units may be written in the header as ``Range [cm]`` or ``Range (cm)``. The delimiter is
``--delimiter`` or, by default, a comma -- a semicolon or a tab when the header has one of those
and no comma. Times are parsed with ``--time-format`` or, by default, ISO 8601 and the
unambiguous year-first forms ``2021/08/18 20:55:54`` / ``2021/08/18 20:55``; naive times are
local to the zone the time column's header names (``Time [UTC]``, ``Time (GMT-04:00)``), else to
``--tz``, else to the site's.
"""

from __future__ import annotations

from pathlib import Path

from stormwatch.display import plural
from stormwatch.importers.cells import normalise_unit
from stormwatch.importers.options import ImportOptions
from stormwatch.importers.table import ISO, Table, TableError, TimeParser, header_unit, header_zone, split_line

#: Default time formats: only unambiguous, year-first forms (day/month order is never guessed).
DEFAULT_FORMATS = (ISO, "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y-%m-%d %H:%M")


def sniff_delimiter(header: str) -> str:
    """``,`` unless the header has no comma but a semicolon or a tab."""
    if "," in header:
        return ","
    for d in (";", "\t", "|"):
        if d in header:
            return d
    return ","


def read_generic(path: Path, lines: list[str], options: ImportOptions) -> Table:
    """The table of a generic delimited file.

    Raises:
        TableError: no header line after ``skip_rows``.
    """
    at = options.skip_rows
    if at >= len(lines):
        raise TableError(f"{path}: no header line after skipping {plural(at, 'line')} (the file has {len(lines)})")
    delimiter = options.delimiter or sniff_delimiter(lines[at])
    columns = tuple(c.strip() for c in split_line(lines[at], delimiter))
    units = tuple(normalise_unit(header_unit(c)[1]) for c in columns)
    formats = [options.time_format] if options.time_format else list(DEFAULT_FORMATS)
    probe = Table(path, "generic", columns, units, (), 0, TimeParser(formats, options.zone, options.tz_source),
                  frozenset(), delimiter)
    time_column = probe.column(options.time_column) if options.time_column is not None else 0
    named = header_zone(columns[time_column])  # ``Time [UTC]``: the file says its zone
    parser = TimeParser(formats, named, "header") if named is not None else probe.time
    data = tuple((n, split_line(line, delimiter)) for n, line in enumerate(lines[at + 1:], start=at + 2))
    return Table(path, "generic", columns, units, data, time_column, parser, frozenset(), delimiter)
