"""The ``stormwatch decode`` field tool: decode register words typed by hand, via stormwatch.codec.

``decode --type float32 --order CDAB 0x0000 0x3FC0`` → ``1.5`` (failure-kinds.md #1);
``--order all`` shows the value in the four byte orders side by side;
``decode --type int16 --scale 0.1 65535`` → ``-0.1`` (failure-kinds.md #2).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import get_args

from stormwatch.codec import DataType, DecodeError, WordOrder, decode_words, scale
from stormwatch.display import plural
from stormwatch.errors import InputError
from stormwatch.numbers import NumberError, parse_word_text
from stormwatch.profiles import REGISTER_COUNT

ORDERS: tuple[str, ...] = get_args(WordOrder)
TYPES: tuple[str, ...] = get_args(DataType)


class FieldToolError(InputError):
    """Bad input to the field tool (message says what and how to fix it)."""


def parse_word(text: str) -> int:
    """A register word from decimal (``16320``) or hex (``0x3FC0``) text, ASCII digits only
    (:func:`stormwatch.numbers.parse_word_text`: ``1_0`` and ``١`` are refused, not read as 10 and 1).

    Raises:
        FieldToolError: not a number or outside 0..65535.
    """
    try:
        value = parse_word_text(text)
    except NumberError:
        if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():
            raise FieldToolError(f"register word {text!r} is negative: a word as read from the wire is 0..65535 "
                                 f"(a signed value's word is its two's complement: -1 is 65535 or 0xFFFF; "
                                 f"--type int16 decodes it)") from None
        raise FieldToolError(f"register word {text!r} is not a decimal or 0x-hex number (ASCII digits: 16320, "
                             "0x3FC0)") from None
    if not 0 <= value <= 0xFFFF:
        raise FieldToolError(f"register word {text!r} = {value} is outside 0..65535")
    return value


def format_number(value: int | float, dtype: str, scaled: bool) -> str:
    """Shortest text for a decoded value: ints as ints, float32 as the shortest decimal that
    round-trips through float32, other floats with 12 significant digits."""
    if isinstance(value, int) and not scaled:
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if dtype == "float32" and not scaled:
        packed = struct.pack(">f", value)
        for digits in range(1, 10):
            text = f"{value:.{digits}g}"
            if struct.pack(">f", float(text)) == packed:
                return text
    return f"{value:.12g}"


def decode_text(words: Sequence[str], dtype: str, order: str, point_scale: float = 1.0, offset: float = 0.0) -> str:
    """The output of ``stormwatch decode``.

    Raises:
        FieldToolError: unknown type/order, wrong word count or a bad word.
    """
    if dtype not in TYPES:
        raise FieldToolError(f"--type {dtype!r}: expected one of {', '.join(TYPES)}")
    if order != "all" and order not in ORDERS:
        raise FieldToolError(f"--order {order!r}: expected one of {', '.join(ORDERS)} or all")
    for name, number in (("--scale", point_scale), ("--offset", offset)):
        if not math.isfinite(number):
            raise FieldToolError(f"{name} {number}: must be a finite number")
    need = REGISTER_COUNT[dtype]
    if len(words) != need:
        raise FieldToolError(f"{dtype} needs {plural(need, 'register word')}, got {len(words)}")
    values = [parse_word(w) for w in words]
    scaled = point_scale != 1.0 or offset != 0.0

    def one(o: str) -> str:
        try:
            raw = decode_words(values, dtype, o)  # type: ignore[arg-type]
        except DecodeError as exc:
            raise FieldToolError(str(exc)) from exc
        return format_number(scale(raw, point_scale, offset) if scaled else raw, dtype, scaled)

    if order == "all":
        return "  ".join(f"{o}={one(o)}" for o in ORDERS)
    return one(order)
