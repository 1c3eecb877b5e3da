"""Backfill: re-run a site's rules over stored readings (``stormwatch evaluate``).

The same :class:`stormwatch.alerts.engine.Engine` code as live (design-notes.md, "Rules"): the store's
readings of ``[start, end)`` in event-time order go through :meth:`Engine.feed`, then
:meth:`Engine.flush`. Over a period already processed live (from the same first reading) it gives
the same events, compared by ``(kind, occurrence, due_at)``; work orders are not touched.

A gap in the rain-gauge data is never reported as dry (issue 3, item 5): the evaluation lists every
period without gauge data -- gaps the engine saw, the start of the window before the gauge's first
reading and its end after the gauge's last one when longer than the gauge's silence allowance (two
poll intervals) -- and its summary says rain there is unknown.

Depths for people (:func:`depth_text`) are printed so they never mislead near a threshold: in the
gauge's own unit, exactly (``63 tips = 12.6 mm``), and for a millimetre gauge also in inches to
three decimals, cut (never rounded up): ``12.6 mm (0.496 in)`` -- a 0.496 in storm must not read
as the 0.50 in of Ch. 133 §133-7A(2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

from stormwatch.alerts.engine import DEFAULT_LATENESS_S, Engine
from stormwatch.alerts.rules import RuleTrace
from stormwatch.alerts.rules.basin import BasinRuleState
from stormwatch.alerts.rules.storm import GapSummary, StormRuleState, StormSummary
from stormwatch.alerts.rules.turbidity import TurbidityRuleState
from stormwatch.config import SiteConfig
from stormwatch.contract import Event, Reading
from stormwatch.display import local_time
from stormwatch.profiles import ProfileError, ProfileLibrary
from stormwatch.rain import TipResolution
from stormwatch.stores.base import ReadingStore
from stormwatch.wire import format_time

log = logging.getLogger(__name__)


def _cut(value: Fraction, places: int) -> str:
    """``value`` with exactly ``places`` decimals, cut toward zero (never rounded up)."""
    scaled = Decimal(value.numerator) / Decimal(value.denominator)
    return str(scaled.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN))


def depth_text(tips: int, resolution: str) -> str:
    """``"63 tips = 12.6 mm (0.496 in)"`` (mm gauge) or ``"63 tips = 0.63 in"`` (inch gauge).

    The depth in the gauge's unit is exact (a whole number of decimal tip sizes); the inches of a
    mm gauge are cut to 3 decimals, so a depth below a threshold never prints at or above it.

    Args:
        tips: whole tips.
        resolution: the gauge's tip size as its profile writes it (``"0.2 mm"``, ``"0.01 in"``).

    Raises:
        ValueError: ``resolution`` is not ``<decimal> in|mm``.
    """
    res = TipResolution.parse(resolution)
    count = f"{tips} tip{'' if tips == 1 else 's'}"
    if resolution.strip().endswith("mm"):
        mm = res.depth_mm(tips)
        exact_mm = format((Decimal(mm.numerator) / Decimal(mm.denominator)).normalize(), "f")
        return f"{count} = {exact_mm} mm ({_cut(res.depth_in(tips), 3)} in)"
    inches = res.depth_in(tips)
    places = max(2, -int(Decimal(resolution.split()[0]).as_tuple().exponent))
    return f"{count} = {_cut(inches, places)} in"


def gauge_resolution(cfg: SiteConfig, profiles: ProfileLibrary) -> str | None:
    """The tip size of ``cfg``'s rain gauge as its profile writes it (``"0.2 mm"``), or ``None``."""
    if cfg.rain_gauge is None:
        return None
    try:
        counter = profiles.get(cfg.device(cfg.rain_gauge).profile).counter
    except (KeyError, ProfileError):
        return None
    return counter.resolution if counter is not None else None


@dataclass(frozen=True)
class Evaluation:
    """The result of one backfill.

    Attributes:
        site: site id.
        start, end: the evaluated window ``[start, end)`` (UTC).
        readings: how many stored readings were evaluated.
        events: the ordinance events, in the order the engine emitted them.
        in_progress: storms still open at the end of the window (not ended, no deadline yet).
        gaps: periods without rain-gauge data, oldest first (``end`` None: to the window's end).
        has_gauge: whether the pack watches storms at this site (a rain gauge and an R1 rule).
        resolution: the gauge's tip size as its profile writes it (``"0.2 mm"``), if known.
    """

    site: str
    start: datetime
    end: datetime
    readings: int
    events: list[Event]
    in_progress: list[StormSummary]
    gaps: list[GapSummary] = field(default_factory=list)
    has_gauge: bool = True
    resolution: str | None = None

    def depth(self, tips: int) -> str:
        """``tips`` of this site's gauge for a person (:func:`depth_text`; tips only if unknown)."""
        return depth_text(tips, self.resolution) if self.resolution else f"{tips} tips"

    def in_progress_lines(self, tz: ZoneInfo, where: str = "the window") -> list[str]:
        """One line per storm still open at the end (``where``: "the window", "the file"), site-local times."""
        return [f"storm in progress at the end of {where}: {self.depth(s.tips)} since {local_time(s.start, tz)}, "
                f"last tip {local_time(s.last_tip, tz)}; "
                + (("it qualified: its inspection was asked for when it did" if s.inspection_asked
                    else "it qualifies: an inspection is due once it ends") if s.qualified
                   else "below the inspection threshold so far")
                for s in self.in_progress]

    @property
    def qualifying_storms(self) -> list[Event]:
        """``storm_inspection_due`` events of the qualifying storms that ended (a pack that asks for the
        inspection at the threshold crossing, ``order_opens: threshold``, has one for a storm still in
        progress too: not counted here)."""
        going_on = {s.start for s in self.in_progress}
        return [e for e in self.events if e.kind == "storm_inspection_due"
                and getattr(e.details, "storm_start", None) not in going_on]

    def summary(self) -> str:
        """One sentence on rain in the window; never "no storm" across a data gap."""
        if not self.has_gauge:
            return "storms not watched at this site (no rain gauge or no storm rule in the pack)"
        n = len(self.qualifying_storms)
        open_q = [s for s in self.in_progress if s.qualified]
        parts = [f"{n} qualifying storm(s) ended" if n else "no qualifying storm ended in the covered periods"]
        if open_q:
            parts.append(f"{len(open_q)} qualifying storm(s) still in progress")
        if self.gaps:
            spans = ", ".join(f"{format_time(g.start)} to {format_time(g.end) if g.end else format_time(self.end)}"
                              for g in self.gaps)
            parts.append(f"rain UNKNOWN (no rain-gauge data, not dry) from {spans}")
        elif not n and not open_q:
            parts.append("rain-gauge data complete")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``stormwatch evaluate --json``)."""
        return {
            "site": self.site, "from": format_time(self.start), "to": format_time(self.end),
            "readings": self.readings,
            "events": [e.to_wire() for e in self.events],
            "in_progress": [{"storm_start": format_time(s.start), "last_tip": format_time(s.last_tip), "tips": s.tips,
                             "depth_in": s.depth_in, "depth": self.depth(s.tips), "qualified": s.qualified}
                             for s in self.in_progress],
            "data_gaps": [{"device": g.device, "start": format_time(g.start),
                           "end": format_time(g.end) if g.end else format_time(self.end)} for g in self.gaps],
            "qualifying_storms": len(self.qualifying_storms),
            "summary": self.summary(),
        }


#: Event time read from the store per query in a backfill: a year of 1-minute data of a site is
#: never held in memory at once (one day of four sensors is 5,760 readings).
CHUNK = timedelta(days=1)


def evaluate(cfg: SiteConfig, profiles: ProfileLibrary, store: ReadingStore, start: datetime, end: datetime,
             *, lateness_s: float = DEFAULT_LATENESS_S, trace: RuleTrace | None = None,
             on_readings: Callable[[list[Reading]], None] | None = None) -> Evaluation:
    """Re-run the rules of ``cfg``'s pack over its stored readings of ``[start, end)``.

    The store is read one :data:`CHUNK` of event time at a time (memory stays flat over a year)
    and the chunks go through :meth:`Engine.replay` -- the engine's own checks and rule code.

    Args:
        trace: given to every rule (:class:`stormwatch.alerts.rules.RuleTrace`): the quantities the
            rules decide on, for a report.
        on_readings: called with each chunk of stored readings as read (e.g. to count them).

    Raises:
        ValueError: ``end`` not after ``start``.
        stormwatch.alerts.packs.PackError, stormwatch.alerts.engine.EngineError: the site cannot be evaluated.
        stormwatch.stores.base.StoreError: the store cannot be read.
    """
    if end <= start:
        raise ValueError(f"--until ({format_time(end)}) must be after --from ({format_time(start)})")
    engine = Engine.for_site(cfg, profiles, None, lateness_s)
    if trace is not None:
        for rule in engine.rules:
            if isinstance(rule, StormRuleState | TurbidityRuleState | BasinRuleState):
                rule.trace = trace
    log.info("%s: evaluating stored readings from %s to %s", cfg.site.id, format_time(start), format_time(end))
    events: list[Event] = []
    count = 0
    t = start
    while t < end:
        upto = min(end, t + CHUNK)
        readings = store.query_readings(cfg.site.id, start=t, end=upto)
        if on_readings is not None:
            on_readings(readings)
        count += len(readings)
        events += engine.replay(readings)
        t = upto
    events += engine.flush()
    log.info("%s: %d stored readings evaluated, %d events", cfg.site.id, count, len(events))
    return Evaluation(cfg.site.id, start, end, count, events, engine.in_progress(),
                      _gaps(engine, start, end), has_gauge=engine.storm is not None,
                      resolution=gauge_resolution(cfg, profiles))


def _gaps(engine: Engine, start: datetime, end: datetime) -> list[GapSummary]:
    storm = engine.storm
    if storm is None:
        return []
    allowance = storm.silence_allowance
    gaps = list(engine.gaps())
    covered = storm.covered_until
    if covered is None:
        return [GapSummary(storm.gauge, start, None)]
    first_reading = storm.first_reading or covered
    if first_reading - start > allowance:
        gaps.insert(0, GapSummary(storm.gauge, start, first_reading))
    if gaps and gaps[-1].end is None:
        gaps[-1] = GapSummary(storm.gauge, gaps[-1].start, None)
    elif end - covered > allowance:
        gaps.append(GapSummary(storm.gauge, covered, None))
    return gaps
