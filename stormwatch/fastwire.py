"""The hot path of reading a readings message: one strict, typed decode (msgspec) and the contract's
field checks in one pass, for the common case -- a well-formed message of valid readings.

:func:`fast_readings` gives the readings of a message it can accept outright, equal to those of
:func:`stormwatch.contract.parse_parts`, or ``None``: anything else (a refusal, a time in another
RFC 3339 form, a value it does not take as it is) is left to ``parse_parts``, which gives
every refusal its reason. So the two paths accept the same set and refuse with the same reasons by
construction; tests/ingest/test_fastwire.py holds them equal on generated and hand-made payloads.
Design: docs/ingest.md, "The hot path".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, overload

import msgspec

from stormwatch.contract import INT64_MAX, INT64_MIN, RAIN_TIPS, Reading, check_identifier, trusted_reading
from stormwatch.rain import tip_size_of

__all__ = ["Cycle", "Wire", "fast_cycle", "fast_readings", "fast_wire", "fast_wires", "poll_cycle", "wire_reading"]


#: An integer a store holds (:data:`stormwatch.contract.INT64_MAX`).
_Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]


class _Wire(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One reading as the wire carries it, typed as strictly as :class:`~stormwatch.contract.Reading`
    (no coercion: a bool is not a number, a float not an integer); the checks msgspec cannot say
    (identifiers, the value per quantity, times, tip sizes) follow in :func:`_checked`."""

    site: str
    device: str
    quantity: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    value: int | float
    unit: Annotated[str, msgspec.Meta(min_length=1, max_length=32)]
    time: str
    gateway: str
    boot: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    seq: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
    raw: list[_Int64] | _Int64 | float | str | None = None
    flags: list[str] = msgspec.field(default_factory=list)
    tip_size: str | None = None


class _Batch(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    readings: list[_Wire]


#: A decoded reading as the hot path carries it (:func:`fast_wires`).
Wire = _Wire

_ONE = msgspec.json.Decoder(_Wire)
_MANY = msgspec.json.Decoder(_Batch)
#: The event-time form the gateway writes (:func:`stormwatch.wire.format_time`); other RFC 3339 forms
#: (an offset, a space, a lower-case ``z``, more than 6 decimals) take the full path.
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")
#: Bounded caches of what was checked once: identifiers (a site's few), event times (shared by the
#: readings of a poll cycle) and tip sizes (canonical text).
_CACHE_MAX = 4096
_IDS: set[str] = set()
_TIMES: dict[str, datetime] = {}
_SIZES: dict[str, str] = {}
#: :func:`_stamp`: the gateway's form with ASCII digits only, and the nanoseconds of its minutes.
_TIME_ASCII = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z", re.ASCII)
_MINUTES: dict[str, int] = {}
#: What follows a minute's 16 characters in :data:`_TIME_ASCII`.
_TIME_TAIL = re.compile(r":\d{2}(?:\.\d{1,6})?Z", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _identifier(text: str) -> bool:
    if text in _IDS:
        return True
    try:
        check_identifier(text)
    except ValueError:
        return False
    if len(_IDS) >= _CACHE_MAX:
        _IDS.clear()
    _IDS.add(text)
    return True


def _time(text: str) -> datetime | None:
    t = _TIMES.get(text)
    if t is None:
        if _TIME.fullmatch(text) is None:
            return None
        try:
            t = datetime.fromisoformat(text)  # ``Z``: UTC
        except ValueError:
            return None
        if len(_TIMES) >= _CACHE_MAX:
            _TIMES.clear()
        _TIMES[text] = t
    return t


def _stamp(text: str) -> int | None:
    """Nanoseconds since the epoch of an event time in the gateway's form (``datetime.fromisoformat``'s
    instant, to the microsecond), or ``None`` for any other text: the date and minute are checked
    once per minute, the seconds and their fraction read from the text."""
    minute = _MINUTES.get(text[:16])  # a minute's text is cached only once a whole time of it matched
    if minute is not None:
        if _TIME_TAIL.fullmatch(text, 16) is None:
            return None
    else:
        if _TIME_ASCII.fullmatch(text) is None:
            return None
        try:
            delta = datetime.fromisoformat(text[:16] + ":00Z") - _EPOCH
        except ValueError:
            return None
        if len(_MINUTES) >= _CACHE_MAX:
            _MINUTES.clear()
        minute = _MINUTES[text[:16]] = (delta.days * 86_400 + delta.seconds) * 1_000_000_000
    second = int(text[17:19])
    if second > 59:
        return None
    fraction = text[20:-1]
    return minute + second * 1_000_000_000 + (int(fraction.ljust(6, "0")) * 1_000 if fraction else 0)


def _size(text: str) -> str | None:
    size = _SIZES.get(text)
    if size is None:
        try:
            size = str(tip_size_of(text))
        except ValueError:
            return None
        if len(_SIZES) >= _CACHE_MAX:
            _SIZES.clear()
        _SIZES[text] = size
    return size


def fast_readings(payload: bytes | bytearray) -> tuple[list[Reading], bool] | None:
    """``(readings, batched)`` of a message whose every reading is plainly valid, or ``None`` (module
    docstring): ``batched`` is ``True`` for the ``{"readings": [...]}`` form."""
    fast = fast_wires(payload)
    if fast is None:
        return None
    wires, stamps, batched = fast
    return [wire_reading(w, ns) for w, ns in zip(wires, stamps, strict=True)], batched


def fast_wires(payload: bytes | bytearray) -> tuple[list[Wire], list[int], bool] | None:
    """``(wires, stamps, batched)`` of a message whose every reading is plainly valid, or ``None``: the
    decoded readings themselves -- each field as :class:`~stormwatch.contract.Reading` holds it (a
    value a float unless it counts tips, a tip size canonical) but the time, given as its instant in
    ns in ``stamps`` -- with no object made per reading (module docstring)."""
    try:  # msgspec refuses a lone surrogate escape (the full path says why: bad_json)
        if b'"readings"' in payload:
            wires = _MANY.decode(payload).readings
            if not wires:
                return None
            batched = True
        else:
            wires = [_ONE.decode(payload)]
            batched = False
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    stamps = _checked(wires)
    return None if stamps is None else (wires, stamps, batched)


def wire_reading(w: Wire, ns: int) -> Reading:
    """The :class:`~stormwatch.contract.Reading` of a checked wire reading (:func:`fast_wires`) and its
    time in ns: equal to the one the contract's parser gives of the same JSON."""
    return trusted_reading({"site": w.site, "device": w.device, "quantity": w.quantity, "value": w.value,
                            "unit": w.unit, "time": _EPOCH + timedelta(microseconds=ns // 1_000),
                            "gateway": w.gateway, "boot": w.boot, "seq": w.seq, "raw": w.raw,
                            "flags": tuple(w.flags), "tip_size": w.tip_size})


def _checked(wires: list[_Wire]) -> list[int] | None:
    """The event times in ns of a message's readings, each checked as :class:`~stormwatch.contract.Reading`
    checks it in one loop, its value and tip size put in the form the model holds; ``None`` at the
    first that is not plainly valid (a poll cycle's readings share their texts)."""
    out: list[int] = []
    append = out.append
    ids, rain = _IDS, RAIN_TIPS
    last_time: str | None = None  # a poll cycle's readings share their event time: parsed once
    last_ns = 0
    for w in wires:
        value: Any = w.value
        quantity = w.quantity
        if quantity == rain:
            if not isinstance(value, int):
                return None
        elif type(value) is not float:
            try:
                w.value = float(value)
            except OverflowError:
                return None
        tip_size = w.tip_size
        if tip_size is not None:
            if quantity != rain or (tip_size := _size(tip_size)) is None:
                return None
            w.tip_size = tip_size
        text = w.time
        if text != last_time:
            ns = _stamp(text)
            if ns is None:
                return None
            last_time, last_ns = text, ns
        site, device, gateway = w.site, w.device, w.gateway
        if not ((site in ids and device in ids and gateway in ids)
                or (_identifier(site) and _identifier(device) and _identifier(gateway))):
            return None
        append(last_ns)
    return out


class Cycle(Sequence[Reading]):
    """The readings of one message as columns: a gateway's poll cycle -- one site, gateway, boot and
    event time, seqs ``seq, seq + 1, ...``, no flags -- each reading the i-th of ``devices``,
    ``quantities``, ``values``, ``units``, ``tip_sizes`` and ``raws``, every field as the contract
    validates it. The alert engine takes it whole (``Engine.feed_cycle``: the shared fields checked
    once, the rules fed from the columns); as a sequence it is its :class:`Reading` s (made on first
    use). ``shape`` is ``(devices, quantities)``: pass one tuple object for the cycles of one gateway
    and the engine finds its routes by identity."""

    __slots__ = (
        "_readings",
        "boot",
        "devices",
        "gateway",
        "quantities",
        "raws",
        "seq",
        "shape",
        "site",
        "time",
        "tip_sizes",
        "units",
        "values",
    )

    def __init__(self, site: str, gateway: str, boot: str, seq: int, time: datetime,
                 shape: tuple[tuple[str, ...], tuple[str, ...]], values: Sequence[int | float],
                 units: Sequence[str], tip_sizes: Sequence[str | None], raws: Sequence[Any] | None = None) -> None:
        self.site, self.gateway, self.boot, self.seq, self.time = site, gateway, boot, seq, time
        self.shape = shape
        self.devices, self.quantities = shape
        self.values, self.units, self.tip_sizes = values, units, tip_sizes
        self.raws = raws
        self._readings: list[Reading] | None = None
        if not len(self.devices) == len(self.quantities) == len(values) == len(units) == len(tip_sizes):
            raise ValueError("a cycle's columns must have one entry per reading")

    def readings(self) -> list[Reading]:
        """The cycle's readings as models (made once)."""
        out = self._readings
        if out is None:
            raws = self.raws if self.raws is not None else [None] * len(self.values)
            out = self._readings = [
                trusted_reading({"site": self.site, "device": d, "quantity": q, "value": v, "unit": u,
                                 "time": self.time, "gateway": self.gateway, "boot": self.boot, "seq": self.seq + i,
                                 "raw": raw, "flags": (), "tip_size": size})
                for i, (d, q, v, u, size, raw) in enumerate(zip(self.devices, self.quantities, self.values,
                                                                self.units, self.tip_sizes, raws, strict=True))]
        return out

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> Reading: ...

    @overload
    def __getitem__(self, i: slice) -> list[Reading]: ...

    def __getitem__(self, i: int | slice) -> Reading | list[Reading]:
        return self.readings()[i]

    def reading(self, i: int) -> Reading:
        """The ``i``-th reading alone (a rule taking one reading as a model: the others not made)."""
        if self._readings is not None:
            return self._readings[i]
        return trusted_reading({"site": self.site, "device": self.devices[i], "quantity": self.quantities[i],
                                "value": self.values[i], "unit": self.units[i], "time": self.time,
                                "gateway": self.gateway, "boot": self.boot, "seq": self.seq + i,
                                "raw": None if self.raws is None else self.raws[i], "flags": (),
                                "tip_size": self.tip_sizes[i]})

    def __iter__(self) -> Iterator[Reading]:
        return iter(self.readings())


#: The shapes of the cycles decoded (one tuple object per gateway's poll cycle: the engine's routes by identity).
_SHAPES: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def fast_cycle(payload: bytes | bytearray) -> Cycle | None:
    """The message as a :class:`Cycle` when :func:`fast_readings` accepts it outright and its readings are
    one poll cycle (one site, gateway, boot and event time, one run of seqs, no flags), else ``None``
    (the caller takes :func:`fast_readings`, then the full path). Its readings equal
    ``fast_readings(payload)``'s, made only when asked for (tests/ingest/test_fastwire_cycle.py)."""
    try:
        if b'"readings"' in payload:
            wires = _MANY.decode(payload).readings
            if not wires:
                return None
        else:
            wires = [_ONE.decode(payload)]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return _cycle(wires)


def _cycle(wires: list[_Wire]) -> Cycle | None:
    """:func:`_readings`' checks of a poll cycle's readings -- the shared fields once -- into columns."""
    w0 = wires[0]
    site, gateway, boot, seq, text = w0.site, w0.gateway, w0.boot, w0.seq, w0.time
    t = _TIMES.get(text) or _time(text)
    if t is None or not (_identifier(site) and _identifier(gateway)):
        return None
    ids, rain = _IDS, RAIN_TIPS
    devices, quantities, values, units, sizes, raws = [], [], [], [], [], []
    next_seq = seq
    for w in wires:
        if w.seq != next_seq or w.flags or w.time != text or w.site != site or w.gateway != gateway \
                or w.boot != boot:
            return None
        next_seq += 1
        value: Any = w.value
        quantity = w.quantity
        if quantity == rain:
            if not isinstance(value, int):
                return None
        elif type(value) is not float:
            try:
                value = float(value)
            except OverflowError:
                return None
        tip_size = w.tip_size
        if tip_size is not None and (quantity != rain or (tip_size := _size(tip_size)) is None):
            return None
        device = w.device
        if device not in ids and not _identifier(device):
            return None
        devices.append(device)
        quantities.append(quantity)
        values.append(value)
        units.append(w.unit)
        sizes.append(tip_size)
        raws.append(w.raw)
    shape = (tuple(devices), tuple(quantities))
    known = _SHAPES.get(shape)
    if known is None:
        if len(_SHAPES) >= _CACHE_MAX:
            _SHAPES.clear()
        known = _SHAPES[shape] = shape
    return Cycle(site, gateway, boot, seq, t, known, values, units, sizes, raws)



def fast_wire(payload: bytes | bytearray) -> Wire | None:
    """The reading of a one-reading message as decoded and typed (:class:`Wire`), or ``None`` (another
    form, or what the decoder refuses); the contract's checks of its fields are :func:`poll_cycle`'s."""
    if b'"readings"' in payload:
        return None
    try:
        return _ONE.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def poll_cycle(wires: list[Wire]) -> Cycle | None:
    """:func:`fast_cycle` of the readings of several one-reading messages (:func:`fast_wire`), as if they
    came in one message: a poll sent one reading a message, taken whole (tests/ingest/test_fastwire_join.py)."""
    return _cycle(wires) if wires else None
