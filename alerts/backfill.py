"""Backfill: re-run a site's rules over stored readings (``stormwatch evaluate``).

The same rule code as live (design-notes.md, "Rules"): the rules of an
:class:`stormwatch.alerts.engine.Engine` take the store's readings of ``[start, end)`` in event-time
order, series by series as rows (:func:`evaluate`: what :meth:`Engine.replay` and
:meth:`Engine.flush` give, without a model object per reading). Over a period already processed
live (from the same first reading) it gives the same events, compared by ``(kind, occurrence,
due_at)``; work orders are not touched.

The design: docs/alerts.md ("The modules", `alerts/backfill.py`).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction
from operator import itemgetter
from typing import Any
from zoneinfo import ZoneInfo

from stormwatch.alerts.engine import DEFAULT_LATENESS_S, Engine, EngineError
from stormwatch.alerts.rules import Chunk, RuleTrace
from stormwatch.alerts.rules.basin import BasinRuleState
from stormwatch.alerts.rules.storm import GapSummary, StormRuleState, StormSummary
from stormwatch.alerts.rules.turbidity import TurbidityRuleState
from stormwatch.config import SiteConfig
from stormwatch.contract import Event
from stormwatch.display import local_time, plural
from stormwatch.ingest.validate import LEVEL_QUANTITIES
from stormwatch.physics import NON_NEGATIVE
from stormwatch.profiles import ProfileError, ProfileLibrary
from stormwatch.rain import PRECIPITATION, TipResolution
from stormwatch.stores.base import ROW_FLAGS, ROW_TIME, ROW_VALUE, ReadingStore, StoredRow
from stormwatch.stores.rows import engine_order, row_reading, series_chunks, stored_series, time_of_us
from stormwatch.stores.seriesrows import SeriesRows
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: Rain-gauge gaps a summary lists one by one; more are told as a count and a total (the list:
#: ``evaluate --json``, or ``-v``).
GAPS_LISTED = 10


def _cut(value: Fraction, places: int) -> str:
    """``value`` with exactly ``places`` decimals, cut toward zero (never rounded up)."""
    scaled = Decimal(value.numerator) / Decimal(value.denominator)
    return str(scaled.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN))


def inches_cut(depth_in: Fraction) -> str:
    """``"0.504 in"``: an exact depth in inches with 3 decimals, cut (never rounded up to a threshold)."""
    return f"{_cut(depth_in, 3)} in"


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
    count = f"{tips} tip{'' if tips == 1 else 's'}"
    amount = depth_amount(tips, resolution)
    if resolution.strip().endswith("mm"):
        return f"{count} = {amount} mm ({_cut(TipResolution.parse(resolution).depth_in(tips), 3)} in)"
    return f"{count} = {amount} in"


def depth_amount(tips: int, resolution: str) -> str:
    """``"12.6"`` (mm gauge) or ``"0.63"`` (inch gauge): the depth of ``tips`` in the gauge's own unit
    as :func:`depth_text` writes it -- millimetres exact, inches cut to the tip size's decimals (at
    least 2), never rounded up.

    Raises:
        ValueError: ``resolution`` is not ``<decimal> in|mm``.
    """
    res = TipResolution.parse(resolution)
    if resolution.strip().endswith("mm"):
        mm = res.depth_mm(tips)
        return format((Decimal(mm.numerator) / Decimal(mm.denominator)).normalize(), "f")
    places = max(2, -int(Decimal(resolution.split()[0]).as_tuple().exponent))
    return _cut(res.depth_in(tips), places)


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

    def storm_depth(self, storm: StormSummary) -> str:
        """A storm's depth for a person: :func:`depth_text` of its one tip size, or -- across a gauge
        replacement -- each size's tips and the exact sum in inches, cut to 3 decimals."""
        if len(storm.sizes) == 1:
            return depth_text(storm.tips, storm.sizes[0][0])
        if not storm.sizes:
            return self.depth(storm.tips)
        total = sum((TipResolution.parse(size).depth_in(n) for size, n in storm.sizes), Fraction(0))
        return " + ".join(f"{n} tips of {size}" for size, n in storm.sizes) + f" = {inches_cut(total)}"

    def in_progress_lines(self, tz: ZoneInfo, where: str = "the window") -> list[str]:
        """One line per storm still open at the end (``where``: "the window", "the file"), site-local times."""
        return [f"storm in progress at the end of {where}: {self.storm_depth(s)} since {local_time(s.start, tz)}, "
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

    def gap_lines(self, tz: ZoneInfo | None = None) -> list[str]:
        """One line per rain-gauge gap (``evaluate -v``), site-local in ``tz``."""
        def when(t: datetime) -> str:
            return local_time(t, tz) if tz is not None else format_time(t)

        return [f"rain UNKNOWN ({g.device}): {when(g.start)} to {when(g.end or self.end)}" for g in self.gaps]

    def summary(self, tz: ZoneInfo | None = None, incomplete: str = "") -> str:
        """One sentence on rain in the window; never "no storm" across a data gap. Times of gaps are
        site-local with the year in ``tz`` (for a person), ISO UTC without it (the JSON summary).
        ``incomplete``: what the input lacked that no gap shows (rows a replay rejected, cells without
        a value): then the data is never called complete."""

        def when(t: datetime) -> str:
            return local_time(t, tz) if tz is not None else format_time(t)

        if not self.has_gauge:
            return "storms not watched at this site (no rain gauge or no storm rule in the pack)"
        n = len(self.qualifying_storms)
        open_q = [s for s in self.in_progress if s.qualified]
        parts = [f"{plural(n, 'qualifying storm')} ended" if n else "no qualifying storm ended in the covered periods"]
        if open_q:
            parts.append(f"{plural(len(open_q), 'qualifying storm')} still in progress")
        if len(self.gaps) > GAPS_LISTED:
            # hundreds of short gaps would make one line of kilobytes: a count and the total instead
            total_h = sum(((g.end or self.end) - g.start).total_seconds() for g in self.gaps) / 3600
            parts.append(f"rain UNKNOWN (no rain-gauge data, not dry) in {len(self.gaps)} intervals, "
                         f"{total_h:.1f} h in all, from {when(self.gaps[0].start)} to "
                         f"{when(self.gaps[-1].end or self.end)} (each listed: --json or -v)")
        elif self.gaps:
            spans = ", ".join(f"{when(g.start)} to {when(g.end) if g.end else when(self.end)}" for g in self.gaps)
            parts.append(f"rain UNKNOWN (no rain-gauge data, not dry) from {spans}")
        if incomplete:
            parts.append(f"rain-gauge data NOT complete: {incomplete}")
        elif not self.gaps and not n and not open_q:
            parts.append("rain-gauge data complete")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``stormwatch evaluate --json``)."""
        return {
            "site": self.site, "from": format_time(self.start), "to": format_time(self.end),
            "readings": self.readings,
            "events": [e.to_wire() for e in self.events],
            "in_progress": [{"storm_start": format_time(s.start), "last_tip": format_time(s.last_tip), "tips": s.tips,
                             "depth_in": s.depth_in, "depth": self.storm_depth(s), "qualified": s.qualified}
                             for s in self.in_progress],
            "data_gaps": [{"device": g.device, "start": format_time(g.start),
                           "end": format_time(g.end) if g.end else format_time(self.end)} for g in self.gaps],
            "qualifying_storms": len(self.qualifying_storms),
            "summary": self.summary(),
        }


#: Event time read from the store per query in a backfill: a year of 1-minute data of a site is
#: never held in memory at once (one day of four sensors is 5,760 readings).
CHUNK = timedelta(days=1)
_TICK = timedelta(microseconds=1)
#: What the engine checks before a rule sees a reading: a reading flagged ``late`` is data, not a trigger.
_LATE = "late"
_VALUE, _FLAGS = itemgetter(ROW_VALUE), itemgetter(ROW_FLAGS)  # of a StoredRow


def site_series(cfg: SiteConfig, profiles: ProfileLibrary) -> list[tuple[str, str]]:
    """Every ``(device, quantity)`` the site's devices report -- their profiles' points and, for a level
    sensor, the heights a gateway derives (what ingest accepts, :data:`stormwatch.ingest.validate.LEVEL_QUANTITIES`).

    Raises:
        stormwatch.profiles.ProfileError: a device's profile cannot be loaded.
    """
    out: list[tuple[str, str]] = []
    for dev in cfg.devices:
        profile = profiles.get(dev.profile)
        quantities = list(profile.quantities())
        if profile.level is not None:
            quantities += [q for q in LEVEL_QUANTITIES if q not in quantities]
        out += [(dev.id, q) for q in quantities]
    return out


def _accepted(engine: Engine, site: str, device: str, quantity: str,
              rows: Sequence[StoredRow]) -> Sequence[StoredRow]:
    """``rows`` without those the engine refuses before any rule (a ``late`` flag, a value physics
    forbids), each of those given to :meth:`Engine.feed` so it is counted and logged as live."""
    if isinstance(rows, SeriesRows):  # none flagged: only physics can refuse one (its values at C speed)
        if not rows or quantity not in NON_NEGATIVE or min(rows.values) >= 0:
            return rows
    elif not rows or (not any(map(_FLAGS, rows)) and (quantity not in NON_NEGATIVE or min(map(_VALUE, rows)) >= 0)):
        return rows  # nearly every chunk: nothing flagged, nothing negative (checked at C speed)
    bounded = quantity in NON_NEGATIVE
    refused = [r for r in rows if (r[ROW_FLAGS] and _LATE in r[ROW_FLAGS].split(","))
               or (bounded and r[ROW_VALUE] < 0)]
    if not refused:
        return rows
    for r in refused:
        engine.feed(row_reading(site, device, quantity, r))
    drop = {id(r) for r in refused}
    return [r for r in rows if id(r) not in drop]


def _order(item: tuple[tuple[str, str], StoredRow]) -> tuple[int, str, str, int]:
    return engine_order(item[1])


def _fed_one_by_one(rule: Any, chunk: Chunk) -> list[Event]:
    """A rule without ``replay``: every accepted reading of the chunk in the engine's order, ``advance_to``
    before each as the engine calls it, ``feed`` with the readings the rule wants."""
    wanted: dict[tuple[str, str], bool] = {}
    out: list[Event] = []
    merged = heapq.merge(*([(key, row) for row in rows] for key, rows in chunk.rows.items()), key=_order)
    for (device, quantity), row in merged:
        reading = chunk.reading(device, quantity, row)
        before = reading.time - _TICK
        if rule.next_due is not None and rule.next_due <= before:
            out += rule.advance_to(before)
        want = wanted.get((device, quantity))
        if want is None:
            want = wanted[(device, quantity)] = bool(rule.wants(reading))
        if want:
            out += rule.feed(reading)
    return out


def evaluate(cfg: SiteConfig, profiles: ProfileLibrary, store: ReadingStore, start: datetime, end: datetime,
             *, lateness_s: float = DEFAULT_LATENESS_S, trace: RuleTrace | None = None,
             on_rows: Callable[[Mapping[tuple[str, str], Sequence[StoredRow]]], None] | None = None,
             progress: Callable[[float], None] | None = None) -> Evaluation:
    """Re-run the rules of ``cfg``'s pack over its stored readings of ``[start, end)``.

    The store is read one :data:`CHUNK` of event time at a time (memory stays flat over a year), as
    rows of each series (:func:`stormwatch.stores.rows.series_rows`: no model object per reading).
    Each rule of the engine takes its own series: the rules are independent of each other, so rule
    after rule over a chunk gives each rule exactly the events of the engine fed every reading in
    event-time order (:meth:`Engine.replay`): the engine's checks (a ``late`` flag, a value physics
    forbids) come first, then each rule's ``replay`` (:class:`stormwatch.alerts.rules.Chunk`) or its
    ``feed`` reading by reading, then ``advance_to`` the chunk's newest reading as the engine does.
    ``tests/alerts/test_backfill_rows.py`` compares the two on data with gaps, flags, counter resets and
    storms across chunks. Events come per rule in the order the rule emitted them, the rules' lists
    merged by event time.

    Args:
        trace: given to every rule (:class:`stormwatch.alerts.rules.RuleTrace`): the quantities the
            rules decide on, for a report.
        on_rows: called with the stored rows of each chunk as read, by series (e.g. to count them):
            every row, those the engine refuses included.
        progress: called after each chunk with the fraction of the work done (0 to 1).

    A command running a long evaluation does it inside
    :func:`stormwatch.runtime.gcbatch.fewer_collections` (the rows are acyclic; the collector's
    passes over them were seconds of CPU over a year): ``stormwatch evaluate`` and ``stormwatch
    report`` do; this function leaves the interpreter's settings alone.

    Only the stored data's extent is read (:func:`_stored_span`): a window of ``0001-01-01`` to
    ``9999-12-31`` over a month of data reads that month, chunk by chunk on the same chunk
    boundaries as the whole window, and the stretches before and after are gaps as before.

    Tip sizes: the stored rain readings' own sizes are used (each storm's depth is theirs); a stored
    reading whose size is not the one the site file gives for its time stops the evaluation
    (:class:`stormwatch.tipsizes.TipSizeMismatch`, naming both); readings stored without a size (an
    earlier stormwatch) are read with the site file's, and a WARNING says how many and which size.

    Raises:
        ValueError: ``end`` not after ``start``.
        stormwatch.alerts.packs.PackError, stormwatch.alerts.engine.EngineError: the site cannot be evaluated.
        stormwatch.tipsizes.TipSizeMismatch: stored rain of another tip size than the site file's.
        stormwatch.stores.base.StoreError: the store cannot be read.
    """
    if end <= start:
        raise ValueError(f"--until ({format_time(end)}) must be after --from ({format_time(start)})")
    engine = Engine.for_site(cfg, profiles, None, lateness_s)
    if engine.storm is not None:
        engine.storm.raise_mismatch = True  # stored rain of another tip size than the site file's: stop, say so
    if trace is not None:
        for rule in engine.rules:
            if isinstance(rule, StormRuleState | TurbidityRuleState | BasinRuleState):
                rule.trace = trace
    site = cfg.site.id
    try:
        series = site_series(cfg, profiles)
    except ProfileError as exc:
        raise EngineError(f"{site}: {exc}") from exc
    if cfg.fallback_gauge is not None:
        series.append((cfg.fallback_gauge.station, PRECIPITATION))
    # and whatever else the store holds for the site (manual samples recorded against a discharge point...)
    series += [key for key in stored_series(store, site) if key not in series]
    log.info("%s: evaluating stored readings from %s to %s", site, format_time(start), format_time(end))
    events: list[Event] = []
    count = 0
    t, stop = _stored_span(store, site, series, start, end)
    windows = []
    while t < stop:
        windows.append((t, min(end, t + CHUNK)))
        t += CHUNK
    with closing(series_chunks(store, site, series, windows)) as chunks:
        for (_, upto), stored in zip(windows, chunks, strict=False):
            count += _evaluate_chunk(engine, site, stored, on_rows, events)
            if progress is not None:
                progress((min(upto, stop) - start) / (stop - start) if stop > start else 1.0)
    storm = engine.storm
    note = storm.assumed_note() if storm is not None else None
    if note is not None:
        log.warning("%s: %s", site, note)
    log.info("%s: %d stored readings evaluated, %d events", site, count, len(events))
    return Evaluation(site, start, end, count, events, engine.in_progress(),
                      _gaps(engine, start, end), has_gauge=engine.storm is not None,
                      resolution=gauge_resolution(cfg, profiles))


def _stored_span(store: ReadingStore, site: str, series: list[tuple[str, str]], start: datetime,
                 end: datetime) -> tuple[datetime, datetime]:
    """Where in ``[start, end)`` the chunks of a backfill hold readings: from the chunk boundary at
    or before the first stored reading to just after the last, on the boundaries ``start + k·CHUNK``
    (every chunk outside is empty: reading it changes nothing). The span comes from the store's
    ``stored_span`` (SQLite: :meth:`stormwatch.stores.sqlite.SqliteStore.stored_span`) or else its
    :meth:`~stormwatch.stores.base.OverviewStore.summarize`; a store with neither is read over the
    whole window.

    Raises:
        stormwatch.stores.base.StoreError: the store cannot be read.
    """
    if not series:
        return start, end
    span = getattr(store, "stored_span", None)  # SQLite: first and last time alone, without counting
    if span is not None:
        found_span: tuple[datetime, datetime] | None = span(site, series, start, end)
        if found_span is None:
            return start, start
        first, last = found_span
    else:
        summarize = getattr(store, "summarize", None)
        if summarize is None:
            return start, end
        found = summarize(start, end, [(site, device, quantity) for device, quantity in series])
        if not found:
            return start, start
        first = min(s.first_time for s in found)
        last = max(s.last_time for s in found)
    return start + ((first - start) // CHUNK) * CHUNK, min(end, last + _TICK)


def _evaluate_chunk(engine: Engine, site: str, stored: Mapping[tuple[str, str], Sequence[StoredRow]],
                    on_rows: Callable[[Mapping[tuple[str, str], Sequence[StoredRow]]], None] | None,
                    events: list[Event]) -> int:
    """One chunk of stored rows through the engine's rules (:func:`evaluate`); its events appended to
    ``events``; returns how many rows it had."""
    count = 0
    rows: dict[tuple[str, str], Sequence[StoredRow]] = {}
    firsts: list[tuple[tuple[str, str], StoredRow]] = []
    newest: int | None = None
    if on_rows is not None:
        on_rows(stored)
    for (device, quantity), found in stored.items():
        count += len(found)
        kept = _accepted(engine, site, device, quantity, found)
        rows[(device, quantity)] = kept
        if kept:
            firsts.append(((device, quantity), kept[0]))
            newest = kept[-1][ROW_TIME] if newest is None else max(newest, kept[-1][ROW_TIME])
    first = min(firsts, key=_order) if firsts else None
    chunk = Chunk(site, rows, None if newest is None else time_of_us(newest),
                  None if first is None else row_reading(site, *first[0], first[1]))
    if chunk.watermark is not None:
        found_events: list[list[Event]] = []
        for rule in engine.rules:
            replay = getattr(rule, "replay", None)
            out = replay(chunk) if replay is not None else _fed_one_by_one(rule, chunk)
            w = chunk.watermark
            if rule.next_due is not None and rule.next_due <= w:
                out += rule.advance_to(w)
            if hasattr(rule, "on_watermark"):
                out += rule.on_watermark(w)
            found_events.append(out)
        events += map(engine.stamp, heapq.merge(*found_events, key=lambda e: e.event_time))
    return count


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
