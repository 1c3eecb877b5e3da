"""R1: inspection within 24 hours of a storm producing 0.5 inch or more.

Law: Ch. 133 §133-7A(2) and Ch. 196 §196-9B ("every seven days and within 24 hours of any storm
event producing 0.5 inches of precipitation or more"). The codes do not define a storm's start
and end; our definition and defaults are in ``../shared/reference/rules.md`` (R1):

* a storm is a run of tips with no dry gap ≥ ``dry_gap_hours`` (6 h) between consecutive tips;
* its depth is its whole tips × the gauge resolution, compared exactly: it qualifies when
  ``tips >= resolution.tips_to_reach_in(threshold)`` (50 tips of 0.01 in qualify, 49 do not;
  64 tips of 0.2 mm = 12.8 mm qualify, 63 = 12.6 mm do not);
* the 24-hour clock runs from the last tip (``clock_from: last_tip``) -- the end is *known* only
  once the gauge has reported dry for the gap -- or, stricter, from the tip that crossed the
  threshold (``clock_from: threshold``).

Input: ``rain_tips`` readings of the site's rain gauge, integer tips per poll (0 = a dry poll).
A tip count arriving after a gauge outage covers the whole outage (counter delta) and is counted
at its poll time.

Events: ``storm_started`` (first tip), ``storm_qualified`` (the tip that reaches the threshold;
"an inspection will be due"), ``storm_inspection_due`` (when the storm is known to have ended:
a gauge reading at or after last tip + dry gap, ``due_at`` = last tip + 24 h). When the site's
event time passes last tip + dry gap (+ two poll intervals) and the gauge has reported nothing
that closes the storm, a ``data_gap`` event
says so (a gap is not "no rain"); a qualified storm is then closed conservatively with its
inspection due at last tip + 24 h (the earliest possible deadline), an unqualified one stays open.
A storm still open at the end of a backfill is in progress (see :meth:`StormRule.in_progress`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from alerts.packs import StormRule
from stormwatch.contract import TIP_UNIT, Event, Reading, format_time
from stormwatch.rain import TipResolution

log = logging.getLogger(__name__)


@dataclass
class _Storm:
    start: datetime
    last_tip: datetime
    tips: int = 0
    threshold_time: datetime | None = None
    gap_reported: bool = False
    evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def occurrence(self) -> str:
        return f"storm:{format_time(self.start)}"


@dataclass(frozen=True)
class StormSummary:
    """A storm still open (in progress) at the current event time."""

    start: datetime
    last_tip: datetime
    tips: int
    depth_in: float
    qualified: bool


class StormRuleState:
    """R1 for one site: tracks the open storm of one rain gauge.

    Args:
        site: site id.
        rule_id: pack rule id (``R1``).
        params: the pack's :class:`~alerts.packs.StormRule` (citation, threshold, gap, clock).
        gauge: device id of the rain gauge.
        resolution: the gauge's exact depth per tip (from its profile's ``counter.resolution``).
        silence_allowance: how long past last tip + dry gap the gauge may take to report the dry
            poll that ends the storm before it counts as silent (the engine uses 2 poll intervals).
    """

    def __init__(self, site: str, rule_id: str, params: StormRule, gauge: str, resolution: TipResolution,
                 silence_allowance: timedelta = timedelta(minutes=2)) -> None:
        self.site = site
        self.rule_id = rule_id
        self.params = params
        self.gauge = gauge
        self.resolution = resolution
        self.tips_needed = resolution.tips_to_reach_in(params.threshold)
        self.gap = timedelta(hours=params.dry_gap_hours)
        self.within = timedelta(hours=params.inspection_within_hours)
        self._storm: _Storm | None = None
        self.silence_allowance = silence_allowance
        self._covered: datetime | None = None  # time of the gauge's latest reading

    def wants(self, reading: Reading) -> bool:
        return reading.device == self.gauge and reading.quantity == "rain_tips"

    def _event(self, kind: str, storm: _Storm, event_time: datetime, message: str, **extra: Any) -> Event:
        return Event(
            kind=kind, site=self.site, event_time=event_time, rule=self.rule_id, citation=self.params.citation,
            occurrence=storm.occurrence, message=message, storm_start=storm.start, tips=storm.tips,
            depth_in=float(self.resolution.depth_in(storm.tips)), **extra,
        )

    def _depth_text(self, tips: int) -> str:
        return f"{float(self.resolution.depth_in(tips)):.2f} in ({tips} tips of {self.resolution.inches} in)"

    def _close(self, storm: _Storm, known_at: datetime, confirmed: bool) -> list[Event]:
        self._storm = None
        if storm.threshold_time is None:
            log.debug("%s: storm %s ended below threshold: %s", self.site, storm.occurrence,
                      self._depth_text(storm.tips))
            return []
        clock_start = storm.last_tip if self.params.clock_from == "last_tip" else storm.threshold_time
        due = clock_start + self.within
        note = "" if confirmed else " (rain gauge silent since its last reading: end not confirmed, earliest deadline)"
        return [self._event(
            "storm_inspection_due", storm, known_at,
            f"storm of {self._depth_text(storm.tips)} ended at {format_time(storm.last_tip)}{note}: "
            f"inspection due by {format_time(due)}",
            storm_end=storm.last_tip, due_at=due, evidence=list(storm.evidence),
        )]

    def feed(self, reading: Reading) -> list[Event]:
        tips = reading.value
        if not isinstance(tips, int) or tips < 0 or reading.unit != TIP_UNIT:
            log.error("%s: rain reading %s/%s seq %s is not a whole tip count in %s (value %r, unit %r): ignored",
                      self.site, reading.gateway, reading.device, reading.seq, TIP_UNIT, reading.value, reading.unit)
            return []
        out: list[Event] = []
        t = reading.time
        storm = self._storm
        if storm is not None and t >= storm.last_tip + self.gap:
            out += self._close(storm, storm.last_tip + self.gap, confirmed=True)
        self._covered = t if self._covered is None else max(self._covered, t)
        if tips == 0:
            return out
        started = self._storm is None
        if self._storm is None:
            self._storm = _Storm(start=t, last_tip=t)
        storm = self._storm
        storm.tips += tips
        storm.last_tip = t
        storm.evidence.append({"time": format_time(t), "tips": tips, "gateway": reading.gateway,
                               "boot": reading.boot, "seq": reading.seq, "flags": list(reading.flags)})
        if started:
            out.append(self._event("storm_started", storm, t, f"rain started at {format_time(t)}"))
        if storm.threshold_time is None and storm.tips >= self.tips_needed:
            storm.threshold_time = t
            due = t + self.within if self.params.clock_from == "threshold" else None
            out.append(self._event(
                "storm_qualified", storm, t,
                f"qualifying storm in progress: {self._depth_text(storm.tips)} since {format_time(storm.start)}; "
                f"an inspection will be due within {self.params.inspection_within_hours:g} h of "
                + ("the threshold crossing" if due else "its end"),
                due_at=due,
            ))
        return out

    def advance_to(self, t: datetime) -> list[Event]:
        storm = self._storm
        if storm is None or t < storm.last_tip + self.gap + self.silence_allowance:
            return []
        # Event time is well past the dry gap and no gauge reading has closed the storm: the gauge is silent.
        out: list[Event] = []
        if not storm.gap_reported:
            storm.gap_reported = True
            gap_start = self._covered or storm.last_tip
            out.append(Event(
                kind="data_gap", site=self.site, event_time=storm.last_tip + self.gap, rule=self.rule_id,
                citation=self.params.citation, occurrence=f"gap:{self.gauge}:{format_time(gap_start)}",
                gap_start=gap_start, gap_end=t, storm_start=storm.start, tips=storm.tips,
                message=f"rain gauge {self.gauge} silent since {format_time(gap_start)} during a storm: "
                        "rain since then is unknown, not zero",
            ))
        if storm.threshold_time is not None:
            out += self._close(storm, storm.last_tip + self.gap, confirmed=False)
        return out

    def in_progress(self) -> StormSummary | None:
        """The open storm (reported as in progress at the end of a backfill), or ``None``."""
        s = self._storm
        if s is None:
            return None
        return StormSummary(s.start, s.last_tip, s.tips, float(self.resolution.depth_in(s.tips)),
                            s.threshold_time is not None)
