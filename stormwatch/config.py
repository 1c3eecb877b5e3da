"""Site configuration (YAML), validated at load.

A site file describes one construction site: who enforces (jurisdiction), where the devices are
and how to reach them, which probes form the turbidity pair, and the sediment basin's geometry.
See ``examples/site.yaml`` for a complete, commented example.

Errors: :func:`load_site` raises :class:`ConfigError` whose message names the file and the bad
key path (e.g. ``site.yaml: devices.2.transport.port: Field required``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import date, datetime
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from stormwatch.contract import Identifier
from stormwatch.errors import InputError, load_yaml, problems_message, yaml_line
from stormwatch.hosts import host_problem
from stormwatch.profiles import Baud, DeviceProfile, ProfileError, ProfileLibrary, UnknownProfile, ValueSpec
from stormwatch.rain import tip_size_of

#: 1 ft = 0.3048 m exactly (international foot).
M_PER_FT = 0.3048

Jurisdiction = str  # a rule-pack name, e.g. "ch133", "ch196" (alerts/packs/<name>.yaml)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _not_a_bool(value: object) -> object:
    """A number of a site file is never a YAML boolean: ``true``/``false`` (and YAML 1.1's
    ``yes``/``no``/``on``/``off``) load as ``bool``, which Python counts as 1 and 0 -- so
    ``poll_interval_s: true`` was a poll every second.

    Raises:
        ValueError: ``value`` is a bool.
    """
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is a yes/no value, not a number (YAML reads true/false, yes/no "
                         "and on/off so); give the number")
    return value


#: A number of a site file: finite (``_Strict`` refuses ``.inf``/``.nan``), never a boolean.
Number = Annotated[float, BeforeValidator(_not_a_bool)]
#: An integer of a site file, never a boolean.
Integer = Annotated[int, BeforeValidator(_not_a_bool)]

#: The longest poll interval, s: one day. A rain gauge polled more rarely cannot date a storm's
#: start to the day the rules count in (R1's 24-hour windows), and a poll interval is also the
#: silence after which a device is reported missing (twice the interval): more than a day of
#: silence unnoticed is no watch at all. Bounded too so event-time arithmetic never overflows
#: (``poll_interval_s: 1e308`` overflowed ``timedelta`` in the storm rule).
MAX_POLL_INTERVAL_S = 86_400.0
#: The longest reply timeout, s: a Modbus slave answers within a second or so (the Modbus serial
#: line guide's typical response timeout is 1 s; pymodbus defaults to 3 s) and a serial-line
#: instrument streams a line every few seconds; ten minutes of waiting is a dead link, and one
#: device's wait holds up every other device on the bus.
MAX_TIMEOUT_S = 600.0


def _host(value: str) -> str:
    """``value`` when it is an IP address or an RFC 1123 host name (:func:`stormwatch.hosts.host_problem`).

    Raises:
        ValueError: it is neither (a space, ``!``, an empty label ...).
    """
    problem = host_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} is not a host: {problem}")
    return value


class ModbusTcp(_Strict):
    """A Modbus TCP device: ``host`` (an IP address or an RFC 1123 host name) and ``port``."""

    kind: Literal["modbus-tcp"]
    host: Annotated[str, AfterValidator(_host)]
    port: Integer = Field(default=502, ge=1, le=65535)
    unit_id: Integer = Field(default=1, ge=0, le=247)
    timeout_s: Number = Field(default=1.0, gt=0, le=MAX_TIMEOUT_S)


class ModbusRtu(_Strict):
    """A Modbus RTU device on a serial port; ``baud`` one of the standard rates
    (:data:`stormwatch.profiles.STANDARD_BAUD_RATES`)."""

    kind: Literal["modbus-rtu"]
    port: str
    baud: Annotated[Baud, BeforeValidator(_not_a_bool)] = 9600
    unit_id: Integer = Field(default=1, ge=1, le=247)
    parity: Literal["N", "E", "O"] = "N"
    stopbits: Annotated[Literal[1, 2], BeforeValidator(_not_a_bool)] = 1
    timeout_s: Number = Field(default=1.0, gt=0, le=MAX_TIMEOUT_S)


class Serial(_Strict):
    """A device on a serial port (a line per reading, or an SDI-12 adapter); ``baud`` one of the
    standard rates (:data:`stormwatch.profiles.STANDARD_BAUD_RATES`)."""

    kind: Literal["serial"]
    port: str
    baud: Annotated[Baud, BeforeValidator(_not_a_bool)] = 9600
    timeout_s: Number = Field(default=1.0, gt=0, le=MAX_TIMEOUT_S)


Transport = Annotated[ModbusTcp | ModbusRtu | Serial, Field(discriminator="kind")]


class ReplacedGauge(_Strict):
    """A rain gauge this device id had before (``devices[i].replaced_gauges``; docs/deployment.md,
    "Replacing a rain gauge").

    Stored rain describes itself (every reading carries its tip size), and a site
    file whose gauge names another size than the stored readings is an error -- unless the site file
    records the replacement here: readings before ``until`` were counted by this gauge (of
    ``tip_size``), those from ``until`` on by the next one (the next entry, or the device's profile).

    Attributes:
        tip_size: the earlier gauge's depth per tip, ``"<decimal> in|mm"`` (``"0.01 in"``).
        until: when it was taken out of service (RFC 3339 with its UTC offset: an instant).
        note: what it was, for people (``"TE525, serial 1234"``).
    """

    tip_size: str
    until: AwareDatetime
    note: str = ""

    @field_validator("tip_size")
    @classmethod
    def _size(cls, v: str) -> str:
        return str(tip_size_of(v))

    @field_validator("until", mode="before")
    @classmethod
    def _instant(cls, v: object) -> object:
        given = v
        if isinstance(v, str):
            try:
                given = datetime.fromisoformat(v.strip())
            except ValueError:
                return v  # pydantic names what is wrong with the text
        if (isinstance(given, date) and not isinstance(given, datetime)) or (
                isinstance(given, datetime) and given.tzinfo is None):
            raise ValueError(f"{v}: give the time the gauge was replaced with its UTC offset, e.g. "
                             "2026-06-10T14:00:00-04:00 (readings before it were counted by this gauge)")
        return v


class Device(_Strict):
    """One device at the site.

    Attributes:
        id: device id, unique within the site (the id grammar of :func:`stormwatch.contract.check_identifier`).
        profile: profile model name (``device_profiles/<profile>.yaml``).
        transport: how to reach it.
        poll_interval_s: seconds between polls (event time), 0 < s ≤ 86,400 (:data:`MAX_POLL_INTERVAL_S`).
        sdi12_address: SDI-12 address for SDI-12 profiles.
        replaced_gauges: earlier rain gauges of this device id, oldest first (:class:`ReplacedGauge`);
            the profile describes the gauge in service since the last one's ``until``.
    """

    id: Identifier
    profile: str
    transport: Transport
    poll_interval_s: Number = Field(default=60.0, gt=0, le=MAX_POLL_INTERVAL_S)
    sdi12_address: str | None = None
    replaced_gauges: tuple[ReplacedGauge, ...] = ()

    @model_validator(mode="after")
    def _in_order(self) -> Device:
        for i, (a, b) in enumerate(pairwise(self.replaced_gauges)):
            if not a.until < b.until:
                raise ValueError(f"replaced_gauges.{i + 1}.until ({b.until.isoformat()}) must be after "
                                 f"replaced_gauges.{i}.until ({a.until.isoformat()}): list the gauges oldest first")
        return self


def _distinct_probes(upstream: str | None, downstream: str | None) -> None:
    """A background and a compliance probe are two devices: a probe compared with itself has a
    contrast of 0 at every reading, so the turbidity rule (rules.md R2) could never fire.

    Raises:
        ValueError: both name one device.
    """
    if upstream is not None and upstream == downstream:
        raise ValueError(f"upstream and downstream are the same device {upstream!r}: a probe compared with "
                         "itself never shows a contrast (R2 could never fire); name the background probe "
                         "upstream and the compliance probe at the discharge downstream")


class TurbidityPair(_Strict):
    """Background (upstream) and compliance (downstream) probes (rules.md R2).

    The single discharge point of a site file written before ``discharge_points`` (its events name
    no point: :data:`LEGACY_POINT`)."""

    upstream: str
    downstream: str

    @model_validator(mode="after")
    def _two_probes(self) -> TurbidityPair:
        _distinct_probes(self.upstream, self.downstream)
        return self


class DischargePoint(_Strict):
    """A point where the site's stormwater leaves it (an outfall) and what watches it.

    Either an upstream/downstream pair (background and compliance probe, rules.md R2) or a single
    compliance probe (``downstream`` alone: rules that need no background, e.g. numeric action
    levels). Manual field samples taken there are recorded against the point's ``id``
    (``stormwatch sample``). Each point has its own events and work orders.

    Attributes:
        id: the point's id (the id grammar; unique among the site's points, basins and devices).
        name: how people call it ("Outfall 1, to Mill Creek").
        upstream: background turbidity probe (optional).
        downstream: compliance turbidity probe at the discharge (optional for a point sampled by hand).
        ph_probe: a pH probe in the discharge (optional).
    """

    id: Identifier
    name: str = ""
    upstream: str | None = None
    downstream: str | None = None
    ph_probe: str | None = None

    @model_validator(mode="after")
    def _background_needs_compliance(self) -> DischargePoint:
        if self.upstream is not None and self.downstream is None:
            raise ValueError("an upstream (background) probe needs a downstream (compliance) probe to compare")
        _distinct_probes(self.upstream, self.downstream)
        return self

    @property
    def label(self) -> str:
        """``name (id)`` or the id."""
        return f"{self.name} ({self.id})" if self.name else self.id


#: Id of the discharge point a site file's ``turbidity_pair`` stands for (events of it name no point,
#: exactly as before discharge points existed).
LEGACY_POINT = "turbidity_pair"


#: Plausible bounds of a sediment basin or trap (docs/reference/hydrology.md, "Plausible basin
#: dimensions"). A temporary sediment basin is sized at about 3,600 ft³ per acre drained (the EPA
#: CGP's storage for a basin without a 2-year storm calculation) and drains at most some 100
#: acres: some 360,000 ft³, e.g. 300 × 300 ft at 4 ft deep. The bounds are an order of magnitude
#: and more beyond that, so no real basin meets them -- they exist to refuse what no basin is
#: (``.inf``, ``1e308``, a typo of several digits), which made V(H) infinite and turned R3 off.
MAX_BASIN_SIDE_FT = 5000.0
#: Design height, stage and sensor mount height (ft): an embankment that high is a dam, not a sediment basin.
MAX_BASIN_HEIGHT_FT = 100.0
#: Side slope z (horizontal : 1 vertical); basins are built 2:1 to 4:1, 100:1 is a flat field.
MAX_SIDE_SLOPE_Z = 100.0
#: Storage volume (ft³) of a stage-storage row: ~23,000 acre-ft, thousands of times a large basin.
MAX_BASIN_VOLUME_FT3 = 1e9


class BasinGeometry(_Strict):
    """Rectangular basin with sloped sides (hydrology.md, "Stage–storage").

    Every dimension is finite and within the plausible bounds (:data:`MAX_BASIN_SIDE_FT`,
    :data:`MAX_SIDE_SLOPE_Z`, :data:`MAX_BASIN_HEIGHT_FT`).

    Attributes:
        bottom_length_ft, bottom_width_ft: floor dimensions (0 < ft ≤ 5,000).
        side_slope_z: horizontal run per unit rise (z:1; 0 ≤ z ≤ 100).
        design_height_ft: design storage height H above the floor (0 < ft ≤ 100).
    """

    bottom_length_ft: Number = Field(gt=0, le=MAX_BASIN_SIDE_FT)
    bottom_width_ft: Number = Field(gt=0, le=MAX_BASIN_SIDE_FT)
    side_slope_z: Number = Field(ge=0, le=MAX_SIDE_SLOPE_Z)
    design_height_ft: Number = Field(gt=0, le=MAX_BASIN_HEIGHT_FT)


StageFt = Annotated[Number, Field(ge=0, le=MAX_BASIN_HEIGHT_FT)]
VolumeFt3 = Annotated[Number, Field(ge=0, le=MAX_BASIN_VOLUME_FT3)]


def _interpolate(rows: tuple[tuple[float, float], ...], stage_ft: float) -> float:
    """The volume (ft³) at ``stage_ft`` of stage-storage ``rows``, linear between rows (as
    :class:`stormwatch.alerts.geometry.StageStorageTable`; ``stage_ft`` within the table)."""
    for (s0, v0), (s1, v1) in pairwise(rows):
        if s0 <= stage_ft <= s1:
            return v0 + (v1 - v0) * (stage_ft - s0) / (s1 - s0)
    return rows[-1][1]


class Basin(_Strict):
    """The sediment trap/basin watched for cleanout (rules.md R3).

    Either ``geometry`` or ``stage_storage`` (rows of ``[stage_ft, volume_ft3]`` starting at
    ``[0, 0]``, stages strictly increasing, volumes never decreasing, each finite and within
    :data:`MAX_BASIN_HEIGHT_FT` / :data:`MAX_BASIN_VOLUME_FT3`; ``design_height_ft`` then required,
    at most the last stage, with a positive storage below it -- the lost capacity V(s)/V(H) of R3
    divides by it).

    Attributes:
        id: basin name.
        device: the level device measuring the sediment surface.
        sensor_mount_height_ft: for distance-down sensors, height of the sensor face above the floor.
    """

    id: str = "basin-1"
    device: str
    sensor_mount_height_ft: Number | None = Field(default=None, gt=0, le=MAX_BASIN_HEIGHT_FT)
    geometry: BasinGeometry | None = None
    stage_storage: tuple[tuple[StageFt, VolumeFt3], ...] | None = None
    design_height_ft: Number | None = Field(default=None, gt=0, le=MAX_BASIN_HEIGHT_FT)

    @model_validator(mode="after")
    def _one_shape(self) -> Basin:
        if (self.geometry is None) == (self.stage_storage is None):
            raise ValueError("give exactly one of 'geometry' or 'stage_storage'")
        if self.stage_storage is not None:
            if self.design_height_ft is None:
                raise ValueError("design_height_ft is required with stage_storage")
            rows = self.stage_storage
            if len(rows) < 2 or rows[0] != (0.0, 0.0):
                raise ValueError("stage_storage needs ≥ 2 rows starting at [0, 0]")
            for (s0, v0), (s1, v1) in pairwise(rows):
                if not (s1 > s0 and v1 >= v0):
                    raise ValueError("stage_storage rows must increase in stage and not decrease in volume")
            if self.design_height_ft > rows[-1][0]:
                raise ValueError("design_height_ft is above the last stage_storage row")
            design = _interpolate(rows, self.design_height_ft)
            if not design > 0:
                raise ValueError(f"stage_storage holds {design:g} ft³ below design_height_ft "
                                 f"{self.design_height_ft:g} ft: a basin with no design storage has no "
                                 "capacity to lose (R3 divides by it); give the volumes of the plan's table")
        return self

    @property
    def design_height(self) -> float:
        """H in feet."""
        if self.geometry is not None:
            return self.geometry.design_height_ft
        assert self.design_height_ft is not None
        return self.design_height_ft


class Notify(_Strict):
    """Who hears about the site's work orders (``notify:``): e-mail when an order opens, when it is
    due soon and when it goes overdue (``stormwatch web --smtp``, :mod:`stormwatch.web.notify`).

    Attributes:
        email: recipients' addresses.
    """

    email: tuple[str, ...] = ()

    @field_validator("email")
    @classmethod
    def _addresses(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for a in v:
            if not re.fullmatch(r"[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+", a):
                raise ValueError(f"{a!r} is not an e-mail address")
        return v


class FallbackGauge(_Strict):
    """A representative station record used ONLY while the site's rain gauge has a data gap
    (``fallback_gauge:``; rules.md R1, "Fallback gauge").

    The record is a file the user imports (``stormwatch station import``: NOAA GHCN-Daily ``.dly``,
    NOAA hourly precipitation TD-3240/HPD text, or any delimited file): its values are stored as
    ``precipitation`` readings of device ``station`` (gateway ``station``), each at the END of the
    interval it covers. R1 counts a value only when its whole interval lies inside a gap of the
    site's gauge; every event that counted one names the station (and ``distance_km``).

    Attributes:
        station: the station's id as its record names it (GHCN ``USC00304174``, a COOP number
            ``304174``, or any id of the identifier grammar).
        name: the station's name, for people (optional).
        distance_km: distance from the site to the station, km (shown in events when given).
        interval_minutes: what one value of the record covers: 1440 (GHCN-Daily), 60 (HPD),
            10 (a 10-minute pluviometer); the import refuses a file of another interval.
    """

    station: Identifier
    name: str = ""
    distance_km: Number | None = Field(default=None, ge=0, le=20_037.5)  # half the Earth's circumference
    interval_minutes: Integer = Field(gt=0, le=1440)

    @property
    def label(self) -> str:
        """``station ID`` and the distance when known (``station USC00304174, 3.2 km away``)."""
        text = f"station {self.station}"
        if self.name:
            text += f" ({self.name})"
        return text + (f", {self.distance_km:g} km away" if self.distance_km is not None else "")


class Site(_Strict):
    """The ``site:`` block."""

    id: Identifier
    name: str = ""
    jurisdiction: Jurisdiction
    timezone: str = "UTC"
    #: the site's permit as the SMO knows it (e.g. SPDES GP-0-25-001, NOI NYR11A123); on report covers
    permit: str = ""

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {v!r}") from exc
        return v

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class SiteConfig(_Strict):
    """A whole site file.

    Attributes:
        site: identity, jurisdiction, time zone.
        gateway_id: the site's gateway id (the same grammar).
        devices: the devices polled by the gateway.
        rain_gauge: id of the rain gauge device.
        turbidity_pair: optional upstream/downstream probes (a site with one discharge point).
        discharge_points: the site's discharge points (outfalls), each with its own probes, events and
            work orders; ``turbidity_pair`` is the one point of a site file without them.
        basin: optional sediment basin.
        basins: several sediment basins/traps, each with its own events and work orders; ``basin``
            is the one basin of older site files.
        roles: devices of rule roles that have no key of their own (``roles: {ph_probe: ph-1}``).
        rules: per-site overrides of rule-pack parameters (rule id → parameter → value).
        options: the site's choices among its pack's options (option → choice; docs/rules.md), e.g.
            ``{inspection_frequency: 14-day-and-storm}`` under the EPA CGP.
        notify: who is e-mailed about the site's work orders.
        fallback_gauge: a representative station record for the rain gauge's data gaps.
    """

    site: Site
    gateway_id: Identifier = "gw-1"
    devices: tuple[Device, ...] = Field(min_length=1)
    rain_gauge: str | None = None
    turbidity_pair: TurbidityPair | None = None
    discharge_points: tuple[DischargePoint, ...] = ()
    basin: Basin | None = None
    basins: tuple[Basin, ...] = ()
    roles: dict[str, str] = Field(default_factory=dict)
    rules: dict[str, dict[str, float | int | str | bool]] = Field(default_factory=dict)
    options: dict[str, str] = Field(default_factory=dict)
    notify: Notify = Field(default_factory=Notify)
    fallback_gauge: FallbackGauge | None = None

    @model_validator(mode="after")
    def _references(self) -> SiteConfig:
        ids = [d.id for d in self.devices]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise ValueError(f"duplicate device ids: {', '.join(sorted(dupes))}")
        known = set(ids)
        refs = {"rain_gauge": self.rain_gauge}
        if self.turbidity_pair:
            refs["turbidity_pair.upstream"] = self.turbidity_pair.upstream
            refs["turbidity_pair.downstream"] = self.turbidity_pair.downstream
        points = [p.id for p in self.discharge_points]
        for i, point in enumerate(self.discharge_points):
            for role in ("upstream", "downstream", "ph_probe"):
                refs[f"discharge_points.{i}.{role}"] = getattr(point, role)
        if self.basin:
            refs["basin.device"] = self.basin.device
        basins = [b.id for b in self.basins]
        for i, b in enumerate(self.basins):
            refs[f"basins.{i}.device"] = b.device
        if self.basin is not None and self.basins:
            raise ValueError("give the site's basins as 'basins' (a list) or its one 'basin', not both")
        if self.turbidity_pair is not None and self.discharge_points:
            raise ValueError("give the site's discharge points as 'discharge_points' (a list) or its one "
                             "'turbidity_pair', not both")
        names = points + basins
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"discharge point and basin ids must be unique: {twice} given twice")
        clash = sorted(set(points) & known)
        if clash:
            raise ValueError(f"discharge point ids {clash} are also device ids: a manual sample's point must "
                             "not be mistaken for a device")
        if self.fallback_gauge is not None:
            if self.rain_gauge is None:
                raise ValueError("fallback_gauge: the site has no rain_gauge whose gaps it would fill")
            if self.fallback_gauge.station in known:
                raise ValueError(f"fallback_gauge.station: {self.fallback_gauge.station!r} is also a device id")
        for role, device in self.roles.items():
            if role in _FIELD_ROLES:
                raise ValueError(f"roles.{role}: give it as '{_FIELD_ROLES[role]}' (the site file's own key)")
            refs[f"roles.{role}"] = device
        for key, ref in refs.items():
            if ref is not None and ref not in known:
                raise ValueError(f"{key}: no device {ref!r} (devices: {', '.join(sorted(known))})")
        return self

    @property
    def points(self) -> tuple[DischargePoint, ...]:
        """Every discharge point: ``discharge_points``, or the one point of ``turbidity_pair``
        (id :data:`LEGACY_POINT`)."""
        if self.turbidity_pair is not None:
            pair = self.turbidity_pair
            return (DischargePoint(id=LEGACY_POINT, upstream=pair.upstream, downstream=pair.downstream,
                                   ph_probe=self.roles.get("ph_probe")),)
        return self.discharge_points

    @property
    def all_basins(self) -> tuple[Basin, ...]:
        """Every basin/trap: ``basins``, or the one ``basin``."""
        return (self.basin,) if self.basin is not None else self.basins

    def point(self, point_id: str) -> DischargePoint:
        """The discharge point ``point_id``.

        Raises:
            KeyError: no such point.
        """
        for p in self.points:
            if p.id == point_id:
                return p
        raise KeyError(point_id)

    def device_for_role(self, role: str) -> str | None:
        """The device id of a rule role: ``rain_gauge``, ``turbidity_upstream``,
        ``turbidity_downstream`` and ``basin`` are the site file's own keys (:data:`_FIELD_ROLES`),
        any other role is looked up in ``roles``; ``None`` when the site has no such device."""
        if role == "rain_gauge":
            return self.rain_gauge
        if role in ("turbidity_upstream", "turbidity_downstream"):
            pair = self.turbidity_pair
            return None if pair is None else (pair.upstream if role == "turbidity_upstream" else pair.downstream)
        if role == "basin":
            return self.basin.device if self.basin is not None else None
        return self.roles.get(role)

    def device(self, device_id: str) -> Device:
        """The device with ``device_id``.

        Raises:
            KeyError: unknown device.
        """
        for d in self.devices:
            if d.id == device_id:
                return d
        raise KeyError(device_id)


#: Roles with a key of their own in the site file (role → key).
_FIELD_ROLES = {"rain_gauge": "rain_gauge", "turbidity_upstream": "turbidity_pair.upstream",
                "turbidity_downstream": "turbidity_pair.downstream", "basin": "basin.device"}


class ConfigError(InputError):
    """An invalid site file; the message names the file and the bad key."""


#: What one entry of a list of the site file is called in an error (``devices.0`` is ``device rain-1``).
_ENTITY = {"devices": "device", "discharge_points": "discharge point", "basins": "basin",
           "replaced_gauges": "replaced gauge"}

Locator = Callable[[tuple[str | int, ...]], "int | None"]


def _loc(key: str) -> tuple[str | int, ...]:
    """``("devices", 0, "poll_interval_s")`` for ``"devices.0.poll_interval_s"``."""
    return tuple(int(p) if p.isdigit() else p for p in key.split("."))


def _entity(data: object, loc: tuple[str | int, ...]) -> str | None:
    """The innermost list entry with an ``id`` along ``loc`` in the document (``device rain-1``)."""
    found = None
    node, parent_key = data, None
    for part in loc:
        if isinstance(node, dict) and part in node:
            node, parent_key = node[part], part
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            if isinstance(node, dict) and isinstance(node.get("id"), str) and parent_key in _ENTITY:
                found = f"{_ENTITY[str(parent_key)]} {node['id']}"
        else:
            continue
    return found


def _problem(data: object, key: str, message: str, lines: Locator | None) -> str:
    """``key: message (device rain-1, line 17)``: the key path, what is wrong, and -- where the
    document tells -- the entity it belongs to (unless the message names it) and its line."""
    loc = _loc(key)
    message = message.removeprefix("Value error, ")
    where = []
    entity = _entity(data, loc)
    if entity is not None and repr(entity.split(" ", 1)[-1]) not in message:
        where.append(entity)
    line = lines(loc) if lines is not None else None
    if line is not None:
        where.append(f"line {line}")
    return f"{key}: {message}" + (f" ({', '.join(where)})" if where else "")


def parse_site(data: object, source: str, profiles: ProfileLibrary | None = None, *,
               lines: Locator | None = None) -> SiteConfig:
    """Validate an already-parsed site document.

    Args:
        data: the YAML document.
        source: file name used in error messages.
        profiles: when given, every device's profile must exist and be valid.
        lines: where each key path is written in the file (:func:`stormwatch.errors.yaml_line`), for errors.

    Raises:
        ConfigError: one line: ``source``, then each problem's key path, what is wrong, the entity
            (``device rain-1``) and the line (:func:`stormwatch.errors.problems_message`).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    try:
        cfg = SiteConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "<root>"
            problems.append(_problem(data, key, err["msg"], lines))
        raise ConfigError(problems_message(source, problems)) from exc
    if profiles is not None:
        problems = _profile_problems(cfg, data, profiles, lines)
        if problems:
            raise ConfigError(problems_message(source, problems))
        problems = role_problems(cfg, device_profiles(cfg, profiles))
        if problems:
            raise ConfigError(problems_message(source, [_problem(data, key, why, lines) for key, _, why in
                                                        (p.partition(": ") for p in problems)]))
    return cfg


def _profile_problems(cfg: SiteConfig, data: object, profiles: ProfileLibrary, lines: Locator | None) -> list[str]:
    """One problem for every device whose profile cannot be loaded, each naming its device; where
    the library was searched and what it holds is said once, after them, however many are unknown."""
    out: list[str] = []
    known = ""
    first: dict[str, int] = {}  # a broken profile's full reason once, at its first device
    for i, dev in enumerate(cfg.devices):
        key = f"devices.{i}.profile"
        try:
            profiles.get(dev.profile)
        except UnknownProfile as exc:
            out.append(_problem(data, key, f"no profile {dev.profile!r}", lines))
            known = exc.known
        except ProfileError as exc:
            why = str(exc) if dev.profile not in first else f"profile {dev.profile!r} cannot be loaded " \
                f"(devices.{first[dev.profile]}.profile says why)"
            first.setdefault(dev.profile, i)
            out.append(_problem(data, key, why, lines))
    if known:
        out.append(f"profiles searched {known}")
    return out


def _bus_address(dev: Device, profile: DeviceProfile) -> tuple[str, str, str]:
    """``(bus, address, key path)`` of a device: where a request to it goes and what answers it.

    A serial port is one bus (its path as written); a Modbus TCP endpoint is one per host and port.
    A text-line device owns its port: its address is the port itself.
    """
    t = dev.transport
    if isinstance(t, ModbusTcp):
        return f"Modbus TCP endpoint {t.host.lower()}:{t.port}", f"unit id {t.unit_id}", "transport.unit_id"
    port = f"port {os.path.normpath(t.port)}"
    if isinstance(t, ModbusRtu):
        return port, f"Modbus unit id {t.unit_id}", "transport.unit_id"
    if profile.protocol == "sdi12" and profile.sdi12 is not None:
        return port, f"SDI-12 address {dev.sdi12_address or profile.sdi12.default_address!r}", "sdi12_address"
    return port, "the whole port (a text-line device)", "transport.port"


def address_problems(cfg: SiteConfig, profiles: dict[str, DeviceProfile]) -> list[str]:
    """One address, one device: two devices that one request reaches (two SDI-12 sensors with one
    address on one port, two Modbus RTU devices with one unit id on one line, two Modbus TCP devices
    at one host, port and unit id), or a port shared by a text-line device or by two protocols, would
    answer each other's requests -- each message names both devices (``key.path: why``)."""
    out: list[str] = []
    seen: dict[tuple[str, str], Device] = {}
    protocol_of_bus: dict[str, tuple[str, Device]] = {}
    for i, dev in enumerate(cfg.devices):
        profile = profiles[dev.id]
        bus, address, key = _bus_address(dev, profile)
        kind = f"{dev.transport.kind} {profile.protocol}"
        first = seen.get((bus, address))
        if first is not None:
            out.append(f"devices.{i}.{key}: devices {first.id!r} and {dev.id!r} are both {address} on {bus}: "
                       "one address, one device (each would answer the other's requests)")
        elif bus in protocol_of_bus and (protocol_of_bus[bus][0] != kind or "text-line" in address):
            other = protocol_of_bus[bus][1]
            out.append(f"devices.{i}.transport.port: devices {other.id!r} and {dev.id!r} share {bus}, "
                       "which carries one bus of one protocol: give each its own port")
        seen.setdefault((bus, address), dev)
        protocol_of_bus.setdefault(bus, (kind, dev))
    return out


def role_problems(cfg: SiteConfig, profiles: dict[str, DeviceProfile]) -> list[str]:
    """What is wrong with the roles the site gives its devices, given their profiles.

    * the rain gauge must count tips (a ``counter`` section), and so must a device with ``replaced_gauges``;
    * both turbidity probes of a discharge point must report ``turbidity`` in the same unit (NTU and
      FNU are not comparable -- sensors.md, "Turbidity probes"); a point's pH probe must report ``ph``;
    * each basin device must say how its value becomes a height (a ``level`` section), and a
      distance-down sensor needs ``sensor_mount_height_ft``.
    """
    out: list[str] = []
    for i, dev in enumerate(cfg.devices):
        if dev.replaced_gauges and profiles[dev.id].counter is None:
            out.append(f"devices.{i}.replaced_gauges: device {dev.id!r} ({profiles[dev.id].model}) does not count "
                       "tips: only a rain gauge has a tip size to replace")
    if cfg.rain_gauge is not None and profiles[cfg.rain_gauge].counter is None:
        out.append(f"rain_gauge: device {cfg.rain_gauge!r} ({profiles[cfg.rain_gauge].model}) does not count tips")
    legacy = cfg.turbidity_pair is not None
    for i, point in enumerate(cfg.points):
        where = "turbidity_pair" if legacy else f"discharge_points.{i}"
        units = {}
        for role in ("upstream", "downstream"):
            dev = getattr(point, role)
            if dev is None:
                continue
            unit = profiles[dev].quantities().get("turbidity")
            if unit is None:
                out.append(f"{where}.{role}: device {dev!r} ({profiles[dev].model}) does not report turbidity")
            units[role] = unit
        if len(units) == 2 and None not in units.values() and units["upstream"] != units["downstream"]:
            out.append(
                f"{where}: upstream reports {units['upstream']} but downstream {units['downstream']}; "
                "compare like with like (same unit, ideally the same probe model)"
            )
        if not legacy and point.ph_probe is not None and "ph" not in profiles[point.ph_probe].quantities():
            out.append(f"{where}.ph_probe: device {point.ph_probe!r} ({profiles[point.ph_probe].model}) "
                       "does not report ph")
    for i, basin in enumerate(cfg.all_basins):
        where = "basin" if cfg.basin is not None else f"basins.{i}"
        level = profiles[basin.device].level
        if level is None:
            out.append(
                f"{where}.device: device {basin.device!r} ({profiles[basin.device].model}) is not a level sensor"
            )
        elif level.kind == "distance_down" and basin.sensor_mount_height_ft is None:
            out.append(f"{where}.sensor_mount_height_ft: required for a distance-down (ultrasonic/lidar) sensor")
        elif level.kind == "distance_down":
            out += [f"{where}.sensor_mount_height_ft: {p}" for p in _mount_problems(basin, profiles[basin.device])]
    return out


#: Feet per unit of a length a level sensor may report (1 ft = 0.3048 m exactly).
_FT_PER = {"mm": 1 / (1000 * M_PER_FT), "cm": 1 / (100 * M_PER_FT), "m": 1 / M_PER_FT, "in": 1 / 12, "ft": 1.0}


def _mount_problems(basin: Basin, profile: DeviceProfile) -> list[str]:
    """What is wrong with where a distance-down sensor hangs over ``basin`` (rules.md R3: sediment
    depth = mount height − distance): it must hang above the design height (the surface of a full
    basin is below the sensor face), the surface at the design height must be no closer than the
    sensor's minimum range, and the floor no farther than its maximum range -- the profile's
    ``valid_range`` of the level quantity (e.g. the HRXL-MaxSonar-WR's 300-9999 mm,
    docs/reference/sensors.md)."""
    assert profile.level is not None and basin.sensor_mount_height_ft is not None
    mount, top = basin.sensor_mount_height_ft, basin.design_height
    if mount <= top:
        return [f"{mount:g} ft is not above the basin's design height {top:g} ft: a distance-down sensor hangs "
                "above the basin and measures down to the sediment (the height of its face above the floor "
                "must be more than the design height)"]
    spec = _level_spec(profile)
    if spec is None or spec.valid_range is None or spec.unit not in _FT_PER:
        return []
    low, high = (v * _FT_PER[spec.unit] for v in spec.valid_range)
    if mount - top < low:
        return [f"{mount:g} ft puts the surface of a full basin ({top:g} ft) {mount - top:.2f} ft from the sensor, "
                f"closer than its minimum range {low:.2f} ft ({profile.model} valid_range "
                f"{spec.valid_range[0]:g} {spec.unit}): mount it at least {top + low:.2f} ft above the floor"]
    if mount > high:
        return [f"{mount:g} ft puts the basin floor beyond the sensor's maximum range {high:.2f} ft "
                f"({profile.model} valid_range {spec.valid_range[1]:g} {spec.unit}): an empty basin would read "
                "as no data"]
    return []


def _level_spec(profile: DeviceProfile) -> ValueSpec | None:
    """The point or field that carries ``profile``'s level quantity."""
    assert profile.level is not None
    specs: list[ValueSpec] = []
    if profile.modbus is not None:
        specs += profile.modbus.points
    if profile.serial_line is not None:
        specs += profile.serial_line.fields.values()
    if profile.sdi12 is not None:
        specs += profile.sdi12.values.values()
    return next((v for v in specs if v.quantity == profile.level.quantity), None)


def check_addresses(cfg: SiteConfig, profiles: ProfileLibrary, path: str | Path) -> None:
    """Refuse the site file ``path`` (loaded as ``cfg``) for a gateway if two of its devices share
    an address (:func:`address_problems`). A site that only imports files may name placeholder
    transports; the gateway, which sends the requests, cannot.

    Raises:
        ConfigError: one line: the file, then each clash with both devices and the line.
    """
    problems = address_problems(cfg, device_profiles(cfg, profiles))
    if problems:
        raise ConfigError(problems_message(str(path), [
            _problem(None, key, why, lambda loc: yaml_line(path, loc))
            for key, _, why in (p.partition(": ") for p in problems)]))


def load_site(path: str | Path, profiles: ProfileLibrary | None = None) -> SiteConfig:
    """Load and validate a site YAML file (see :func:`parse_site`).

    Raises:
        ConfigError: unreadable file, bad YAML or an invalid key (file and key named).
    """
    data = load_yaml(path, ConfigError, what="site file")
    return parse_site(data, str(path), profiles, lines=lambda loc: yaml_line(path, loc))


def device_profiles(cfg: SiteConfig, profiles: ProfileLibrary) -> dict[str, DeviceProfile]:
    """device id → profile for every device of ``cfg``."""
    return {d.id: profiles.get(d.profile) for d in cfg.devices}
