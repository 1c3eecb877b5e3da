"""Sampling obligations per discharge point: a reminder work order for each period in which the site
discharges and the point has no recorded sample yet, completed by the sample recorded there.

Law: Washington Construction Stormwater General Permit, Special Condition S4.C.2 ("sample all
discharge points at least once every calendar week when stormwater (or authorized non-stormwater)
discharges from the site"; "sampling is not required when there is no discharge during a calendar
week") and the daily sampling a sample beyond the benchmark calls for (S4.C.5; which trigger the text
in hand confirms: docs/reference/permits/wa-cswgp.md). Any permit that asks for a sample per
discharge point per period while the site discharges fits: a reminder work order per discharge
point while a qualifying storm discharges, closed by a recorded sample.

The design: docs/rules.md ("The rule modules", `alerts/rules/sampling.py`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator, model_validator

from stormwatch.alerts.rules.benchmark import (
    SAMPLE_QUANTITIES,
    Level,
    LevelKey,
    SamplesFrom,
    level_key,
    point_sources,
)
from stormwatch.alerts.rules.daily_average import day_start
from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import BuildError, EventKindSpec, Role, RuleContext, RuleKind
from stormwatch.alerts.rules.routine import add_local_days
from stormwatch.config import LEGACY_POINT
from stormwatch.contract import Event, EventDetails, Reading, manual_inspector
from stormwatch.display import inches, local_day, local_time
from stormwatch.rain import TipResolution

log = logging.getLogger(__name__)

_WEEKDAYS = {"monday": 0, "sunday": 6}


class SamplingRule(RuleParams):
    """A sampling obligation per discharge point.

    Attributes:
        period: ``week`` (local calendar weeks from ``week_starts``) or ``day``.
        week_starts: ``sunday`` or ``monday``.
        samples: which quantities count as a sample (level keys: ``turbidity_ntu``, ``transparency_cm``, ``ph``).
        samples_from: ``manual`` (recorded field samples) or ``any`` (also the point's probes).
        discharge: ``rain`` (the gauge recorded ``discharge_rain_in`` in the period) or ``always``.
        discharge_rain_in: exact decimal inches of rain in a period that make it a discharge period.
        daily_above: a sample beyond this level puts the point on daily sampling (``None``: never).
        daily_until: a sample meeting this level ends daily sampling (required with ``daily_above``).

    Raises (at pack load):
        ValueError: a bad level, ``daily_above`` without ``daily_until`` (or the reverse) or with
            ``period: day``, a threshold that is not a positive exact decimal.
    """

    kind: Literal["sampling"]
    period: Literal["week", "day"] = "week"
    week_starts: Literal["sunday", "monday"] = "sunday"
    samples: tuple[LevelKey, ...] = Field(default=("turbidity_ntu", "transparency_cm"), min_length=1)
    samples_from: SamplesFrom = "manual"
    discharge: Literal["rain", "always"] = "rain"
    discharge_rain_in: str = "0.01"
    daily_above: Level | None = None
    daily_until: Level | None = None

    @field_validator("discharge_rain_in", mode="before")
    @classmethod
    def _exact(cls, v: object) -> str:
        text = str(v)
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"discharge_rain_in must be an exact decimal like '0.01', got {v!r}") from exc
        if value <= 0:
            raise ValueError("discharge_rain_in must be > 0")
        return text

    @model_validator(mode="after")
    def _daily(self) -> SamplingRule:
        if (self.daily_above is None) != (self.daily_until is None):
            raise ValueError("daily_above and daily_until go together (when daily sampling starts and ends)")
        if self.daily_above is not None and self.period == "day":
            raise ValueError("daily_above escalates a weekly cadence to daily: period is already day")
        return self


class SamplingDetails(EventDetails):
    """Details of the sampling events.

    Attributes:
        discharge_point: the point's id (absent for a site file's one ``turbidity_pair``).
        period: ``week`` or ``day``.
        period_start: the period's first local date (``YYYY-MM-DD``).
        reason: why a sample is due (``rain``, ``gauge_silent``, ``always``, ``daily``), or absent.
        quantity, value, unit: the sample (``sampling_done``).
        daily: the point is on daily sampling after this event.
    """

    discharge_point: str | None = None
    period: str
    period_start: str
    reason: str | None = None
    quantity: str | None = None
    value: float | None = None
    unit: str | None = None
    daily: bool = False

    def summary(self, tz: ZoneInfo) -> str:
        where = f"{self.discharge_point}: " if self.discharge_point else ""
        what = f" {self.quantity} {self.value:g} {self.unit}" if self.quantity and self.value is not None else ""
        return f"{where}{self.period} of {self.period_start}{what}"


def week_start(t: datetime, tz: ZoneInfo, first_weekday: int) -> datetime:
    """The start (UTC) of the local calendar week holding ``t`` (local midnight of ``first_weekday``,
    0 = Monday ... 6 = Sunday)."""
    start = day_start(t, tz)
    back = (start.astimezone(tz).weekday() - first_weekday) % 7
    return add_local_days(start, -back, tz) if back else start


class SamplingState:
    """One sampling obligation at one discharge point.

    Args:
        site: site id.
        rule_id: pack rule id.
        params: the pack entry.
        tz: the site's zone.
        sources: ``(device, quantity) -> source`` of the point's samples.
        point: the point's id named in events (``None``: a site file's one ``turbidity_pair``).
        occurrence_key: the point's id in occurrences.
        gauge: the rain gauge's device id (``discharge: rain``).
        resolution: its tip resolution.
        silence: how long the gauge may be silent before rain is unknown (two poll intervals).
    """

    def __init__(self, site: str, rule_id: str, params: SamplingRule, tz: ZoneInfo,
                 sources: dict[tuple[str, str], str], point: str | None, occurrence_key: str, *,
                 gauge: str | None = None, resolution: TipResolution | None = None,
                 silence: timedelta = timedelta(minutes=20)) -> None:
        self.site = site
        self.rule_id = rule_id
        self.params = params
        self.tz = tz
        self.sources = sources
        self.point = point
        self.key = occurrence_key
        self.gauge = gauge
        self.resolution = resolution
        self.silence = silence
        self.tips_needed = (resolution.tips_to_reach_in(Fraction(params.discharge_rain_in))
                            if resolution is not None else 0)
        self.next_due: datetime | None = None
        self._first_weekday = _WEEKDAYS[params.week_starts]
        self._started: datetime | None = None
        self._period: tuple[datetime, datetime] | None = None  # the base period [start, end)
        self._day: tuple[datetime, datetime] | None = None  # the local day [start, end)
        self._sampled = False  # the base period has a counted sample
        self._reminded = False  # the base period's reminder was opened
        self._tips = 0  # whole tips in the base period
        self._gauge_last: datetime | None = None
        self._daily_today = False  # today has a daily-sampling obligation
        self._sampled_today = False
        self._daily = False  # on daily sampling
        self._daily_why = ""

    # -- inputs ------------------------------------------------------------------------------

    def wants(self, reading: Reading) -> bool:
        if (reading.device, reading.quantity) in self.sources:
            return True
        if self.gauge is not None:
            return reading.device == self.gauge and reading.quantity == "rain_tips"
        return self.params.discharge == "always"  # every reading starts the cadence

    def feed(self, reading: Reading) -> list[Event]:
        t = reading.time
        out: list[Event] = []
        if self._started is None:
            self._start(t)
        if reading.device == self.gauge and reading.quantity == "rain_tips":
            self._gauge_last = t
            if isinstance(reading.value, int) and reading.value > 0:
                self._tips += reading.value
                if self._tips >= self.tips_needed:
                    out += self._remind(t, "rain")
        else:
            out += self._sample(reading)
        if self.params.discharge == "always" and not self._reminded:
            out += self._remind(t, "always")
        self._schedule()
        return out

    def _start(self, t: datetime) -> None:
        self._started = t
        self._period = self._period_of(t)
        start = day_start(t, self.tz)
        self._day = (start, add_local_days(start, 1, self.tz))

    def _period_of(self, t: datetime) -> tuple[datetime, datetime]:
        if self.params.period == "day":
            start = day_start(t, self.tz)
            return start, add_local_days(start, 1, self.tz)
        start = week_start(t, self.tz, self._first_weekday)
        return start, add_local_days(start, 7, self.tz)

    def _sample(self, reading: Reading) -> list[Event]:
        source = self.sources.get((reading.device, reading.quantity))
        key = level_key(reading.quantity, reading.unit)
        if source is None or reading.flags or key is None or key not in self.params.samples:
            return []
        p = self.params
        value = float(reading.value)
        was_daily = self._daily
        if p.daily_above is not None and p.daily_until is not None:
            if p.daily_above.holds(key, value):
                self._daily = True
                self._daily_why = self._sample_text(reading)
            elif was_daily and p.daily_until.holds(key, value):
                self._daily = False
        change = ""
        if self._daily and not was_daily:
            change = f"; beyond {p.daily_above}: daily sampling from tomorrow until {p.daily_until}"
        elif was_daily and not self._daily:
            change = f"; meets {p.daily_until}: back to {p.period}ly sampling"
        out: list[Event] = []
        assert self._period is not None and self._day is not None
        if self._daily_today and not self._sampled_today:
            self._sampled_today = True
            out.append(self._done(reading, "day", self._day[0], change))
            change = ""
        if not self._sampled:
            self._sampled = True
            out.append(self._done(reading, p.period, self._period[0], change))
        return out

    # -- time --------------------------------------------------------------------------------

    def _silence_due(self) -> datetime | None:
        if self.gauge is None or self._sampled or self._reminded or self._daily or self._period is None:
            return None
        last = self._gauge_last or self._started
        assert last is not None
        return max(last + self.silence, self._period[0])

    def _schedule(self) -> None:
        if self._period is None or self._day is None:
            self.next_due = None
            return
        candidates = [self._period[1], self._day[1]]
        silent = self._silence_due()
        if silent is not None:
            candidates.append(silent)
        self.next_due = min(candidates)

    def advance_to(self, t: datetime) -> list[Event]:
        out: list[Event] = []
        while self._period is not None and self._day is not None:
            silent = self._silence_due()
            boundary = min(self._period[1], self._day[1], *([silent] if silent else []))
            if boundary > t:
                break
            if silent is not None and boundary == silent and silent < min(self._period[1], self._day[1]):
                since = self._gauge_last or self._started
                assert since is not None
                out += self._remind(silent, "gauge_silent", since)
                continue
            if self._day[1] == boundary:
                start = self._day[1]
                self._day = (start, add_local_days(start, 1, self.tz))
                self._sampled_today = False
                self._daily_today = self._daily and self.params.period != "day"
                if self._daily_today:
                    out.append(self._due("day", self._day, "daily"))
            if self._period[1] == boundary:
                self._period = (boundary, self._period_of(boundary)[1])
                self._sampled = self._reminded = False
                self._tips = 0
                if self.params.discharge == "always":
                    out += self._remind(boundary, "always")
        self._schedule()
        return out

    # -- events ------------------------------------------------------------------------------

    def _remind(self, t: datetime, reason: str, since: datetime | None = None) -> list[Event]:
        """The base period's reminder, unless the period is sampled, reminded, or on daily sampling."""
        if self._sampled or self._reminded or self._daily or self._period is None:
            return []
        self._reminded = True
        return [self._due(self.params.period, self._period, reason, at=t, since=since)]

    def _where(self) -> str:
        return f"discharge point {self.point}: " if self.point else ""

    def _period_text(self, period: str, start: datetime) -> str:
        local = local_day(start.astimezone(self.tz).date())  # as an SMO reads it (the details keep ISO)
        return f"the week of {local}" if period == "week" else local

    def _occurrence(self, period: str, start: datetime) -> str:
        return f"{self.rule_id}:{self.key}:{period}:{start.astimezone(self.tz).date().isoformat()}"

    def _due(self, period: str, span: tuple[datetime, datetime], reason: str, *, at: datetime | None = None,
             since: datetime | None = None) -> Event:
        p = self.params
        start, end = span
        when = at or start
        if reason == "rain":
            assert self.resolution is not None
            why = (f"the site discharges: {inches(float(self.resolution.depth_in(self._tips)))} of rain since "
                   f"{local_time(start, self.tz)} (at least {p.discharge_rain_in} in)")
        elif reason == "gauge_silent":
            why = ("rain, so discharge, is unknown: the rain gauge has been silent since "
                   f"{local_time(since or when, self.tz)}")
        elif reason == "daily":
            why = f"daily sampling: the last sample, {self._daily_why}, was beyond {p.daily_above} (daily until " \
                  f"{p.daily_until})"
        else:
            why = "the site discharges every period (discharge: always)"
        what = ", ".join(SAMPLE_QUANTITIES[k][0] for k in p.samples)
        return Event(kind="sampling_due", site=self.site, event_time=when, rule=self.rule_id, citation=p.citation,
                     occurrence=self._occurrence(period, start), due_at=end,
                     message=f"{self._where()}sample the discharge ({what}) for {self._period_text(period, start)}: "
                             f"{why}; due by {local_time(end, self.tz)}",
                     details=SamplingDetails(discharge_point=self.point, period=period,
                                             period_start=start.astimezone(self.tz).date().isoformat(),
                                             reason=reason, daily=self._daily))

    def _sample_text(self, reading: Reading) -> str:
        name = "pH" if reading.quantity == "ph" else reading.quantity
        unit = "" if reading.quantity == "ph" else f" {reading.unit}"
        inspector = manual_inspector(reading)
        manual = self.sources.get((reading.device, reading.quantity)) == "manual"
        by = f"sampled by {inspector}" if inspector else ("manual sample" if manual else f"probe {reading.device}")
        return f"{name} {float(reading.value):g}{unit} at {local_time(reading.time, self.tz)} ({by})"

    def _done(self, reading: Reading, period: str, start: datetime, change: str) -> Event:
        details: dict[str, Any] = {"discharge_point": self.point, "period": period,
                                   "period_start": start.astimezone(self.tz).date().isoformat(),
                                   "quantity": reading.quantity, "value": float(reading.value), "unit": reading.unit,
                                   "daily": self._daily}
        return Event(kind="sampling_done", site=self.site, event_time=reading.time, rule=self.rule_id,
                     citation=self.params.citation, occurrence=self._occurrence(period, start),
                     message=f"{self._where()}{self._period_text(period, start)} sampled: "
                             f"{self._sample_text(reading)}{change}",
                     details=SamplingDetails(**details), evidence=[reading.to_wire()])


def build(ctx: RuleContext) -> list[SamplingState]:
    """One state per discharge point.

    Raises:
        BuildError: ``discharge: rain`` on a site without a rain gauge (or one without a counter), a
            probe in another unit than the samples' (``samples_from: any``).
    """
    params = ctx.params
    assert isinstance(params, SamplingRule)
    gauge = resolution = None
    silence = timedelta(minutes=20)
    if params.discharge == "rain":
        gauge = ctx.device("rain_gauge")
        if gauge is None:
            raise BuildError(f"{ctx.rule_id} (sampling) knows the site discharges from its rain gauge, and the site "
                             "has none: name its rain_gauge, or choose discharge: always (a site that discharges "
                             "every week, or has no gauge)")
        profile = ctx.profile(gauge)
        if profile.counter is None:
            raise BuildError(f"{ctx.rule_id} (sampling): rain gauge {gauge!r} profile {profile.model!r} has no counter")
        resolution = profile.counter.tip_resolution
        silence = 2 * timedelta(seconds=ctx.cfg.device(gauge).poll_interval_s)
    legacy = ctx.cfg.turbidity_pair is not None
    states = [SamplingState(ctx.site, ctx.rule_id, params, ctx.cfg.site.tz,
                            point_sources(ctx, point, list(params.samples), params.samples_from),
                            None if legacy else point.id, LEGACY_POINT if legacy else point.id,
                            gauge=gauge, resolution=resolution, silence=silence)
              for point in ctx.cfg.points]
    if not states:
        log.warning("%s: %s (sampling) has no discharge point: no sampling reminders (list discharge_points)",
                    ctx.site, ctx.rule_id)
    return states


KIND = RuleKind(
    kind="sampling", params=SamplingRule, build=build,
    summary="a sampling reminder per discharge point for each period the site discharges (weekly; daily while the "
            "last sample was beyond a level), completed by the sample recorded there",
    roles=(Role("rain_gauge", "rain_tips", "the tipping-bucket gauge that tells when the site discharges"),),
    events=(
        EventKindSpec("sampling_due", SamplingDetails,
                      "a discharge point must be sampled in the period (the week, or the day on daily sampling): due "
                      "by due_at, the period's end (opens a sampling work order)", opens="sampling"),
        EventKindSpec("sampling_done", SamplingDetails,
                      "a discharge point's first recorded sample of the period: completes the period's sampling "
                      "work order", closes="sampling"),
    ),
)
