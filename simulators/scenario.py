"""Physical scenarios: what the simulated site experiences, as pure functions of event time.

A :class:`Scenario` (YAML, ``simulators/scenarios/*.yaml``) describes rain (an NRCS design storm or
a real tip record), turbidity (background plus a rain-driven plume downstream), pH (runoff plus
concrete washout water mixed in), sediment accumulating in the basins, and water stage -- for every
discharge point and basin alike, or for each one by its id (``discharge_points:``, ``basins:``).
:class:`SiteScenario` binds a scenario to a site config and its device profiles and answers "what
would device D's quantity Q read at time t?". Nothing here is random: the same time gives the same
value in every process.

Sources: docs/reference/hydrology.md (design storms, stage–storage, concrete washout), rules.md R2
(the Washington rule the default plume must violate) and R3 (50 % capacity), sensors.md (HRXL in
mm, Keller pressure in bar, depth = P·10⁵/(ρ·g); the Y532's temperature-compensated pH and its
electrode potential).
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stormwatch import resources
from stormwatch.config import M_PER_FT, Basin, SiteConfig
from stormwatch.display import LocalTimeError, local_instant, local_time
from stormwatch.errors import InputError, load_yaml, problems_message
from stormwatch.profiles import DeviceProfile
from stormwatch.rain import LengthUnit, TipResolution
from stormwatch.simulators.basin import solve_depth_ft, volume_function
from stormwatch.simulators.design_storm import Distribution, design_storm_tip_times
from stormwatch.simulators.ph import electrode_potential_mv, mix_ph
from stormwatch.simulators.rain_record import RainRecord, RainRecordError, load_rain_record
from stormwatch.simulators.tips import TipSeries

log = logging.getLogger(__name__)


#: Standard gravity, m/s² (sensors.md: depth = P·10⁵ / (ρ·9.80665)).
G_M_PER_S2 = 9.80665
#: Density of water used for the simulated pressure sensor, kg/m³ (fresh water near 20 °C).
RHO_WATER_KG_M3 = 998.2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The largest 24-hour rainfall on record is 1,825 mm (71.9 in, Foc-Foc, La Réunion, January 1966;
#: WMO World Weather and Climate Extremes Archive). A design storm deeper than that is a typo.
MAX_STORM_DEPTH_IN = Decimal("72")


class StormSpec(_Strict):
    """An NRCS 24-hour design storm (hydrology.md).

    Attributes:
        distribution: ``type_ii`` or ``type_iii``.
        depth_in: total depth in inches (kept as an exact decimal).
        start_offset_h: hours after the scenario start when the storm begins.
    """

    distribution: Distribution = "type_ii"
    depth_in: Decimal = Field(gt=0, le=MAX_STORM_DEPTH_IN)
    start_offset_h: float = Field(default=1.0, ge=0)


class RainRecordSpec(_Strict):
    """A real tip record replayed as rain (see :func:`stormwatch.simulators.rain_record.load_rain_record`).

    Attributes:
        path: the file (relative paths are relative to the scenario file).
        tip_size: depth per record tip in ``unit`` (exact decimal string, e.g. ``"0.2"``).
        unit: ``mm`` or ``in``.
        time_column, value_column: names (with a header) or 0-based indexes.
        time_format: strptime format (default: ISO 8601 and year-first forms). tz: IANA zone of
            naive times (``None``: the site's, as every importer reads a logger's file).
            delimiter: field separator (default: sniffed from the header).
        start: when given, only rows from this instant on are replayed (naive = local to ``tz``,
            read as a typed time: :func:`stormwatch.display.local_instant`).
        end: when given, rows from this instant on are dropped (naive = local to ``tz``).
        shift_to_offset_h: when given, the (windowed) record is moved so its first tip falls this
            many hours after the scenario start.
    """

    path: Path
    tip_size: str = "0.2"
    unit: LengthUnit = "mm"
    time_column: str = "0"
    value_column: str = "1"
    time_format: str | None = None
    tz: str | None = None
    delimiter: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    shift_to_offset_h: float | None = Field(default=None, ge=0)


class RainSpec(_Strict):
    """Rain: exactly one of ``storm`` or ``record``; ``counter_offset`` is the gauge counter at start."""

    storm: StormSpec | None = None
    record: RainRecordSpec | None = None
    counter_offset: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _one_source(self) -> RainSpec:
        if (self.storm is None) == (self.record is None):
            raise ValueError("give exactly one of 'storm' or 'record'")
        return self


class TurbiditySpec(_Strict):
    """Turbidity (NTU) at the upstream (background) and downstream (compliance) probes.

    upstream(t) = background_ntu + variation_ntu·(0.6·sin(2πt/period_a) + 0.4·sin(2πt/period_b))
    downstream(t) = upstream(t) + downstream_offset_ntu + plume(t), where
    plume(t) = gain_ntu_per_in_h × Σ_tips resolution_in·K(age)/window_h, K = 1 inside the trailing
    window, then exp(−(age − window)/decay). While it rains the plume is gain × the in/h intensity
    over the trailing window; after the rain it decays with time constant ``decay_min``.
    """

    background_ntu: float = Field(default=8.0, ge=0)
    variation_ntu: float = Field(default=0.4, ge=0)
    period_a_min: float = Field(default=97.0, gt=0)
    period_b_min: float = Field(default=23.0, gt=0)
    downstream_offset_ntu: float = 1.0
    gain_ntu_per_in_h: float = Field(default=30.0, ge=0)
    window_min: float = Field(default=15.0, gt=0)
    decay_min: float = Field(default=30.0, gt=0)
    water_temperature_c: float = 18.0
    temperature_variation_c: float = Field(default=1.5, ge=0)


class SedimentSpec(_Strict):
    """Sediment in the basin (rules.md R3).

    Attributes:
        initial_fraction: fraction of the design volume V(H) already lost at the start.
        fraction_per_in: fraction of V(H) added per inch of rain (runoff carries sediment in).
    """

    initial_fraction: float = Field(default=0.45, ge=0, le=1)
    fraction_per_in: float = Field(default=0.10, ge=0)


class WaterSpec(_Strict):
    """Water depth above a submersible pressure sensor (kept simple).

    depth(t) = base_depth_m + rise_m_per_in × Σ_tips resolution_in·exp(−age/drain_h).
    """

    base_depth_m: float = Field(default=0.3, ge=0)
    rise_m_per_in: float = Field(default=0.6, ge=0)
    drain_h: float = Field(default=6.0, gt=0)


class WashoutSpec(_Strict):
    """Concrete washout water reaching a discharge point (hydrology.md, "Concrete washout").

    The washout water's share of the flow at the point is ``fraction`` from ``start_offset_h``
    for ``hold_h`` hours (a washout pit overflowing through a pour, a truck chute rinsed into an
    inlet), then decays as the slug flushes out: ``fraction·exp(−age/flush_min)`` after the end.

    Attributes:
        start_offset_h: hours after the scenario start when washout water first arrives.
        hold_h: hours it keeps arriving at ``fraction`` of the flow.
        flush_min: time constant (minutes) of the share's decay once it stops.
        fraction: share of the point's flow that is washout water meanwhile (0 < f ≤ 1).
        washout_ph: the washout water's pH ("pH near 12": hydrology.md).
    """

    start_offset_h: float = Field(ge=0)
    hold_h: float = Field(gt=0)
    flush_min: float = Field(default=20.0, gt=0)
    fraction: float = Field(gt=0, le=1)
    washout_ph: float = Field(default=12.0, ge=7, le=14)

    def share(self, hours: float) -> float:
        """The washout water's share of the flow ``hours`` after the scenario start."""
        age_h = hours - self.start_offset_h
        if age_h < 0:
            return 0.0
        if age_h < self.hold_h:
            return self.fraction
        return self.fraction * math.exp(-(age_h - self.hold_h) * 60.0 / self.flush_min)


class PhSpec(_Strict):
    """pH at a discharge point's pH probe (:mod:`stormwatch.simulators.ph`).

    background(t) = background_ph + variation_ph·sin(2πt/period_min): runoff inside the 6.5-8.5
    range. Washouts mix in as unbuffered strong base (the pH of the mix is that of the summed
    base excess, never an average of pH values); overlapping washouts share the flow, at most all of it.
    """

    background_ph: float = Field(default=7.2, ge=0, le=14)
    variation_ph: float = Field(default=0.05, ge=0)
    period_min: float = Field(default=131.0, gt=0)
    washouts: tuple[WashoutSpec, ...] = ()


class PointPhysics(_Strict):
    """What one discharge point's probes see (``discharge_points: {ID: ...}`` of a scenario file).

    Keys left out come from the scenario's top-level ``turbidity`` and ``ph`` (so a point's
    ``turbidity: {gain_ntu_per_in_h: 0}`` is the default turbidity without a plume).
    """

    turbidity: TurbiditySpec = TurbiditySpec()
    ph: PhSpec = PhSpec()


class BasinPhysics(_Strict):
    """What one basin's level device sees (``basins: {ID: ...}`` of a scenario file); keys left out
    come from the scenario's top-level ``sediment`` and ``water``."""

    sediment: SedimentSpec = SedimentSpec()
    water: WaterSpec = WaterSpec()


#: Per-place sections and the top-level sections each of their keys inherits from.
_INHERITED = {"discharge_points": ("turbidity", "ph"), "basins": ("sediment", "water")}


def _inherit(default: object, override: object) -> object:
    """``override`` (a mapping of a scenario file) completed with the top-level ``default``."""
    if not isinstance(override, dict):
        return override
    base = default.model_dump() if isinstance(default, BaseModel) else default
    return {**base, **override} if isinstance(base, dict) else override


class Scenario(_Strict):
    """A whole scenario file.

    Attributes:
        name: label.
        start: simulated UTC start instant (the ScenarioClock's ``sim_start``).
        duration_h: how long the scenario runs (simulated hours).
        rain, turbidity, sediment, water, ph: the physics (see each model); ``turbidity`` and ``ph``
            hold at every discharge point, ``sediment`` and ``water`` in every basin, unless
            ``discharge_points`` / ``basins`` say otherwise for one.
        discharge_points: discharge point id → what its probes see (:class:`PointPhysics`).
        basins: basin id → what its level device sees (:class:`BasinPhysics`).
        site: the site file the scenario is written for (``stormwatch demo --scenario NAME`` runs it
            without ``--site``); a file name ``NAME`` (no suffix) in the scenario file is a bundled
            example site (``examples/NAME.yaml``), a path is relative to the scenario file.
        source: file it was loaded from (set by :func:`load_scenario`).
    """

    name: str = "scenario"
    start: datetime
    duration_h: float = Field(gt=0)
    rain: RainSpec
    turbidity: TurbiditySpec = TurbiditySpec()
    sediment: SedimentSpec = SedimentSpec()
    water: WaterSpec = WaterSpec()
    ph: PhSpec = PhSpec()
    discharge_points: dict[str, PointPhysics] = Field(default_factory=dict)
    basins: dict[str, BasinPhysics] = Field(default_factory=dict)
    site: Path | None = None
    source: str = ""

    @model_validator(mode="before")
    @classmethod
    def _places_inherit(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for section, keys in _INHERITED.items():
            places = out.get(section)
            if not isinstance(places, dict):
                continue
            completed = {}
            for place_id, physics in places.items():
                if physics is None:  # "outfall-1:" with nothing under it: the defaults
                    physics = {}
                if isinstance(physics, dict):
                    physics = {**physics}
                    for key in keys:
                        physics[key] = _inherit(out.get(key, {}), physics.get(key, {}))
                completed[place_id] = physics
            out[section] = completed
        return out

    @field_validator("start")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("start must carry a UTC offset (e.g. 2026-06-01T04:00:00Z)")
        return v.astimezone(UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.duration_h)

    def with_storm_depth(self, depth_in: Decimal | str | float) -> Scenario:
        """This scenario with the design-storm depth replaced (the rain source becomes a storm).

        Raises:
            ValueError: a non-positive depth.
        """
        try:
            depth = Decimal(str(depth_in))
        except ArithmeticError:
            raise ValueError(f"storm depth {depth_in!r} is not a decimal number of inches") from None
        if not depth.is_finite() or not 0 < depth <= MAX_STORM_DEPTH_IN:
            raise ValueError(
                f"storm depth must be > 0 and <= {MAX_STORM_DEPTH_IN} in (the 24-hour world record), got {depth_in}"
            )
        storm = self.rain.storm or StormSpec(depth_in=depth)
        rain = self.rain.model_copy(update={"storm": storm.model_copy(update={"depth_in": depth}), "record": None})
        return self.model_copy(update={"rain": rain})

    def with_rain_record(self, record: RainRecordSpec) -> Scenario:
        """This scenario replaying ``record`` instead of its design storm."""
        rain = self.rain.model_copy(update={"storm": None, "record": record})
        return self.model_copy(update={"rain": rain})


class ScenarioError(InputError):
    """A scenario that cannot be loaded; the message names the file and the bad key."""


def load_scenario(name_or_path: str | Path = "default") -> Scenario:
    """Load a scenario: a bundled name (``default``) or a YAML file path.

    Raises:
        ScenarioError: unreadable file, bad YAML, or an invalid key (file and key named).
    """
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = resources.builtin_scenarios_dir() / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(resources.builtin_scenarios())
        raise ScenarioError(f"--scenario {name_or_path}: no such scenario file or bundled scenario (bundled: {known})")
    data = load_yaml(path, ScenarioError, what="scenario file")
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping at the top level")
    if isinstance(data.get("site"), dict) and "devices" in data:
        raise ScenarioError(f"--scenario {name_or_path}: {path} is a site file, not a scenario (give it as --site; "
                            f"bundled scenarios: {', '.join(resources.builtin_scenarios())})")
    rec = data.get("rain", {}).get("record") if isinstance(data.get("rain"), dict) else None
    if isinstance(rec, dict) and "path" in rec and not Path(str(rec["path"])).is_absolute():
        rec["path"] = str((path.parent / str(rec["path"])).resolve())
    if isinstance(data.get("site"), str):
        data["site"] = str(_scenario_site(path, data["site"]))
    try:
        scenario = Scenario.model_validate({**data, "source": str(path)})
    except ValidationError as exc:
        raise ScenarioError(problems_message(str(path), [
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()])) from exc
    return scenario


def _scenario_site(scenario_file: Path, site: str) -> Path:
    """The site file a scenario's ``site:`` names: ``NAME`` = bundled example ``examples/NAME.yaml``,
    a path = relative to the scenario file.

    Raises:
        ScenarioError: no such file (the bundled example sites are named).
    """
    given = Path(site)
    if not given.suffix and len(given.parts) == 1:
        found = resources.examples_dir() / f"{site}.yaml"
        if not found.is_file():
            known = ", ".join(sorted(p.stem for p in resources.examples_dir().glob("*.yaml")))
            raise ScenarioError(f"{scenario_file}: site: no bundled example site {site!r} (bundled: {known})")
        return found
    found = given if given.is_absolute() else (scenario_file.parent / given).resolve()
    if not found.is_file():
        raise ScenarioError(f"{scenario_file}: site: {found} is not a file")
    return found


def rain_tips(scenario: Scenario, resolution: TipResolution, site_tz: str = "UTC") -> TipSeries:
    """The scenario's rain as tips of a gauge of ``resolution`` (a record's times without an offset
    and no ``tz`` of its own: in ``site_tz``, the site's zone).

    Raises:
        stormwatch.simulators.rain_record.RainRecordError: the record file cannot be read.
    """
    if scenario.rain.storm is not None:
        s = scenario.rain.storm
        start = scenario.start + timedelta(hours=s.start_offset_h)
        times = design_storm_tip_times(s.distribution, Fraction(s.depth_in), resolution.inches, start)
        return TipSeries(times, resolution)
    spec = scenario.rain.record
    assert spec is not None  # RainSpec validates: exactly one source
    return record_from_spec(spec, scenario.start, site_tz).gauge_tips(resolution)


def _moved(record: RainRecord, tz: ZoneInfo) -> str:
    """Where a record moved to the scenario's date came from, for the user (``""``: not moved)."""
    if record.moved_from is None or not record.rows:
        return ""
    return (f"; its rain was moved to the scenario's date: the first tip, {local_time(record.moved_from, tz)}, "
            f"plays at {local_time(record.rows[0][0], tz)} (every tip moved by the same time)")


def record_from_spec(spec: RainRecordSpec, scenario_start: datetime, site_tz: str) -> RainRecord:
    """Load, window and shift a :class:`RainRecordSpec`; times without an offset -- the file's and
    the window's -- are local to ``spec.tz``, else to ``site_tz`` (the site's zone).

    Raises:
        RainRecordError: an unreadable file, a window time the zone skips or repeats, an empty window.
    """
    zone_name = spec.tz or site_tz
    record = load_rain_record(
        spec.path,
        tip_size=spec.tip_size,
        unit=spec.unit,
        time_column=spec.time_column,
        value_column=spec.value_column,
        time_format=spec.time_format,
        tz=zone_name,
        tz_source="--tz" if spec.tz else "site",
        delimiter=spec.delimiter,
    )

    def utc(t: datetime | None, default: datetime) -> datetime:
        if t is None:
            return default
        try:
            return local_instant(t, zone_name).astimezone(UTC)
        except LocalTimeError as exc:
            raise RainRecordError(f"{spec.path}: the window's {'start' if t is spec.start else 'end'} "
                                  f"(--from/--until): {exc}") from None

    lo = utc(spec.start, datetime.min.replace(tzinfo=UTC))
    hi = utc(spec.end, datetime.max.replace(tzinfo=UTC))
    if lo >= hi:
        raise RainRecordError(f"{spec.path}: the window from {lo.isoformat()} until {hi.isoformat()} is empty "
                              "(--from must be before --until)")
    whole = record
    record = record.window(lo, hi)
    if not record.rows:
        span = (f"its tips run from {whole.rows[0][0].isoformat()} to {whole.rows[-1][0].isoformat()}"
                if whole.rows else "it has no tips at all")
        where = " ".join(p for p in (f"from {lo.isoformat()}" if spec.start else "",
                                     f"until {hi.isoformat()}" if spec.end else "") if p)
        raise RainRecordError(f"{spec.path}: no rain {where or 'in the file'}: {span} ({whole.times})")
    if spec.shift_to_offset_h is not None:
        record = record.shifted(scenario_start + timedelta(hours=spec.shift_to_offset_h))
    return record


Role = Literal["rain", "turbidity_upstream", "turbidity_downstream", "ph", "basin_level", "other"]
Side = Literal["upstream", "downstream"]


class _BasinModel:
    """One basin of the site with the scenario's physics for it: its stage–storage and the sediment
    depth solved once per tip count (the depth changes only with a tip)."""

    def __init__(self, basin: Basin, physics: BasinPhysics) -> None:
        self.basin = basin
        self.physics = physics
        self.volume = volume_function(basin)
        self.design_height_ft = basin.design_height
        self.design_volume_ft3 = self.volume(self.design_height_ft)
        self.depth_by_tips: dict[int, float] = {}


class SiteScenario:
    """A scenario bound to one site: the value each device would read at an event time.

    Every discharge point (``discharge_points``, or the one ``turbidity_pair``) and every basin
    (``basins``, or the one ``basin``) is simulated with its own physics: the scenario's
    ``discharge_points: {ID: ...}`` / ``basins: {ID: ...}`` sections, else its top-level
    ``turbidity``, ``ph``, ``sediment`` and ``water``. A device is simulated as what it is at its
    place: the compliance (``downstream``) or background (``upstream``) probe of a point -- one
    probe may be the background of several points --, a point's ``ph_probe``, a basin's level device.

    Args:
        scenario: the physics.
        cfg: the site (roles come from ``rain_gauge``, its discharge points and its basins).
        profiles: device id → profile (see :func:`stormwatch.config.device_profiles`).

    Raises:
        ValueError: the rain gauge has no counter in its profile, a distance-down basin has no
            ``sensor_mount_height_ft``, or the scenario describes a discharge point or basin the
            site does not have.
    """

    def __init__(self, scenario: Scenario, cfg: SiteConfig, profiles: dict[str, DeviceProfile]) -> None:
        self.scenario = scenario
        self.cfg = cfg
        self.profiles = profiles
        self._check_places()
        self._defaults = PointPhysics(turbidity=scenario.turbidity, ph=scenario.ph)
        #: discharge point id → the physics its probes see
        self.point_physics: dict[str, PointPhysics] = {
            p.id: scenario.discharge_points.get(p.id, self._defaults) for p in cfg.points
        }
        self._first_point = cfg.points[0].id if cfg.points else None
        #: device id → (discharge point, side) of a turbidity probe; a compliance probe is where it
        #: is (below its point's discharge) even when it is also another point's background
        self.turbidity_sides: dict[str, tuple[str, Side]] = {}
        for side in ("downstream", "upstream"):
            for p in cfg.points:
                dev = getattr(p, side)
                if dev is not None:
                    self.turbidity_sides.setdefault(dev, (p.id, side))
        #: device id → the discharge point whose pH it measures
        self.ph_points: dict[str, str] = {}
        for p in cfg.points:
            if p.ph_probe is not None:
                self.ph_points.setdefault(p.ph_probe, p.id)
        self.roles: dict[str, Role] = {d.id: self._role(d.id) for d in cfg.devices}
        resolution = TipResolution.parse("0.01 in")
        if cfg.rain_gauge is not None:
            gauge = profiles[cfg.rain_gauge]
            counter = gauge.counter
            if counter is None:
                raise ValueError(f"rain gauge {cfg.rain_gauge!r}: profile {gauge.model} has no counter")
            resolution = counter.tip_resolution
        #: rows of the rain file that could not be used (``file:line: reason``), for the user to see
        self.rain_skipped: tuple[str, ...] = ()
        #: one line about them (the command shows it once; :attr:`RainRecord.skip_summary`)
        self.rain_skip_summary = ""
        #: how the rain file's times were read (:attr:`RainRecord.times`), ``""`` without a file
        self.rain_times = ""
        #: what playing the rain file at the gauge's tip size changes (:meth:`RainRecord.rounding`), ``""`` if nothing
        self.rain_rounding = ""
        if scenario.rain.record is not None:
            record = record_from_spec(scenario.rain.record, scenario.start, cfg.site.timezone)
            self.rain_skipped = record.skipped
            self.rain_skip_summary = record.skip_summary
            self.rain_times = f"rain file {record.source}: {record.times}" + _moved(record, cfg.site.tz)
            self.tips = record.gauge_tips(resolution)
            self.rain_rounding = record.rounding(resolution)
        else:
            self.tips = rain_tips(scenario, resolution, cfg.site.timezone)
        self._res_in = float(resolution.inches)
        self._basin_setup()

    # ------------------------------------------------------------------ places and roles
    def _check_places(self) -> None:
        sc, cfg = self.scenario, self.cfg
        for section, have in (("discharge_points", [p.id for p in cfg.points]),
                              ("basins", [b.id for b in cfg.all_basins])):
            described: dict[str, object] = getattr(sc, section)
            unknown = sorted(set(described) - set(have))
            if unknown:
                raise ValueError(
                    f"scenario {sc.name}: {section} {', '.join(unknown)}: site {cfg.site.id} has no such "
                    f"{'discharge point' if section == 'discharge_points' else 'basin'} "
                    f"(it has: {', '.join(have) or 'none'})"
                )

    def _role(self, device_id: str) -> Role:
        if device_id == self.cfg.rain_gauge:
            return "rain"
        if device_id in self.turbidity_sides:
            downstream = self.turbidity_sides[device_id][1] == "downstream"
            return "turbidity_downstream" if downstream else "turbidity_upstream"
        if device_id in self.ph_points:
            return "ph"
        if any(b.device == device_id for b in self.cfg.all_basins):
            return "basin_level"
        return "other"

    def _physics(self, point: str | None) -> PointPhysics:
        """A point's physics; ``None``: the site's first point (the scenario's defaults without one).

        Raises:
            KeyError: not a discharge point of the site.
        """
        key = point if point is not None else self._first_point
        return self._defaults if key is None else self.point_physics[key]

    # ------------------------------------------------------------------ rain
    def counter_at(self, t: datetime, width_bits: int = 16) -> int:
        """The gauge's cumulative counter at ``t``: (counter_offset + tips ≤ t) mod 2**width_bits."""
        return self.tips.counter_at(t, self.scenario.rain.counter_offset, width_bits)

    def rain_depth_in(self, t: datetime) -> Fraction:
        """Exact cumulative scenario rain (in) at ``t``."""
        return self.tips.depth_in_until(t)

    # ------------------------------------------------------------------ turbidity
    def _minutes(self, t: datetime) -> float:
        return (t - self.scenario.start).total_seconds() / 60.0

    def _wave(self, t: datetime, a_min: float, b_min: float) -> float:
        s = self._minutes(t)
        return 0.6 * math.sin(2 * math.pi * s / a_min) + 0.4 * math.sin(2 * math.pi * s / b_min)

    def _upstream(self, t: datetime, spec: TurbiditySpec) -> float:
        return spec.background_ntu + spec.variation_ntu * self._wave(t, spec.period_a_min, spec.period_b_min)

    def _plume(self, t: datetime, spec: TurbiditySpec) -> float:
        window, decay = timedelta(minutes=spec.window_min), timedelta(minutes=spec.decay_min)
        weighted_tips = self.tips.decayed_sum(t, window, decay)
        return spec.gain_ntu_per_in_h * weighted_tips * self._res_in / (spec.window_min / 60.0)

    def upstream_ntu(self, t: datetime, point: str | None = None) -> float:
        """Background turbidity (NTU) at ``point`` (default: the first): steady with a small
        deterministic variation."""
        return self._upstream(t, self._physics(point).turbidity)

    def plume_ntu(self, t: datetime, point: str | None = None) -> float:
        """The rain-driven plume added below ``point``'s discharge (NTU); see :class:`TurbiditySpec`."""
        return self._plume(t, self._physics(point).turbidity)

    def downstream_ntu(self, t: datetime, point: str | None = None) -> float:
        """Compliance-probe turbidity (NTU) at ``point`` = background + offset + plume."""
        spec = self._physics(point).turbidity
        return self._upstream(t, spec) + spec.downstream_offset_ntu + self._plume(t, spec)

    def _water_temperature(self, t: datetime, spec: TurbiditySpec) -> float:
        hours = self._minutes(t) / 60.0
        return spec.water_temperature_c + spec.temperature_variation_c * math.sin(2 * math.pi * hours / 24.0)

    def water_temperature_c(self, t: datetime, point: str | None = None) -> float:
        """Water temperature (°C) at ``point``, a slow deterministic swing."""
        return self._water_temperature(t, self._physics(point).turbidity)

    # ------------------------------------------------------------------ pH
    def _ph(self, t: datetime, spec: PhSpec) -> float:
        background = spec.background_ph + spec.variation_ph * math.sin(2 * math.pi * self._minutes(t) / spec.period_min)
        hours = self._minutes(t) / 60.0
        parts = [(w.share(hours), w.washout_ph) for w in spec.washouts]
        parts = [(share, ph) for share, ph in parts if share > 0]
        washout = math.fsum(share for share, _ in parts)
        if washout > 1.0:  # overlapping washouts: together they are all of the flow
            parts = [(share / washout, ph) for share, ph in parts]
            washout = 1.0
        return mix_ph([*parts, (1.0 - washout, background)])

    def ph(self, t: datetime, point: str | None = None) -> float:
        """pH (temperature-compensated, as the probe reports it) at ``point``; see :class:`PhSpec`."""
        return self._ph(t, self._physics(point).ph)

    def washout_share(self, t: datetime, point: str | None = None) -> float:
        """The share of ``point``'s flow that is concrete washout water at ``t`` (0..1)."""
        hours = self._minutes(t) / 60.0
        return min(1.0, math.fsum(w.share(hours) for w in self._physics(point).ph.washouts))

    # ------------------------------------------------------------------ basins
    def _basin_setup(self) -> None:
        self._basins: dict[str, _BasinModel] = {}
        defaults = BasinPhysics(sediment=self.scenario.sediment, water=self.scenario.water)
        for basin in self.cfg.all_basins:
            level = self.profiles[basin.device].level
            if level is not None and level.kind == "distance_down" and basin.sensor_mount_height_ft is None:
                raise ValueError(f"basin {basin.id!r}: sensor_mount_height_ft is required for a distance-down sensor")
            self._basins[basin.id] = _BasinModel(basin, self.scenario.basins.get(basin.id, defaults))
        #: device id → the basin it watches
        self.basin_of: dict[str, str] = {}
        for basin in self.cfg.all_basins:
            self.basin_of.setdefault(basin.device, basin.id)
        first = next(iter(self._basins.values()), None)
        self.design_volume_ft3 = first.design_volume_ft3 if first is not None else 0.0
        if first is not None:
            self.design_height_ft = first.design_height_ft
            self.initial_sediment_depth_ft = self.sediment_depth_ft(self.scenario.start)

    def _basin(self, basin: str | None) -> _BasinModel:
        if not self._basins:
            raise ValueError("the site has no basin")
        if basin is None:
            return next(iter(self._basins.values()))
        try:
            return self._basins[basin]
        except KeyError:
            raise ValueError(f"the site has no basin {basin!r} (it has: {', '.join(self._basins)})") from None

    def sediment_fraction(self, t: datetime, basin: str | None = None) -> float:
        """Fraction of ``basin``'s design volume V(H) lost to sediment at ``t`` (capped at 1; default:
        the first basin).

        Raises:
            ValueError: the site has no such basin.
        """
        spec = self._basin(basin).physics.sediment
        return min(1.0, spec.initial_fraction + spec.fraction_per_in * float(self.rain_depth_in(t)))

    def sediment_depth_ft(self, t: datetime, basin: str | None = None) -> float:
        """Sediment surface height above ``basin``'s floor (ft): solves V(d) = fraction · V(H).

        Raises:
            ValueError: the site has no such basin.
        """
        model = self._basin(basin)
        tips = self.tips.tips_until(t)
        depth = model.depth_by_tips.get(tips)
        if depth is None:
            target = self.sediment_fraction(t, model.basin.id) * model.design_volume_ft3
            depth = model.depth_by_tips[tips] = solve_depth_ft(model.volume, target, model.design_height_ft)
        return depth

    def distance_mm(self, t: datetime, basin: str | None = None) -> float:
        """A distance-down sensor's reading (mm): mount height − sediment depth (1 ft = 0.3048 m).

        Raises:
            ValueError: no such basin, or it has no ``sensor_mount_height_ft``.
        """
        model = self._basin(basin)
        mount = model.basin.sensor_mount_height_ft
        if mount is None:
            raise ValueError(f"basin {model.basin.id!r}: distance needs sensor_mount_height_ft")
        return (mount - self.sediment_depth_ft(t, model.basin.id)) * M_PER_FT * 1000.0

    def water_depth_m(self, t: datetime, basin: str | None = None) -> float:
        """Water depth above a submersible sensor in ``basin`` (m); see :class:`WaterSpec`. Without a
        basin: the scenario's top-level ``water``."""
        spec = self._basin(basin).physics.water if self._basins else self.scenario.water
        tips = self.tips.decayed_sum(t, timedelta(0), timedelta(hours=spec.drain_h))
        return spec.base_depth_m + spec.rise_m_per_in * tips * self._res_in

    def pressure_bar(self, t: datetime, basin: str | None = None) -> float:
        """Gauge pressure (bar) of the water column: ρ·g·depth / 10⁵ (sensors.md)."""
        return RHO_WATER_KG_M3 * G_M_PER_S2 * self.water_depth_m(t, basin) / 1e5

    # ------------------------------------------------------------------ dispatch
    def _device_physics(self, device_id: str) -> PointPhysics:
        """The physics of the point a probe is at (the scenario's defaults for a probe at no point)."""
        where = self.turbidity_sides.get(device_id)
        point = where[0] if where is not None else self.ph_points.get(device_id)
        return self._defaults if point is None else self.point_physics[point]

    def value(self, device_id: str, quantity: str, t: datetime) -> float:
        """What ``device_id`` would read for ``quantity`` at ``t`` (engineering units of its profile).

        Raises:
            KeyError: unknown device, a quantity this simulator does not model, or a level quantity
                of a device that watches no basin.
        """
        profile = self.profiles[device_id]
        if profile.counter is not None and quantity == profile.counter.quantity:
            return float(self.counter_at(t, profile.counter.width_bits))
        physics = self._device_physics(device_id)
        if quantity == "turbidity":
            where = self.turbidity_sides.get(device_id)
            if where is not None and where[1] == "downstream":
                return self.downstream_ntu(t, where[0])
            return self._upstream(t, physics.turbidity)
        if quantity == "temperature":
            return self._water_temperature(t, physics.turbidity)
        if quantity == "ph":
            return self._ph(t, physics.ph)
        if quantity == "electrode_potential":
            return electrode_potential_mv(self._ph(t, physics.ph), self._water_temperature(t, physics.turbidity))
        if quantity == "device_error":
            return 0.0
        if quantity in ("distance", "pressure"):
            basin = self.basin_of.get(device_id)
            if basin is None:
                raise KeyError(f"device {device_id!r}: {quantity} is simulated for a basin's level device only")
            return self.distance_mm(t, basin) if quantity == "distance" else self.pressure_bar(t, basin)
        raise KeyError(f"device {device_id!r}: no simulation for quantity {quantity!r}")
