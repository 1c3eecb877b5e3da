"""Device profiles: one YAML file per sensor model in ``device_profiles/`` (EdgeX-style).

A new sensor model is a new profile file, no code. The profile says how to talk to the device
(Modbus registers, a serial line format or SDI-12), how to decode and scale each value, its unit
and valid range, and -- for level sensors -- how the value becomes a height above the basin
floor. Decoding and scaling are applied in one shared place, :mod:`stormwatch.codec`.

Schema (top level)::

    model: yosemitech_y511            # must equal the file name without .yaml
    manufacturer: Yosemitech
    description: ...
    source: datasheet / library the facts come from
    protocol: modbus | serial_line | sdi12
    modbus: {...}                     # protocol == modbus   (ModbusSpec)
    serial_line: {...}                # protocol == serial_line (SerialLineSpec)
    sdi12: {...}                      # protocol == sdi12 (Sdi12Spec)
    counter: {...}                    # a tip counter among the points (CounterSpec)
    level: {...}                      # how a level reading becomes a height (LevelSpec)

Errors: :func:`load_profile` raises :class:`ProfileError` naming the file and the bad key.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stormwatch.rain import TipResolution

DataType = Literal["int16", "uint16", "int32", "uint32", "float32", "int64", "uint64", "float64"]
WordOrder = Literal["ABCD", "CDAB", "BADC", "DCBA"]
RegisterKind = Literal["holding", "input", "coil", "discrete"]

#: Registers each data type spans.
REGISTER_COUNT: dict[str, int] = {
    "int16": 1, "uint16": 1, "int32": 2, "uint32": 2, "float32": 2,
    "int64": 4, "uint64": 4, "float64": 4,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Point(_Strict):
    """One value read from a device.

    Attributes:
        quantity: contract quantity (``turbidity``, ``temperature``, ``pressure``, ``rain_tips``...).
        unit: unit of the *engineering* value (after scale/offset), UCUM-style.
        table: Modbus table: holding/input registers, coils, discrete inputs (modbus only).
        address: zero-based wire address (modbus only).
        type: data type; 32/64-bit values span 2/4 registers.
        order: byte order of the 4 (or 8, by pairs) bytes as named for a big-endian ``ABCD``.
        scale, offset: engineering = raw * scale + offset.
        valid_range: [min, max] in engineering units; outside → ``out_of_range`` flag.
        error_codes: raw values that mean "device error" (e.g. a sentinel) → ``device_error``.
    """

    quantity: str
    unit: str
    table: RegisterKind = "holding"
    address: int = Field(default=0, ge=0, le=0xFFFF)
    type: DataType = "uint16"
    order: WordOrder = "ABCD"
    scale: float = 1.0
    offset: float = 0.0
    valid_range: tuple[float, float] | None = None
    error_codes: tuple[float, ...] = ()

    @property
    def count(self) -> int:
        return REGISTER_COUNT[self.type]


class ModbusCommand(_Strict):
    """A write sent to the device before reading (wake, start measurement, brush/wiper).

    Attributes:
        name: label for logs.
        function: ``write_registers`` (0x10) or ``write_coil`` (0x05) or ``read_registers`` (0x03,
            some models start a measurement on read).
        address: wire address.
        values: register values to write (or ``[0|1]`` for a coil); empty for a read.
        count: registers to read (for ``read_registers``).
        delay_s: wait after the command before the next step (device warm-up/settling).
        every_n_polls: 1 = before every poll; 0 = only once after connecting.
    """

    name: str
    function: Literal["write_registers", "write_coil", "read_registers"]
    address: int = Field(ge=0, le=0xFFFF)
    values: tuple[int, ...] = ()
    count: int = 1
    delay_s: float = Field(default=0.0, ge=0)
    every_n_polls: int = Field(default=0, ge=0)


class ModbusSpec(_Strict):
    """Modbus (RTU or TCP) access: one or more points plus optional commands."""

    points: tuple[Point, ...] = Field(min_length=1)
    commands: tuple[ModbusCommand, ...] = ()
    default_unit_id: int = Field(default=1, ge=0, le=247)
    default_baud: int = 9600


class LineField(_Strict):
    """A named regex group of a serial line → a point."""

    quantity: str
    unit: str
    scale: float = 1.0
    offset: float = 0.0
    valid_range: tuple[float, float] | None = None
    error_codes: tuple[float, ...] = ()


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
    baud: int = 9600
    bytesize: Literal[7, 8] = 8
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Literal[1, 2] = 1
    fields: dict[str, LineField] = Field(min_length=1)


class Sdi12Spec(_Strict):
    """An SDI-12 sensor behind a serial SDI-12 adapter (``aM!`` → ``aD0!``...).

    ``values`` maps the 0-based index of a value in the concatenated D responses to a point.
    """

    default_address: str = Field(default="0", pattern=r"^[0-9a-zA-Z]$")
    measure_command: str = "M"
    baud: int = 9600
    retries: int = Field(default=3, ge=0)
    values: dict[int, LineField] = Field(min_length=1)


class CounterSpec(_Strict):
    """A tipping-bucket counter (sensors.md, "Tipping-bucket rain gauges").

    Attributes:
        quantity: the point carrying the counter (published as ``rain_tips`` deltas).
        mode: ``cumulative`` (wraps at ``2**width_bits``) or ``delta`` (resets on every read).
        width_bits: counter width (16, 24 or 32).
        resolution: depth per tip, e.g. ``"0.01 in"`` or ``"0.2 mm"`` (exact decimal).
        max_tips_per_s: the plausible maximum tip rate; a drop is a wrap only if the implied tips
            fit this rate over the elapsed time.
    """

    quantity: str = "rain_tips"
    mode: Literal["cumulative", "delta"] = "cumulative"
    width_bits: Literal[16, 24, 32] = 16
    resolution: str
    max_tips_per_s: float = Field(default=2.0, gt=0)

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

    @model_validator(mode="after")
    def _protocol_section(self) -> DeviceProfile:
        section = {"modbus": self.modbus, "serial_line": self.serial_line, "sdi12": self.sdi12}
        if section[self.protocol] is None:
            raise ValueError(f"protocol is {self.protocol!r} but the {self.protocol!r} section is missing")
        if self.counter is not None and self.counter.quantity not in self.quantities():
            raise ValueError(f"counter.quantity {self.counter.quantity!r} is not one of the points")
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


class ProfileError(ValueError):
    """A profile that cannot be loaded; the message names the file and the bad key."""


def profiles_dir() -> Path:
    """The profile directory: ``$STORMWATCH_PROFILES`` or the repository's ``device_profiles/``."""
    env = os.environ.get("STORMWATCH_PROFILES")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "device_profiles"


def load_profile_file(path: Path) -> DeviceProfile:
    """Load and validate one profile file.

    Raises:
        ProfileError: unreadable file, bad YAML, a schema error (file and key named), or a
            ``model`` that differs from the file name.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level")
    try:
        profile = DeviceProfile.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{path}: {'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        ]
        raise ProfileError("\n".join(lines)) from exc
    if profile.model != path.stem:
        raise ProfileError(f"{path}: model: {profile.model!r} must equal the file name {path.stem!r}")
    return profile


class ProfileLibrary:
    """The profiles available to a process, loaded lazily by model name from one directory."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or profiles_dir()
        self._cache: dict[str, DeviceProfile] = {}

    def get(self, model: str) -> DeviceProfile:
        """The profile named ``model``.

        Raises:
            ProfileError: no such file (the known models are listed) or an invalid file.
        """
        if model not in self._cache:
            path = self.directory / f"{model}.yaml"
            if not path.is_file():
                known = ", ".join(sorted(self.names())) or "none"
                raise ProfileError(f"no profile {model!r} in {self.directory} (known: {known})")
            self._cache[model] = load_profile_file(path)
        return self._cache[model]

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.yaml"))
