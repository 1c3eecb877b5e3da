"""Which reader a file needs: TOA5 and HOBOware are recognised by their headers."""

from __future__ import annotations

from pathlib import Path

from importers.generic import read_generic
from importers.hobo import is_hobo, read_hobo
from importers.options import ImportOptions
from importers.table import Table, read_lines
from importers.toa5 import is_toa5, read_toa5


def detect_format(lines: list[str]) -> str:
    """``toa5``, ``hobo`` or ``generic`` from the first lines of a file."""
    if is_toa5(lines):
        return "toa5"
    if is_hobo(lines):
        return "hobo"
    return "generic"


def open_table(path: Path, options: ImportOptions) -> Table:
    """Read ``path`` with the reader ``options.format`` names (or the detected one).

    Raises:
        importers.table.TableError: unreadable file or a header that does not fit the format.
    """
    lines = read_lines(path)
    fmt = detect_format(lines) if options.format == "auto" else options.format
    readers = {"toa5": read_toa5, "hobo": read_hobo, "generic": read_generic}
    return readers[fmt](path, lines, options)
