"""Rain from a real tip record, so a simulated gauge can replay real rainfall.

A record is a list of ``(UTC time, tips)`` rows at the record's own tip size. Several tips may
share one timestamp (the Tharandt Davis file has up to 7 tips in one minute, tests/data/SOURCES.md):
every tip is kept. :meth:`RainRecord.gauge_tips` re-expresses the record at a gauge's resolution
exactly: gauge tip k falls at the first record tip whose cumulative depth reaches ``k × resolution``.

Files are read by the same code as ``stormwatch import`` and ``replay`` (:mod:`stormwatch.importers`):
one set of formats and options, and a malformed row is skipped with a reason, never fatal.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from stormwatch.display import plural
from stormwatch.errors import InputError
from stormwatch.rain import MM_PER_IN, LengthUnit, TipResolution
from stormwatch.simulators.tips import TipSeries

if TYPE_CHECKING:
    from stormwatch.importers.options import ZoneSource

log = logging.getLogger(__name__)


class RainRecordError(InputError):
    """A tip record that cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class RainRecord:
    """A real tip record.

    Attributes:
        rows: ``(time UTC, tips)`` rows sorted by time; ``tips ≥ 1``.
        tip: the record's depth per tip.
        source: where the record came from (for logs).
        skipped: the rows that could not be used, as ``file:line: reason`` (the reader's messages).
        skip_summary: one line about them for the user (``rain file F: 1 of 3 rows skipped
            (too_few_fields 1); first: F:3: ...``), ``""`` when none was skipped. The reader does
            not log it: a file is read several times in one run (the command, the simulator, the
            pipeline), and the command tells the user once.
        times: how the file's times were read (``12 times without an offset, read in
            America/New_York (the site's zone; ...)``), for the command to say once.
        moved_from: the first tip's own time when :meth:`shifted` moved the record (to a
            scenario's date), else ``None``.
    """

    rows: tuple[tuple[datetime, int], ...]
    tip: TipResolution
    source: str = ""
    skipped: tuple[str, ...] = ()
    skip_summary: str = ""
    times: str = ""
    moved_from: datetime | None = None

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
        return dataclasses.replace(self, rows=tuple((t + delta, n) for t, n in self.rows),
                                   moved_from=self.moved_from or self.rows[0][0])

    def window(self, start: datetime, end: datetime) -> RainRecord:
        """Only the rows with ``start ≤ time < end``."""
        return dataclasses.replace(self, rows=tuple((t, n) for t, n in self.rows if start <= t < end))

    def rounding(self, resolution: TipResolution) -> str:
        """What :meth:`gauge_tips` changes when the gauge's tip size is not the record's, for the
        user to hear once (``""`` when the sizes are equal): the record's depth, the gauge's whole
        tips of it, and the depth after the last whole tip that no gauge tip carries."""
        if resolution == self.tip or not self.rows:
            return ""
        total = self.tip.depth_in(self.total_tips)
        whole = int(total // resolution.inches)
        left = total - resolution.depth_in(whole)
        unit = str(resolution).split()[-1]
        other = "mm" if unit == "in" else "in"
        dropped = (f"the {_depth(left, unit, 3)} ({_depth(left, other, 3)}) after the last whole tip is left out"
                   if left else "nothing is left out")
        return (f"rain file {self.source}: its {plural(self.total_tips, 'tip')} of {self.tip} "
                f"({_depth(total, str(self.tip).split()[-1])}) play as {plural(whole, 'tip')} of the gauge's "
                f"{resolution} ({_depth(resolution.depth_in(whole), unit)}); {dropped}, and each gauge tip falls at "
                "the file's tip that completes it")

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


def _depth(inches: Fraction, unit: str, digits: int = 6) -> str:
    """``inches`` in ``unit`` (``in`` or ``mm``) to ``digits`` significant digits: ``526.2 mm``, ``1.05 in``."""
    return f"{float(inches if unit == 'in' else inches * MM_PER_IN):.{digits}g} {unit}"


def load_rain_record(
    path: str | Path,
    *,
    tip_size: str,
    unit: LengthUnit = "mm",
    time_column: str | int = 0,
    value_column: str | int = 1,
    time_format: str | None = None,
    tz: str | None = None,
    tz_source: ZoneSource = "--tz",
    delimiter: str | None = None,
) -> RainRecord:
    """Read a tip record with the reader of ``stormwatch import``/``replay`` (the same formats,
    options and row checks: a malformed row is skipped with its ``file:line`` and reason, never the
    end of the run).

    Each row holds a time and a depth: a whole number of tips (``0.2`` mm = 1 tip of 0.2 mm), or
    ``0`` (a start marker, not a tip).

    Args:
        path: the file (delimited text with a header line, TOA5 or HOBOware CSV).
        tip_size: depth per record tip as an exact decimal string (e.g. ``"0.2"``), in ``unit``.
        unit: ``mm`` or ``in``: the unit of ``tip_size`` and of the file's values.
        time_column, value_column: column names or 0-based indexes.
        time_format: :func:`datetime.strptime` format (default: ISO 8601 and year-first forms);
            a time with no offset is local to ``tz``.
        tz: IANA zone of naive times (the commands give the site's); ``None``: UTC, said in
            :attr:`RainRecord.times` as a default nobody chose.
        tz_source: where ``tz`` came from (``site``, ``--tz``), said beside it.
        delimiter: field separator (default: sniffed; ``;`` for the Tharandt files).

    Returns:
        The record, rows merged per identical timestamp (tips summed, never deduplicated), with
        the skipped rows in ``skipped`` and ``skip_summary`` (for the caller to tell the user).

    Raises:
        RainRecordError: an unreadable file, unknown column or zone, a tip size no bucket has, or
            no usable row at all (the first reason given).
    """
    from stormwatch.importers.detect import open_table
    from stormwatch.importers.options import ImportOptions, OptionsError, TipSpec, zone_note
    from stormwatch.importers.rows import build_readings
    from stormwatch.importers.table import TableError

    path = Path(path)
    try:
        options = ImportOptions(
            delimiter=delimiter, time_column=str(time_column), time_format=time_format, tz=tz, tz_source=tz_source,
            tips=TipSpec.parse(tip_size if unit == "mm" else None, tip_size if unit == "in" else None,
                               str(value_column)),
        ).in_zone("UTC", "default")
        assert options.tips is not None
        table = open_table(path, options)
        conv = build_readings(table, options, "record", "gauge", {})
    except (OptionsError, TableError) as exc:
        raise RainRecordError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from exc
    rows = tuple((r.time, int(r.value)) for r in conv.readings if r.quantity == "rain_tips" and r.value)
    skipped = tuple(r.detail for r in conv.rejects)
    if conv.rejects:
        by_reason: dict[str, int] = {}
        for r in conv.rejects:
            by_reason[r.reason] = by_reason.get(r.reason, 0) + 1
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(by_reason.items()))
        if not rows and not conv.readings:
            raise RainRecordError(f"{path}: no usable row: {len(skipped)} of {conv.rows_read} rows skipped "
                                  f"({reasons}); first: {skipped[0]}")
        summary = f"rain file {path}: {len(skipped)} of {conv.rows_read} rows skipped ({reasons}); first: {skipped[0]}"
        log.debug("%s", summary)
    record = RainRecord(rows, options.tips.resolution, str(path), skipped, summary if skipped else "",
                        zone_note(table.time.zone_name, table.time.source, table.time.local_times))
    log.info("rain record %s: %d tips in %d rows", path, record.total_tips, len(rows))
    return record


def record_day_tips(record: RainRecord, day_start_local: datetime) -> int:
    """Record tips within the local calendar day starting at ``day_start_local`` (aware)."""
    start = day_start_local.astimezone(UTC)
    end = (day_start_local + timedelta(days=1)).astimezone(UTC)
    return record.tips_between(start, end)
