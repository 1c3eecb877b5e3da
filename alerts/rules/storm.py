"""R1: inspection within 24 hours of a storm producing 0.5 inch or more.

Law: Ch. 133 §133-7A(2) and Ch. 196 §196-9B ("every seven days and within 24 hours of any storm
event producing 0.5 inches of precipitation or more"). The codes do not define a storm's start
and end; our definition and defaults are in ``docs/reference/rules.md`` (R1).

The design: docs/rules.md ("The rule modules", `alerts/rules/storm.py`).
"""

from __future__ import annotations

import logging
import operator
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from itertools import islice, repeat
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator, model_validator

from stormwatch.alerts.rules import Chunk, RuleTrace, occurrence
from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import BuildError, EventKindSpec, Role, RuleContext, RuleKind
from stormwatch.config import FallbackGauge
from stormwatch.contract import TIP_UNIT, Event, EventDetails, EventKind, Reading, UtcDatetime
from stormwatch.display import UTC_ZONE, inches, local_time
from stormwatch.gateway.counter import FLAG_BASELINE, FLAG_CATCH_UP, FLAG_GLITCH, FLAG_RESET, FLAG_SUSPECT, FLAG_WRAP
from stormwatch.physics import FLAG_BEYOND_ENVELOPE, FLAG_EXTREME_RATE, max_tips, review_mm
from stormwatch.rain import PRECIPITATION, TipResolution, precipitation_in
from stormwatch.stores.base import (
    ROW_FLAGS,
    ROW_GATEWAY,
    ROW_TIME,
    ROW_TIP_SIZE,
    ROW_UNIT,
    ROW_VALUE,
    StoredRow,
)
from stormwatch.stores.rows import engine_order, time_of_us, us_of
from stormwatch.stores.seriesrows import SeriesRows
from stormwatch.tipsizes import TipSizeMismatch, TipSizes
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: What every data_gap message says after its times (GapDetails.headline leaves it out of a timeline).
UNKNOWN_NOTE = "; rain in that period is unknown, not zero"

#: The longest dry gap that still separates storms: 168 h (a week). The packs use 6 h (ch133,
#: EPA CGP) to 48 h (CA CGP); the longest separation in US practice is the 72 h between
#: "measurable storm events" of storm-water sampling (40 CFR 122.21(g)(7)(ii),
#: docs/reference/hydrology.md). A gap beyond the routine inspection week would merge a month of
#: rain into one "storm" whose inspection is due weeks after its first tip (docs/rules.md R1).
MAX_DRY_GAP_HOURS = 168.0


class StormRule(RuleParams):
    """R1: inspection within 24 h of a storm producing ≥ 0.5 in (rules.md R1).

    Attributes:
        threshold_in: storm depth that qualifies, an exact decimal string (compared as a Fraction).
        dry_gap_hours: a storm ends after this long without a tip; tips separated by ≥ this are
            two storms.
        inspection_within_hours: the inspection deadline after the clock start.
        clock_from: ``last_tip`` (deadline = last tip + 24 h) or ``threshold`` (stricter: from the
            tip that crossed the threshold).
        definition: ``dry_gap`` (default: the storm's whole depth counts) or ``rolling`` (for
            permits written as "X inches within a 24-hour period", e.g. EPA CGP 2022: the storm
            qualifies when the tips of any trailing ``rolling_window_hours`` window reach the
            threshold; storms are still delimited by the dry gap).
        rolling_window_hours: the trailing window of ``rolling`` (24 h).
        order_opens: when the inspection work order opens: ``storm_end`` (default: the
            ``storm_inspection_due`` event once the dry gap has passed) or ``threshold`` (with
            ``clock_from: threshold``: at the tip that reaches the threshold, so an inspection due
            within 24 h of a storm's occurrence is asked for while the storm may still go on --
            EPA CGP 2022 Part 4.2).
    """

    kind: Literal["storm"]
    threshold_in: str = "0.5"
    dry_gap_hours: float = Field(default=6.0, gt=0, le=MAX_DRY_GAP_HOURS)
    inspection_within_hours: float = Field(default=24.0, gt=0)
    clock_from: Literal["last_tip", "threshold"] = "last_tip"
    definition: Literal["dry_gap", "rolling"] = "dry_gap"
    rolling_window_hours: float = Field(default=24.0, gt=0)
    order_opens: Literal["storm_end", "threshold"] = "storm_end"

    @model_validator(mode="after")
    def _clock_for_threshold_orders(self) -> StormRule:
        if self.order_opens == "threshold" and self.clock_from != "threshold":
            raise ValueError("order_opens: threshold needs clock_from: threshold (the deadline is known at the "
                             "threshold crossing only when the clock starts there)")
        return self

    @field_validator("threshold_in", mode="before")
    @classmethod
    def _exact(cls, v: object) -> str:
        text = str(v)
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"threshold_in must be an exact decimal like '0.5', got {v!r}") from exc
        if value <= 0:
            raise ValueError("threshold_in must be > 0")
        return text

    @property
    def threshold(self) -> Fraction:
        """The threshold in inches, exact."""
        return Fraction(self.threshold_in)

#: Flags of a rain reading that are bookkeeping, not doubt: a first sample (0 tips), a counter
#: wrap, tips counted from the trusted value after a one-sample glitch, late delivery.
INFORMATIONAL_FLAGS = frozenset({FLAG_BASELINE, FLAG_WRAP, FLAG_GLITCH, "late"})
#: Flag of a reading whose tips are beyond the world-record envelope (not counted); R1 sets it on
#: its own judgement too (:data:`stormwatch.physics.FLAG_BEYOND_ENVELOPE`).
BEYOND_ENVELOPE = FLAG_BEYOND_ENVELOPE

_US = timedelta(microseconds=1)
_TICK = _US
_NEVER = 2**63  # microseconds: no open storm to close


def _index(flags: list[bool], start: int, default: int) -> int:
    """The first index at or after ``start`` where ``flags`` is true, else ``default``."""
    try:
        return flags.index(True, start)
    except ValueError:
        return default


@dataclass
class _Storm:
    start: datetime
    last_tip: datetime
    tips: int = 0
    depth: Fraction = Fraction(0)  # the gauge's rain, inches: each reading's tips x its own tip size
    sizes: dict[TipResolution, int] = field(default_factory=dict)  # tips per tip size (a replaced gauge: two)
    threshold_time: datetime | None = None
    gap_reported: bool = False
    evidence: list[dict[str, Any]] = field(default_factory=list)
    # rolling: (t, tips, their tip size, station inches)
    window: deque[tuple[datetime, int, TipResolution, Fraction]] = field(default_factory=deque)
    window_tips: int = 0
    window_depth: Fraction = Fraction(0)
    window_station: Fraction = Fraction(0)
    window_sizes: dict[TipResolution, int] = field(default_factory=dict)
    peak_window_tips: int = 0
    verify: set[str] = field(default_factory=set)  # doubt flags of readings that shaped the storm
    station_in: Fraction = Fraction(0)  # rain counted from the fallback station (inside gauge gaps), inches

    @property
    def occurrence(self) -> str:
        return occurrence("storm", self.start)


@dataclass(frozen=True)
class StormSummary:
    """A storm still open (in progress) at the current event time."""

    #: containers of values only: a snapshot copies them flat (stormwatch.alerts.statecopy)
    state_flat: ClassVar[frozenset[str]] = frozenset({"sizes", "verify", "window", "window_sizes"})

    start: datetime
    last_tip: datetime
    tips: int
    depth_in: float
    qualified: bool
    inspection_asked: bool = False  # its storm_inspection_due was emitted at the threshold (order_opens)
    sizes: tuple[tuple[str, int], ...] = ()  # (tip size, tips) of each size counted, largest first


@dataclass(frozen=True)
class GapSummary:
    """A period without rain-gauge data (``end`` ``None``: still open)."""

    device: str
    start: datetime
    end: datetime | None


class StormRuleState:
    """R1 for one site: tracks the open storm and the data coverage of one rain gauge.

    Args:
        site: site id.
        rule_id: pack rule id (``R1``).
        params: the pack's :class:`~stormwatch.alerts.packs.StormRule` (citation, threshold, gap, clock).
        gauge: device id of the rain gauge.
        resolution: the gauge's tip sizes over time (:class:`stormwatch.tipsizes.TipSizes`: its
            profile's ``counter.resolution`` and its ``replaced_gauges``), or one exact depth per tip.
        silence_allowance: how long past its last reading the gauge may be silent before the
            period counts as a data gap (the engine uses 2 poll intervals).
        fallback: the site's representative station record (``fallback_gauge:``), used only for
            the gauge's data gaps (see :meth:`feed`).
        tz: the site's zone: the times in event messages (what an SMO reads, and a work order's
            reason) are site-local with the year (:func:`stormwatch.display.local_time`); the
            events' machine fields (``event_time``, ``due_at``, details) stay UTC.
    """

    def __init__(self, site: str, rule_id: str, params: StormRule, gauge: str, resolution: TipResolution | TipSizes,
                 silence_allowance: timedelta = timedelta(minutes=2), fallback: FallbackGauge | None = None,
                 tz: ZoneInfo = UTC_ZONE) -> None:
        self.site = site
        self.tz = tz
        self.rule_id = rule_id
        self.params = params
        self.gauge = gauge
        self.sizes = resolution if isinstance(resolution, TipSizes) else TipSizes.single(gauge, resolution)
        self.resolution = self.sizes.current  # the gauge in service now
        # the one size every reading must name (a gauge never replaced), else None: looked up per reading
        self._single = None if self.sizes.replaced else str(self.sizes.current)
        self.mismatch: TipSizeMismatch | None = None  # the first reading of another size than the site file's
        #: a backfill stops at such a reading (raises the mismatch); live, it is logged and not counted
        self.raise_mismatch = False
        self.mismatched = 0  # how many such readings were refused
        self.assumed = 0  # readings without a tip size, read with the site file's
        self._assumed_span: tuple[datetime, datetime] | None = None
        self.gap = timedelta(hours=params.dry_gap_hours)
        self.within = timedelta(hours=params.inspection_within_hours)
        self.rolling = params.definition == "rolling"
        self.rolling_window = timedelta(hours=params.rolling_window_hours)
        self._storm: _Storm | None = None
        self.silence_allowance = silence_allowance
        self._covered: datetime | None = None  # time of the gauge's latest reading
        self._before: datetime | None = None  # time of the reading before it (an earlier instant)
        self._tips_at_covered = 0  # tips counted at ``_covered`` (readings sharing one instant add up)
        self.first_reading: datetime | None = None  # time of the gauge's first reading
        self._gap_open: datetime | None = None  # start of the open data gap (last reading before it)
        self.gateway: str | None = None  # the gateway the gauge reports through
        self.gaps: list[GapSummary] = []  # closed gaps, oldest first
        # closed gaps whose rain is unknown: not covered by the counter delta of the reading that closed
        # them (readings lost on the way, a counter reset, a count beyond the envelope), oldest first
        self._unknown_rain: list[GapSummary] = []
        self.next_due: datetime | None = None  # earliest event time at which advance_to can emit
        self.trace: RuleTrace | None = None  # a report's observer (backfill only)
        self.fallback = fallback
        self._station_span = timedelta(minutes=fallback.interval_minutes) if fallback else timedelta(0)
        # station values after the gauge's last reading, not yet known to be inside a gap: (start, reading, in)
        self._pending: deque[tuple[datetime, Reading, Fraction]] = deque()
        self._gap_station_in = Fraction(0)  # station rain counted in the open gap, inches

    def wants(self, reading: Reading) -> bool:
        if reading.device == self.gauge:
            return reading.quantity == "rain_tips"
        fb = self.fallback
        return fb is not None and reading.device == fb.station and reading.quantity == PRECIPITATION

    def _schedule(self) -> None:
        due = None
        if self._covered is not None and self._gap_open is None:
            due = self._covered + self.silence_allowance
        s = self._storm
        if s is not None and not (s.gap_reported and s.threshold_time is None):
            storm_due = s.last_tip + self.gap + self.silence_allowance
            due = storm_due if due is None else min(due, storm_due)
        self.next_due = due

    def _event(self, kind: EventKind, storm: _Storm, event_time: datetime, message: str,
               storm_end: datetime | None = None, lower_bound: bool = False, **extra: Any) -> Event:
        verify = sorted(storm.verify) or None
        if verify:
            message += f" -- needs verification: the gauge's readings are flagged {', '.join(verify)}"
        station = self.fallback if storm.station_in else None
        if station is not None:
            message += (f" -- includes {inches(float(storm.station_in))} from {station.label}, "
                        f"for the rain gauge's data gap")
        details = StormDetails(storm_start=storm.start, storm_end=storm_end, tips=storm.tips,
                               depth_in=float(storm.depth + storm.station_in),
                               needs_verification=verify,
                               source=f"station {station.station}" if station else None,
                               station_distance_km=station.distance_km if station else None,
                               station_depth_in=float(storm.station_in) if station else None,
                               depth_lower_bound=True if lower_bound else None)
        return Event(kind=kind, site=self.site, event_time=event_time, rule=self.rule_id, citation=self.params.citation,
                     occurrence=storm.occurrence, message=message, details=details, **extra)

    def _when(self, t: datetime) -> str:
        """``t`` as an SMO reads it in a message: site-local, with weekday, date and year."""
        return local_time(t, self.tz)

    def _depth_text(self, sizes: dict[TipResolution, int], station_in: Fraction = Fraction(0)) -> str:
        """``0.50 in (50 tips of 0.01 in)``; across a replacement ``0.50 in (30 tips of 0.01 in + 26 tips
        of 0.2 mm)``; with station rain ``... + 0.10 in from the station``."""
        depth = sum((size.depth_in(n) for size, n in sizes.items()), Fraction(0)) + station_in
        counted = " + ".join(f"{n} tips of {size}" for size, n in sorted(sizes.items(), key=lambda kv: -kv[0].inches)
                             if n) or f"0 tips of {self.resolution}"
        more = f" + {inches(float(station_in))} from the station" if station_in else ""
        return f"{inches(float(depth))} ({counted}{more})"

    def _close(self, storm: _Storm, known_at: datetime, confirmed: bool) -> list[Event]:
        self._storm = None
        inside = self._gaps_inside(storm)
        if self.trace is not None:
            self.trace.storm_ended(storm.start, storm.last_tip, storm.tips, storm.threshold_time is not None, confirmed,
                                   storm.depth, lower_bound=bool(inside))
        if storm.threshold_time is not None and self.params.order_opens == "threshold":
            return []  # its storm_inspection_due was emitted at the threshold crossing
        if storm.threshold_time is None:
            depth = self._depth_text(storm.sizes, storm.station_in)
            unknown = " (rain unknown in the rain gauge's data gaps)" if inside else ""
            return [self._event(
                "storm_ended_below_threshold", storm, known_at,
                f"storm of {'at least ' if inside else ''}{depth} ended at {self._when(storm.last_tip)}{unknown}: "
                f"below the {self.params.threshold_in} in threshold, no inspection due",
                storm_end=storm.last_tip, lower_bound=bool(inside))]
        clock_start = storm.last_tip if self.params.clock_from == "last_tip" else storm.threshold_time
        due = clock_start + self.within
        note = "" if confirmed else " (rain gauge silent since its last reading: end not confirmed, earliest deadline)"
        depth = self._depth_text(storm.sizes, storm.station_in)
        if inside:
            spans = ", ".join(f"{self._when(g.start)} to {self._when(g.end)}" for g in inside if g.end is not None)
            gaps = "data gaps" if len(inside) > 1 else "data gap"
            depth = f"at least {depth}; rain unknown in the rain gauge's {gaps} {spans}"
        return [self._event(
            "storm_inspection_due", storm, known_at,
            f"storm of {depth} ended at {self._when(storm.last_tip)}{note}: "
            f"inspection due by {self._when(due)}",
            storm_end=storm.last_tip, due_at=due, evidence=list(storm.evidence), lower_bound=bool(inside),
        )]

    def _gaps_inside(self, storm: _Storm) -> list[GapSummary]:
        """The closed data gaps of the gauge between the storm's first and last tip whose rain is
        unknown and that no fallback station filled: the storm's depth is then a lower bound. A gap
        closed by a counter catch-up (``counter_catch_up``: the gateway's next poll counted every tip
        since its last one) is not among them: its tips are counted, only their times are unknown."""
        if self.fallback is not None:
            return []  # the station's rain is counted in the gauge's gaps (and said so)
        inside: list[GapSummary] = []
        for gap in reversed(self._unknown_rain):
            if gap.end is None or gap.end <= storm.start:
                break
            if gap.start < storm.last_tip:
                inside.append(gap)
        return inside[::-1]

    def _gap_event(self, start: datetime, end: datetime | None, event_time: datetime, why: str,
                   station_in: Fraction | None = None) -> Event:
        s = self._storm
        fb = self.fallback
        filled = ""
        if fb is not None and end is not None and station_in is not None:
            filled = (f"; {fb.label}: {inches(float(station_in))} in intervals wholly inside the gap, "
                      "counted for R1 in the gauge's place")
        return Event(
            kind="data_gap", site=self.site, event_time=event_time, rule=self.rule_id, citation=self.params.citation,
            occurrence=occurrence("gap", start, self.gauge),
            details=GapDetails(gap_start=start, gap_end=end, storm_start=s.start if s else None,
                               tips=s.tips if s else None,
                               source=f"station {fb.station}" if filled and fb else None,
                               station_distance_km=fb.distance_km if filled and fb else None,
                               station_depth_in=float(station_in) if filled and station_in is not None else None),
            message=(f"rain gauge {self.gauge} {why}: no data from {self._when(start)}"
                     + (f" to {self._when(end)}" if end else "")
                     + UNKNOWN_NOTE + filled),
        )

    def _qualifying(self, storm: _Storm, t: datetime, tips: int, size: TipResolution,
                    station_in: Fraction) -> tuple[dict[TipResolution, int], Fraction, Fraction]:
        """The tips per size, gauge inches and station inches that count toward the threshold at ``t``
        (the whole storm, or the trailing window of ``definition: rolling``)."""
        if not self.rolling:
            return storm.sizes, storm.depth, storm.station_in
        storm.window.append((t, tips, size, station_in))
        storm.window_tips += tips
        storm.window_depth += size.depth_in(tips)
        storm.window_station += station_in
        storm.window_sizes[size] = storm.window_sizes.get(size, 0) + tips
        edge = t - self.rolling_window
        while storm.window and storm.window[0][0] <= edge:
            _, old_tips, old_size, old_in = storm.window.popleft()
            storm.window_tips -= old_tips
            storm.window_depth -= old_size.depth_in(old_tips)
            storm.window_station -= old_in
            storm.window_sizes[old_size] -= old_tips
        storm.peak_window_tips = max(storm.peak_window_tips, storm.window_tips)
        return storm.window_sizes, storm.window_depth, storm.window_station

    def _reaches(self, depth: Fraction, station_in: Fraction) -> bool:
        """Whether ``depth`` inches of the gauge plus ``station_in`` inches reach the threshold (exactly)."""
        return depth + station_in >= self.params.threshold

    def feed(self, reading: Reading) -> list[Event]:
        # the fields from the model's __dict__: a pydantic model's attribute goes through its
        # __getattr__ hook (about 4x a plain object's); this is the hot path of every gauge reading
        fields = reading.__dict__
        if fields["device"] != self.gauge:
            return self._station_value(reading)
        tips = fields["value"]
        if type(tips) is not int or tips < 0 or fields["unit"] != TIP_UNIT:
            log.error("%s: rain reading %s/%s seq %s is not a whole tip count in %s (value %r, unit %r): ignored",
                      self.site, reading.gateway, reading.device, reading.seq, TIP_UNIT, reading.value, reading.unit)
            return []
        t = fields["time"]
        storm = self._storm
        covered = self._covered
        if not tips and not fields["flags"] and self._gap_open is None and covered is not None \
                and fields["tip_size"] and fields["tip_size"] == self._single \
                and (storm is None or t < storm.last_tip + self.gap):
            # quiet (nearly every reading): a clean 0 of the site file's size, no gap to close, no storm
            # to end -- what the full path below leaves, without classifying it (as replay's quiet runs)
            self.gateway = fields["gateway"]
            if self._pending:
                self._pending.clear()
            if t > covered:
                self._before, self._covered, self._tips_at_covered = covered, t, 0
                covered = t
            if storm is None:  # _schedule's answer without a storm or a gap
                self.next_due = covered + self.silence_allowance
            else:
                self._schedule()
            return []
        return self._classify(reading, tips, t)

    def quick_feeder(self, device: str, quantity: str) -> Callable[..., list[Event] | None] | None:
        """What takes a clean reading of ``device``'s ``quantity`` from a cycle's columns (the engine's
        ``feed_cycle``): :meth:`feed`'s quiet reading, or ``None`` (nothing done) for :meth:`feed`."""
        return self._quick if device == self.gauge and quantity == "rain_tips" else None

    def _quick(self, t: datetime, us: int, tips: int, unit: str, tip_size: str | None,
               gateway: str) -> list[Event] | None:
        storm = self._storm
        covered = self._covered
        if type(tips) is not int or tips or unit != TIP_UNIT or self._gap_open is not None or covered is None \
                or not tip_size or tip_size != self._single or (storm is not None and t >= storm.last_tip + self.gap):
            return None
        self.gateway = gateway  # :meth:`feed`'s quiet reading, from the cycle's fields
        if self._pending:
            self._pending.clear()
        if t > covered:
            self._before, self._covered, self._tips_at_covered = covered, t, 0
            covered = t
        if storm is None:
            self.next_due = covered + self.silence_allowance
        else:
            self._schedule()
        return []

    def _classify(self, reading: Reading, tips: int, t: datetime) -> list[Event]:
        """A gauge reading that is not quiet: its flags, size and rate judged; the gaps it ends, the
        storm it ends or grows."""
        flags = set(reading.flags)
        if FLAG_SUSPECT in flags:
            log.info("%s: rain reading at %s flagged %s: rain at that time unknown, not coverage", self.site,
                     format_time(t), FLAG_SUSPECT)
            return []
        size = self._size(reading.tip_size, t, reading)
        if size is None:
            return []  # another size than the site file's: not rain, not coverage (self.mismatch)
        self.gateway = reading.gateway
        doubt = flags - INFORMATIONAL_FLAGS
        unknown: tuple[datetime, str] | None = None  # an unknown interval ending at t: (start, why)
        if FLAG_RESET in flags and self._covered is not None:
            unknown = (self._covered, f"counter reset (reading at {self._when(t)} flagged {FLAG_RESET})")
        if tips:
            tips, unknown = self._judge_rate(reading, tips, size, flags, doubt, unknown)
        out, gap_from = self._end_gaps(t, flags, unknown)
        self._pending.clear()  # the gauge reports: held station values overlap its data
        storm = self._storm
        if storm is not None:
            storm.verify |= doubt  # a doubtful reading inside a storm (or its dry gap) taints its events
        if storm is not None and t >= storm.last_tip + self.gap:
            dry_known = gap_from is None or gap_from >= storm.last_tip + self.gap
            out += self._close(storm, storm.last_tip + self.gap, confirmed=dry_known)
        if self._covered is None or t > self._covered:
            if self._covered is None:
                self.first_reading = t
            self._before, self._covered, self._tips_at_covered = self._covered, t, 0
        if t == self._covered:
            self._tips_at_covered += tips
        if tips:
            if self.trace is not None:
                self.trace.rain_counted(t, tips, size.depth_in(tips))
            evidence = {"time": format_time(t), "tips": tips, "gateway": reading.gateway,
                        "boot": reading.boot, "seq": reading.seq, "flags": list(reading.flags)}
            out += self._rain(t, tips, Fraction(0), evidence, doubt, size)
        self._schedule()
        return out

    def _judge_rate(self, reading: Reading, tips: int, size: TipResolution, flags: set[str], doubt: set[str],
                    unknown: tuple[datetime, str] | None) -> tuple[int, tuple[datetime, str] | None]:
        """``(tips counted, unknown interval)`` of a reading with tips, judged against the physical
        envelope over the time since the previous instant with a reading (readings of one instant add
        up; the gauge's first instant covers an unknown interval and is not judged). Beyond it: no
        rain, the interval a data gap; extreme but possible: counted, ``doubt`` gets the flag."""
        t = reading.time
        since, before = (self._before, self._tips_at_covered) if t == self._covered else (self._covered, 0)
        if BEYOND_ENVELOPE in flags:
            log.warning("%s: rain reading %s/%s seq %s at %s: %d tips stored flagged %s: not rain%s", self.site,
                        reading.gateway, reading.device, reading.seq, format_time(t), tips, BEYOND_ENVELOPE,
                        "" if since is None else ", the interval is a data gap")
            if since is not None:
                unknown = (since, f"reported {tips} tips at {self._when(t)}, flagged {BEYOND_ENVELOPE} (more rain "
                                  f"than physically possible)")
            return 0, unknown
        if since is None:
            return tips, unknown
        seconds = (t - since).total_seconds()
        allowed = max_tips(size.mm_float, seconds)
        if before + tips > allowed:
            log.warning("%s: rain reading %s/%s seq %s at %s: %d tips since %s is beyond the world-record "
                        "envelope (%d): not rain, the interval is a data gap", self.site, reading.gateway,
                        reading.device, reading.seq, format_time(t), before + tips, format_time(since), allowed)
            doubt.add(BEYOND_ENVELOPE)
            return 0, (since, f"reported {before + tips} tips at {self._when(t)}, more rain than physically "
                              f"possible since {self._when(since)} (at most {allowed})")
        if (before + tips) * size.mm_float >= review_mm(seconds) and FLAG_EXTREME_RATE not in doubt:
            log.info("%s: rain reading at %s: %d tips since %s is extreme but possible rain: counted, flagged %s",
                     self.site, format_time(t), before + tips, format_time(since), FLAG_EXTREME_RATE)
            doubt.add(FLAG_EXTREME_RATE)
        return tips, unknown

    def _end_gaps(self, t: datetime, flags: set[str], unknown: tuple[datetime, str] | None,
                  ) -> tuple[list[Event], datetime | None]:
        """The data gap a gauge reading at ``t`` ends -- the open one (the gauge reports again), or the
        ``unknown`` interval it reports -- as events, and where that gap began (``None``: none)."""
        out: list[Event] = []
        gap_from: datetime | None = None
        if self._gap_open is not None and t > self._gap_open:
            gap_from = self._gap_open
            self._gap_open = None
            gap = GapSummary(self.gauge, gap_from, t)
            self.gaps.append(gap)
            if unknown is not None or FLAG_CATCH_UP not in flags:
                self._unknown_rain.append(gap)  # a catch-up's tips are the gap's (counted, time unknown)
            out.append(self._gap_event(gap_from, t, t, "reported again", self._gap_filled()))
        elif unknown is not None and t > unknown[0]:
            gap_from = unknown[0]
            # station values held since the gauge's last trusted reading fall inside this gap
            out += self._use_pending(gap_from, t)
            gap = GapSummary(self.gauge, gap_from, t)
            self.gaps.append(gap)
            self._unknown_rain.append(gap)
            out.append(self._gap_event(gap_from, t, t, unknown[1], self._gap_filled()))
        return out, gap_from

    def _size(self, stored: str | None, t: datetime, reading: Reading | None = None) -> TipResolution | None:
        """The tip size of a gauge reading at ``t`` that names ``stored`` (``None``/``""``: none): the
        site file's when they agree or the reading names none (counted in :attr:`assumed`), ``None``
        when they disagree (the first such reading is kept in :attr:`mismatch`, logged)."""
        if stored and stored == self._single:
            return self.resolution
        if not stored:
            self._assume(t)
            return self.sizes.at(t)
        try:
            return self.sizes.check(stored, t)
        except TipSizeMismatch as exc:
            if self.raise_mismatch:
                raise
            self.mismatched += 1
            if self.mismatch is None:
                self.mismatch = exc
                where = f" ({reading.gateway}/{reading.boot} seq {reading.seq})" if reading is not None else ""
                log.error("%s: %s%s: not counted", self.site, exc, where)
            return None

    def _assume(self, t: datetime, last: datetime | None = None, count: int = 1) -> None:
        """One more reading without a tip size, read with the site file's size at ``t`` (or ``count``
        of them from ``t`` to ``last``)."""
        if not self.assumed:
            log.warning("%s: rain gauge %s: a reading at %s carries no tip size (stored or sent by an earlier "
                        "stormwatch): read as %s, the size the site file gives for its time", self.site, self.gauge,
                        format_time(t), self.sizes.text_at(t))
        self.assumed += count
        last = t if last is None else last
        span = self._assumed_span
        self._assumed_span = (t, last) if span is None else (min(span[0], t), max(span[1], last))

    def assumed_note(self) -> str | None:
        """What was assumed for readings without a tip size (:meth:`stormwatch.tipsizes.TipSizes.assumed`),
        or ``None`` when every reading named its size."""
        span = self._assumed_span
        return None if span is None else self.sizes.assumed(self.assumed, span[0], span[1])

    def replay(self, chunk: Chunk) -> list[Event]:
        """The gauge's (and the fallback station's) rows of a backfill chunk
        (:class:`~stormwatch.alerts.rules.Chunk`): what :meth:`feed` gives for each, in the engine's
        order, with ``advance_to`` before each as the engine calls it.

        A *quiet* gauge reading -- a clean whole ``0`` tips at most :attr:`silence_allowance` after
        the gauge's previous reading, no data gap open, no open storm it could close (before last
        tip + dry gap) -- changes nothing but the gauge's coverage (:meth:`feed` moves ``_covered``
        and ``_before`` and drops held station values; it emits nothing and ``next_due`` stays after
        it, so the engine calls no ``advance_to`` before it): a run of them moves the coverage at
        once. Every other reading goes through :meth:`feed`. Nearly every reading of a year is quiet.
        """
        rows = chunk.rows.get((self.gauge, "rain_tips")) or []
        fb = self.fallback
        station = (chunk.rows.get((fb.station, PRECIPITATION)) or []) if fb is not None else []
        if not rows and not station:
            return []
        single = self._single  # the size every quiet reading names (None: a replaced gauge, looked up)
        if not station and isinstance(rows, SeriesRows) and rows.unit == TIP_UNIT \
                and (rows.tip_size == single or (not rows.tip_size and single is not None)):
            return self._replay_columns(chunk, rows)
        return self._replay_rows(chunk, rows, station)

    def _state(self) -> tuple[int, int, int, bool]:
        """What decides whether the next gauge row is quiet (:meth:`replay`): the coverage and the
        instant before it (µs), when the open storm's dry gap ends (µs), and whether a quiet reading
        can follow (covered, no gap open)."""
        s = self._storm
        return (0 if self._covered is None else us_of(self._covered),
                0 if self._before is None else us_of(self._before),
                _NEVER if s is None else us_of(s.last_tip + self.gap),
                self._covered is not None and self._gap_open is None)

    def _slow(self, chunk: Chunk, device: str, quantity: str, row: StoredRow) -> list[Event]:
        """One row as the engine gives it: ``advance_to`` just before it when due, then :meth:`feed`."""
        out: list[Event] = []
        reading = chunk.reading(device, quantity, row)
        edge = reading.time - _TICK
        if self.next_due is not None and self.next_due <= edge:
            out += self.advance_to(edge)
        return out + self.feed(reading)

    def _replay_columns(self, chunk: Chunk, rows: SeriesRows) -> list[Event]:
        """:meth:`replay` of the gauge's columns (one unit, one tip size, no flag): the quiet runs found
        at C speed, every other row through :meth:`feed`."""
        out: list[Event] = []
        allow = self.silence_allowance // _US
        moved = False
        gateway = ""
        cov, before, close, quiet = self._state()
        times, values, n, i = rows.times, rows.values, len(rows), 0
        # stop[k]: row k is never quiet -- tips other than a whole 0, or after more than the allowance
        stop = list(map(operator.or_, map(operator.ne, values, repeat(0)),
                        map(operator.is_not, map(type, values), repeat(int))))
        after_gap = [False, *map(operator.gt, map(operator.sub, islice(times, 1, None), times), repeat(allow))]
        stop = list(map(operator.or_, stop, after_gap))
        while i < n:
            end = i
            if quiet and times[i] - cov <= allow:
                end = min(_index(stop, i + 1, n) if not stop[i] else i, bisect_left(times, close, i))
            if end > i:  # rows i .. end-1 are quiet: what feed leaves after each, at once
                if not rows.tip_size:
                    self._assume(time_of_us(times[i]), time_of_us(times[end - 1]), end - i)
                if end - i >= 2:
                    before, cov = times[end - 2], times[end - 1]
                elif times[i] != cov:
                    before, cov = cov, times[i]
                gateway, moved = rows.gateway, True
                i = end
                if i == n:
                    break
            if moved:
                self._moved(before, cov, gateway)
                moved = False
            out += self._slow(chunk, self.gauge, "rain_tips", rows[i])
            cov, before, close, quiet = self._state()
            i += 1
        if moved:
            self._moved(before, cov, gateway)
        return out

    def _quiet_row(self, row: StoredRow, cov: int, close: int, allow: int) -> bool:
        """Whether a gauge row (after coverage ``cov``, before the open storm's end ``close``, at most
        ``allow`` after it, µs) is quiet (:meth:`replay`); the caller knows a quiet reading can follow."""
        t, tips, tip = row[ROW_TIME], row[ROW_VALUE], row[ROW_TIP_SIZE]
        single = self._single
        return (tips == 0 and not row[ROW_FLAGS] and t - cov <= allow and t < close
                and type(tips) is int and row[ROW_UNIT] == TIP_UNIT
                and (tip == single or not tip or (single is None and tip == self.sizes.text_at(time_of_us(t)))))

    def _replay_rows(self, chunk: Chunk, rows: Sequence[StoredRow], station: Sequence[StoredRow]) -> list[Event]:
        """:meth:`replay` row by row, the station's rows merged in the engine's order."""
        fb = self.fallback
        out: list[Event] = []
        moved = False
        gateway = ""
        si, ns = 0, len(station)
        allow = self.silence_allowance // _US
        cov, before, close, quiet = self._state()
        for row in rows:
            if si < ns and engine_order(station[si]) < engine_order(row):  # station values before this reading
                if moved:
                    self._moved(before, cov, gateway)
                    moved = False
                assert fb is not None
                while si < ns and engine_order(station[si]) < engine_order(row):
                    out += self._slow(chunk, fb.station, PRECIPITATION, station[si])
                    si += 1
                cov, before, close, quiet = self._state()
            if quiet and self._quiet_row(row, cov, close, allow):
                t = row[ROW_TIME]
                if not row[ROW_TIP_SIZE]:
                    self._assume(time_of_us(t))
                if t != cov:
                    before, cov = cov, t
                gateway, moved = row[ROW_GATEWAY], True
                continue
            if moved:
                self._moved(before, cov, gateway)
                moved = False
            out += self._slow(chunk, self.gauge, "rain_tips", row)
            cov, before, close, quiet = self._state()
        if moved:
            self._moved(before, cov, gateway)
        if si < ns:
            assert fb is not None
            for row in station[si:]:
                out += self._slow(chunk, fb.station, PRECIPITATION, row)
        return out

    def _moved(self, before_us: int, covered_us: int, gateway: str) -> None:
        """The state :meth:`feed` leaves after a run of quiet readings (see :meth:`replay`)."""
        assert self._covered is not None
        if covered_us != us_of(self._covered):
            self._before, self._covered, self._tips_at_covered = time_of_us(before_us), time_of_us(covered_us), 0
        self.gateway = gateway
        self._pending.clear()
        self._schedule()

    # -- the fallback station ----------------------------------------------------------------

    def _station_value(self, reading: Reading) -> list[Event]:
        """A value of the fallback station's record (interval ``(time - interval, time]``).

        Counted as rain at its interval's end only when the whole interval lies inside a data gap
        of the gauge: at once while a gap is open (and began at or before the interval), held
        when the gauge has been silent since before the interval but no gap is declared yet
        (decided when the gap opens, or dropped when the gauge reports), dropped otherwise -- the
        gauge's own data always wins.
        """
        depth = precipitation_in(reading.value, reading.unit)
        if depth is None:
            log.error("%s: station reading %s at %s is not a precipitation depth in mm or [in_i] (value %r, unit %r): "
                      "ignored", self.site, reading.device, format_time(reading.time), reading.value, reading.unit)
            return []
        start = reading.time - self._station_span
        if self._gap_open is not None:
            if start >= self._gap_open:
                return self._station_rain(start, reading, depth)
            return []
        if self._covered is not None and start >= self._covered and depth:
            self._pending.append((start, reading, depth))
        return []

    def _use_pending(self, gap_start: datetime, gap_end: datetime | None) -> list[Event]:
        """Count the held station values whose interval lies inside the gap from ``gap_start``."""
        out: list[Event] = []
        pending, self._pending = self._pending, deque()
        for start, reading, depth in pending:
            if start >= gap_start and (gap_end is None or reading.time <= gap_end):
                out += self._station_rain(start, reading, depth)
        return out

    def _station_rain(self, start: datetime, reading: Reading, depth: Fraction) -> list[Event]:
        self._gap_station_in += depth
        if not depth:
            return []
        t = reading.time
        out: list[Event] = []
        storm = self._storm
        if storm is not None and t >= storm.last_tip + self.gap:
            out += self._close(storm, storm.last_tip + self.gap, confirmed=False)
        evidence = {"time": format_time(t), "station": reading.device, "interval_start": format_time(start),
                    "precipitation": reading.value, "unit": reading.unit,
                    "gateway": reading.gateway, "boot": reading.boot, "seq": reading.seq}
        return out + self._rain(t, 0, depth, evidence, set(reading.flags) - INFORMATIONAL_FLAGS)

    def _gap_filled(self) -> Fraction | None:
        """Station rain counted in the gap just closed (``None`` without a fallback station); resets it."""
        filled, self._gap_station_in = self._gap_station_in, Fraction(0)
        return filled if self.fallback is not None else None

    def _rain(self, t: datetime, tips: int, station_in: Fraction, evidence: dict[str, Any],
              doubt: set[str], size: TipResolution | None = None) -> list[Event]:
        out: list[Event] = []
        size = size or self.resolution
        started = self._storm is None
        if started:
            self._storm = _Storm(start=t, last_tip=t)
        storm = self._storm
        assert storm is not None
        storm.verify |= doubt
        storm.tips += tips
        if tips:
            storm.depth += size.depth_in(tips)
            storm.sizes[size] = storm.sizes.get(size, 0) + tips
        storm.station_in += station_in
        storm.last_tip = t
        storm.evidence.append(evidence)
        if started:
            out.append(self._event("storm_started", storm, t, f"rain started at {self._when(t)}"))
        counted, counted_depth, counted_in = self._qualifying(storm, t, tips, size, station_in)
        if storm.threshold_time is None and self._reaches(counted_depth, counted_in):
            storm.threshold_time = t
            due = t + self.within if self.params.clock_from == "threshold" else None
            span = (f"within {self.params.rolling_window_hours:g} h" if self.rolling
                    else f"since {self._when(storm.start)}")
            out.append(self._event(
                "storm_qualified", storm, t,
                f"qualifying storm in progress: {self._depth_text(counted, counted_in)} {span}; "
                f"an inspection will be due within {self.params.inspection_within_hours:g} h of "
                + ("the threshold crossing" if due else "its end"),
                due_at=due,
            ))
            if self.params.order_opens == "threshold" and due is not None:
                out.append(self._event(
                    "storm_inspection_due", storm, t,
                    f"storm event of {self._depth_text(counted)} {span} occurred at {self._when(t)}: "
                    f"inspection due by {self._when(due)}", due_at=due, evidence=list(storm.evidence)))
        return out

    def advance_to(self, t: datetime) -> list[Event]:
        out: list[Event] = []
        covered = self._covered
        if covered is not None and self._gap_open is None and t > covered + self.silence_allowance:
            self._gap_open = covered
            self._gap_station_in = Fraction(0)
            out.append(self._gap_event(covered, None, covered + self.silence_allowance,
                                       f"silent for more than {self.silence_allowance.total_seconds():g} s"))
            out += self._use_pending(covered, None)
        storm = self._storm
        if storm is not None and t >= storm.last_tip + self.gap + self.silence_allowance:
            # Event time is past the dry gap and no gauge reading has closed the storm: the gauge is silent.
            storm.gap_reported = True
            if storm.threshold_time is not None:
                out += self._close(storm, storm.last_tip + self.gap, confirmed=False)
        self._schedule()
        return out

    def source_offline(self, gateway: str, at: datetime, received: datetime | None = None) -> list[Event]:
        """The gauge's gateway is reported offline (its MQTT last will) and the clock reads ``at``:
        open a data gap once the gauge has been silent past its allowance on that clock.

        The clock, not event time: with its gateway gone nothing moves the site's event time. Within
        the allowance no poll slot is lost (a gateway restarted in time, or a lockstep clock that waits
        for it), so no gap; the caller asks again as its clock moves. ``received`` is the newest gauge
        reading received but not yet released to the rules (the engine's reorder buffer); the gap
        starts after it. Nothing is opened when the gateway is not the gauge's or a gap is already open.
        """
        if (self.gateway is not None and gateway != self.gateway) or self._gap_open is not None:
            return []
        known = [x for x in (self._covered, received) if x is not None]
        start = max(known) if known else at
        if known and at <= start + self.silence_allowance:
            return []
        self._gap_open = start
        self._gap_station_in = Fraction(0)
        opened = start + self.silence_allowance if known else at
        out = [self._gap_event(start, None, opened, f"offline (gateway {gateway} last will)")]
        out += self._use_pending(start, None)
        self._schedule()
        return out

    def open_gap(self) -> GapSummary | None:
        """The data gap still open, if any."""
        return GapSummary(self.gauge, self._gap_open, None) if self._gap_open is not None else None

    @property
    def covered_until(self) -> datetime | None:
        """Time of the gauge's latest reading."""
        return self._covered

    def in_progress(self) -> StormSummary | None:
        """The open storm (reported as in progress at the end of a backfill), or ``None``."""
        s = self._storm
        if s is None:
            return None
        return StormSummary(s.start, s.last_tip, s.tips, float(s.depth),
                            s.threshold_time is not None,
                            inspection_asked=s.threshold_time is not None and self.params.order_opens == "threshold",
                            sizes=tuple((str(z), n) for z, n in sorted(s.sizes.items(), key=lambda kv: -kv[0].inches)
                                        if n))


class StormDetails(EventDetails):
    """Details of the storm events (``storm_started``, ``storm_qualified``, ``storm_inspection_due``,
    ``storm_ended_below_threshold``).

    Attributes:
        storm_start: the storm's first tip (UTC).
        storm_end: its last tip (``storm_inspection_due``, ``storm_ended_below_threshold``: known once
            the dry gap passed).
        tips: whole tips counted so far; depth_in: their depth, inches (each reading's tips × its own
            tip size: across a gauge replacement, tips of two sizes).
        needs_verification: the quality flags of rain readings that shaped the storm (rules.md R1).
        source, station_distance_km, station_depth_in: set when rain of the site's fallback station
            was counted for the gauge's data gaps: ``station <ID>``, its distance (km, when the
            site file gives it) and the inches it contributed (included in ``depth_in``; ``tips``
            are the gauge's own).
        depth_lower_bound: ``True`` when the rain gauge had a data gap between the storm's first and
            last tip whose rain is unknown (readings lost on the way, a counter reset, a count beyond
            the envelope -- not a gap a counter catch-up counted; no fallback station filled it): the
            storm was at least ``depth_in`` deep (``storm_inspection_due`` only; rules.md R1).
    """

    storm_start: UtcDatetime | None = None
    storm_end: UtcDatetime | None = None
    tips: int | None = Field(default=None, ge=0)
    depth_in: float | None = Field(default=None, ge=0)
    needs_verification: list[str] | None = None
    source: str | None = None
    station_distance_km: float | None = Field(default=None, ge=0)
    station_depth_in: float | None = Field(default=None, ge=0)
    depth_lower_bound: bool | None = None

    def summary(self, tz: ZoneInfo) -> str:
        if self.tips is None or self.depth_in is None:
            return ""
        text = ("at least " if self.depth_lower_bound else "") + \
            f"{inches(self.depth_in)} ({self.tips} tip{'' if self.tips == 1 else 's'}"
        if self.source and self.station_depth_in is not None:
            far = f", {self.station_distance_km:g} km away" if self.station_distance_km is not None else ""
            text += f" + {inches(self.station_depth_in)} from {self.source}{far} in the gauge's data gap"
        text += ")"
        if self.storm_start is not None and self.storm_end is not None:
            text += f", rain {local_time(self.storm_start, tz)} – last tip {local_time(self.storm_end, tz)}"
        return text

    def headline(self, event: Event, tz: ZoneInfo) -> str:
        """The summary; a storm that ended below the threshold says that nothing is due."""
        text = self.summary(tz)
        if event.kind == "storm_ended_below_threshold":
            return f"{text}: ended below the threshold, no inspection due"
        return text

    def span(self) -> tuple[datetime, datetime] | None:
        return (self.storm_start, self.storm_end) if self.storm_start and self.storm_end else None


class GapDetails(EventDetails):
    """Details of ``data_gap``: the rain gauge's silence (``gap_end`` absent while it lasts) and the
    storm open when it began, if any (its start and tips so far)."""

    gap_start: UtcDatetime
    gap_end: UtcDatetime | None = None
    storm_start: UtcDatetime | None = None
    tips: int | None = Field(default=None, ge=0)
    source: str | None = None
    station_distance_km: float | None = Field(default=None, ge=0)
    station_depth_in: float | None = Field(default=None, ge=0)

    def summary(self, tz: ZoneInfo) -> str:
        if self.gap_end is None:
            return f"no data since {local_time(self.gap_start, tz)}"
        text = f"no data {local_time(self.gap_start, tz)} – {local_time(self.gap_end, tz)}"
        if self.source and self.station_depth_in is not None:
            text += f"; {self.source} reported {inches(self.station_depth_in)} in it"
        return text

    def headline(self, event: Event, tz: ZoneInfo) -> str:
        """The message up to its note: which gauge, why and when (``rain gauge rain-1 silent for more
        than 120 s: no data from ...``) -- a timeline of gaps says whose and why."""
        head, note, rest = event.message.partition(UNKNOWN_NOTE)
        return head + rest if note and head else self.summary(tz)

    def span(self) -> tuple[datetime, datetime] | None:
        return (self.gap_start, self.gap_end) if self.gap_end is not None else None

    def variant(self) -> str:
        return "open" if self.gap_end is None else "closed"


def build(ctx: RuleContext) -> StormRuleState | None:
    """R1 on the site's rain gauge (its profile's counter and its ``replaced_gauges`` give the tip sizes)."""
    gauge = ctx.device("rain_gauge")
    if gauge is None:
        log.warning("%s: pack %s has storm rule %s but the site has no rain_gauge: R1 not watched",
                    ctx.site, ctx.pack_name, ctx.rule_id)
        return None
    profile = ctx.profile(gauge)
    if profile.counter is None:
        raise BuildError(f"rain gauge {gauge!r} profile {profile.model!r} has no counter "
                         "(its tip resolution is needed for R1)")
    assert isinstance(ctx.params, StormRule)
    poll = timedelta(seconds=ctx.cfg.device(gauge).poll_interval_s)
    sizes = TipSizes.of(ctx.cfg, ctx.profiles, gauge)
    assert sizes is not None  # the profile has a counter
    return StormRuleState(ctx.site, ctx.rule_id, ctx.params, gauge, sizes,
                          silence_allowance=2 * poll, fallback=ctx.cfg.fallback_gauge, tz=ctx.cfg.site.tz)


KIND = RuleKind(
    kind="storm", params=StormRule, build=build,
    summary="R1: inspection within 24 h of a storm of 0.5 in or more (§133-7A(2), §196-9B)",
    roles=(Role("rain_gauge", "rain_tips", "the tipping-bucket gauge (a counter profile)"),),
    # the site's fallback_gauge (a station record, stormwatch station import) fills the gauge's data gaps
    events=(
        EventKindSpec("storm_started", StormDetails, "the first tip of a storm"),
        EventKindSpec("storm_qualified", StormDetails, "the tip that reaches the threshold: an inspection will be due"),
        EventKindSpec("storm_inspection_due", StormDetails, "a qualifying storm ended: inspection due by due_at",
                      opens="storm_inspection", inspection=True, chart="rain"),
        EventKindSpec("storm_ended_below_threshold", StormDetails,
                      "a storm ended (its dry gap passed) below the threshold: no inspection due"),
        EventKindSpec("data_gap", GapDetails, "the rain gauge is silent (gap_end absent) or reported again"),
    ),
)
