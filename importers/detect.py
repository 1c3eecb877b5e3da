"""Which reader a file needs: TOA5 and HOBOware are recognised by their headers.

JSON Lines (one JSON object per line, as ``rtl_433 -F json`` writes and publishes to MQTT) is
recognised and refused with a clear message rather than split at its commas into thousands of
``bad_time`` rows: its rain is a cumulative counter in every message, sent 3 times
(``sequence_num`` 0/1/2), which needs the gateway's counter logic, not a delimited-text reader.
"""

from __future__ import annotations

import json
from pathlib import Path

from stormwatch.importers.generic import read_generic
from stormwatch.importers.hobo import is_hobo, read_hobo
from stormwatch.importers.options import ImportOptions
from stormwatch.importers.table import Table, TableError, read_lines
from stormwatch.importers.toa5 import is_toa5, read_toa5


def is_json_lines(lines: list[str]) -> bool:
    """Whether the first non-blank line is a JSON object (a JSON Lines file)."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if not first.startswith("{"):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


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
        stormwatch.importers.table.TableError: unreadable or binary file, a JSON Lines file (not supported),
            or a header that does not fit the format.
    """
    lines = read_lines(path)
    if is_json_lines(lines):
        raise TableError(f"{path}: JSON Lines (rtl_433) is not supported: import delimited text, TOA5 or "
                         "HOBOware CSV (a live rtl_433 gauge belongs behind the gateway's counter logic)")
    fmt = detect_format(lines) if options.format == "auto" else options.format
    readers = {"toa5": read_toa5, "hobo": read_hobo, "generic": read_generic}
    return readers[fmt](path, lines, options)
