"""File rows -> :class:`~stormwatch.contract.Reading` objects of one device (nothing stored here).

Per row: the time (UTC), each ``--value-column`` cell and, for rain, the tip column. A cell that is
a gap (:mod:`stormwatch.importers.cells`) yields no reading -- never a zero. A row with a malformed part
(too few fields, more fields than the header names, a bad time, a cell that is not a number, a
depth that is not a whole number of tips) is rejected as a whole with its ``file:line`` and
reason; the other rows are kept.

The design: docs/importing.md ("The modules", `importers/rows.py`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.display import plural, quoted
from stormwatch.gateway.counter import CounterError, CounterLike, CounterState, count_tips
from stormwatch.gateway.plan import CounterPlan
from stormwatch.importers.cells import CellError, convert, normalise_unit, parse_cell
from stormwatch.importers.identity import IMPORT_GATEWAY, import_boot, import_seq
from stormwatch.importers.options import CUMULATIVE, ImportOptions, TipSpec, TipsPerRow
from stormwatch.importers.table import Table, TableError
from stormwatch.physics import (
    FLAG_BEYOND_ENVELOPE,
    FLAG_EXTREME_RATE,
    impossible_value,
    max_tips,
    rain_verdict,
)

#: ``progress(done_rows, total_rows)``.
Progress = Callable[[int, int], None]

#: Raw text kept per rain reading at most (longer sums keep only the row count).
_RAW_MAX = 200


@dataclass(frozen=True)
class RowReject:
    """A skipped row: ``file:line``, a short reason and the detail."""

    line: int
    reason: str
    detail: str


@dataclass(frozen=True)
class ColumnPlan:
    """How one file column becomes readings.

    Attributes:
        index: column index.
        quantity: contract quantity.
        file_unit: the unit the file writes (``--value-column`` unit, header unit, or assumed).
        unit: the unit stored (the profile's when an exact conversion exists, else ``file_unit``).
    """

    index: int
    quantity: str
    file_unit: str
    unit: str


@dataclass
class Conversion:
    """What a file turned into.

    Attributes:
        readings: readings in event-time order (per quantity), ready to validate.
        rows_read: data rows (blank lines not counted).
        rejects: rejected rows.
        gaps: cells that held no value (empty, NaN, sentinel).
        duplicate_rows: rows repeating an earlier row's values at the same time.
        tips: total tips in the readings (rain files).
        plans: the column plans used.
        lines: ``(boot, seq)`` of a reading -> the file line it came from (its first, for rain rows
            summed into one reading), so what the store refuses is reported ``file:line``.
    """

    readings: list[Reading] = field(default_factory=list)
    rows_read: int = 0
    rejects: list[RowReject] = field(default_factory=list)
    gaps: int = 0
    duplicate_rows: int = 0
    tips: int = 0
    plans: list[ColumnPlan] = field(default_factory=list)
    lines: dict[tuple[str, int], int] = field(default_factory=dict)


def plan_columns(table: Table, options: ImportOptions, profile_units: Mapping[str, str]) -> list[ColumnPlan]:
    """Resolve ``--value-column`` names and units against the file and the device profile.

    Raises:
        TableError: a named column is not in the file.
    """
    plans: list[ColumnPlan] = []
    for vc in options.value_columns:
        index = table.column(vc.name)
        target = profile_units.get(vc.quantity)
        file_unit = normalise_unit(vc.unit) or table.units[index] or target or "1"
        unit = target if target is not None and convert(Decimal(1), file_unit, target) is not None else file_unit
        plans.append(ColumnPlan(index, vc.quantity, file_unit, unit))
    return plans


def file_counter(tips: TipSpec, max_intensity_mm_h: float | None = None) -> CounterPlan:
    """The counter of a rain file: the tip size, ``--counter-bits`` (``None``: never wraps) and the
    gauge profile's optional ``max_intensity_mm_h`` (the lean :class:`CounterPlan` the gateway runs)."""
    resolution = tips.resolution
    return CounterPlan(f"{tips.size} {tips.unit}", resolution.inches, TIP_UNIT, "rain_tips", "cumulative",
                       tips.counter_bits, max_intensity_mm_h)


def tip_mode(table: Table, options: ImportOptions) -> TipsPerRow:
    """How the rain column is read: ``--tips-per-row``, else the format's default.

    Raises:
        TableError: ``--counter-bits`` for a column that is not a running total.
    """
    tips = options.tips
    assert tips is not None
    mode = tips.per_row or table.rain_per_row
    if tips.counter_bits is not None and mode not in CUMULATIVE:
        raise TableError(f"{table.path}: --counter-bits applies to running totals, but the rain column is read "
                         f"as {mode}: give --tips-per-row cumulative or cumulative-count")
    return mode


def tip_column(table: Table, options: ImportOptions) -> int | None:
    """Index of the rain column (``None`` when every row is one tip).

    Raises:
        TableError: the named column is missing, or the file has no data column.
    """
    tips = options.tips
    if tips is None or tip_mode(table, options) == "row":
        return None
    if tips.column is not None:
        return table.column(tips.column)
    if table.rain_column is not None:
        return table.rain_column
    taken = {table.column(v.name) for v in options.value_columns}
    free = [i for i in table.data_columns() if i not in taken]
    if not free:
        raise TableError(f"{table.path}: no column left for the tips; name it with --tips-column")
    return free[0]


#: More tips than this in one row is refused (``too_many_tips``): the largest count a reading
#: holds exactly as a float (2**53). Real rows are far below it (the world's wettest day, 1,825 mm
#: at Foc-Foc in 1966, is 9,125 tips of 0.2 mm); plausibility against time is the envelope's job.
MAX_TIPS_PER_ROW = 2**53


def _tips_of(cell: str, options: ImportOptions, mode: TipsPerRow, file_unit: str | None,
             decimal_comma: bool) -> int | None:
    """Whole tips in a rain cell (``None`` = gap): a depth or a count, or a running total of either.

    Raises:
        CellError: not a number.
        ValueError: (reason, detail) as args: not whole, negative.
    """
    tips = options.tips
    assert tips is not None
    value = parse_cell(cell, options.gap_values, decimal_comma=decimal_comma)
    if value is None:
        return None
    if mode in ("depth", "cumulative"):
        if file_unit in ("mm", "in") and file_unit != tips.unit:
            converted = convert(value, file_unit, tips.unit)
            value = converted if converted is not None else value
        exact = value / tips.size
        if exact != exact.to_integral_value():
            raise ValueError("not_whole_tips", f"{quoted(cell.strip())} {tips.unit} is not a whole number of "
                                               f"{tips.size} {tips.unit} tips")
    else:
        exact = value
        if exact != exact.to_integral_value():
            raise ValueError("not_whole_tips", f"tip count {quoted(cell.strip())} is not a whole number")
    if exact < 0:
        raise ValueError("negative_tips", f"{quoted(cell.strip())}: a tip count cannot be negative")
    if exact > MAX_TIPS_PER_ROW:
        raise ValueError("too_many_tips", f"{quoted(cell.strip())}: {exact:.3g} tips in one row is not rain")
    return int(exact)


class _Rejected(Exception):
    """A row refused as a whole, with its reason and detail (the row's other parts are not kept)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason, self.detail = reason, detail


#: One value cell of a row: its column's plan, the value in the stored unit, the cell's text.
_Cell = tuple[ColumnPlan, Decimal, str]
#: ``emit(time, tips, raw, line, flags)``: one rain reading made.
_Emit = Callable[[datetime, int, str, int, tuple[str, ...]], None]
#: ``reject(line, reason, detail)``.
_Reject = Callable[[int, str, str], None]


class _ValueColumns:
    """The ``--value-column`` quantities: one reading per timestamp and quantity; a row repeating a
    time's values is a duplicate row, one with another value ``conflicting_time``."""

    def __init__(self, table: Table, options: ImportOptions, plans: Sequence[ColumnPlan]) -> None:
        self.table, self.options, self.plans = table, options, plans
        self.decimal_comma = table.delimiter != ","
        self.kept: dict[str, dict[datetime, tuple[Decimal, str, int]]] = {p.quantity: {} for p in plans}

    def cells(self, fields: Sequence[str]) -> tuple[list[_Cell], int]:
        """The row's values (in the stored unit) and how many of its cells were gaps.

        Raises:
            _Rejected: ``not_a_number``, ``negative_value``, ``beyond_instrument_range``.
        """
        row: list[_Cell] = []
        gaps = 0
        for plan in self.plans:
            cell, name = fields[plan.index], self.table.columns[plan.index]
            try:
                value = parse_cell(cell, self.options.gap_values, decimal_comma=self.decimal_comma)
            except CellError as exc:
                raise _Rejected("not_a_number", f"column {name!r}: {exc}") from None
            if value is None:
                gaps += 1
                continue
            converted = convert(value, plan.file_unit, plan.unit)
            value = converted if converted is not None else value
            if not math.isfinite(float(value)):
                raise _Rejected("not_a_number",
                                f"column {name!r}: {quoted(cell.strip())} is beyond what a reading can hold")
            impossible = impossible_value(plan.quantity, float(value))
            if impossible is not None:
                raise _Rejected("negative_value" if value < 0 else "beyond_instrument_range",
                                f"column {name!r}: {quoted(cell.strip())}: {impossible}")
            row.append((plan, value, cell.strip()))
        return row, gaps

    def repeats(self, when: datetime, row: Sequence[_Cell]) -> bool:
        """Whether ``row`` repeats values already kept at ``when`` (all of them; an empty row: no).

        Raises:
            _Rejected: ``conflicting_time``: another value of a quantity at ``when``.
        """
        for plan, value, _cell in row:
            seen = self.kept[plan.quantity].get(when)
            if seen is not None and seen[0] != value:
                raise _Rejected("conflicting_time", f"{plan.quantity} {value} at the same time as line {seen[2]} "
                                                    f"({seen[0]})")
        return bool(row) and all(when in self.kept[p.quantity] for p, _v, _c in row)

    def keep(self, line: int, when: datetime, row: Sequence[_Cell]) -> None:
        for plan, value, cell in row:
            self.kept[plan.quantity].setdefault(when, (value, cell, line))

    def readings(self, out: Conversion, site: str, device: str) -> None:
        """The kept values as readings, per quantity in time order."""
        for plan in self.plans:
            boot = import_boot(site, device, plan.quantity, plan.unit)
            kept = self.kept[plan.quantity]
            for when in sorted(kept):
                value, cell, line = kept[when]
                seq = import_seq(when)
                out.lines[(boot, seq)] = line
                out.readings.append(Reading(
                    site=site, device=device, quantity=plan.quantity, value=float(value), unit=plan.unit, time=when,
                    gateway=IMPORT_GATEWAY, boot=boot, seq=seq, raw=cell,
                ))


class _TipRows:
    """A rain column read per row (``--tips-per-row`` depth, count or row): the tips of the rows of
    one timestamp are summed into one reading, judged against the world-record envelope."""

    def __init__(self, table: Table, options: ImportOptions, mode: TipsPerRow, counter: CounterLike) -> None:
        self.table, self.options, self.mode, self.counter = table, options, mode, counter
        self.index = tip_column(table, options)
        self.unit = table.units[self.index] if self.index is not None else None
        self.decimal_comma = table.delimiter != ","
        self.cells: dict[datetime, list[str]] = {}
        self.tips: dict[datetime, int] = {}
        self.lines: dict[datetime, list[int]] = {}

    def cell(self, fields: Sequence[str]) -> tuple[int | None, str]:
        """The row's tips (``None``: a gap) and the cell's text (``""``: every row is one tip).

        Raises:
            _Rejected: ``not_a_number``, ``not_whole_tips``, ``negative_tips``, ``too_many_tips``.
        """
        if self.index is None:
            return 1, ""
        cell, name = fields[self.index], self.table.columns[self.index]
        try:
            return _tips_of(cell, self.options, self.mode, self.unit, self.decimal_comma), cell.strip()
        except CellError as exc:
            raise _Rejected("not_a_number", f"column {name!r}: {exc}") from None
        except ValueError as exc:
            raise _Rejected(exc.args[0], f"column {name!r}: {exc.args[1]}") from None

    def repeats(self, when: datetime, tips: int | None, cell: str) -> bool:
        """Whether the row repeats a kept one: never, every row's tips count."""
        return False

    def keep(self, line: int, when: datetime, tips: int, cell: str) -> None:
        self.cells.setdefault(when, []).append(cell or "1")
        self.tips[when] = self.tips.get(when, 0) + tips
        self.lines.setdefault(when, []).append(line)

    def readings(self, emit: _Emit, reject: _Reject, row_times: Iterable[datetime]) -> None:
        """One reading per timestamp, in time order; beyond the envelope: its rows rejected."""
        extreme = _check_envelope(self.tips, self.lines, self.counter, reject, row_interval(row_times))
        for when in sorted(self.tips):
            cells = self.cells[when]
            raw = "+".join(cells)
            emit(when, self.tips[when], raw if len(raw) <= _RAW_MAX else f"{len(cells)} rows", self.lines[when][0],
                 (FLAG_EXTREME_RATE,) if when in extreme else ())


class _RunningTotals(_TipRows):
    """A rain column of running totals (``cumulative``, ``cumulative-count``): one total per
    timestamp (the same total again is a duplicate row, another ``conflicting_time``), turned into
    new tips by the gateway's :func:`count_tips` in event-time order."""

    def __init__(self, table: Table, options: ImportOptions, mode: TipsPerRow, counter: CounterLike) -> None:
        super().__init__(table, options, mode, counter)
        self.totals: dict[datetime, tuple[int, str, int]] = {}  # time -> (total tips, cell, line)

    def repeats(self, when: datetime, tips: int | None, cell: str) -> bool:
        if tips is None or when not in self.totals:
            return False
        total, seen, line = self.totals[when]
        if total != tips:
            raise _Rejected("conflicting_time",
                            f"running total {quoted(cell)} at the same time as line {line} ({seen!r})")
        return True

    def keep(self, line: int, when: datetime, tips: int, cell: str) -> None:
        self.totals.setdefault(when, (tips, cell, line))

    def readings(self, emit: _Emit, reject: _Reject, row_times: Iterable[datetime]) -> None:
        state: CounterState | None = None
        for when in sorted(self.totals):
            total, cell, line = self.totals[when]
            try:
                result = count_tips(state, total, when, self.counter)
            except CounterError as exc:
                reject(line, "beyond_counter_width", f"running total {quoted(cell)}: {exc} (--counter-bits)")
                continue
            state = result.state
            emit(when, result.tips, cell, line, result.flags)


def _rain_column(table: Table, options: ImportOptions, counter: CounterLike | None) -> _TipRows | None:
    """How the file's rain column is read (``None``: the file holds no rain)."""
    if options.tips is None:
        return None
    mode = tip_mode(table, options)
    kind = _RunningTotals if mode in CUMULATIVE else _TipRows
    return kind(table, options, mode, counter or file_counter(options.tips))


def _row_time(table: Table, fields: Sequence[str], needed: int) -> datetime:
    """The UTC time of a row whose fields are as many as the header names.

    Raises:
        _Rejected: ``too_few_fields``, ``extra_fields``, ``bad_time``, ``before_1970``.
    """
    if len(fields) <= needed:
        raise _Rejected("too_few_fields", f"{plural(len(fields), 'field')}, need at least {needed + 1}")
    if len(fields) > len(table.columns) and any(f.strip() for f in fields[len(table.columns):]):
        raise _Rejected("extra_fields", f"{plural(len(fields), 'field')}, the header names {len(table.columns)} "
                                        f"(which column is which cannot be known)")
    try:
        when = table.time.parse(fields[table.time_column])
        import_seq(when)
    except ValueError as exc:
        raise _Rejected("before_1970" if "before 1970" in str(exc) else "bad_time", str(exc)) from None
    return when


def _take_row(out: Conversion, values: _ValueColumns, rain: _TipRows | None, line: int, when: datetime,
              fields: Sequence[str]) -> None:
    """Keep a row's values and tips, all or nothing.

    Raises:
        _Rejected: a part of the row cannot be read, or contradicts a kept row of its time.
    """
    row, gaps = values.cells(fields)
    tips, cell = rain.cell(fields) if rain is not None else (None, "")
    if rain is not None and tips is None:
        gaps += 1
    repeated = values.repeats(when, row)
    rain_repeat = rain.repeats(when, tips, cell) if rain is not None else False
    out.gaps += gaps
    if (repeated and tips is None) or (rain_repeat and (repeated or not row)):
        out.duplicate_rows += 1
    values.keep(line, when, row)
    if rain is not None and tips is not None:
        rain.keep(line, when, tips, cell)


def build_readings(table: Table, options: ImportOptions, site: str, device: str,
                   profile_units: Mapping[str, str], progress: Progress | None = None,
                   counter: CounterLike | None = None) -> Conversion:
    """Turn every data row of ``table`` into readings of ``device`` at ``site``.

    Args:
        table: the parsed file.
        options: the format options.
        site, device: where the readings belong.
        profile_units: quantity -> unit of the device's profile (units are converted to these
            exactly where a conversion is known: lengths).
        progress: called every 2,000 rows and at the end.
        counter: the rain column's counter (:func:`file_counter`; default: from ``options.tips``
            alone, without the gauge's ``max_intensity_mm_h``).

    Raises:
        TableError: a named column is not in the file, or ``--counter-bits`` for a column that is
            not a running total.
    """
    out = Conversion(plans=plan_columns(table, options, profile_units), duplicate_rows=table.duplicate_lines)
    values = _ValueColumns(table, options, out.plans)
    rain = _rain_column(table, options, counter)
    rain_index = [rain.index] if rain is not None and rain.index is not None else []
    needed = max([p.index for p in out.plans] + [table.time_column] + rain_index)
    row_times: set[datetime] = set()  # every row time that parsed: the file's row interval
    total = len(table.lines)
    where = str(table.path)

    def reject(line: int, reason: str, detail: str) -> None:
        out.rejects.append(RowReject(line, reason, f"{where}:{line}: {detail}"))

    for done, (line, fields) in enumerate(table.lines, start=1):
        if progress is not None and done % 2000 == 0:
            progress(done, total)
        if not fields or all(not f.strip() for f in fields):
            continue
        out.rows_read += 1
        try:
            when = _row_time(table, fields, needed)
            row_times.add(when)
            _take_row(out, values, rain, line, when, fields)
        except _Rejected as exc:
            reject(line, exc.reason, exc.detail)
    if progress is not None:
        progress(total, total)
    values.readings(out, site, device)
    if rain is not None:
        rain.readings(_rain_emitter(out, site, device, rain.counter), reject, row_times)
    return out


def _rain_emitter(out: Conversion, site: str, device: str, counter: CounterLike) -> _Emit:
    """``emit`` adding one rain reading (with the file's tip size) to ``out``."""
    boot = import_boot(site, device, "rain_tips", TIP_UNIT)
    tip_size = str(counter.tip_resolution)

    def emit(when: datetime, tips: int, raw: str, line: int, flags: tuple[str, ...]) -> None:
        seq = import_seq(when)
        out.lines[(boot, seq)] = line
        out.readings.append(Reading(
            site=site, device=device, quantity="rain_tips", value=tips, unit=TIP_UNIT, time=when,
            gateway=IMPORT_GATEWAY, boot=boot, seq=seq, raw=raw, flags=flags, tip_size=tip_size,
        ))
        out.tips += tips

    return emit


def row_interval(times: Iterable[datetime]) -> tuple[float, str]:
    """The file's own row interval, seconds, and how it was found: the MEDIAN of the positive
    spacings between its distinct row times (a logger writing every 10 minutes: 600 s, whatever one
    odd row does), or :data:`SINGLE_ROW_INTERVAL_S` (a day) when the file has a single time.

    The duration the envelope judges a rain row with no accepted rain row before it (the file's
    first, or one after rejected rows only): the rain of a logger's row fell in the interval it
    writes. The median, not the smallest spacing: one odd pair of rows a minute apart in a 15-minute
    file must not make every first row's bound a minute's (docs/importing.md, "Plausible rain").
    """
    ordered = sorted(set(times))
    spacings = [(b - a).total_seconds() for a, b in itertools.pairwise(ordered)]
    if not spacings:
        return SINGLE_ROW_INTERVAL_S, "one day, the file has a single row time"
    seconds = statistics.median(spacings)
    return seconds, f"the file's median row spacing, {_duration(seconds)}"


#: The duration a rain row is judged over when its file has a single row time (no spacing to read):
#: a day, the longest interval a rain logger writes (a daily total). 1,000 mm in it is still rain
#: (the envelope over 24 h is 2,860 mm); 100,000 in is not.
SINGLE_ROW_INTERVAL_S = 86_400.0


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _check_envelope(rain_tips: dict[datetime, int], rain_lines: Mapping[datetime, list[int]], counter: CounterLike,
                    reject: Callable[[int, str, str], None], interval: tuple[float, str]) -> set[datetime]:
    """Drop (and reject the rows of) each timestamp whose tips are more rain than physically possible
    since the previous ACCEPTED rain timestamp -- a rejected one never shortens nor lengthens the
    next one's interval -- or, with no accepted one before it (the first row), over ``interval``
    (:func:`row_interval`); returns the timestamps whose tips are extreme but possible (at or above
    the review line)."""
    tip_mm = float(counter.tip_resolution.mm)
    previous: datetime | None = None
    extreme: set[datetime] = set()
    for when in sorted(rain_tips):
        if previous is not None:
            seconds = (when - previous).total_seconds()
            since = f"since the previous rain row at {previous.isoformat()}"
        else:
            seconds, how = interval
            since = f"in its row interval ({how}; no earlier rain row to measure from)"
        tips = rain_tips[when]
        verdict = rain_verdict(tips, tip_mm, seconds, counter.max_intensity_mm_h)
        if verdict == FLAG_BEYOND_ENVELOPE:
            del rain_tips[when]
            allowed = max_tips(tip_mm, seconds, counter.max_intensity_mm_h)
            for line in rain_lines[when]:
                reject(line, "beyond_envelope", f"{tips} tips ({tips * tip_mm:g} mm) {since}: more rain than "
                                                f"physically possible (at most {allowed}; "
                                                "docs/reference/rain-records.md)")
            continue
        if verdict == FLAG_EXTREME_RATE:
            extreme.add(when)
        previous = when
    return extreme
