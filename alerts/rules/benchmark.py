"""Benchmarks on field samples per discharge point: a turbidity (NTU), transparency-tube (cm) or pH
sample beyond a level opens the corrective actions a permit sets, each with its deadline.

Law: Washington Construction Stormwater General Permit (CSWGP), Special Condition S4.C
(turbidity/transparency benchmark 25 NTU / 33 cm; 250 NTU / 6 cm high-turbidity reporting level,
S5.A: notify Ecology within 24 hours); docs/reference/permits/wa-cswgp.md says which values the
text in hand confirms. Any permit that writes "a sample above X requires A within N days" fits.

The design: docs/rules.md ("The rule modules", `alerts/rules/benchmark.py`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from stormwatch.alerts.rules import occurrence
from stormwatch.alerts.rules.daily_average import day_start
from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import BuildError, EventKindSpec, RuleContext, RuleKind
from stormwatch.alerts.rules.routine import add_local_days
from stormwatch.config import LEGACY_POINT, DischargePoint
from stormwatch.contract import Event, EventDetails, Reading, manual_inspector
from stormwatch.display import local_time

log = logging.getLogger(__name__)

#: A level's key -> the reading's ``(quantity, unit)``.
SAMPLE_QUANTITIES: dict[str, tuple[str, str]] = {
    "turbidity_ntu": ("turbidity", "NTU"),
    "transparency_cm": ("transparency", "cm"),
    "ph": ("ph", "[pH]"),
}
#: Where a point's probe for a quantity is named (manual readings need none).
_PROBES = {"turbidity": "downstream", "ph": "ph_probe"}

LevelKey = Literal["turbidity_ntu", "transparency_cm", "ph"]
SamplesFrom = Literal["manual", "any"]

_COMPARISON = re.compile(r"^\s*(<=|>=|<|>)\s*(\d+(?:\.\d+)?)\s*$")


def parse_comparison(text: str) -> tuple[str, float]:
    """``"> 25"`` -> ``(">", 25.0)``.

    Raises:
        ValueError: not ``<``, ``<=``, ``>`` or ``>=`` followed by a non-negative decimal.
    """
    m = _COMPARISON.match(str(text))
    if not m:
        raise ValueError(f"{text!r}: a comparison like '> 25' or '<= 6' (<, <=, >, >= and a number)")
    return m.group(1), float(m.group(2))


def compare(value: float, comparison: str) -> bool:
    """Whether ``value`` satisfies ``comparison`` (``"> 25"``), exactly as recorded."""
    op, limit = parse_comparison(comparison)
    if op == ">":
        return value > limit
    if op == ">=":
        return value >= limit
    if op == "<":
        return value < limit
    return value <= limit


def level_key(quantity: str, unit: str) -> str | None:
    """The level key of a reading's quantity and unit (``turbidity``/``NTU`` -> ``turbidity_ntu``), or ``None``."""
    for key, spec in SAMPLE_QUANTITIES.items():
        if spec == (quantity, unit):
            return key
    return None


def level_text(level: Mapping[str, str]) -> str:
    """``"turbidity > 25 NTU or transparency < 33 cm"``."""
    parts = []
    for key, comparison in level.items():
        quantity, unit = SAMPLE_QUANTITIES[key]
        op, limit = parse_comparison(comparison)
        name = "pH" if quantity == "ph" else quantity
        parts.append(f"{name} {op} {limit:g}" + ("" if quantity == "ph" else f" {unit}"))
    return " or ".join(parts)


class Level(RootModel[dict[str, str]]):
    """A level per sample quantity: ``{turbidity_ntu: "> 25", transparency_cm: "< 33"}`` (at least one
    key of :data:`SAMPLE_QUANTITIES`, each a comparison); shown as ``turbidity > 25 NTU or
    transparency < 33 cm``."""

    model_config = ConfigDict(frozen=True)

    @field_validator("root")
    @classmethod
    def _comparisons(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("give at least one of " + ", ".join(SAMPLE_QUANTITIES))
        unknown = sorted(set(value) - set(SAMPLE_QUANTITIES))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a sample quantity (one of {', '.join(SAMPLE_QUANTITIES)})")
        for comparison in value.values():
            parse_comparison(comparison)
        return value

    def __str__(self) -> str:
        return level_text(self.root)

    def keys(self) -> list[str]:
        """The level's keys (``turbidity_ntu``, ...)."""
        return list(self.root)

    def holds(self, key: str, value: float) -> bool:
        """Whether a sample of ``key`` at ``value`` satisfies the level (``False`` for a key it lacks)."""
        comparison = self.root.get(key)
        return comparison is not None and compare(value, comparison)


class BenchmarkAction(BaseModel):
    """One corrective action a permit sets for a sample beyond the level.

    Attributes:
        id: short name, part of the work order's occurrence (``swppp_review``).
        what: what is to be done, for the work order.
        within_hours: due this long after the sample (``None``: ``within_days``).
        within_days: due at the end of the local calendar day this many days after the sample's date.
        repeat: ``excursion`` (once while the point stays beyond the level) or ``day`` (once per local
            day with a sample beyond it).
        citation: the action's own section, if it differs from the rule's.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    what: str = Field(min_length=1)
    within_hours: float | None = Field(default=None, gt=0)
    within_days: int | None = Field(default=None, gt=0)
    repeat: Literal["excursion", "day"] = "excursion"
    citation: str = ""

    @model_validator(mode="after")
    def _one_deadline(self) -> BenchmarkAction:
        if (self.within_hours is None) == (self.within_days is None):
            raise ValueError(f"action {self.id}: give within_hours or within_days (one of them)")
        return self

    def due(self, sampled: datetime, tz: ZoneInfo) -> datetime:
        """The deadline of this action for a sample at ``sampled`` (UTC)."""
        if self.within_hours is not None:
            return sampled + timedelta(hours=self.within_hours)
        assert self.within_days is not None
        return add_local_days(day_start(sampled, tz), self.within_days + 1, tz)

    def deadline_text(self) -> str:
        if self.within_hours is not None:
            return f"within {self.within_hours:g} h of the sample"
        return f"within {self.within_days} days of the sample's date"


class Actions(RootModel[tuple[BenchmarkAction, ...]]):
    """The corrective actions of a benchmark (ids unique); shown as ``swppp_review within 7 days of the
    sample's date, bmps within 10 days of the sample's date``."""

    model_config = ConfigDict(frozen=True)

    @field_validator("root")
    @classmethod
    def _unique(cls, value: tuple[BenchmarkAction, ...]) -> tuple[BenchmarkAction, ...]:
        ids = [a.id for a in value]
        if len(ids) != len(set(ids)):
            raise ValueError(f"action ids must be unique, got {ids}")
        return value

    def __str__(self) -> str:
        return ", ".join(f"{a.id} {a.deadline_text()}" for a in self.root) or "none"


class BenchmarkRule(RuleParams):
    """A benchmark on field samples per discharge point.

    Attributes:
        exceeds: the :class:`Level` a sample exceeds (``{turbidity_ntu: "> 25", transparency_cm: "< 33"}``).
        samples_from: ``manual`` (recorded field samples only) or ``any`` (also the point's probes).
        actions: what a sample beyond the level requires, each with its deadline (none: the
            ``benchmark_exceeded`` events only).

    Raises (at pack load):
        ValueError: an unknown key, a malformed comparison, an action without exactly one deadline,
            two actions with one id.
    """

    kind: Literal["benchmark"]
    exceeds: Level
    samples_from: SamplesFrom = "any"
    actions: Actions = Actions(())


class BenchmarkDetails(EventDetails):
    """Details of the benchmark events.

    Attributes:
        discharge_point: the point's id (absent for a site file's one ``turbidity_pair``).
        quantity: ``turbidity``, ``transparency`` or ``ph``.
        value: the sample's value in ``unit``.
        unit: ``NTU``, ``cm`` or ``[pH]``.
        level: the rule's level (``turbidity > 25 NTU or transparency < 33 cm``).
        source: ``manual`` (a recorded field sample; the message names the inspector) or the probe's id.
        action: the corrective action (``benchmark_action_due``), else absent.
    """

    discharge_point: str | None = None
    quantity: str
    value: float
    unit: str
    level: str
    source: str
    action: str | None = None

    def summary(self, tz: ZoneInfo) -> str:
        where = f"{self.discharge_point}: " if self.discharge_point else ""
        name = "pH" if self.quantity == "ph" else self.quantity
        what = f" -> {self.action}" if self.action else ""
        return f"{where}{name} {self.value:g} {self.unit} ({self.level}){what}"


def point_sources(ctx: RuleContext, point: DischargePoint, keys: list[str], samples_from: str,
                  ) -> dict[tuple[str, str], str]:
    """``(device, quantity) -> source`` of a point's samples for the level ``keys``: the manual readings
    recorded against the point's id (source ``manual``) and, with ``samples_from: any``, its probes
    (source = the probe's id).

    Raises:
        BuildError: a probe that reports the quantity in another unit than the level's.
    """
    out: dict[tuple[str, str], str] = {}
    for key in keys:
        quantity, unit = SAMPLE_QUANTITIES[key]
        out[(point.id, quantity)] = "manual"
        field = _PROBES.get(quantity)
        probe = getattr(point, field) if field and samples_from == "any" else None
        if probe is None:
            continue
        reported = ctx.profile(probe).quantities().get(quantity)
        if reported is None:
            continue
        if reported != unit:
            raise BuildError(f"{ctx.rule_id}: discharge point {point.id}'s probe {probe!r} reports {quantity} in "
                             f"{reported}; the level is in {unit} (samples_from: manual leaves probes out)")
        out[(probe, quantity)] = probe
    return out


class BenchmarkState:
    """One benchmark rule at one discharge point.

    Args:
        site: site id.
        rule_id: pack rule id.
        params: the pack entry.
        tz: the site's zone (local days).
        sources: ``(device, quantity) -> source`` (:func:`point_sources`).
        point: the point's id named in events (``None``: a site file's one ``turbidity_pair``).
        occurrence_key: the point's id in occurrences (always set).
    """

    def __init__(self, site: str, rule_id: str, params: BenchmarkRule, tz: ZoneInfo,
                 sources: dict[tuple[str, str], str], point: str | None, occurrence_key: str) -> None:
        self.site = site
        self.rule_id = rule_id
        self.params = params
        self.tz = tz
        self.sources = sources
        self.point = point
        self.key = occurrence_key
        self.next_due: datetime | None = None  # time alone emits nothing
        self._excursion = False
        self._day: str | None = None  # the local day of the latest sample
        self._day_samples = 0
        self._day_exceeded = False
        self._noted_day: str | None = None  # local day of the last benchmark_exceeded
        self._acted: dict[str, str] = {}  # action id -> local day it was last opened

    def wants(self, reading: Reading) -> bool:
        return (reading.device, reading.quantity) in self.sources

    def advance_to(self, t: datetime) -> list[Event]:
        return []

    def feed(self, reading: Reading) -> list[Event]:
        source = self.sources.get((reading.device, reading.quantity))
        if source is None:
            return []
        if reading.flags:
            return []  # a flagged probe reading is not a sample (QC)
        key = level_key(reading.quantity, reading.unit)
        if key is None or key not in self.params.exceeds.root:
            if key is None:
                log.warning("%s: %s ignores %s/%s in %s (no level in that unit)", self.site, self.rule_id,
                            reading.device, reading.quantity, reading.unit)
            return []
        value = float(reading.value)
        day = reading.time.astimezone(self.tz).date().isoformat()
        if day != self._day:
            if self._day_samples and not self._day_exceeded:
                self._excursion = False  # a whole local day of samples within the level
            self._day, self._day_samples, self._day_exceeded = day, 0, False
        self._day_samples += 1
        if not self.params.exceeds.holds(key, value):
            if source == "manual":
                self._excursion = False  # a recorded sample within the level ends it at once
            return []
        self._day_exceeded = True
        started = not self._excursion
        self._excursion = True
        out: list[Event] = []
        if started or day != self._noted_day:
            self._noted_day = day
            out.append(self._event("benchmark_exceeded", reading, source, None, started))
        for action in self.params.actions.root:
            if self._acted.get(action.id) == day:
                continue
            if action.repeat == "excursion" and not started and action.id in self._acted:
                continue
            self._acted[action.id] = day
            out.append(self._event("benchmark_action_due", reading, source, action, started))
        return out

    def _event(self, kind: str, reading: Reading, source: str, action: BenchmarkAction | None,
               started: bool) -> Event:
        p = self.params
        quantity, unit = reading.quantity, reading.unit
        name = "pH" if quantity == "ph" else quantity
        value = float(reading.value)
        where = f"discharge point {self.point}: " if self.point else ""
        inspector = manual_inspector(reading)
        by = f"sampled by {inspector}" if inspector else ("manual sample" if source == "manual" else f"probe {source}")
        level = str(p.exceeds)
        sample = (f"{name} {value:g}{'' if quantity == 'ph' else ' ' + unit} at {local_time(reading.time, self.tz)} "
                  f"({by})")
        details: dict[str, Any] = {"discharge_point": self.point, "quantity": quantity, "value": value, "unit": unit,
                                   "level": level, "source": source}
        day = reading.time.astimezone(self.tz).date().isoformat()
        if action is None:
            again = "" if started else " (still beyond it)"
            return Event(kind=kind, site=self.site, event_time=reading.time, rule=self.rule_id, citation=p.citation,
                         occurrence=occurrence(self.rule_id, reading.time, self.key),
                         message=f"{where}{sample} is beyond the benchmark ({level}){again}",
                         details=BenchmarkDetails(**details), evidence=[reading.to_wire()])
        due = action.due(reading.time, self.tz)
        return Event(kind=kind, site=self.site, event_time=reading.time, rule=self.rule_id,
                     citation=action.citation or p.citation, occurrence=f"{self.rule_id}:{self.key}:{action.id}:{day}",
                     due_at=due,
                     message=f"{where}{sample} is beyond the benchmark ({level}): {action.what} "
                             f"({action.deadline_text()}) by {local_time(due, self.tz)}",
                     details=BenchmarkDetails(**details, action=action.id), evidence=[reading.to_wire()])


def build(ctx: RuleContext) -> list[BenchmarkState]:
    """One state per discharge point (its manual samples and, with ``samples_from: any``, its probes).

    Raises:
        BuildError: see :func:`point_sources`.
    """
    params = ctx.params
    assert isinstance(params, BenchmarkRule)
    legacy = ctx.cfg.turbidity_pair is not None
    states = [BenchmarkState(ctx.site, ctx.rule_id, params, ctx.cfg.site.tz,
                             point_sources(ctx, point, params.exceeds.keys(), params.samples_from),
                             None if legacy else point.id, LEGACY_POINT if legacy else point.id)
              for point in ctx.cfg.points]
    if not states:
        log.info("%s: %s (benchmark) has no discharge point to watch", ctx.site, ctx.rule_id)
    return states


KIND = RuleKind(
    kind="benchmark", params=BenchmarkRule, build=build,
    summary="a field sample (NTU, transparency cm, pH) beyond a benchmark at a discharge point opens the permit's "
            "corrective actions, each with its deadline",
    events=(
        EventKindSpec("benchmark_exceeded", BenchmarkDetails,
                      "a discharge point's sample is beyond the benchmark (the first of an excursion, then the first "
                      "of each local day)"),
        EventKindSpec("benchmark_action_due", BenchmarkDetails,
                      "a corrective action the benchmark requires, due by due_at (opens a benchmark_response work "
                      "order)", opens="benchmark_response"),
    ),
)
