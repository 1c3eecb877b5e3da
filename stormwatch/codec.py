"""Register decoding, encoding and scaling: the one shared place (EdgeX-style).

Every driver hands raw 16-bit register words to :func:`decode_point`; the simulators build
register words with :func:`encode_point`. Nothing else in the code base interprets word order,
signedness or scale. Stdlib only (the lean gateway process imports it without pydantic): the
profile types are imported for type checking only, and a point is anything with
``type/order/scale/offset`` (:class:`PointLike`).

Byte orders name the four bytes ``A B C D`` of a big-endian 32-bit value as they appear on the
wire (sensors.md, "Modbus data types and word order"; failure-kinds.md #1).

The design: docs/contract.md ("The modules", `stormwatch/codec.py`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Literal, Protocol

#: Register data types a profile point may hold (the number of registers each spans is in
#: :data:`stormwatch.profiles.REGISTER_COUNT`).
DataType = Literal["int16", "uint16", "int32", "uint32", "float32", "int64", "uint64", "float64"]
#: Word/byte orders of multi-register values (docs/reference/sensors.md; failure-kinds.md #1).
WordOrder = Literal["ABCD", "CDAB", "BADC", "DCBA"]

_STRUCT = {
    "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "float32": "f",
    "int64": "q", "uint64": "Q", "float64": "d",
}


class PointLike(Protocol):
    """What :func:`decode_point`/:func:`encode_point` read from a point: the profile's pydantic
    :class:`stormwatch.profiles.Point` or the gateway plan's :class:`stormwatch.gateway.plan.PointPlan`."""

    @property
    def type(self) -> DataType: ...
    @property
    def order(self) -> WordOrder: ...
    @property
    def scale(self) -> float: ...
    @property
    def offset(self) -> float: ...


class DecodeError(ValueError):
    """Registers that cannot be decoded as asked (wrong count, word out of 0..65535)."""


def _wire_bytes(words: Sequence[int]) -> bytes:
    for w in words:
        if not 0 <= w <= 0xFFFF:
            raise DecodeError(f"register word {w} is not in 0..65535")
    return b"".join(w.to_bytes(2, "big") for w in words)


def _to_big_endian(wire: bytes, order: WordOrder) -> bytes:
    """Reorder wire bytes into big-endian (ABCD) order. The permutations are involutions."""
    if len(wire) == 2 or order == "ABCD":
        return wire
    if order == "DCBA":
        return wire[::-1]
    words = [wire[i : i + 2] for i in range(0, len(wire), 2)]
    if order == "CDAB":
        return b"".join(reversed(words))
    # BADC: swap the two bytes of each word
    return b"".join(w[::-1] for w in words)


def decode_words(words: Sequence[int], dtype: DataType, order: WordOrder = "ABCD") -> int | float:
    """Decode register words into a raw number (no scaling).

    Args:
        words: 16-bit register values as read (1, 2 or 4 of them, per ``dtype``).
        dtype: ``int16`` ... ``float64``.
        order: byte order for 32/64-bit types (ignored for 16-bit).

    Returns:
        int for integer types, float for float types.

    Raises:
        DecodeError: wrong number of words or a word outside 0..65535.

    Examples: ``decode_words([0x0000, 0x3FC0], "float32", "CDAB") == 1.5``;
    ``decode_words([65535], "int16") == -1`` (failure-kinds.md #1, #2).
    """
    if dtype not in _STRUCT:
        raise DecodeError(f"unknown data type {dtype!r}")
    need = struct.calcsize(_STRUCT[dtype]) // 2  # registers spanned (profiles.REGISTER_COUNT)
    if len(words) != need:
        raise DecodeError(f"{dtype} needs {need} register(s), got {len(words)}")
    raw = _to_big_endian(_wire_bytes(words), order)
    value: int | float = struct.unpack(">" + _STRUCT[dtype], raw)[0]
    return value


def encode_words(value: int | float, dtype: DataType, order: WordOrder = "ABCD") -> list[int]:
    """Inverse of :func:`decode_words`: a raw number → register words as on the wire.

    Raises:
        DecodeError: the value does not fit ``dtype``.
    """
    try:
        if dtype.startswith("float"):
            packed = struct.pack(">" + _STRUCT[dtype], float(value))
        else:
            packed = struct.pack(">" + _STRUCT[dtype], int(value))
    except struct.error as exc:
        raise DecodeError(f"{value!r} does not fit {dtype}: {exc}") from exc
    wire = _to_big_endian(packed, order)
    return [int.from_bytes(wire[i : i + 2], "big") for i in range(0, len(wire), 2)]


def scale(raw: int | float, point_scale: float, point_offset: float) -> float:
    """Engineering value = raw × scale + offset (the only place scaling happens)."""
    return raw * point_scale + point_offset


def decode_point(point: PointLike, words: Sequence[int]) -> tuple[int | float, float]:
    """Decode and scale one profile point.

    Returns:
        ``(raw, value)``: the undecoded-number and the engineering value in ``point.unit``.
        The value is NaN when the raw number is NaN (a float register holding NaN) -- callers
        treat a non-finite value as a missing reading, never as zero.

    Raises:
        DecodeError: see :func:`decode_words`.
    """
    raw = decode_words(words, point.type, point.order)
    if isinstance(raw, float) and not math.isfinite(raw):
        return raw, math.nan
    return raw, scale(raw, point.scale, point.offset)


def encode_point(point: PointLike, value: float) -> list[int]:
    """Register words a device would hold for engineering ``value`` of ``point``.

    Integer types round to the nearest raw count.

    Raises:
        DecodeError: the raw value does not fit the point's type.
    """
    raw = (value - point.offset) / point.scale
    if not point.type.startswith("float"):
        raw = round(raw)
    return encode_words(raw, point.type, point.order)
