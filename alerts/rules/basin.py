"""R3: remove sediment when the trap's design capacity is reduced by 50 % (by volume).

Law: Ch. 133 §133-7A(1), Ch. 196 §196-9A ("Sediment shall be removed from sediment traps or
sediment ponds whenever their design capacity has been reduced by 50%"). Operational form
(``docs/reference/rules.md`` R3): capacity is a *volume*; lost = V(s) / V(H)
(:mod:`stormwatch.alerts.geometry`), s the sediment surface above the floor.

Sediment depth from the basin's level device, as its profile's ``level`` spec says
(``docs/reference/sensors.md``).

The design: docs/rules.md ("The rule modules", `alerts/rules/basin.py`).
"""

from __future__ import annotations

import logging
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo

from pydantic import Field

from stormwatch.alerts.geometry import StageStorage, lost_capacity, stage_storage_of
from stormwatch.alerts.rules import Chunk, RuleTrace, occurrence
from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import BuildError, EventKindSpec, Role, RuleContext, RuleKind
from stormwatch.config import M_PER_FT, Basin
from stormwatch.contract import Event, EventDetails, EventKind, Reading
from stormwatch.display import UTC_ZONE, local_time
from stormwatch.profiles import LevelSpec
from stormwatch.stores.base import ROW_FLAGS, ROW_TIME, ROW_UNIT, ROW_VALUE
from stormwatch.stores.rows import engine_order, time_of_us, us_of
from stormwatch.stores.seriesrows import SeriesRows
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

_US = timedelta(microseconds=1)


class BasinRule(RuleParams):
    """R3: cleanout when design capacity is reduced by 50 % by volume (rules.md R3).

    Attributes:
        cleanout_fraction: lost fraction of V(H) that makes a cleanout due.
        warning_fraction: lost fraction that raises an early warning.
        settle_readings: fewest readings in the settling window before a median is trusted.
        settle_minutes: settling window length (median over it).
        cleanout_within_hours: due time of the cleanout work order (the codes say "whenever";
            our default 72 h, Minnesota's practice).
        water_density_kg_m3: ρ for pressure-depth sensors (depth = P·10⁵/(ρ·g)).
    """

    kind: Literal["basin"]
    cleanout_fraction: float = Field(default=0.5, gt=0, le=1)
    warning_fraction: float = Field(default=0.4, gt=0, le=1)
    settle_readings: int = Field(default=3, ge=1)
    settle_minutes: float = Field(default=30.0, gt=0)
    cleanout_within_hours: float = Field(default=72.0, gt=0)
    water_density_kg_m3: float = Field(default=1000.0, gt=0)

#: Standard gravity, m/s² (sensors.md, Keller: depth = P·10⁵ / (ρ·9.80665)).
G_M_S2 = 9.80665
MM_PER_FT = 304.8
PA_PER_BAR = 1e5
#: Millimetres per unit of a distance reading (a product with 1.0 is the value itself, exactly).
_MM_PER = {"mm": 1.0, "cm": 10.0, "m": 1000.0}
#: Fractions are compared with this tolerance: float rounding only, far below the 1-mm (3.3e-3 ft)
#: resolution of the level sensors.
FRACTION_EPS = 1e-9


class BasinRuleState:
    """R3 for one basin.

    Args:
        site: site id.
        rule_id: pack rule id (``R3``).
        params: the pack's :class:`~stormwatch.alerts.packs.BasinRule`.
        basin: the site's basin (device, mount height).
        level: the level device profile's ``level`` spec.
        storage: the basin's stage–storage relation.
        named: name the basin in every event's details (a site with ``basins``; a site file's one
            ``basin`` names it in messages and occurrences only, as before).

    Raises:
        ValueError: a ``distance_down`` sensor without ``basin.sensor_mount_height_ft``.
    """

    #: containers of values only: a snapshot copies them flat (stormwatch.alerts.statecopy)
    state_flat: ClassVar[frozenset[str]] = frozenset({"_depths", "_recent", "_sorted"})

    def __init__(self, site: str, rule_id: str, params: BasinRule, basin: Basin, level: LevelSpec,
                 storage: StageStorage, named: bool = False, tz: ZoneInfo = UTC_ZONE) -> None:
        if level.kind == "distance_down" and basin.sensor_mount_height_ft is None:
            raise ValueError(f"basin {basin.id}: a distance_down sensor needs basin.sensor_mount_height_ft")
        self.site = site
        self.tz = tz
        self.rule_id = rule_id
        self.params = params
        self.basin = basin
        self.named = named
        self.level = level
        self.storage = storage
        self.settle = timedelta(minutes=params.settle_minutes)
        self._settle_us = self.settle // _US
        #: the usable depths of the last :attr:`settle`, ``(event time in µs since the epoch, ft)``
        self._recent: deque[tuple[int, float]] = deque()
        self._sorted: list[float] = []  # the depths of _recent, sorted (running median)
        self._last_settled: float | None = None
        #: usable depths by (quantity, value, unit): a level sensor repeats its few values
        self._depths: dict[tuple[str, float, str], float] = {}
        self._warned = False
        self._due = False
        self._cycle_start: datetime | None = None
        self.next_due: datetime | None = None  # time alone never emits a basin event
        self.trace: RuleTrace | None = None  # a report's observer (backfill only)

    def wants(self, reading: Reading) -> bool:
        return reading.device == self.basin.device and reading.quantity in (self.level.quantity, "sediment_depth")

    def depth_ft(self, reading: Reading) -> float | None:
        """Sediment depth above the floor (ft) from one reading, or ``None`` if it is not usable."""
        return self.depth_of(reading.quantity, reading.value, reading.unit)

    def depth_of(self, quantity: str, value: float, unit: str) -> float | None:
        """Sediment depth above the floor (ft) from a value of ``quantity`` in ``unit`` (the module
        docstring's conversions), or ``None`` if it is not usable."""
        v = float(value)
        if quantity == "sediment_depth":
            return v / M_PER_FT if unit == "m" else None
        if v in self.level.no_target:
            return None
        if self.level.kind == "distance_down":
            scale = _MM_PER.get(unit)
            if scale is None:
                return None
            assert self.basin.sensor_mount_height_ft is not None
            return self.basin.sensor_mount_height_ft - v * scale / MM_PER_FT
        bar = {"bar": v, "mbar": v / 1000.0, "Pa": v / PA_PER_BAR, "kPa": v / 100.0}.get(unit)
        if bar is None:
            return None
        return bar * PA_PER_BAR / (self.params.water_density_kg_m3 * G_M_S2) / M_PER_FT

    def feed(self, reading: Reading) -> list[Event]:
        # the fields from the model's __dict__: a pydantic model's attribute goes through its
        # __getattr__ hook (about 4x a plain object's); this is the hot path of every level reading
        fields = reading.__dict__
        depth = self._depths.get((fields["quantity"], fields["value"], fields["unit"]))
        if depth is not None and not fields["flags"]:
            return self._settle(us_of(fields["time"]), depth)
        return self._feed_new(reading)

    def quick_feeder(self, device: str, quantity: str) -> Callable[..., list[Event] | None] | None:
        """What takes a clean reading of ``device``'s ``quantity`` from a cycle's columns (the engine's
        ``feed_cycle``): a value whose depth is known, or ``None`` (nothing done) for :meth:`feed`."""
        if device != self.basin.device or quantity not in (self.level.quantity, "sediment_depth"):
            return None
        depths, settle = self._depths, self._settle

        def quick(t: datetime, us: int, value: float, unit: str, tip_size: str | None,
                  gateway: str) -> list[Event] | None:
            depth = depths.get((quantity, value, unit))
            return None if depth is None else settle(us, depth)
        return quick

    def _feed_new(self, reading: Reading) -> list[Event]:
        """:meth:`feed` of a flagged reading or a value not seen before."""
        if reading.flags:
            log.info("%s: basin reading at %s flagged %s: skipped", self.site, format_time(reading.time),
                     ",".join(reading.flags))
            return []
        depth = self.depth_ft(reading)
        if depth is None:
            log.warning("%s: basin reading %s=%r %s at %s is not a usable level: skipped", self.site,
                        reading.quantity, reading.value, reading.unit, format_time(reading.time))
            return []
        if len(self._depths) < 256:
            self._depths[(reading.quantity, reading.value, reading.unit)] = depth
        return self._settle(us_of(reading.time), depth)

    def replay(self, chunk: Chunk) -> list[Event]:
        """The level device's rows of a backfill chunk (:class:`~stormwatch.alerts.rules.Chunk`): what
        :meth:`feed` gives for each, in order (time alone never emits a basin event, so the engine's
        ``advance_to`` calls change nothing). Clean rows go straight to the running median; flagged or
        unusable ones through :meth:`feed` (skipped and logged)."""
        device = self.basin.device
        quantities = [self.level.quantity] + (["sediment_depth"] if self.level.quantity != "sediment_depth" else [])
        series = [(q, rows) for q in quantities if (rows := chunk.rows.get((device, q)))]
        if not series:
            return []
        if len(series) > 1:  # both a level and a derived depth (rare): one stream in the engine's order
            merged = sorted(((q, r) for q, rows in series for r in rows), key=lambda x: engine_order(x[1]))
            out: list[Event] = []
            for q, r in merged:
                out += self.feed(chunk.reading(device, q, r))
            return out
        quantity, rows = series[0]
        out = []
        depth_of, settle = self.depth_of, self._settle
        if isinstance(rows, SeriesRows):  # columns: one unit, no flag (nearly every chunk)
            unit, times = rows.unit, rows.times
            by_value: dict[float, float | None] = {}  # a level sensor repeats its few values
            for i, value in enumerate(rows.values):
                if value in by_value:
                    depth = by_value[value]
                else:
                    depth = by_value[value] = depth_of(quantity, value, unit)
                if depth is None:
                    out += self.feed(chunk.reading(device, quantity, rows[i]))
                    continue
                found = settle(times[i], depth)
                if found:
                    out += found
            return out
        depths: dict[tuple[float, str], float | None] = {}  # a level sensor repeats its few values
        for row in rows:
            depth = None
            if not row[ROW_FLAGS]:
                key = (row[ROW_VALUE], row[ROW_UNIT])
                if key in depths:
                    depth = depths[key]
                else:
                    depth = depths[key] = depth_of(quantity, *key)
            if depth is None:
                out += self.feed(chunk.reading(device, quantity, row))
                continue
            found = settle(row[ROW_TIME], depth)
            if found:
                out += found
        return out

    def _settle(self, t_us: int, depth: float) -> list[Event]:
        """A usable depth at ``t_us`` (µs since the epoch) into the running median of the last
        :attr:`settle`; the events of a new settled depth."""
        recent = self._recent
        recent.append((t_us, depth))
        edge = t_us - self._settle_us
        if recent[0][0] <= edge and recent[0][1] == depth and recent[1][0] > edge:
            # exactly one depth leaves the window and it equals the new one: the sorted depths, hence the
            # median, are those after the previous reading, which decided already (nothing new)
            recent.popleft()
            return []
        insort(self._sorted, depth)
        while recent[0][0] <= edge:
            del self._sorted[bisect_left(self._sorted, recent.popleft()[1])]
        n = len(self._sorted)
        if n < self.params.settle_readings:
            return []
        mid = n // 2
        settled = self._sorted[mid] if n % 2 else (self._sorted[mid - 1] + self._sorted[mid]) / 2
        if settled == self._last_settled:
            return []  # the same median decides the same (_step is idempotent for a repeated value)
        self._last_settled = settled
        lost = lost_capacity(self.storage, settled)
        t = time_of_us(t_us)
        if self.trace is not None:
            self.trace.basin_settled(t, settled, lost, basin=self.basin.id)
        return self._step(t, settled, lost)

    def advance_to(self, t: datetime) -> list[Event]:
        """Basin events come only from readings (a median needs data); time alone changes nothing."""
        return []

    def _event(self, kind: EventKind, t: datetime, depth: float, lost: float, message: str, **extra: Any) -> Event:
        assert self._cycle_start is not None
        return Event(kind=kind, site=self.site, event_time=t, rule=self.rule_id, citation=self.params.citation,
                     occurrence=occurrence("basin", self._cycle_start, self.basin.id), message=message,
                     details=BasinDetails(lost_capacity=lost, sediment_depth_ft=depth,
                                          basin=self.basin.id if self.named else None),
                     evidence=[{"time": format_time(time_of_us(x)), "sediment_depth_ft": d} for x, d in self._recent],
                     **extra)

    def _step(self, t: datetime, depth: float, lost: float) -> list[Event]:
        p = self.params
        out: list[Event] = []
        if (self._due or self._warned) and lost < p.warning_fraction:
            if self._due:
                out.append(self._event("basin_cleanout_done", t, depth, lost,
                                       f"basin {self.basin.id}: sediment down to {depth:.2f} ft "
                                       f"({lost:.0%} of design volume): cleanout recorded"))
            self._due = self._warned = False
            self._cycle_start = None
            return out
        if lost >= p.warning_fraction - FRACTION_EPS and self._cycle_start is None:
            self._cycle_start = t
        if lost >= p.cleanout_fraction - FRACTION_EPS and not self._due:
            self._due = self._warned = True
            due = t + timedelta(hours=p.cleanout_within_hours)
            out.append(self._event("basin_cleanout_due", t, depth, lost,
                                   f"basin {self.basin.id}: sediment {depth:.2f} ft fills {lost:.1%} of the design "
                                   f"volume (>= {p.cleanout_fraction:.0%}): cleanout due by {local_time(due, self.tz)}",
                                   due_at=due))
        elif lost >= p.warning_fraction - FRACTION_EPS and not self._warned:
            self._warned = True
            out.append(self._event("basin_capacity_warning", t, depth, lost,
                                   f"basin {self.basin.id}: sediment {depth:.2f} ft fills {lost:.1%} of the design "
                                   f"volume (warning at {p.warning_fraction:.0%})"))
        return out


class BasinDetails(EventDetails):
    """Details of the basin events: lost fraction 0..1 of the design storage volume and the settled
    sediment depth above the floor (ft)."""

    lost_capacity: float | None = Field(default=None, ge=0)
    sediment_depth_ft: float | None = None
    basin: str | None = None

    def summary(self, tz: ZoneInfo) -> str:
        if self.lost_capacity is None:
            return self.basin or ""
        text = f"{self.lost_capacity * 100:.1f} % of design storage lost"
        if self.basin:
            text = f"{self.basin}: {text}"
        return text if self.sediment_depth_ft is None else f"{text} (sediment {self.sediment_depth_ft:.2f} ft)"


def build(ctx: RuleContext) -> list[BasinRuleState]:
    """R3 on each of the site's basins and its level device (the profile's ``level`` section)."""
    assert isinstance(ctx.params, BasinRule)
    named = ctx.cfg.basin is None
    states = []
    for basin in ctx.cfg.all_basins:
        profile = ctx.profile(basin.device)
        if profile.level is None:
            raise BuildError(f"basin device {basin.device!r} profile {profile.model!r} has no "
                             "'level' section (how its value becomes a height)")
        try:
            states.append(BasinRuleState(ctx.site, ctx.rule_id, ctx.params, basin, profile.level,
                                         stage_storage_of(basin), named=named, tz=ctx.cfg.site.tz))
        except ValueError as exc:
            raise BuildError(str(exc)) from exc
    return states


KIND = RuleKind(
    kind="basin", params=BasinRule, build=build,
    summary="R3: cleanout when the basin's design storage is 50 % lost by volume (§133-7A(1), §196-9A)",
    roles=(Role("basin", None, "the level device over the sediment basin (basin.device)"),),
    events=(
        EventKindSpec("basin_capacity_warning", BasinDetails, "sediment reached the warning fraction"),
        EventKindSpec("basin_cleanout_due", BasinDetails, "sediment reached the cleanout fraction: due by due_at",
                      opens="basin_cleanout", chart="basin"),
        EventKindSpec("basin_cleanout_done", BasinDetails, "a measured drop below warning after a cleanout"),
    ),
)
