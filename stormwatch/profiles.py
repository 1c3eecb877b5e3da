"""Device profiles: one YAML file per sensor model in ``device_profiles/`` (EdgeX-style).

Built-in profiles ship in the package (``stormwatch.device_profiles``); a user's own live in
directories named by ``stormwatch --profiles DIR`` or ``STORMWATCH_PROFILES``, searched first
(:class:`ProfileLibrary`, :mod:`stormwatch.resources`).

A new sensor model is a new profile file, no code. The profile says how to talk to the device
(Modbus registers, a serial line format or SDI-12), how to decode and scale each value, its unit
and valid range, and -- for level sensors -- how the value becomes a height above the basin
floor. Decoding and scaling are applied in one shared place, :mod:`stormwatch.codec`.

The design: docs/profiles.md ("The module", `stormwatch/profiles.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from stormwatch import resources
from stormwatch.codec import DataType, WordOrder
from stormwatch.errors import InputError, load_yaml, problems_message
from stormwatch.physics import unit_problem
from stormwatch.rain import TipResolution

RegisterKind = Literal["holding", "input", "coil", "discrete"]

Addressing = Literal["0-based", "modicon"]

#: Modicon reference notation per table: (5-digit first number, 6-digit first number). Register n
#: of a manual's "4xxxx" list is holding wire address n - 40001 (n - 400001 in the 6-digit form);
#: coils are 00001.. (wire n - 1, both forms). Source: Modicon Modbus Protocol Reference Guide
#: PI-MBUS-300 Rev. J, ch. 2 "Data Addresses in Modbus Messages" (coil 1 → address 0000, holding
#: register 40001 → address 0000); the six-digit form is the tools' extension to 65536 registers
#: (docs/reference/sensors.md, "Register notation").
MODICON_BASE: dict[str, tuple[int, int]] = {
    "coil": (1, 1), "discrete": (10001, 100001), "input": (30001, 300001), "holding": (40001, 400001),
}
#: Which table a command's function works on (its Modicon notation follows that table).
COMMAND_TABLE: dict[str, str] = {
    "write_registers": "holding", "write_register": "holding", "read_registers": "holding",
    "read_input_registers": "input", "write_coil": "coil",
}


def modicon_ranges(table: str) -> list[tuple[int, int]]:
    """The Modicon reference numbers of ``table``: the 5-digit range, then the 6-digit one."""
    five, six = MODICON_BASE[table]
    if table == "coil":
        return [(1, 65536)]
    return [(five, five + 9998), (six, six + 0xFFFF)]


def modicon_to_wire(number: int, table: str) -> int:
    """Wire (0-based) address of Modicon reference ``number`` of ``table``: 40001 → 0 (holding),
    30010 → 9 (input), 400001 → 0, 465536 → 65535, coil 1 → 0.

    Raises:
        ValueError: ``number`` is not a reference of ``table`` (the message names the ranges and,
            when the number belongs to another table, that table).
    """
    for first, last in modicon_ranges(table):
        if first <= number <= last:
            return number - first
    ranges = " or ".join(f"{a}-{b}" for a, b in modicon_ranges(table))
    other = [t for t in MODICON_BASE if t != table and t != "coil"
             and any(a <= number <= b for a, b in modicon_ranges(t))]
    hint = f"; {number} is a Modicon {other[0]} reference (table: {other[0]})" if other else ""
    raise ValueError(f"{number} is not a Modicon {table} reference ({ranges}){hint}")


def modicon_lookalike(address: int, table: str) -> str | None:
    """Why a 0-based ``address`` of ``table`` looks like Modicon notation, with the suggested wire
    address (``None`` if it does not): holding 40001-49999, input 30001-39999, discrete 10001-19999."""
    if table == "coil":
        return None
    first = MODICON_BASE[table][0]
    if first <= address <= first + 9998:
        wire = address - first
        return (f"address {address} looks like Modicon notation ({table} register {address} = wire address "
                f"{wire}) but the profile's addressing is 0-based: write address: {wire} "
                f"(0x{wire:04X}), or state addressing: modicon in the modbus section")
    return None


#: Registers each data type spans.
REGISTER_COUNT: dict[str, int] = {
    "int16": 1, "uint16": 1, "int32": 2, "uint32": 2, "float32": 2,
    "int64": 4, "uint64": 4, "float64": 4,
}


#: The baud rates a serial port can be set to: the POSIX termios rates (``B50`` .. ``B38400``,
#: termios.h), Linux's ``B57600`` .. ``B921600`` (pyserial's ``SerialBase.BAUDRATES`` lists the
#: same and more), and 14400 / 28800 of Windows' ``CBR_`` rates, which some loggers use. The
#: Modbus serial line guide (Modbus over Serial Line V1.02, 2.5.1) requires 9600 and 19200 and
#: lets others be offered; SDI-12 adapters talk to the host at one of these. 12345 is no rate:
#: a port opened at it talks to nothing.
STANDARD_BAUD_RATES = (50, 75, 110, 134, 150, 200, 300, 600, 1200, 1800, 2400, 4800, 9600, 14400, 19200, 28800,
                       38400, 57600, 115200, 230400, 460800, 921600)


def _standard_baud(value: int) -> int:
    """``value`` when it is one of :data:`STANDARD_BAUD_RATES`.

    Raises:
        ValueError: any other rate (the message lists the common ones).
    """
    if value not in STANDARD_BAUD_RATES:
        raise ValueError(f"{value} is not a standard baud rate (the common ones: 1200, 2400, 4800, 9600, 19200, "
                         "38400, 57600, 115200; see the device's manual)")
    return value


#: A serial port's baud rate, one of :data:`STANDARD_BAUD_RATES`.
Baud = Annotated[int, AfterValidator(_standard_baud)]


def bool_for_number(annotation: object, value: object) -> str | None:
    """Why ``value`` must not fill a field of type ``annotation``: a YAML boolean (``true``/``false``,
    YAML 1.1's ``yes``/``no``/``on``/``off``) given for a number -- Python counts it as 1 or 0, so
    ``stopbits: true`` would be 1 stop bit -- or ``None`` (not a bool, or a field that takes one;
    other types say their own error)."""
    if not isinstance(value, bool):
        return None
    types = {annotation, *get_args(annotation)}
    if bool in types:
        return None
    numeric = any(t in (int, float) or (get_origin(t) is Literal and all(
        isinstance(a, int | float) and not isinstance(a, bool) for a in get_args(t))) for t in types)
    if not numeric:
        return None
    return (f"{str(value).lower()} is a yes/no value, not a number (YAML reads true/false, yes/no and on/off so); "
            "give the number")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any, info: ValidationInfo) -> Any:
        """No YAML boolean for a number of a profile (:func:`bool_for_number`)."""
        field = cls.model_fields.get(info.field_name or "")
        problem = bool_for_number(field.annotation if field is not None else None, value)
        if problem is not None:
            raise ValueError(problem)
        return value


class QcSpec(_Strict):
    """Edge quality-control parameters of one value (``stormwatch.gateway.qc``; flags travel with readings).

    Attributes:
        flatline_samples: flag ``flatline`` when this many consecutive samples (this one
            included) stay within ``flatline_tolerance`` of each other (a stuck sensor); ``None``
            disables the check. A probe that is healthy never repeats its last digit that long.
        flatline_tolerance: largest spread (engineering units) still counted as "the same".
        spike_delta: flag ``spike`` when the value differs from the median of the previous
            ``spike_window`` samples by more than this (engineering units); ``None`` disables it.
            The edge sees only past neighbours (publishing is never delayed for the next one).
        spike_window: neighbours the spike test compares against (at least 1).
    """

    flatline_samples: int | None = Field(default=None, ge=2)
    flatline_tolerance: float = Field(default=0.0, ge=0)
    spike_delta: float | None = Field(default=None, gt=0)
    spike_window: int = Field(default=5, ge=1)


class ValueSpec(_Strict):
    """What every value of every protocol declares: quantity, unit, scaling, validity, QC.

    Attributes:
        quantity: contract quantity (``turbidity``, ``temperature``, ``pressure``, ``rain_tips``...).
        unit: unit of the *engineering* value (after scale/offset), UCUM-style.
        scale, offset: engineering = raw * scale + offset.
        valid_range: [min, max] in engineering units (inclusive); outside → ``out_of_range`` flag.
        error_codes: raw values that mean "device error" (e.g. a sentinel) → ``device_error``.
        qc: flatline / spike parameters (:class:`QcSpec`).
    """

    quantity: str = Field(min_length=1)
    unit: str = Field(min_length=1)
    scale: float = 1.0
    offset: float = 0.0
    valid_range: tuple[float, float] | None = None
    error_codes: tuple[float, ...] = ()
    qc: QcSpec = QcSpec()

    @model_validator(mode="after")
    def _check_value_spec(self) -> ValueSpec:
        if self.scale == 0:
            raise ValueError("scale must not be 0")
        if self.valid_range is not None and self.valid_range[0] > self.valid_range[1]:
            raise ValueError(f"valid_range {list(self.valid_range)}: min is above max")
        problem = unit_problem(self.quantity, self.unit)
        if problem is not None:
            raise ValueError(problem)
        return self


class Point(ValueSpec):
    """One value read from a Modbus device (see :class:`ValueSpec` for the common keys).

    Attributes:
        table: Modbus table -- ``holding`` (function 0x03), ``input`` (0x04) registers, ``coil``
            (0x01) or ``discrete`` (0x02) inputs.
        address: as the profile writes it, in the notation of :attr:`ModbusSpec.addressing`:
            the zero-based wire address (default; a manual's "register 40001" is address 0) or
            the Modicon reference (``40001``). The wire address is in :attr:`ModbusSpec.wire_points`.
        type: data type; 16-bit types span 1 register, 32-bit 2, 64-bit 4 (:attr:`count`).
            Coils and discrete inputs are one bit each: ``uint16`` (0 or 1).
        order: byte order of the 4 (or 8, by pairs) bytes as named for a big-endian ``ABCD``.
    """

    table: RegisterKind = "holding"
    address: int = Field(default=0, ge=0, le=465536)
    type: DataType = "uint16"
    order: WordOrder = "ABCD"

    @model_validator(mode="after")
    def _check_bits(self) -> Point:
        if self.table in ("coil", "discrete") and self.type != "uint16":
            raise ValueError(f"a {self.table} is one bit: type must be uint16, not {self.type}")
        return self

    @property
    def count(self) -> int:
        """Registers (or bits) this point spans on the wire."""
        return REGISTER_COUNT[self.type]


class ModbusCommand(_Strict):
    """A write sent to the device before reading (wake, start measurement, brush/wiper).

    Attributes:
        name: label for logs.
        function: ``write_registers`` (0x10), ``write_register`` (0x06), ``write_coil`` (0x05),
            ``read_registers`` (0x03; some models start a measurement on a read) or
            ``read_input_registers`` (0x04).
        address: in the profile's notation (:attr:`ModbusSpec.addressing`), like a point's.
        values: register values to write (or ``[0|1]`` for a coil); empty for a read.
        count: registers to read (for ``read_registers``).
        delay_s: wait after the command before the next step (device warm-up/settling).
        every_n_polls: 1 = before every poll; 0 = only once after connecting.
    """

    name: str
    function: Literal["write_registers", "write_register", "write_coil", "read_registers", "read_input_registers"]
    address: int = Field(ge=0, le=465536)
    values: tuple[int, ...] = ()
    count: int = 1
    delay_s: float = Field(default=0.0, ge=0)
    every_n_polls: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_values(self) -> ModbusCommand:
        if self.function in ("write_registers", "write_register", "write_coil") and not self.values:
            raise ValueError(f"{self.function} needs values")
        if self.function in ("write_register", "write_coil") and len(self.values) != 1:
            raise ValueError(f"{self.function} writes exactly one value")
        if any(not 0 <= v <= 0xFFFF for v in self.values):
            raise ValueError("values must be register words 0..65535")
        if not 1 <= self.count <= 125:
            raise ValueError("count must be 1..125")
        return self


class ModbusSpec(_Strict):
    """Modbus (RTU or TCP) access: one or more points plus optional commands.

    Attributes:
        addressing: how ``address`` is written. ``0-based`` (default): the wire address, as
            on the bus (a manual's register 40001 is address 0); an address that looks like
            Modicon notation of its table (holding 40001-49999, input 30001-39999, discrete
            10001-19999) is refused with the wire address to write instead. ``modicon``: the
            manual's reference numbers (holding 4xxxx/4xxxxx, input 3xxxx/3xxxxx, discrete
            1xxxx/1xxxxx, coil 0xxxx), converted to wire addresses (:func:`modicon_to_wire`).
        points: the values read each poll (contiguous points of one table are read together).
        commands: wake / start-measurement / wiper commands, in order (:class:`ModbusCommand`).
        warmup_s: seconds (clock time) to wait after (re)connecting, before the first command
            or read -- the probe's power-up warm-up (e.g. Yosemitech 8 s, sensors.md).
        default_unit_id: the factory device (slave) id.
        default_baud: the factory baud rate.
    """

    addressing: Addressing = "0-based"
    points: tuple[Point, ...] = Field(min_length=1)
    commands: tuple[ModbusCommand, ...] = ()
    warmup_s: float = Field(default=0.0, ge=0)
    default_unit_id: int = Field(default=1, ge=0, le=247)
    default_baud: Baud = 9600

    def wire_address(self, address: int, table: str) -> int:
        """The wire address of ``address`` written in this profile's notation, for ``table``.

        Raises:
            ValueError: not an address of ``table`` in this notation, a 0-based address that looks
                like Modicon notation, or past 0xFFFF (messages suggest the fix).
        """
        if self.addressing == "modicon":
            return modicon_to_wire(address, table)
        lookalike = modicon_lookalike(address, table)
        if lookalike is not None:
            raise ValueError(lookalike)
        if address > 0xFFFF:
            raise ValueError(f"address {address} is past the last wire address 65535 (0xFFFF)")
        return address

    @cached_property
    def wire_points(self) -> tuple[Point, ...]:
        """:attr:`points` with ``address`` converted to the wire address (what the gateway reads)."""
        return tuple(p.model_copy(update={"address": self.wire_address(p.address, p.table)}) for p in self.points)

    @cached_property
    def wire_commands(self) -> tuple[ModbusCommand, ...]:
        """:attr:`commands` with ``address`` converted to the wire address."""
        return tuple(c.model_copy(update={"address": self.wire_address(c.address, COMMAND_TABLE[c.function])})
                     for c in self.commands)

    @model_validator(mode="after")
    def _addresses(self) -> ModbusSpec:
        for i, p in enumerate(self.points):
            try:
                wire = self.wire_address(p.address, p.table)
            except ValueError as exc:
                raise ValueError(f"points.{i} ({p.quantity}): {exc}") from None
            if wire + p.count - 1 > 0xFFFF:
                raise ValueError(f"points.{i} ({p.quantity}): wire address 0x{wire:04X} + {p.count} registers "
                                 "runs past 0xFFFF")
        for i, c in enumerate(self.commands):
            try:
                self.wire_address(c.address, COMMAND_TABLE[c.function])
            except ValueError as exc:
                raise ValueError(f"commands.{i} ({c.name}): {exc}") from None
        return self

    @model_validator(mode="after")
    def _no_overlap(self) -> ModbusSpec:
        seen: dict[tuple[str, int], str] = {}
        for p in self.wire_points:
            for a in range(p.address, p.address + p.count):
                other = seen.setdefault((p.table, a), p.quantity)
                if other != p.quantity:
                    raise ValueError(f"points {other!r} and {p.quantity!r} overlap at {p.table} 0x{a:04X}")
        quantities = [p.quantity for p in self.points]
        dupes = sorted({q for q in quantities if quantities.count(q) > 1})
        if dupes:
            raise ValueError(f"quantities {dupes} appear in more than one point")
        return self


class LineField(ValueSpec):
    """A value of a text protocol (a named regex group of a serial line, or an SDI-12 value)."""


class SerialLineSpec(_Strict):
    """A device that writes text lines (e.g. MaxBotix HRXL ``R####\\r``).

    Attributes:
        pattern: Python regex with named groups; each group named in ``fields``.
        terminator: line terminator (``"\\r"`` for MaxBotix).
        baud, bytesize, parity, stopbits: port settings (8-N-1 by default).
        fields: group name → how it becomes a point.
    """

    pattern: str
    terminator: str = "\r"
    baud: Baud = 9600
    bytesize: Literal[7, 8] = 8
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Literal[1, 2] = 1
    fields: dict[str, LineField] = Field(min_length=1)

    @model_validator(mode="after")
    def _groups(self) -> SerialLineSpec:
        try:
            groups = set(re.compile(self.pattern).groupindex)
        except re.error as exc:
            raise ValueError(f"pattern is not a valid regex: {exc}") from exc
        missing = sorted(set(self.fields) - groups)
        if missing:
            raise ValueError(f"fields {missing} are not named groups of the pattern")
        return self


class Sdi12Spec(_Strict):
    """An SDI-12 sensor behind a serial SDI-12 adapter (sensors.md "SDI-12").

    A poll sends ``a<measure_command>!`` and expects ``atttn`` (ttt seconds until the data are
    ready, n values), waits ``ttt`` seconds (or until the sensor's service request ``a<CR><LF>``),
    then sends ``aD0!``, ``aD1!``... until n values arrived (each answer ``a+1.23-4.56``).

    Attributes:
        default_address: factory address (0-9, a-z, A-Z); the site's ``sdi12_address`` wins.
        measure_command: ``M`` or ``M1``..``M9`` (additional measurements).
        baud, bytesize, parity, stopbits: settings of the ADAPTER's serial port (the adapter
            speaks 1200 7E1 on the SDI-12 side itself).
        response_timeout_s: real seconds to wait for an answer line (SDI-12 allows 15 ms + the
            adapter's latency; generous by default).
        retries: extra attempts of a command that got no (or a garbled) answer.
        max_wait_s: largest ``ttt`` accepted (SDI-12 allows 999 s).
        values: 0-based index of a value in the concatenated D answers → how it becomes a point.
    """

    default_address: str = Field(default="0", pattern=r"^[0-9a-zA-Z]$")
    measure_command: str = Field(default="M", pattern=r"^M[1-9]?$")
    baud: Baud = 9600
    bytesize: Literal[7, 8] = 8
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Literal[1, 2] = 1
    response_timeout_s: float = Field(default=1.0, gt=0)
    retries: int = Field(default=3, ge=0)
    max_wait_s: float = Field(default=120.0, gt=0, le=999)
    values: dict[int, LineField] = Field(min_length=1)

    @model_validator(mode="after")
    def _indices(self) -> Sdi12Spec:
        if any(i < 0 or i > 98 for i in self.values):
            raise ValueError("value indices must be 0..98")
        return self


class CounterSpec(_Strict):
    """A tipping-bucket counter (sensors.md, "Tipping-bucket rain gauges").

    Attributes:
        quantity: the point carrying the counter (published as ``rain_tips`` deltas).
        mode: ``cumulative`` (wraps at ``2**width_bits``) or ``delta`` (resets on every read).
        width_bits: counter width (16, 24 or 32).
        resolution: depth per tip, e.g. ``"0.01 in"`` or ``"0.2 mm"`` (exact decimal).
        max_intensity_mm_h: optional: the highest rain rate (mm/h) this gauge can record (its
            datasheet's range), which tightens -- never loosens -- the world-record depth–duration
            envelope every rise and wrap is checked against (rain-records.md;
            :func:`stormwatch.gateway.counter.count_tips`). Default: the envelope alone.
    """

    quantity: str = "rain_tips"
    mode: Literal["cumulative", "delta"] = "cumulative"
    width_bits: Literal[16, 24, 32] = 16
    resolution: str
    max_intensity_mm_h: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _retired_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_tips_per_s" in data:
            raise ValueError("max_tips_per_s is retired: plausibility is the world-record rain envelope "
                             "(docs/reference/rain-records.md); delete the key, or tighten with "
                             "max_intensity_mm_h (the gauge's datasheet range)")
        return data

    @cached_property
    def tip_resolution(self) -> TipResolution:
        return TipResolution.parse(self.resolution)

    @model_validator(mode="after")
    def _check_resolution(self) -> CounterSpec:
        TipResolution.parse(self.resolution)
        return self


class LevelSpec(_Strict):
    """How a level reading becomes a height above the basin floor (rules.md R3).

    Attributes:
        kind: ``distance_down`` (ultrasonic/lidar: height = mount height − distance) or
            ``pressure_depth`` (submersible: depth = P·10⁵ / (ρ·g) above the sensor; sensors.md).
        quantity: the point carrying the value.
        no_target: raw values meaning "no echo" (e.g. HRXL max range 9999 mm) → not a reading.
    """

    kind: Literal["distance_down", "pressure_depth"]
    quantity: str
    no_target: tuple[float, ...] = ()


class DeviceProfile(_Strict):
    """A sensor model. See the module docstring for the file layout."""

    model: str = Field(pattern=r"^[a-z0-9_]+$")
    manufacturer: str
    description: str
    source: str
    protocol: Literal["modbus", "serial_line", "sdi12"]
    modbus: ModbusSpec | None = None
    serial_line: SerialLineSpec | None = None
    sdi12: Sdi12Spec | None = None
    counter: CounterSpec | None = None
    level: LevelSpec | None = None

    @property
    def display_name(self) -> str:
        """The model as people name it: the maker (unless ``generic``) and the description's first
        phrase (``Campbell Scientific RainVUE10 tipping-bucket precipitation sensor``, ``Tipping-bucket
        rain gauge``) -- never the profile's file name."""
        phrase = self.description.split(",")[0].split(" (")[0].strip().rstrip(".")
        maker = self.manufacturer.strip()
        return phrase if maker.lower() == "generic" or phrase.startswith(maker) else f"{maker} {phrase}"

    @model_validator(mode="after")
    def _protocol_section(self) -> DeviceProfile:
        section = {"modbus": self.modbus, "serial_line": self.serial_line, "sdi12": self.sdi12}
        if section[self.protocol] is None:
            raise ValueError(f"protocol is {self.protocol!r} but the {self.protocol!r} section is missing")
        if self.counter is not None and self.counter.quantity not in self.quantities():
            raise ValueError(f"counter.quantity {self.counter.quantity!r} is not one of the points")
        if self.counter is not None and self.protocol == "modbus" and self.modbus is not None:
            point = next(p for p in self.modbus.points if p.quantity == self.counter.quantity)
            if point.type.startswith("float"):
                raise ValueError(f"counter point {point.quantity!r} must be an integer type, not {point.type}")
            if point.count * 16 < self.counter.width_bits:
                raise ValueError(
                    f"counter.width_bits {self.counter.width_bits} does not fit a {point.type} point"
                )
        if self.level is not None and self.level.quantity not in self.quantities():
            raise ValueError(f"level.quantity {self.level.quantity!r} is not one of the points")
        return self

    def quantities(self) -> dict[str, str]:
        """quantity → unit of every value this model produces."""
        if self.modbus is not None and self.protocol == "modbus":
            return {p.quantity: p.unit for p in self.modbus.points}
        if self.serial_line is not None and self.protocol == "serial_line":
            return {f.quantity: f.unit for f in self.serial_line.fields.values()}
        assert self.sdi12 is not None
        return {f.quantity: f.unit for f in self.sdi12.values.values()}


class ProfileError(InputError):
    """A profile that cannot be loaded; the message names the file and the bad key."""


class UnknownProfile(ProfileError):
    """No profile file of that model on the search path.

    Attributes:
        model: the model asked for.
        known: where was searched and what is there (``in DIR (known: a, b)``), for one line that
            serves every device naming an unknown profile.
    """

    def __init__(self, model: str, known: str) -> None:
        super().__init__(f"no profile {model!r} {known}")
        self.model = model
        self.known = known


def profiles_dir() -> Path:
    """The built-in profile directory (``device_profiles/`` in the repository, in the wheel too)."""
    return resources.builtin_profiles_dir()


def load_profile_file(path: Path) -> DeviceProfile:
    """Load and validate one profile file.

    Raises:
        ProfileError: unreadable file, bad YAML, a schema error (file and key named), or a
            ``model`` that differs from the file name.
    """
    data = load_yaml(path, ProfileError, what="device profile")
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level")
    try:
        profile = DeviceProfile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(problems_message(str(path), [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()])) from exc
    if profile.model != path.stem:
        raise ProfileError(f"{path}: model: {profile.model!r} must equal the file name {path.stem!r}")
    return profile


class ProfileLibrary:
    """The profiles available to a process, loaded lazily by model name from a search path.

    The search path is ``directories`` (a directory or several), then ``$STORMWATCH_PROFILES``
    (``os.pathsep``-separated), then the built-in profiles; the first file named
    ``<model>.yaml`` wins, so a user's profile replaces a built-in one of the same name.
    """

    def __init__(self, directories: Path | Sequence[Path] | None = None) -> None:
        self.search_path = resources.search_path(directories, resources.PROFILES_ENV, profiles_dir())
        self._cache: dict[str, DeviceProfile] = {}

    def get(self, model: str) -> DeviceProfile:
        """The profile named ``model``.

        Raises:
            ProfileError: no such file (the known models and the search path are listed) or an
                invalid file.
        """
        if model not in self._cache:
            path = resources.find_one(model, self.search_path)
            if path is None:
                known = ", ".join(self.names()) or "none"
                where = ", ".join(str(d) for d in self.search_path)
                raise UnknownProfile(model, f"in {where} (known: {known})")
            self._cache[model] = load_profile_file(path)
        return self._cache[model]

    def names(self) -> list[str]:
        """Every model name on the search path, sorted."""
        return [f.name for f in self.sources()]

    def sources(self) -> list[resources.Found]:
        """Every profile file by model name, with where it comes from (``stormwatch profiles list``)."""
        return resources.find_all(self.search_path, profiles_dir())
