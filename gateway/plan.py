"""The gateway's compiled plan: validated site + profiles → plain frozen dataclasses (stdlib only).

The Telegraf/EdgeX way: configuration is validated ONCE, up front, by the pydantic models
(:mod:`stormwatch.config`, :mod:`stormwatch.profiles`, :mod:`stormwatch.contract`); the polling
process then runs a compiled plan and never imports pydantic (≈ 17 MB of resident memory on a
field box; benchmarks/gateway.py). ``stormwatch gateway`` validates, compiles, writes
``<state_dir>/plan.json`` (:meth:`GatewayPlan.to_json`) and execs ``python -m stormwatch.gateway --plan``.

The dataclasses carry the same attribute names as the pydantic models they come from
(``Point.type/order/scale/offset/...``, ``Device.id/profile/transport/...``), so drivers, the
counter, QC and :mod:`stormwatch.codec` work on either (duck typing). They are filled by NAME from
the models (:func:`lean`), and :data:`TWINS` names each one's model and every deliberate difference:
``tests/gateway/test_plan.py`` fails when a field exists on one side only (issue 13 item 5).

:func:`compile_plan` is the only function here that touches the pydantic models (passed in; it
imports :mod:`stormwatch.contract` lazily to check that every identifier, quantity and unit the
gateway will publish satisfies the reading contract). Everything else is stdlib.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

from stormwatch.codec import DataType, WordOrder
from stormwatch.errors import InputError
from stormwatch.gateway.counter import RAIN_QUANTITY
from stormwatch.gateway.qc import DEVICE_ERROR_QUANTITY
from stormwatch.rain import TipResolution

if TYPE_CHECKING:
    from stormwatch.config import SiteConfig
    from stormwatch.profiles import ProfileLibrary

#: Bumped when the JSON layout changes; :meth:`GatewayPlan.from_json` refuses other versions.
#: 2: ``CounterPlan.max_tips_per_s`` replaced by ``max_intensity_mm_h`` (the rain envelope).
PLAN_VERSION = 2


class PlanError(InputError):
    """A plan that cannot be compiled or loaded; the message names the device/key or the file."""


# -- value specs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QcParams:
    """Edge QC parameters of one value (see :class:`stormwatch.profiles.QcSpec` for meanings)."""

    flatline_samples: int | None = None
    flatline_tolerance: float = 0.0
    spike_delta: float | None = None
    spike_window: int = 5


@dataclass(frozen=True)
class ValuePlan:
    """Quantity, unit (engineering), scale/offset, valid range, error codes, QC of one value."""

    quantity: str
    unit: str
    scale: float = 1.0
    offset: float = 0.0
    valid_range: tuple[float, float] | None = None
    error_codes: tuple[float, ...] = ()
    qc: QcParams = QcParams()


@dataclass(frozen=True)
class PointPlan(ValuePlan):
    """A Modbus point: table, zero-based wire address, data type, byte order, registers spanned."""

    table: Literal["holding", "input", "coil", "discrete"] = "holding"
    address: int = 0
    type: DataType = "uint16"
    order: WordOrder = "ABCD"
    count: int = 1


@dataclass(frozen=True)
class CommandPlan:
    """A Modbus command (wake, start measurement, wiper); see :class:`stormwatch.profiles.ModbusCommand`."""

    name: str
    function: str
    address: int
    values: tuple[int, ...] = ()
    count: int = 1
    delay_s: float = 0.0
    every_n_polls: int = 0


@dataclass(frozen=True)
class ModbusPlan:
    """Points read each poll, commands, warm-up seconds after (re)connecting.

    Addresses are wire (0-based) addresses: a profile in Modicon notation is converted at compile
    time (:attr:`stormwatch.profiles.ModbusSpec.wire_points`). :attr:`wire_points` and
    :attr:`wire_commands` name them as the pydantic spec does, so a driver reads either.
    """

    points: tuple[PointPlan, ...]
    commands: tuple[CommandPlan, ...] = ()
    warmup_s: float = 0.0

    @property
    def wire_points(self) -> tuple[PointPlan, ...]:
        """The points (their addresses are already wire addresses)."""
        return self.points

    @property
    def wire_commands(self) -> tuple[CommandPlan, ...]:
        """The commands (their addresses are already wire addresses)."""
        return self.commands


@dataclass(frozen=True)
class SerialLinePlan:
    """A text-line device: regex with named groups → values; port settings."""

    pattern: str
    fields: dict[str, ValuePlan]
    terminator: str = "\r"
    baud: int = 9600
    bytesize: int = 8
    parity: str = "N"
    stopbits: int = 1


@dataclass(frozen=True)
class Sdi12Plan:
    """An SDI-12 sensor behind an adapter; see :class:`stormwatch.profiles.Sdi12Spec`."""

    values: dict[int, ValuePlan]
    default_address: str = "0"
    measure_command: str = "M"
    baud: int = 9600
    bytesize: int = 8
    parity: str = "N"
    stopbits: int = 1
    response_timeout_s: float = 1.0
    retries: int = 3
    max_wait_s: float = 120.0


@dataclass(frozen=True)
class CounterPlan:
    """A tip counter, the lean twin of :class:`stormwatch.profiles.CounterSpec` (same attribute
    names and meanings). ``resolution_in``: exact inches per tip (sensors.md); ``unit``: the
    contract's tip unit (``{tip}``), copied from :data:`stormwatch.contract.TIP_UNIT` at compile;
    ``max_intensity_mm_h``: the profile's optional tightening of the rain envelope; ``width_bits``
    ``None``: a running total that never wraps (a file's cumulative column, ``stormwatch import``)."""

    resolution: str
    resolution_in: Fraction
    unit: str
    quantity: str = "rain_tips"
    mode: Literal["cumulative", "delta"] = "cumulative"
    width_bits: int | None = 16
    max_intensity_mm_h: float | None = None

    @property
    def tip_resolution(self) -> TipResolution:
        """The exact depth per tip."""
        return TipResolution(self.resolution_in)


@dataclass(frozen=True)
class LevelPlan:
    """Level reading kind, its quantity and the raw "no target" values (gaps)."""

    kind: str
    quantity: str
    no_target: tuple[float, ...] = ()


@dataclass(frozen=True)
class ProfilePlan:
    """One sensor model, reduced to what polling needs."""

    model: str
    protocol: Literal["modbus", "serial_line", "sdi12"]
    modbus: ModbusPlan | None = None
    serial_line: SerialLinePlan | None = None
    sdi12: Sdi12Plan | None = None
    counter: CounterPlan | None = None
    level: LevelPlan | None = None


# -- transports and devices -------------------------------------------------------------------------


@dataclass(frozen=True)
class ModbusTcpLink:
    """Modbus TCP endpoint of one device (``kind: modbus-tcp`` in the site file)."""

    host: str
    port: int = 502
    unit_id: int = 1
    timeout_s: float = 1.0
    kind: Literal["modbus-tcp"] = "modbus-tcp"


@dataclass(frozen=True)
class ModbusRtuLink:
    """An RS-485 Modbus RTU line (``kind: modbus-rtu``)."""

    port: str
    baud: int = 9600
    unit_id: int = 1
    parity: str = "N"
    stopbits: int = 1
    timeout_s: float = 1.0
    kind: Literal["modbus-rtu"] = "modbus-rtu"


@dataclass(frozen=True)
class SerialLink:
    """A serial port (text-line device or SDI-12 adapter; ``kind: serial``)."""

    port: str
    baud: int = 9600
    timeout_s: float = 1.0
    kind: Literal["serial"] = "serial"


TransportPlan = ModbusTcpLink | ModbusRtuLink | SerialLink


@dataclass(frozen=True)
class DevicePlan:
    """One device: id, profile model name (a key of :attr:`GatewayPlan.profiles`), transport,
    poll interval (event-time seconds), SDI-12 address."""

    id: str
    profile: str
    transport: TransportPlan
    poll_interval_s: float = 60.0
    sdi12_address: str | None = None


@dataclass(frozen=True)
class GatewayPlan:
    """Everything the polling process needs: site and gateway ids, devices and their profiles."""

    site: str
    gateway_id: str
    devices: tuple[DevicePlan, ...]
    profiles: dict[str, ProfilePlan] = field(default_factory=dict)
    version: int = PLAN_VERSION

    def profile(self, device: DevicePlan) -> ProfilePlan:
        """The profile of ``device``.

        Raises:
            PlanError: the plan has no such profile (a hand-edited plan file).
        """
        try:
            return self.profiles[device.profile]
        except KeyError:
            raise PlanError(f"device {device.id}: profile {device.profile!r} is not in the plan") from None

    def to_json(self) -> str:
        """The plan as JSON text (Fractions as ``"n/d"`` strings; tuples as lists)."""
        return json.dumps(_encode(self), indent=1, sort_keys=False)

    @classmethod
    def from_json(cls, text: str, source: str = "plan") -> GatewayPlan:
        """Inverse of :meth:`to_json`.

        Raises:
            PlanError: bad JSON, another plan version, or a missing/ill-typed key (``source`` named).
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"{source}: not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != PLAN_VERSION:
            found = data.get("version") if isinstance(data, dict) else None
            raise PlanError(f"{source}: plan version {found!r}, this gateway reads version {PLAN_VERSION}"
                            " (recompile with `stormwatch gateway`)")
        try:
            plan = _decode(GatewayPlan, data, "")
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"{source}: {exc}") from exc
        assert isinstance(plan, GatewayPlan)
        for device in plan.devices:
            plan.profile(device)
        return plan


# -- JSON (generic over the dataclasses above) ------------------------------------------------------


def _encode(obj: object) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Fraction):
        return f"{obj.numerator}/{obj.denominator}"
    if isinstance(obj, tuple | list):
        return [_encode(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _encode(v) for k, v in obj.items()}
    return obj


def _decode(tp: Any, data: Any, where: str) -> Any:
    """Build a value of type ``tp`` from JSON ``data``; ``where`` is the key path for errors."""
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            raise TypeError(f"{where or '<root>'}: expected an object")
        hints = get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        extra = sorted(set(data) - known)
        if extra:
            raise KeyError(f"{where or '<root>'}: unknown keys {extra}")
        return tp(**{k: _decode(hints[k], v, f"{where}.{k}".lstrip(".")) for k, v in data.items()})
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        if data is None:
            if len(options) < len(get_args(tp)):
                return None
            raise TypeError(f"{where}: must not be null")
        if len(options) == 1:
            return _decode(options[0], data, where)
        kinds = {_kind(a): a for a in options}
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind not in kinds:
            raise ValueError(f"{where}.kind: {kind!r} is not one of {', '.join(sorted(kinds))}")
        return _decode(kinds[kind], data, where)
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(data, list):
            raise TypeError(f"{where}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}.{i}") for i, v in enumerate(data))
        if len(args) != len(data):
            raise ValueError(f"{where}: expected {len(args)} items")
        return tuple(_decode(a, v, f"{where}.{i}") for i, (a, v) in enumerate(zip(args, data, strict=True)))
    if origin is dict:
        key_t, val_t = get_args(tp)
        if not isinstance(data, dict):
            raise TypeError(f"{where}: expected an object")
        return {key_t(k): _decode(val_t, v, f"{where}.{k}") for k, v in data.items()}
    if origin is Literal:
        if data not in get_args(tp):
            raise ValueError(f"{where}: {data!r} is not one of {', '.join(map(str, get_args(tp)))}")
        return data
    if tp is Fraction:
        return Fraction(data)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise TypeError(f"{where}: expected a number")
        return float(data)
    if tp in (int, str):
        if isinstance(data, bool) or not isinstance(data, tp):
            raise TypeError(f"{where}: expected {tp.__name__}")
        return data
    raise TypeError(f"{where}: unsupported type {tp!r}")


def _kind(tp: Any) -> str:
    default = next(f.default for f in dataclasses.fields(tp) if f.name == "kind")
    assert isinstance(default, str)
    return default


# -- compile -------------------------------------------------------------------------------------------

#: Each lean dataclass and the pydantic model it is compiled from, with every deliberate difference
#: named: ``not_carried`` -- model fields the polling process does not need (resolved at compile
#: time or documentation only); ``lean_only`` -- plan fields with no model field of that name, and
#: where their value comes from. ``tests/gateway/test_plan.py`` fails when a field exists on one side
#: only and is not named here, so the plan cannot drift from the models.
TWINS: dict[type, tuple[str, frozenset[str], dict[str, str]]] = {
    QcParams: ("stormwatch.profiles.QcSpec", frozenset(), {}),
    ValuePlan: ("stormwatch.profiles.ValueSpec", frozenset(), {}),
    PointPlan: ("stormwatch.profiles.Point", frozenset(), {"count": "the registers its type spans (Point.count)"}),
    CommandPlan: ("stormwatch.profiles.ModbusCommand", frozenset(), {}),
    ModbusPlan: ("stormwatch.profiles.ModbusSpec", frozenset({"addressing", "default_baud", "default_unit_id"}), {}),
    SerialLinePlan: ("stormwatch.profiles.SerialLineSpec", frozenset(), {}),
    Sdi12Plan: ("stormwatch.profiles.Sdi12Spec", frozenset(), {}),
    CounterPlan: ("stormwatch.profiles.CounterSpec", frozenset(),
                  {"resolution_in": "CounterSpec.tip_resolution.inches", "unit": "stormwatch.contract.TIP_UNIT"}),
    LevelPlan: ("stormwatch.profiles.LevelSpec", frozenset(), {}),
    ProfilePlan: ("stormwatch.profiles.DeviceProfile", frozenset({"description", "manufacturer", "source"}), {}),
    ModbusTcpLink: ("stormwatch.config.ModbusTcp", frozenset(), {}),
    ModbusRtuLink: ("stormwatch.config.ModbusRtu", frozenset(), {}),
    SerialLink: ("stormwatch.config.Serial", frozenset(), {}),
    # the gateway stamps the size of the gauge in service (its profile); earlier gauges' sizes are for
    # readers of stored rain (stormwatch.tipsizes), never for polling
    DevicePlan: ("stormwatch.config.Device", frozenset({"replaced_gauges"}), {}),
    GatewayPlan: ("stormwatch.config.SiteConfig",
                  frozenset({"basin", "basins", "rain_gauge", "rules", "options", "turbidity_pair",
                             "discharge_points", "site", "notify", "roles", "fallback_gauge"}),
                  {"site": "SiteConfig.site.id", "profiles": "the device profiles, compiled",
                   "version": "PLAN_VERSION"}),
}


def _carry(tp: Any, value: Any) -> Any:
    """``value`` (a pydantic model, or a field of one) as the plan type ``tp``, every dataclass field
    taken by NAME from the model (never positionally)."""
    if value is None:
        return None
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return lean(tp, value)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        if len(options) == 1:
            return _carry(options[0], value)
        kinds = {_kind(a): a for a in options}
        return _carry(kinds[value.kind], value)
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_carry(args[0], v) for v in value)
        return tuple(_carry(a, v) for a, v in zip(args, value, strict=True))
    if origin is dict:
        key_t, val_t = get_args(tp)
        return {key_t(k): _carry(val_t, v) for k, v in value.items()}
    if tp is float:
        return float(value)
    return value


@functools.cache
def _hints(cls: type[Any]) -> dict[str, Any]:
    """The resolved field types of a plan dataclass (resolved once: a fleet compiles thousands of plans)."""
    return get_type_hints(cls)


def lean(cls: type[Any], model: Any, **given: Any) -> Any:
    """The plan dataclass ``cls`` of a validated pydantic ``model``: every field not in ``given`` is
    the model's attribute of the same name (nested models converted the same way)."""
    hints = _hints(cls)  # type: ignore[arg-type]  # a class is hashable; mypy's Hashable check says no
    values = {f.name: given[f.name] if f.name in given else _carry(hints[f.name], getattr(model, f.name))
              for f in dataclasses.fields(cls) if f.name in given or hasattr(model, f.name)}
    return cls(**values)


def _profile(profile: Any, tip_unit: str) -> ProfilePlan:
    modbus = None
    if profile.modbus is not None:
        m = profile.modbus  # Modicon notation converted: the plan holds wire addresses
        modbus = lean(ModbusPlan, m, points=_carry(tuple[PointPlan, ...], m.wire_points),
                      commands=_carry(tuple[CommandPlan, ...], m.wire_commands))
    counter = counter_plan(profile.counter, tip_unit) if profile.counter is not None else None
    plan = lean(ProfilePlan, profile, modbus=modbus, counter=counter)
    assert isinstance(plan, ProfilePlan)
    return plan


def counter_plan(spec: Any, tip_unit: str) -> CounterPlan:
    """The lean :class:`CounterPlan` of a profile's ``CounterSpec`` (every field carried over by name)."""
    plan = lean(CounterPlan, spec, resolution_in=spec.tip_resolution.inches, unit=tip_unit)
    assert isinstance(plan, CounterPlan)
    return plan


def compile_plan(cfg: SiteConfig, profiles: ProfileLibrary) -> GatewayPlan:
    """Compile a validated site and its profiles into the gateway's plan.

    Also checks, through :class:`stormwatch.contract.Reading` itself, that every reading the plan
    can produce has contract-valid identifiers, quantity and unit (so the lean process, which
    builds payloads without validation, never publishes something ingest would dead-letter).

    Raises:
        stormwatch.profiles.ProfileError: a missing/invalid profile.
        PlanError: a device whose readings would break the contract (device and key named).
    """
    from datetime import UTC, datetime

    from pydantic import ValidationError

    from stormwatch.contract import TIP_UNIT, Reading

    plans: dict[str, ProfilePlan] = {}
    for device in cfg.devices:
        if device.profile not in plans:
            plans[device.profile] = _profile(profiles.get(device.profile), TIP_UNIT)
    devices: tuple[DevicePlan, ...] = _carry(tuple[DevicePlan, ...], cfg.devices)
    plan = GatewayPlan(site=cfg.site.id, gateway_id=cfg.gateway_id, devices=devices, profiles=plans)
    for dplan in devices:
        for quantity, unit in _outputs(plan.profiles[dplan.profile]):
            try:
                Reading(site=plan.site, device=dplan.id, quantity=quantity, value=0, unit=unit,
                        time=datetime(1970, 1, 1, tzinfo=UTC), gateway=plan.gateway_id, boot="plan", seq=0)
            except ValidationError as exc:
                err = exc.errors()[0]
                raise PlanError(
                    f"device {dplan.id} ({dplan.profile}): a {quantity!r} reading would break the contract:"
                    f" {'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                ) from None
    return plan


def _outputs(profile: ProfilePlan) -> list[tuple[str, str]]:
    """(quantity, unit) of every reading a device of ``profile`` can publish."""
    values: list[ValuePlan]
    if profile.modbus is not None:
        values = list(profile.modbus.points)
    elif profile.serial_line is not None:
        values = list(profile.serial_line.fields.values())
    else:
        assert profile.sdi12 is not None
        values = list(profile.sdi12.values.values())
    out: list[tuple[str, str]] = []
    for v in values:
        if profile.counter is not None and v.quantity == profile.counter.quantity:
            out.append((RAIN_QUANTITY, profile.counter.unit))
        elif v.quantity != DEVICE_ERROR_QUANTITY:
            out.append((v.quantity, v.unit))
    return out
