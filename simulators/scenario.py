"""Physical scenarios: what the simulated site experiences, as pure functions of event time.

A :class:`Scenario` (YAML, ``simulators/scenarios/default.yaml``) describes rain (an NRCS design
storm or a real tip record), turbidity (background plus a rain-driven plume downstream), sediment
accumulating in the basin, and water stage. :class:`SiteScenario` binds a scenario to a site
config and its device profiles and answers "what would device D's quantity Q read at time t?".
Nothing here is random: the same time gives the same value in every process.

Sources: docs/reference/hydrology.md (design storms, stage–storage), rules.md R2 (the
Washington rule the default plume must violate) and R3 (50 % capacity), sensors.md (HRXL in mm,
Keller pressure in bar, depth = P·10⁵/(ρ·g)).
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
from stormwatch.config import M_PER_FT, SiteConfig
from stormwatch.errors import InputError, load_yaml
from stormwatch.profiles import DeviceProfile
from stormwatch.rain import LengthUnit, TipResolution
from stormwatch.simulators.basin import solve_depth_ft, volume_function
from stormwatch.simulators.design_storm import Distribution, design_storm_tip_times
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
            naive times. delimiter: field separator (default: sniffed from the header).
        start: when given, only rows from this instant on are replayed (naive = local to ``tz``).
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
    tz: str = "UTC"
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


class Scenario(_Strict):
    """A whole scenario file.

    Attributes:
        name: label.
        start: simulated UTC start instant (the ScenarioClock's ``sim_start``).
        duration_h: how long the scenario runs (simulated hours).
        rain, turbidity, sediment, water: the physics (see each model).
        source: file it was loaded from (set by :func:`load_scenario`).
    """

    name: str = "scenario"
    start: datetime
    duration_h: float = Field(gt=0)
    rain: RainSpec
    turbidity: TurbiditySpec = TurbiditySpec()
    sediment: SedimentSpec = SedimentSpec()
    water: WaterSpec = WaterSpec()
    source: str = ""

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
        known = ", ".join(sorted(p.stem for p in resources.builtin_scenarios_dir().glob("*.yaml")))
        raise ScenarioError(f"--scenario {name_or_path}: no such scenario file or bundled scenario (bundled: {known})")
    data = load_yaml(path, ScenarioError, what="scenario file")
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping at the top level")
    rec = data.get("rain", {}).get("record") if isinstance(data.get("rain"), dict) else None
    if isinstance(rec, dict) and "path" in rec and not Path(str(rec["path"])).is_absolute():
        rec["path"] = str((path.parent / str(rec["path"])).resolve())
    try:
        scenario = Scenario.model_validate({**data, "source": str(path)})
    except ValidationError as exc:
        lines = [f"{path}: {'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()]
        raise ScenarioError("\n".join(lines)) from exc
    return scenario


def rain_tips(scenario: Scenario, resolution: TipResolution) -> TipSeries:
    """The scenario's rain as tips of a gauge of ``resolution``.

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
    return record_from_spec(spec, scenario.start).gauge_tips(resolution)


def record_from_spec(spec: RainRecordSpec, scenario_start: datetime) -> RainRecord:
    """Load, window and shift a :class:`RainRecordSpec`."""
    record = load_rain_record(
        spec.path,
        tip_size=spec.tip_size,
        unit=spec.unit,
        time_column=spec.time_column,
        value_column=spec.value_column,
        time_format=spec.time_format,
        tz=spec.tz,
        delimiter=spec.delimiter,
    )
    zone = ZoneInfo(spec.tz)

    def utc(t: datetime | None, default: datetime) -> datetime:
        if t is None:
            return default
        return (t if t.tzinfo else t.replace(tzinfo=zone)).astimezone(UTC)

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
        raise RainRecordError(f"{spec.path}: no rain {where or 'in the file'}: {span}")
    if spec.shift_to_offset_h is not None:
        record = record.shifted(scenario_start + timedelta(hours=spec.shift_to_offset_h))
    return record


Role = Literal["rain", "turbidity_upstream", "turbidity_downstream", "basin_level", "other"]


class SiteScenario:
    """A scenario bound to one site: the value each device would read at an event time.

    Args:
        scenario: the physics.
        cfg: the site (roles come from ``rain_gauge``, ``turbidity_pair``, ``basin``).
        profiles: device id → profile (see :func:`stormwatch.config.device_profiles`).

    Raises:
        ValueError: the rain gauge has no counter in its profile, or a distance-down basin has no
            ``sensor_mount_height_ft``.
    """

    def __init__(self, scenario: Scenario, cfg: SiteConfig, profiles: dict[str, DeviceProfile]) -> None:
        self.scenario = scenario
        self.cfg = cfg
        self.profiles = profiles
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
        if scenario.rain.record is not None:
            record = record_from_spec(scenario.rain.record, scenario.start)
            self.rain_skipped = record.skipped
            self.tips = record.gauge_tips(resolution)
        else:
            self.tips = rain_tips(scenario, resolution)
        t = scenario.turbidity
        self._window = timedelta(minutes=t.window_min)
        self._decay = timedelta(minutes=t.decay_min)
        self._window_h = t.window_min / 60.0
        self._res_in = float(resolution.inches)
        self._basin_setup()

    # ------------------------------------------------------------------ roles
    def _role(self, device_id: str) -> Role:
        cfg = self.cfg
        if device_id == cfg.rain_gauge:
            return "rain"
        if cfg.turbidity_pair is not None and device_id == cfg.turbidity_pair.upstream:
            return "turbidity_upstream"
        if cfg.turbidity_pair is not None and device_id == cfg.turbidity_pair.downstream:
            return "turbidity_downstream"
        if cfg.basin is not None and device_id == cfg.basin.device:
            return "basin_level"
        return "other"

    # ------------------------------------------------------------------ rain
    def counter_at(self, t: datetime, width_bits: int = 16) -> int:
        """The gauge's cumulative counter at ``t``: (counter_offset + tips ≤ t) mod 2**width_bits."""
        return self.tips.counter_at(t, self.scenario.rain.counter_offset, width_bits)

    def rain_depth_in(self, t: datetime) -> Fraction:
        """Exact cumulative scenario rain (in) at ``t``."""
        return self.tips.depth_in_until(t)

    # ------------------------------------------------------------------ turbidity
    def _wave(self, t: datetime, a_min: float, b_min: float) -> float:
        s = (t - self.scenario.start).total_seconds() / 60.0
        return 0.6 * math.sin(2 * math.pi * s / a_min) + 0.4 * math.sin(2 * math.pi * s / b_min)

    def upstream_ntu(self, t: datetime) -> float:
        """Background turbidity (NTU): steady with a small deterministic variation."""
        spec = self.scenario.turbidity
        return spec.background_ntu + spec.variation_ntu * self._wave(t, spec.period_a_min, spec.period_b_min)

    def plume_ntu(self, t: datetime) -> float:
        """The rain-driven plume added downstream (NTU); see :class:`TurbiditySpec`."""
        spec = self.scenario.turbidity
        weighted_tips = self.tips.decayed_sum(t, self._window, self._decay)
        return spec.gain_ntu_per_in_h * weighted_tips * self._res_in / self._window_h

    def downstream_ntu(self, t: datetime) -> float:
        """Compliance-probe turbidity (NTU) = background + offset + plume."""
        return self.upstream_ntu(t) + self.scenario.turbidity.downstream_offset_ntu + self.plume_ntu(t)

    def water_temperature_c(self, t: datetime) -> float:
        """Water temperature (°C), a slow deterministic swing."""
        spec = self.scenario.turbidity
        hours = (t - self.scenario.start).total_seconds() / 3600.0
        return spec.water_temperature_c + spec.temperature_variation_c * math.sin(2 * math.pi * hours / 24.0)

    # ------------------------------------------------------------------ basin
    def _basin_setup(self) -> None:
        self._sediment_depth_by_tips: dict[int, float] = {}
        basin = self.cfg.basin
        self._volume = volume_function(basin) if basin is not None else None
        if basin is None or self._volume is None:
            self.design_volume_ft3 = 0.0
            return
        self.design_height_ft = basin.design_height
        self.design_volume_ft3 = self._volume(self.design_height_ft)
        self.initial_sediment_depth_ft = self.sediment_depth_ft(self.scenario.start)
        level = self.profiles[basin.device].level
        if level is not None and level.kind == "distance_down" and basin.sensor_mount_height_ft is None:
            raise ValueError(f"basin {basin.id!r}: sensor_mount_height_ft is required for a distance-down sensor")

    def sediment_fraction(self, t: datetime) -> float:
        """Fraction of the design volume V(H) lost to sediment at ``t`` (capped at 1)."""
        spec = self.scenario.sediment
        return min(1.0, spec.initial_fraction + spec.fraction_per_in * float(self.rain_depth_in(t)))

    def sediment_depth_ft(self, t: datetime) -> float:
        """Sediment surface height above the basin floor (ft): solves V(d) = fraction · V(H).

        Raises:
            ValueError: the site has no basin.
        """
        if self._volume is None:
            raise ValueError("the site has no basin")
        tips = self.tips.tips_until(t)  # the depth changes only with a tip: solved once per tip count
        depth = self._sediment_depth_by_tips.get(tips)
        if depth is None:
            target = self.sediment_fraction(t) * self.design_volume_ft3
            depth = self._sediment_depth_by_tips[tips] = solve_depth_ft(self._volume, target, self.design_height_ft)
        return depth

    def distance_mm(self, t: datetime) -> float:
        """A distance-down sensor's reading (mm): mount height − sediment depth (1 ft = 0.3048 m)."""
        basin = self.cfg.basin
        if basin is None or basin.sensor_mount_height_ft is None:
            raise ValueError("distance needs a basin with sensor_mount_height_ft")
        return (basin.sensor_mount_height_ft - self.sediment_depth_ft(t)) * M_PER_FT * 1000.0

    def water_depth_m(self, t: datetime) -> float:
        """Water depth above a submersible sensor (m); see :class:`WaterSpec`."""
        spec = self.scenario.water
        tips = self.tips.decayed_sum(t, timedelta(0), timedelta(hours=spec.drain_h))
        return spec.base_depth_m + spec.rise_m_per_in * tips * self._res_in

    def pressure_bar(self, t: datetime) -> float:
        """Gauge pressure (bar) of the water column: ρ·g·depth / 10⁵ (sensors.md)."""
        return RHO_WATER_KG_M3 * G_M_PER_S2 * self.water_depth_m(t) / 1e5

    # ------------------------------------------------------------------ dispatch
    def value(self, device_id: str, quantity: str, t: datetime) -> float:
        """What ``device_id`` would read for ``quantity`` at ``t`` (engineering units of its profile).

        Raises:
            KeyError: unknown device or a quantity this simulator does not model.
        """
        role = self.roles[device_id]
        profile = self.profiles[device_id]
        if profile.counter is not None and quantity == profile.counter.quantity:
            return float(self.counter_at(t, profile.counter.width_bits))
        if quantity == "turbidity":
            return self.downstream_ntu(t) if role == "turbidity_downstream" else self.upstream_ntu(t)
        if quantity == "temperature":
            return self.water_temperature_c(t)
        if quantity == "device_error":
            return 0.0
        if quantity == "distance":
            return self.distance_mm(t)
        if quantity == "pressure":
            return self.pressure_bar(t)
        raise KeyError(f"device {device_id!r}: no simulation for quantity {quantity!r}")
