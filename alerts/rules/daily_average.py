"""Numeric action levels on daily averages (pH, turbidity) per discharge point, on local calendar days.

Law: California Construction General Permit (Order WQ 2022-0057-DWQ): numeric action levels (NALs)
for turbidity (250 NTU) and pH (below 6.5 or above 8.5), compared with the **daily average** of the
samples of one discharge point, computed from at least three samples a day
(docs/reference/permits/ca-cgp-2022.md; the pack says which values its text in hand confirms).

The design: docs/rules.md ("The rule modules", `alerts/rules/daily_average.py`).
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, time
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, model_validator

from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import BuildError, EventKindSpec, RuleContext, RuleKind
from stormwatch.alerts.rules.routine import add_local_days
from stormwatch.config import LEGACY_POINT, DischargePoint
from stormwatch.contract import Event, EventDetails, Reading
from stormwatch.display import local_day, local_time
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: The unit a quantity's action level is written in, and how a reading gives it.
UNITS: dict[str, str] = {"turbidity": "NTU", "ph": "[pH]"}


class DailyAverageRule(RuleParams):
    """A numeric action level on the daily average of one quantity at each discharge point.

    Attributes:
        quantity: ``turbidity`` (NTU) or ``ph`` (``[pH]``).
        lower: the average must not fall below it (pH 6.5), or ``None``.
        upper: the average must not exceed it (turbidity 250 NTU, pH 8.5), or ``None``.
        min_samples_per_day: fewer clean samples in a local day make the day undetermined (3).
        average: ``arithmetic`` mean of the values, or ``hydrogen_ion`` (pH only: the pH of the mean
            hydrogen-ion activity).
        report_within_days: the exceedance report is due this many local calendar days after the end
            of the day that exceeded.

    Raises (at pack load):
        ValueError: no level given, ``lower >= upper``, or ``hydrogen_ion`` on turbidity.
    """

    kind: Literal["daily_average"]
    quantity: Literal["turbidity", "ph"]
    lower: float | None = None
    upper: float | None = None
    min_samples_per_day: int = Field(default=3, ge=1)
    average: Literal["arithmetic", "hydrogen_ion"] = "arithmetic"
    report_within_days: int = Field(default=10, gt=0)

    @model_validator(mode="after")
    def _levels(self) -> DailyAverageRule:
        if self.lower is None and self.upper is None:
            raise ValueError("give the action level: lower, upper or both")
        if self.lower is not None and self.upper is not None and self.lower >= self.upper:
            raise ValueError(f"lower ({self.lower:g}) must be below upper ({self.upper:g})")
        if self.average == "hydrogen_ion" and self.quantity != "ph":
            raise ValueError("average: hydrogen_ion is for pH only")
        return self

    @property
    def unit(self) -> str:
        """The unit its readings must carry (:data:`UNITS`)."""
        return UNITS[self.quantity]

    def level_text(self) -> str:
        """``"6.5-8.5 [pH]"``, ``"250 NTU"`` (upper only), ``"above 6.5 [pH]"`` (lower only)."""
        if self.lower is not None and self.upper is not None:
            return f"{self.lower:g}-{self.upper:g} {self.unit}"
        if self.upper is not None:
            return f"{self.upper:g} {self.unit}"
        return f"at least {self.lower:g} {self.unit}"


class DailyAverageDetails(EventDetails):
    """Details of the daily-average events.

    Attributes:
        discharge_point: the point's id (absent for a site file's one ``turbidity_pair``).
        quantity: ``turbidity`` or ``ph``.
        day: the local calendar day (``YYYY-MM-DD``, the site's zone).
        samples: clean samples that day.
        daily_average: their average in ``unit`` (``None`` when undetermined).
        unit: ``NTU`` or ``[pH]``.
        lower, upper: the action level.
    """

    discharge_point: str | None = None
    quantity: str
    day: str
    samples: int = Field(ge=0)
    daily_average: float | None = None
    unit: str
    lower: float | None = None
    upper: float | None = None

    def summary(self, tz: ZoneInfo) -> str:
        where = f"{self.discharge_point}: " if self.discharge_point else ""
        name = "pH" if self.quantity == "ph" else self.quantity
        if self.daily_average is None:
            return f"{where}{name} on {self.day}: {self.samples} sample{'s' if self.samples != 1 else ''}"
        return f"{where}{name} on {self.day}: average {self.daily_average:.2f} {self.unit} of {self.samples} samples"


def day_start(t: datetime, tz: ZoneInfo) -> datetime:
    """The start (UTC) of the local calendar day of ``tz`` that holds ``t`` (local midnight)."""
    local = t.astimezone(tz)
    return datetime.combine(local.date(), time(0), tzinfo=tz).astimezone(UTC)


class DailyAverageState:
    """One quantity's daily average at one discharge point.

    Args:
        site: site id.
        rule_id: pack rule id.
        params: the pack entry.
        tz: the site's zone (its local days).
        devices: the device ids whose readings are samples (the point's probe and the point's own id,
            under which manual samples are recorded).
        point: the discharge point's id named in events (``None``: a site file's one ``turbidity_pair``).
        occurrence_key: the point's id in occurrences (always set, so two points never share one).
    """

    def __init__(self, site: str, rule_id: str, params: DailyAverageRule, tz: ZoneInfo, devices: frozenset[str],
                 point: str | None, occurrence_key: str) -> None:
        self.site = site
        self.rule_id = rule_id
        self.params = params
        self.tz = tz
        self.devices = devices
        self.point = point
        self.key = occurrence_key
        self.next_due: datetime | None = None  # the open day's end
        self._day: datetime | None = None
        self._values: list[float] = []
        self._flagged = 0
        self._wrong_unit = 0

    def wants(self, reading: Reading) -> bool:
        return reading.quantity == self.params.quantity and reading.device in self.devices

    def feed(self, reading: Reading) -> list[Event]:
        out = self.advance_to(reading.time)
        if self._day is None:
            self._day = day_start(reading.time, self.tz)
            self.next_due = add_local_days(self._day, 1, self.tz)
        if reading.flags:
            self._flagged += 1
        elif reading.unit != self.params.unit:
            self._wrong_unit += 1
            log.warning("%s: %s ignores %s/%s %s in %s (its action level is in %s)", self.site, self.rule_id,
                        reading.device, reading.quantity, format_time(reading.time), reading.unit, self.params.unit)
        else:
            self._values.append(float(reading.value))
        return out

    def advance_to(self, t: datetime) -> list[Event]:
        if self._day is None or self.next_due is None or t < self.next_due:
            return []
        out = self._close(self._day, self.next_due)
        self._day, self.next_due = None, None
        self._values, self._flagged, self._wrong_unit = [], 0, 0
        return out

    def average(self, values: list[float]) -> float:
        """The day's average (:class:`DailyAverageRule` ``average``)."""
        if self.params.average == "hydrogen_ion":
            return -math.log10(math.fsum(10.0 ** -v for v in values) / len(values))
        return math.fsum(values) / len(values)

    def _close(self, start: datetime, end: datetime) -> list[Event]:
        p, n = self.params, len(self._values)
        local = start.astimezone(self.tz).date()
        day, shown = local.isoformat(), local_day(local)  # the details' day (machine) and the message's
        where = f"discharge point {self.point}: " if self.point else ""
        name = "pH" if p.quantity == "ph" else p.quantity
        left_out = []
        if self._flagged:
            left_out.append(f"{self._flagged} flagged by quality control")
        if self._wrong_unit:
            left_out.append(f"{self._wrong_unit} not in {p.unit}")
        also = f" ({', '.join(left_out)} not counted)" if left_out else ""
        details: dict[str, Any] = {"discharge_point": self.point, "quantity": p.quantity, "day": day, "samples": n,
                                   "unit": p.unit, "lower": p.lower, "upper": p.upper}
        if n == 0:
            return []
        if n < p.min_samples_per_day:
            plural = "s" if n != 1 else ""
            return [Event(kind="nal_undetermined", site=self.site, event_time=end, rule=self.rule_id,
                          citation=p.citation, occurrence=f"nal:{self.key}:{p.quantity}:{day}",
                          message=f"{where}{name} daily average on {shown} undetermined: {n} sample{plural}{also}, "
                                  f"at least {p.min_samples_per_day} needed (not a compliant day)",
                          details=DailyAverageDetails(**details))]
        avg = self.average(self._values)
        above = p.upper is not None and avg > p.upper
        below = p.lower is not None and avg < p.lower
        if not (above or below):
            return []
        due = add_local_days(end, p.report_within_days, self.tz)
        side = f"above {p.upper:g}" if above else f"below {p.lower:g}"
        return [Event(kind="nal_exceedance", site=self.site, event_time=end, rule=self.rule_id, citation=p.citation,
                      occurrence=f"nal:{self.key}:{p.quantity}:{day}", due_at=due,
                      message=f"{where}{name} daily average on {shown} {avg:.2f} {p.unit} of {n} samples{also} is "
                              f"{side} (action level {p.level_text()}): exceedance report due by "
                              f"{local_time(due, self.tz)}",
                      details=DailyAverageDetails(**details, daily_average=avg))]


def _probe(point: DischargePoint, quantity: str) -> str | None:
    return point.downstream if quantity == "turbidity" else point.ph_probe


def build(ctx: RuleContext) -> list[DailyAverageState]:
    """One state per discharge point: its probe for the quantity (if any) and its manual samples.

    Raises:
        BuildError: a point's probe reports the quantity in another unit than the action level's
            (FNU against an NTU level).
    """
    params = ctx.params
    assert isinstance(params, DailyAverageRule)
    legacy = ctx.cfg.turbidity_pair is not None
    states = []
    for point in ctx.cfg.points:
        probe = _probe(point, params.quantity)
        devices = {point.id}
        if probe is not None:
            unit = ctx.profile(probe).quantities().get(params.quantity)
            if unit != params.unit:
                raise BuildError(f"{ctx.rule_id} ({params.quantity} action level in {params.unit}): discharge point "
                                 f"{point.id}'s probe {probe!r} reports {params.quantity} in {unit}; the daily average "
                                 f"must be of {params.unit} readings")
            devices.add(probe)
        states.append(DailyAverageState(ctx.site, ctx.rule_id, params, ctx.cfg.site.tz, frozenset(devices),
                                        None if legacy else point.id, LEGACY_POINT if legacy else point.id))
    if not states:
        log.info("%s: %s (%s daily average) has no discharge point to watch", ctx.site, ctx.rule_id, params.quantity)
    return states


KIND = RuleKind(
    kind="daily_average", params=DailyAverageRule, build=build,
    summary="numeric action level on the local-day average of pH or turbidity at each discharge point",
    events=(
        EventKindSpec("nal_exceedance", DailyAverageDetails,
                      "a discharge point's daily average was outside the numeric action level: the report is due by "
                      "due_at (opens a nal_report work order)", opens="nal_report"),
        EventKindSpec("nal_undetermined", DailyAverageDetails,
                      "a discharge point's day had samples but fewer than the permit's minimum for a daily average"),
    ),
)
