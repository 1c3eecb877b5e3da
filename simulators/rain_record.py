"""Rain from a real tip record, so a simulated gauge can replay real rainfall.

A record is a list of ``(UTC time, tips)`` rows at the record's own tip size. Several tips may
share one timestamp (the Tharandt Davis file has up to 7 tips in one minute, tests/data/SOURCES.md):
every tip is kept. :meth:`RainRecord.gauge_tips` re-expresses the record at a gauge's resolution
exactly: gauge tip k falls at the first record tip whose cumulative depth reaches ``k × resolution``.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stormwatch.rain import LengthUnit, TipResolution
from stormwatch.simulators.tips import TipSeries

log = logging.getLogger(__name__)


class RainRecordError(ValueError):
    """A tip record that cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class RainRecord:
    """A real tip record.

    Attributes:
        rows: ``(time UTC, tips)`` rows sorted by time; ``tips ≥ 1``.
        tip: the record's depth per tip.
        source: where the record came from (for logs).
    """

    rows: tuple[tuple[datetime, int], ...]
    tip: TipResolution
    source: str = ""

    @property
    def total_tips(self) -> int:
        return sum(n for _, n in self.rows)

    def tips_between(self, start: datetime, end: datetime) -> int:
        """Record tips with ``start ≤ time < end``."""
        return sum(n for t, n in self.rows if start <= t < end)

    def shifted(self, new_start: datetime) -> RainRecord:
        """The same record moved in time so that its first tip falls at ``new_start``."""
        if not self.rows:
            return self
        delta = new_start - self.rows[0][0]
        return RainRecord(tuple((t + delta, n) for t, n in self.rows), self.tip, self.source)

    def window(self, start: datetime, end: datetime) -> RainRecord:
        """Only the rows with ``start ≤ time < end``."""
        return RainRecord(tuple((t, n) for t, n in self.rows if start <= t < end), self.tip, self.source)

    def gauge_tips(self, resolution: TipResolution) -> TipSeries:
        """The record as tips of a gauge of ``resolution`` (identical when the sizes are equal)."""
        times: list[datetime] = []
        if resolution == self.tip:
            for t, n in self.rows:
                times.extend([t] * n)
            return TipSeries(times, resolution)
        depth = Fraction(0)
        emitted = 0
        for t, n in self.rows:
            depth += self.tip.depth_in(n)
            due = int(depth // resolution.inches)
            times.extend([t] * (due - emitted))
            emitted = due
        return TipSeries(times, resolution)


def load_rain_record(
    path: str | Path,
    *,
    tip_size: str,
    unit: LengthUnit = "mm",
    time_column: str | int = 0,
    value_column: str | int = 1,
    time_format: str = "%Y-%m-%dT%H:%M:%S",
    tz: str = "UTC",
    delimiter: str = ",",
    has_header: bool = True,
) -> RainRecord:
    """Read a delimited tip record.

    Each row is one tip-record entry: its time and a value. The value is either the depth of the
    row (a multiple of the tip size, e.g. ``0.2`` mm = 1 tip) or ``0`` (a start marker, not a tip).

    Args:
        path: the file.
        tip_size: depth per record tip as an exact decimal string (e.g. ``"0.2"``), in ``unit``.
        unit: ``mm`` or ``in``: the unit of ``tip_size`` and of the file's values.
        time_column, value_column: column names (with a header) or 0-based indexes.
        time_format: :func:`datetime.strptime` format; a time with no offset is local to ``tz``.
        tz: IANA zone of naive times.
        delimiter: field separator (``;`` for the Tharandt files).
        has_header: whether the first line is a header.

    Returns:
        The record, rows merged per identical timestamp (tips summed, never deduplicated).

    Raises:
        RainRecordError: unreadable file, unknown column/zone, a bad time or a value that is not a
            whole number of tips (file and line named).
    """
    path = Path(path)
    try:
        size = Fraction(tip_size)
        tip = TipResolution.of(size, unit)
    except (ValueError, ZeroDivisionError) as exc:
        raise RainRecordError(f"{path}: tip size {tip_size!r} {unit}: {exc}") from exc
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise RainRecordError(f"{path}: unknown IANA time zone {tz!r}") from exc
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise RainRecordError(f"{path}: cannot read: {exc}") from exc
    reader = csv.reader(text.splitlines(), delimiter=delimiter)
    lines = list(reader)
    start_line = 1
    ti, vi = time_column, value_column
    if has_header:
        if not lines:
            raise RainRecordError(f"{path}: empty file")
        header = [h.strip() for h in lines[0]]
        ti = _column(path, header, time_column)
        vi = _column(path, header, value_column)
        lines = lines[1:]
        start_line = 2
    if not isinstance(ti, int) or not isinstance(vi, int):
        raise RainRecordError(f"{path}: column names need a header line")
    merged: dict[datetime, int] = {}
    for lineno, row in enumerate(lines, start=start_line):
        if not row or all(not c.strip() for c in row):
            continue
        if max(ti, vi) >= len(row):
            raise RainRecordError(f"{path}:{lineno}: expected at least {max(ti, vi) + 1} fields, got {len(row)}")
        try:
            naive = datetime.strptime(row[ti].strip(), time_format)
        except ValueError as exc:
            raise RainRecordError(f"{path}:{lineno}: time {row[ti]!r}: {exc}") from exc
        when = (naive if naive.tzinfo else naive.replace(tzinfo=zone)).astimezone(UTC)
        try:
            value = Fraction(row[vi].strip().replace(",", "."))
        except ValueError as exc:
            raise RainRecordError(f"{path}:{lineno}: value {row[vi]!r} is not a number") from exc
        if value == 0:
            continue
        tips_exact = value / size
        if tips_exact.denominator != 1 or tips_exact < 0:
            raise RainRecordError(f"{path}:{lineno}: value {row[vi]!r} is not a whole number of {tip} tips")
        merged[when] = merged.get(when, 0) + int(tips_exact)
    rows = tuple(sorted(merged.items()))
    log.info("rain record %s: %d tips in %d rows", path, sum(n for _, n in rows), len(rows))
    return RainRecord(rows, tip, str(path))


def _column(path: Path, header: list[str], col: str | int) -> int:
    if isinstance(col, int):
        return col
    if col.isdigit():
        return int(col)
    if col not in header:
        raise RainRecordError(f"{path}: no column {col!r} (columns: {header})")
    return header.index(col)


def record_day_tips(record: RainRecord, day_start_local: datetime) -> int:
    """Record tips within the local calendar day starting at ``day_start_local`` (aware)."""
    start = day_start_local.astimezone(UTC)
    end = (day_start_local + timedelta(days=1)).astimezone(UTC)
    return record.tips_between(start, end)
