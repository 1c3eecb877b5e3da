"""Which reader a file needs: TOA5 and HOBOware are recognised by their headers, rtl_433 JSON Lines
by its first line (a JSON object); anything else is delimited text."""

from __future__ import annotations

from pathlib import Path

from stormwatch.importers.generic import read_generic
from stormwatch.importers.hobo import is_hobo, read_hobo
from stormwatch.importers.options import ImportOptions
from stormwatch.importers.rtl433 import is_json_lines, read_rtl433
from stormwatch.importers.table import Table, read_lines
from stormwatch.importers.toa5 import is_toa5, read_toa5


def detect_format(lines: list[str]) -> str:
    """``toa5``, ``hobo``, ``rtl433`` or ``generic`` from the first lines of a file."""
    if is_toa5(lines):
        return "toa5"
    if is_hobo(lines):
        return "hobo"
    if is_json_lines(lines):
        return "rtl433"
    return "generic"


def open_table(path: Path, options: ImportOptions) -> Table:
    """Read ``path`` with the reader ``options.format`` names (or the detected one).

    Raises:
        stormwatch.importers.table.TableError: unreadable or binary file, or a header (or, for
            JSON Lines, a line or the sensor selection) that does not fit the format.
    """
    lines = read_lines(path)
    fmt = detect_format(lines) if options.format == "auto" else options.format
    readers = {"toa5": read_toa5, "hobo": read_hobo, "generic": read_generic, "rtl433": read_rtl433}
    return readers[fmt](path, lines, options)
