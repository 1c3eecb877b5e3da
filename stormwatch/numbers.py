"""The one grammar of numbers given as text: file cells, numeric command-line options, typed words
(stdlib only: the lean gateway imports it).

Python's own parsers accept more than a person or a logger means: ``float("1_000")`` is 1000 (PEP 515
digit grouping), ``float("١٢")`` is 12 (any Unicode decimal digit, here Arabic-Indic),
``float("nan")`` and ``float("infinity")`` are numbers, and ``int("0x1F", 0)`` reads hex. A cell
``1_000`` is far more likely a typo or a different convention than a thousand, and a number that is
not a number (NaN) must never reach a rule. So every number stormwatch reads from text follows
:data:`RULE`.

The design: docs/contract.md ("The modules", `stormwatch/numbers.py`).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

#: The grammar in one sentence (errors and docs/importing.md say the same).
RULE = ("numbers are ASCII digits with an optional sign, decimal point and exponent, e.g. 12, -3, 41.5, 1.2e3; "
        "not 1_000, 1,000, other scripts' digits, nan or inf")
#: The integer grammar in one sentence.
INT_RULE = "integers are ASCII digits with an optional sign, e.g. 12, -3"

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A register word as a person types it from a manual: decimal or ``0x`` hex (ASCII).
_WORD = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]+")
#: Longest number text taken (an exponent of thousands of digits is no measurement).
MAX_CHARS = 100


class NumberError(ValueError):
    """Text that is not a number of the grammar; the message quotes it and says the rule."""


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def is_number(text: str) -> bool:
    """Whether ``text`` (exactly, no surrounding space) is a number of :data:`RULE`."""
    return len(text) <= MAX_CHARS and _DECIMAL.fullmatch(text) is not None


def parse_decimal(text: str) -> Decimal:
    """The exact number of ``text`` (no surrounding space allowed).

    Raises:
        NumberError: ``text`` is not a number of :data:`RULE`.
    """
    if not is_number(text):
        raise NumberError(f"{_shown(text)} is not a number ({RULE})")
    return Decimal(text)


def parse_float(text: str) -> float:
    """The finite float of ``text`` (no surrounding space allowed).

    Raises:
        NumberError: not a number of :data:`RULE`, or beyond the range of a float (``1e999``).
    """
    if not is_number(text):
        raise NumberError(f"{_shown(text)} is not a number ({RULE})")
    value = float(text)
    if not math.isfinite(value):
        raise NumberError(f"{_shown(text)} is beyond the range of a number (about ±1.8e308)")
    return value


def parse_int(text: str) -> int:
    """The integer of ``text`` (no surrounding space allowed).

    Raises:
        NumberError: not an integer of :data:`INT_RULE`.
    """
    if len(text) > MAX_CHARS or _INTEGER.fullmatch(text) is None:
        raise NumberError(f"{_shown(text)} is not an integer ({INT_RULE})")
    return int(text)


def parse_word_text(text: str) -> int:
    """A 16-bit-or-wider register word typed as decimal (``16320``) or ``0x`` hex (``0x3FC0``), ASCII only.

    Raises:
        NumberError: any other text (``1_0``, ``١``, ``0o17``, ``-1``).
    """
    if len(text) > MAX_CHARS or _WORD.fullmatch(text) is None:
        raise NumberError(f"{_shown(text)} is not a decimal or 0x-hex number (ASCII digits only)")
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text)
