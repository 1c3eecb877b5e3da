"""Backfill: re-run a site's rules over stored readings (``stormwatch evaluate``).

The same :class:`alerts.engine.Engine` code as live (design-notes.md, "Rules"): the store's
readings of ``[start, end)`` in event-time order go through :meth:`Engine.feed`, then
:meth:`Engine.flush`. Over a period already processed live (from the same first reading) it gives
the same events, compared by ``(kind, occurrence, due_at)``; work orders are not touched.

A gap in the rain-gauge data is never reported as dry (issue 3, item 5): the evaluation lists every
period without gauge data -- gaps the engine saw, the start of the window before the gauge's first
reading and its end after the gauge's last one when longer than the gauge's silence allowance (two
poll intervals) -- and its summary says rain there is unknown.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from alerts.engine import DEFAULT_LATENESS_S, Engine
from alerts.rules.storm import GapSummary, StormSummary
from stormwatch.config import SiteConfig
from stormwatch.contract import Event, format_time
from stormwatch.profiles import ProfileLibrary
from stormwatch.store import ReadingStore

log = logging.getLogger(__name__)


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
    """

    site: str
    start: datetime
    end: datetime
    readings: int
    events: list[Event]
    in_progress: list[StormSummary]
    gaps: list[GapSummary] = field(default_factory=list)
    has_gauge: bool = True

    @property
    def qualifying_storms(self) -> list[Event]:
        """``storm_inspection_due`` events (one per qualifying storm that ended)."""
        return [e for e in self.events if e.kind == "storm_inspection_due"]

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
                             "depth_in": s.depth_in, "qualified": s.qualified} for s in self.in_progress],
            "data_gaps": [{"device": g.device, "start": format_time(g.start),
                           "end": format_time(g.end) if g.end else format_time(self.end)} for g in self.gaps],
            "qualifying_storms": len(self.qualifying_storms),
            "summary": self.summary(),
        }


def evaluate(cfg: SiteConfig, profiles: ProfileLibrary, store: ReadingStore, start: datetime, end: datetime,
             *, lateness_s: float = DEFAULT_LATENESS_S) -> Evaluation:
    """Re-run the rules of ``cfg``'s pack over its stored readings of ``[start, end)``.

    Raises:
        ValueError: ``end`` not after ``start``.
        alerts.packs.PackError, alerts.engine.EngineError: the site cannot be evaluated.
        stormwatch.store.StoreError: the store cannot be read.
    """
    if end <= start:
        raise ValueError(f"--to ({format_time(end)}) must be after --from ({format_time(start)})")
    engine = Engine.for_site(cfg, profiles, None, lateness_s)
    readings = store.query_readings(cfg.site.id, start=start, end=end)
    log.info("%s: evaluating %d stored readings from %s to %s", cfg.site.id, len(readings), format_time(start),
             format_time(end))
    events: list[Event] = []
    for r in readings:
        events += engine.feed(r)
    events += engine.flush()
    return Evaluation(cfg.site.id, start, end, len(readings), events, engine.in_progress(),
                      _gaps(engine, start, end), has_gauge=engine.storm is not None)


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
