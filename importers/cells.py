"""One cell of a logger file: a gap, an exact number, or an error; and the unit of a column.

Gaps (house rule "a missing reading is a gap, not a zero"; docs/reference/design-notes.md):
an empty cell, ``NaN``/``NAN`` (Campbell Scientific writes ``NAN``), ``INF``, ``NA``, ``null`` and
the numeric sentinels loggers write for "no value" (default ``-9999`` and ``-99999``, as in the
common data-logger convention; more with ``--gap-value``) are never stored and never become 0.

Numbers are parsed exactly (:class:`~decimal.Decimal`) so a unit conversion such as cm -> mm is
exact; the float is made once, for the reading. A cell follows the one number grammar of
:mod:`stormwatch.numbers` (ASCII digits, sign, point, exponent): ``1_000`` and ``١٢`` are not numbers
(Python's ``Decimal``/``float`` would take them as 1000 and 12) and the row is rejected with the cell quoted.
"""

from __future__ import annotations

from decimal import Decimal

from stormwatch.display import quoted
from stormwatch.numbers import RULE, is_number

#: Cell texts that mean "no value" (compared case-insensitively, after stripping quotes/space).
GAP_TEXTS = frozenset({"", "nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity", "-infinity", "na", "n/a",
                       "null", "none", "#n/a"})

#: Numeric sentinels that mean "no value" by default.
DEFAULT_SENTINELS: tuple[Decimal, ...] = (Decimal(-9999), Decimal(-99999))

#: Millimetres per length unit, exact (1 in = 25.4 mm and 1 ft = 304.8 mm by definition).
MM_PER_UNIT: dict[str, Decimal] = {
    "mm": Decimal(1), "cm": Decimal(10), "m": Decimal(1000), "in": Decimal("25.4"), "ft": Decimal("304.8"),
}

#: Unit spellings found in logger headers -> the contract's UCUM-style unit.
_UNIT_ALIASES: dict[str, str] = {
    "deg c": "Cel", "degc": "Cel", "°c": "Cel", "ºc": "Cel", "c": "Cel", "celsius": "Cel", "cel": "Cel",
    "deg_c": "Cel", "ntu": "NTU", "fnu": "FNU", "mm": "mm", "cm": "cm", "m": "m", "in": "in", "inch": "in",
    "inches": "in", "ft": "ft", "feet": "ft", "bar": "bar", "mbar": "mbar", "tip": "{tip}", "tips": "{tip}",
    "{tip}": "{tip}",
}


class CellError(ValueError):
    """A cell that is neither a number nor a gap."""


def parse_cell(text: str, sentinels: tuple[Decimal, ...] = DEFAULT_SENTINELS, *,
               decimal_comma: bool = False) -> Decimal | None:
    """The exact number in ``text``, or ``None`` for a gap.

    Args:
        text: the cell as read (quotes already removed by the CSV reader).
        sentinels: numbers that mean "no value".
        decimal_comma: accept ``1,5`` as 1.5 (files whose delimiter is not a comma).

    Raises:
        CellError: the cell is not a number (the message quotes it).
    """
    cell = text.strip().strip('"').strip()
    if cell.lower() in GAP_TEXTS:
        return None
    if decimal_comma and "," in cell and "." not in cell:
        cell = cell.replace(",", ".")
    if not is_number(cell):
        raise CellError(f"{quoted(text)} is not a number ({RULE})")
    value = Decimal(cell)
    if value in sentinels:
        return None
    return value


def normalise_unit(text: str | None) -> str | None:
    """The contract unit for a unit as a logger header writes it (``Deg C`` -> ``Cel``).

    Unknown spellings are returned stripped (the validator then compares them with the profile).
    """
    if text is None:
        return None
    unit = text.strip()
    if not unit:
        return None
    return _UNIT_ALIASES.get(unit.lower(), unit)


def convert(value: Decimal, from_unit: str, to_unit: str) -> Decimal | None:
    """``value`` in ``from_unit`` expressed in ``to_unit``, exactly; ``None`` if no conversion is known.

    Only lengths convert (mm, cm, m, in, ft); any other pair must already match.
    """
    if from_unit == to_unit:
        return value
    if from_unit in MM_PER_UNIT and to_unit in MM_PER_UNIT:
        return value * MM_PER_UNIT[from_unit] / MM_PER_UNIT[to_unit]
    return None
