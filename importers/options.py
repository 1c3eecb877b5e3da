"""Format options of ``stormwatch import`` / ``replay`` as one typed object."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stormwatch.errors import InputError
from stormwatch.importers.cells import DEFAULT_SENTINELS
from stormwatch.numbers import NumberError, parse_decimal
from stormwatch.rain import LengthUnit, TipResolution, parse_tip_size

Format = Literal["auto", "generic", "toa5", "hobo", "rtl433"]

#: Where the zone of a file's times without an offset came from: ``--tz``; ``site``: the site
#: file's ``timezone`` (the default of every command that has a site); ``default``: UTC, said so,
#: where there is no site (``replay``); ``header``: the file's own header (HOBOware ``GMT-04:00``).
ZoneSource = Literal["--tz", "site", "default", "header"]

#: How each source is said next to the zone (:func:`zone_origin`).
_ZONE_SOURCES: dict[str, str] = {
    "--tz": "--tz",
    "site": "the site's zone; --tz ZONE to read them in another",
    "default": "no site to take a zone from; --tz ZONE for the logger's clock",
    "header": "the zone the file's header names",
}


def zone_origin(source: str) -> str:
    """Where a zone came from, for a person: ``the site's zone; --tz ZONE to read them in another``."""
    return _ZONE_SOURCES.get(source, source)


def zone_note(zone: str, source: str, local_times: int) -> str:
    """How a file's times were read, for a person: ``12 times without an offset, read in
    America/New_York (the site's zone; --tz ZONE to read them in another)``."""
    if not local_times:
        return "every time with its UTC offset (no zone needed)"
    many = "time" if local_times == 1 else "times"
    return f"{local_times} {many} without an offset, read in {zone} ({zone_origin(source)})"

#: How a rain file's tip column is read: ``depth`` -- the cell is rain depth in the tip unit (a
#: multiple of the tip size: 0.2 mm = 1 tip, 0 = no tip); ``count`` -- the cell is a whole tip count;
#: ``row`` -- every row is one tip (the cells are ignored); ``cumulative`` -- the cell is a running
#: total of depth in the tip unit (a console's or rtl_433's ``rain_mm``/``rain_in``), and
#: ``cumulative-count`` a running total of tips (an event logger's or pulse counter's count): the
#: total is turned into new tips by the gateway's own counter function
#: (:func:`stormwatch.gateway.counter.count_tips`; wraps at ``--counter-bits``, default never).
TipsPerRow = Literal["depth", "count", "row", "cumulative", "cumulative-count"]

#: The ``--tips-per-row`` values, in the order ``--help`` lists them.
TIPS_PER_ROW: tuple[TipsPerRow, ...] = ("depth", "count", "row", "cumulative", "cumulative-count")
#: The values whose cells are running totals.
CUMULATIVE: frozenset[str] = frozenset({"cumulative", "cumulative-count"})

_VALUE_COLUMN = re.compile(r"^(?P<name>.+)=(?P<quantity>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<unit>[^:=]+))?$")


class OptionsError(InputError):
    """Format options that cannot work (the message names the option)."""


@dataclass(frozen=True)
class ValueColumn:
    """``--value-column NAME=QUANTITY[:UNIT]``: column ``name`` holds ``quantity``.

    ``unit`` is the file's unit of the column; when absent the file's header unit is used, and
    failing that the device profile's unit is assumed.
    """

    name: str
    quantity: str
    unit: str | None = None

    @classmethod
    def parse(cls, spec: str) -> ValueColumn:
        """Parse ``NAME=QUANTITY[:UNIT]`` (the name may contain spaces and brackets).

        Raises:
            OptionsError: another form.
        """
        m = _VALUE_COLUMN.match(spec.strip())
        if not m:
            raise OptionsError(f"--value-column {spec!r}: expected NAME=QUANTITY[:UNIT], e.g. 'turb_FNU=turbidity:FNU'")
        unit = m.group("unit")
        return cls(m.group("name").strip(), m.group("quantity"), unit.strip() if unit else None)


@dataclass(frozen=True)
class TipSpec:
    """A rain file: ``--tip-mm MM`` / ``--tip-in IN``.

    Attributes:
        size: tip size as written (exact decimal) in ``unit``.
        unit: ``mm`` or ``in``.
        column: the column holding depth or counts (default: the file's rain column -- rtl_433's
            ``rain_mm``/``rain_in`` -- or its first data column).
        per_row: see :data:`TipsPerRow`; ``None``: the format's default (``cumulative`` for rtl_433
            JSON Lines, ``depth`` otherwise).
        counter_bits: a cumulative column wraps at ``2**counter_bits`` (``None``: never wraps).
    """

    size: Decimal
    unit: LengthUnit
    column: str | None = None
    per_row: TipsPerRow | None = None
    counter_bits: int | None = None

    @property
    def resolution(self) -> TipResolution:
        return TipResolution.of(str(self.size), self.unit)

    @classmethod
    def parse(cls, mm: str | None, inches: str | None, column: str | None = None,
              per_row: str | None = None, counter_bits: int | None = None) -> TipSpec | None:
        """From ``--tip-mm`` / ``--tip-in`` (at most one), ``--tips-per-row`` and ``--counter-bits``;
        ``None`` when no tip size is given.

        Raises:
            OptionsError: both sizes given, a size no tipping bucket has
                (:func:`stormwatch.rain.parse_tip_size`), an unknown ``per_row``, ``counter_bits``
                outside 1..64 or given for a non-cumulative column.
        """
        if per_row is not None and per_row not in TIPS_PER_ROW:
            raise OptionsError(f"--tips-per-row {per_row!r}: expected {', '.join(TIPS_PER_ROW)}")
        if counter_bits is not None:
            if not 1 <= counter_bits <= 64:
                raise OptionsError(f"--counter-bits {counter_bits}: expected 1..64 (16 and 32 are usual)")
            if per_row is not None and per_row not in CUMULATIVE:
                raise OptionsError(f"--counter-bits applies to running totals: give --tips-per-row cumulative or "
                                   f"cumulative-count, not {per_row}")
        if mm is not None and inches is not None:
            raise OptionsError("give --tip-mm or --tip-in, not both")
        text, unit, option = (mm, "mm", "--tip-mm") if mm is not None else (inches, "in", "--tip-in")
        if text is None:
            if per_row is not None or counter_bits is not None:
                raise OptionsError("--tips-per-row and --counter-bits describe a rain column: give its tip size "
                                   "with --tip-mm MM or --tip-in IN")
            return None
        try:
            size = parse_tip_size(text, unit)  # type: ignore[arg-type]
        except ValueError as exc:
            raise OptionsError(f"{option} {exc}") from None
        return cls(size, unit, column, per_row, counter_bits)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ImportOptions:
    """How to read one file.

    Attributes:
        format: ``auto`` (TOA5 and HOBOware are recognised by their headers, rtl_433 JSON Lines by
            its first line), or forced.
        delimiter: field delimiter of generic files (default: ``,``, or ``;``/tab when the header has
            those and no comma).
        time_column: name or 0-based index of the time column (default: ``TIMESTAMP`` for TOA5,
            ``Date Time`` for HOBOware, the first column otherwise).
        time_format: :func:`~datetime.datetime.strptime` format (default: ISO 8601 and a few
            unambiguous year-first forms; HOBOware: its export formats, month first).
        tz: IANA zone of times without an offset (HOBOware's header offset wins); ``None``: not
            chosen yet -- the command gives its site's zone (:meth:`in_zone`) before reading.
        tz_source: where ``tz`` came from (:data:`ZoneSource`), said beside it.
        value_columns: the columns to import.
        tips: rain: the tip size and how to read the tip column.
        skip_rows: lines before the header (generic files).
        gap_values: numbers that mean "no value".
        select: JSON Lines (rtl_433): only messages whose ``key`` equals ``value`` (``--select``).
    """

    format: Format = "auto"
    delimiter: str | None = None
    time_column: str | None = None
    time_format: str | None = None
    tz: str | None = None
    tz_source: ZoneSource = "--tz"
    value_columns: tuple[ValueColumn, ...] = ()
    tips: TipSpec | None = None
    skip_rows: int = 0
    gap_values: tuple[Decimal, ...] = DEFAULT_SENTINELS
    select: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.value_columns and self.tips is None:
            raise OptionsError("nothing to import: give --value-column NAME=QUANTITY[:UNIT] and/or --tip-mm/--tip-in")
        if self.skip_rows < 0:
            raise OptionsError("--skip-rows must be >= 0")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise OptionsError(f"--delimiter {self.delimiter!r}: must be one character")
        quantities = [v.quantity for v in self.value_columns] + (["rain_tips"] if self.tips else [])
        dupes = sorted({q for q in quantities if quantities.count(q) > 1})
        if dupes:
            raise OptionsError(f"quantity {dupes} mapped from more than one column")
        if self.tz is not None:
            self.zone  # noqa: B018 -- validate the zone now

    def in_zone(self, tz: str, source: ZoneSource) -> ImportOptions:
        """These options with ``tz`` as the zone of naive times, unless ``--tz`` chose one."""
        return self if self.tz is not None else replace(self, tz=tz, tz_source=source)

    @property
    def zone(self) -> ZoneInfo:
        """The IANA zone of naive times.

        Raises:
            OptionsError: unknown zone, or none chosen (a reader reached before :meth:`in_zone`:
                a time is never read in a zone nobody chose).
        """
        if self.tz is None:
            raise OptionsError("times without an offset need a zone: give --tz ZONE")
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise OptionsError(f"--tz {self.tz!r}: unknown IANA time zone") from None


def parse_gap_values(texts: list[str]) -> tuple[Decimal, ...]:
    """Default sentinels plus ``--gap-value`` numbers.

    Raises:
        OptionsError: a value that is not a number.
    """
    extra: list[Decimal] = []
    for t in texts:
        try:
            extra.append(parse_decimal(t.strip()))
        except NumberError as exc:
            raise OptionsError(f"--gap-value: {exc}") from None
    return DEFAULT_SENTINELS + tuple(extra)


def parse_select(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """``--select KEY=VALUE`` options (JSON Lines) as ``(key, value)`` pairs.

    Raises:
        OptionsError: a text without ``=`` or with an empty key.
    """
    out: list[tuple[str, str]] = []
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise OptionsError(f"--select {text!r}: expected KEY=VALUE, e.g. 'model=Acurite-5n1' or 'id=3844'")
        out.append((key.strip(), value.strip()))
    return tuple(out)
