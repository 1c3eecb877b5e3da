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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from stormwatch.contract import TIP_UNIT, Reading
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
            raise ValueError("not_whole_tips", f"{cell.strip()!r} {tips.unit} is not a whole number of "
                                               f"{tips.size} {tips.unit} tips")
    else:
        exact = value
        if exact != exact.to_integral_value():
            raise ValueError("not_whole_tips", f"tip count {cell.strip()!r} is not a whole number")
    if exact < 0:
        raise ValueError("negative_tips", f"{cell.strip()!r}: a tip count cannot be negative")
    if exact > MAX_TIPS_PER_ROW:
        raise ValueError("too_many_tips", f"{cell.strip()!r}: {exact:.3g} tips in one row is not rain")
    return int(exact)


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
    mode: TipsPerRow = tip_mode(table, options) if options.tips is not None else "depth"
    cumulative = mode in CUMULATIVE
    if options.tips is not None and counter is None:
        counter = file_counter(options.tips)
    rain_col = tip_column(table, options)
    rain_unit = table.units[rain_col] if rain_col is not None else None
    needed = max([p.index for p in out.plans] + [table.time_column] + ([rain_col] if rain_col is not None else []))
    decimal_comma = table.delimiter != ","
    values: dict[str, dict[datetime, tuple[Decimal, str, int]]] = {p.quantity: {} for p in out.plans}
    rain: dict[datetime, list[str]] = {}
    rain_tips: dict[datetime, int] = {}
    rain_lines: dict[datetime, list[int]] = {}
    totals: dict[datetime, tuple[int, str, int]] = {}  # cumulative: time -> (total tips, cell, line)
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
        if len(fields) <= needed:
            reject(line, "too_few_fields", f"{len(fields)} fields, need at least {needed + 1}")
            continue
        if len(fields) > len(table.columns) and any(f.strip() for f in fields[len(table.columns):]):
            reject(line, "extra_fields", f"{len(fields)} fields, the header names {len(table.columns)} "
                                         f"(which column is which cannot be known)")
            continue
        try:
            when = table.time.parse(fields[table.time_column])
            import_seq(when)
        except ValueError as exc:
            reason = "before_1970" if "before 1970" in str(exc) else "bad_time"
            reject(line, reason, str(exc))
            continue
        row_times.add(when)
        row: list[tuple[ColumnPlan, Decimal, str]] = []
        gaps = 0
        problem: tuple[str, str] | None = None
        for plan in out.plans:
            cell = fields[plan.index]
            try:
                value = parse_cell(cell, options.gap_values, decimal_comma=decimal_comma)
            except CellError as exc:
                problem = ("not_a_number", f"column {table.columns[plan.index]!r}: {exc}")
                break
            if value is None:
                gaps += 1
                continue
            converted = convert(value, plan.file_unit, plan.unit)
            value = converted if converted is not None else value
            if not math.isfinite(float(value)):
                problem = ("not_a_number", f"column {table.columns[plan.index]!r}: {cell.strip()!r} is beyond "
                                           "what a reading can hold")
                break
            impossible = impossible_value(plan.quantity, float(value))
            if impossible is not None:
                problem = ("negative_value" if value < 0 else "beyond_instrument_range",
                           f"column {table.columns[plan.index]!r}: {cell.strip()!r}: {impossible}")
                break
            row.append((plan, value, cell.strip()))
        tips: int | None = None
        rain_cell = ""
        if problem is None and options.tips is not None:
            if rain_col is None:
                tips = 1
            else:
                rain_cell = fields[rain_col].strip()
                try:
                    tips = _tips_of(fields[rain_col], options, mode, rain_unit, decimal_comma)
                except CellError as exc:
                    problem = ("not_a_number", f"column {table.columns[rain_col]!r}: {exc}")
                except ValueError as exc:
                    problem = (exc.args[0], f"column {table.columns[rain_col]!r}: {exc.args[1]}")
                if tips is None and problem is None:
                    gaps += 1
        rain_repeat = False
        if problem is None:
            for plan, value, _cell in row:
                seen = values[plan.quantity].get(when)
                if seen is not None and seen[0] != value:
                    problem = ("conflicting_time", f"{plan.quantity} {value} at the same time as line {seen[2]} "
                                                   f"({seen[0]})")
                    break
        if problem is None and cumulative and tips is not None and when in totals:
            if totals[when][0] != tips:
                problem = ("conflicting_time", f"running total {rain_cell!r} at the same time as line "
                                               f"{totals[when][2]} ({totals[when][1]!r})")
            rain_repeat = True
        if problem is not None:
            reject(line, *problem)
            continue
        out.gaps += gaps
        repeated = bool(row) and all(when in values[p.quantity] for p, _v, _c in row)
        if (repeated and tips is None) or (rain_repeat and (repeated or not row)):
            out.duplicate_rows += 1
        for plan, value, cell in row:
            values[plan.quantity].setdefault(when, (value, cell, line))
        if tips is not None and cumulative:
            totals.setdefault(when, (tips, rain_cell, line))
        elif tips is not None:
            rain.setdefault(when, []).append(rain_cell or "1")
            rain_tips[when] = rain_tips.get(when, 0) + tips
            rain_lines.setdefault(when, []).append(line)
    if progress is not None:
        progress(total, total)

    for plan in out.plans:
        boot = import_boot(site, device, plan.quantity, plan.unit)
        for when in sorted(values[plan.quantity]):
            value, cell, line = values[plan.quantity][when]
            out.lines[(boot, import_seq(when))] = line
            out.readings.append(Reading(
                site=site, device=device, quantity=plan.quantity, value=float(value), unit=plan.unit, time=when,
                gateway=IMPORT_GATEWAY, boot=boot, seq=import_seq(when), raw=cell,
            ))
    if options.tips is not None:
        assert counter is not None
        boot = import_boot(site, device, "rain_tips", TIP_UNIT)
        tip_size = str(counter.tip_resolution)

        def rain_reading(when: datetime, tips: int, raw: str, flags: tuple[str, ...] = ()) -> None:
            first = rain_lines[when][0] if when in rain_lines else totals[when][2] if when in totals else None
            if first is not None:
                out.lines[(boot, import_seq(when))] = first
            out.readings.append(Reading(
                site=site, device=device, quantity="rain_tips", value=tips, unit=TIP_UNIT, time=when,
                gateway=IMPORT_GATEWAY, boot=boot, seq=import_seq(when), raw=raw, flags=flags, tip_size=tip_size,
            ))
            out.tips += tips

        if cumulative:
            _count_totals(totals, counter, rain_reading, reject)
        else:
            extreme = _check_envelope(rain_tips, rain_lines, counter, reject, row_interval(row_times))
            for when in sorted(rain_tips):
                cells = rain[when]
                raw = "+".join(cells)
                rain_reading(when, rain_tips[when], raw if len(raw) <= _RAW_MAX else f"{len(cells)} rows",
                             (FLAG_EXTREME_RATE,) if when in extreme else ())
    return out


def _count_totals(totals: Mapping[datetime, tuple[int, str, int]], counter: CounterLike,
                  emit: Callable[[datetime, int, str, tuple[str, ...]], None],
                  reject: Callable[[int, str, str], None]) -> None:
    """Running totals -> new tips through :func:`count_tips`, in event-time order."""
    state: CounterState | None = None
    for when in sorted(totals):
        total, cell, line = totals[when]
        try:
            result = count_tips(state, total, when, counter)
        except CounterError as exc:
            reject(line, "beyond_counter_width", f"running total {cell!r}: {exc} (--counter-bits)")
            continue
        state = result.state
        emit(when, result.tips, cell, result.flags)


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
