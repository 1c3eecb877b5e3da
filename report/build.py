"""Gather a site report from the store and the work-order state (:func:`build_report`).

Everything the rules decide comes from the rules themselves: the period is re-evaluated with
:func:`stormwatch.alerts.backfill.evaluate` (the engine's own code) and a :class:`Collector` --
the :class:`~stormwatch.alerts.rules.RuleTrace` of that evaluation -- keeps the tips R1 counted,
the storms it closed (qualifying or not), the windows R2 judged and the sediment depths R3
settled on. The evaluation starts :data:`LEAD_IN` before the period (a storm or a basin cycle that
began before it is seen whole) and runs a dry gap past its end (a storm whose last tip falls just
before the end is closed by the gauge's dry readings after it); only what touches the period is
reported.

The design: docs/reports.md ("The modules", `report/build.py`).
"""

from __future__ import annotations

import base64
import bisect
import io
import itertools
import logging
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from zoneinfo import ZoneInfo

from stormwatch.alerts.backfill import Evaluation, depth_amount, depth_text, evaluate, inches_cut
from stormwatch.alerts.packs import RulePack, load_site_pack
from stormwatch.alerts.rules import parse_occurrence
from stormwatch.alerts.rules.basin import BasinDetails, BasinRule
from stormwatch.alerts.rules.criteria import criterion_named
from stormwatch.alerts.rules.registry import rule_kinds
from stormwatch.alerts.rules.routine import RoutineRule
from stormwatch.alerts.rules.storm import GapDetails, StormDetails, StormRule
from stormwatch.alerts.rules.turbidity import TurbidityDetails, TurbidityRule, watches
from stormwatch.alerts.workorders import REACHED, WorkOrder, WorkOrders, order_id
from stormwatch.config import DischargePoint, SiteConfig
from stormwatch.contract import Event
from stormwatch.display import inches, local_time
from stormwatch.profiles import ProfileError, ProfileLibrary
from stormwatch.rain import TipResolution
from stormwatch.report.fmt import duration
from stormwatch.report.model import (
    BasinRow,
    DayTotal,
    Interval,
    OrderRow,
    Outcome,
    Report,
    SensorCoverage,
    StormRow,
    TurbidityRow,
    UnknownRow,
)
from stormwatch.report.trace import Collector, Window
from stormwatch.stores.base import ReadingStore, StoredRow
from stormwatch.stores.rows import series_rows, time_of_us, us_of
from stormwatch.stores.seriesrows import SeriesRows, times_of
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: How long before the period the rules start evaluating (a storm, a turbidity run or a basin
#: cycle that began before the period is seen from its start).
LEAD_IN = timedelta(days=7)
#: Added to the storm rule's dry gap after the period's end, so a storm that ended just before
#: the end is closed by the gauge's dry readings after it.
TAIL_MARGIN = timedelta(hours=1)

#: How far past the period's end the rules run on to see a storm of the period end (a storm is a run
#: of tips without the pack's dry gap; none lasts weeks).
MAX_STORM_RUN = timedelta(days=14)

_UNDECIDED = ("undetermined", "needs_verification")
_US = timedelta(microseconds=1)


@dataclass
class _Device:
    poll: timedelta
    allowance: timedelta
    last: datetime | None = None
    count: int = 0
    gaps: list[Interval] = field(default_factory=list)


class CoverageCounter:
    """Counts each device's readings in ``[start, end)`` as they stream past (module docstring)."""

    def __init__(self, cfg: SiteConfig, start: datetime, end: datetime, *, finished: bool = False) -> None:
        self.start, self.end = start, end
        #: a finished simulated run: its engine's clock stopped minutes past the data, and the run's
        #: own end is no device's silence (a device's tail gap ends at the site's newest reading)
        self.finished = finished
        self._devices = {d.id: _Device(timedelta(seconds=d.poll_interval_s), 2 * timedelta(seconds=d.poll_interval_s))
                         for d in cfg.devices}

    def add(self, rows: Mapping[tuple[str, str], Sequence[StoredRow]]) -> None:
        """One chunk of stored rows by series (:func:`~stormwatch.alerts.backfill.evaluate`'s ``on_rows``)."""
        start, end = us_of(self.start), us_of(self.end)
        by_device: dict[str, list[Sequence[StoredRow]]] = {}
        for (device, _quantity), found in rows.items():
            if found and device in self._devices:
                by_device.setdefault(device, []).append(found)
        for device, lists in by_device.items():
            # one series as columns (nearly always): its times are distinct and in order already
            distinct = len(lists) == 1 and isinstance(lists[0], SeriesRows)
            times = times_of(lists[0]) if len(lists) == 1 else sorted(t for x in lists for t in times_of(x))
            lo, hi = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
            if lo == hi:
                continue
            if lo or hi < len(times):
                times = times[lo:hi]
            d = self._devices[device]
            allowance = d.allowance // _US
            last = None if d.last is None else us_of(d.last)
            prev = start if last is None else last
            # sorted: a reading time seen before is the previous one (or the last of the chunk before)
            d.count += (len(times) if distinct else len(set(times))) - (times[0] == last)
            if times[0] - prev > allowance or \
                    max(map(operator.sub, itertools.islice(times, 1, None), times), default=0) > allowance:
                for t in times:  # a gap in this chunk (rare): find it
                    if t - prev > allowance:
                        d.gaps.append(Interval(time_of_us(prev), time_of_us(t)))
                    prev = t
            d.last = time_of_us(times[-1])

    def gaps(self, device: str) -> list[Interval]:
        """The device's gaps, the one up to the period's end included."""
        d = self._devices[device]
        last = d.last if d.last is not None else self.start
        end = self.data_end()
        tail = [Interval(last, end)] if end - last > d.allowance else []
        return [*d.gaps, *tail]

    def data_end(self) -> datetime:
        """Where silence can be judged: the period's end, or a finished run's newest reading."""
        if not self.finished:
            return self.end
        return min(self.end, max((x.last for x in self._devices.values() if x.last is not None), default=self.end))

    def result(self, cfg: SiteConfig, profiles: ProfileLibrary) -> list[SensorCoverage]:
        roles = _roles(cfg)
        out = []
        for dev in cfg.devices:
            d = self._devices[dev.id]
            expected = int((self.end - self.start) / d.poll)
            out.append(SensorCoverage(dev.id, roles.get(dev.id, "other"), _model_name(profiles, dev.profile),
                                      dev.poll_interval_s, expected,
                                      d.count, tuple(self.gaps(dev.id))))
        return out


def _model_name(profiles: ProfileLibrary, profile: str) -> str:
    """A device's model as people name it (its profile's display name), else the profile's name."""
    try:
        return profiles.get(profile).display_name
    except ProfileError:
        return profile


def _roles(cfg: SiteConfig) -> dict[str, str]:
    """What each device is for; on a site with ``discharge_points``, of which point (a background
    probe shared by two points names both)."""
    roles: dict[str, str] = {}
    if cfg.rain_gauge:
        roles[cfg.rain_gauge] = "rain gauge (R1)"
    if cfg.turbidity_pair:
        roles[cfg.turbidity_pair.upstream] = "turbidity, upstream background (R2)"
        roles[cfg.turbidity_pair.downstream] = "turbidity, downstream compliance (R2)"
    else:
        served: dict[tuple[str, str], list[str]] = {}
        for point in cfg.discharge_points:
            for device, role in ((point.upstream, "upstream background"), (point.downstream, "downstream compliance")):
                if device is not None:
                    served.setdefault((device, role), []).append(point.id)
        for (device, role), ids in served.items():
            roles[device] = f"turbidity, {role} of {', '.join(ids)} (R2)"
    for basin in cfg.all_basins:
        roles[basin.device] = f"basin level, {basin.id} (R3)"
    return roles


def outcome_of(order: WorkOrder | None, due: datetime | None, as_of: datetime, missing: str) -> Outcome:
    """Whether the work of ``order`` (due ``due``) was done on time, late, or is overdue at ``as_of``."""
    if order is None:
        return Outcome(None, missing)
    due = order.due_at or due
    if order.completed_at is not None:
        if due is not None and order.completed_at > due:
            return Outcome(order, f"LATE by {duration(order.completed_at - due)}")
        return Outcome(order, "on time")
    if due is not None and as_of > due:
        return Outcome(order, f"OVERDUE by {duration(as_of - due)}: not completed")
    return Outcome(order, f"{order.status}, not completed yet")


def _clip(a: datetime, b: datetime, start: datetime, end: datetime) -> Interval | None:
    lo, hi = max(a, start), min(b, end)
    return Interval(lo, hi) if hi > lo else None


def local_days(start: datetime, end: datetime, tz: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """``[day start, next day start)`` (UTC) of every local calendar day of ``tz`` that
    ``[start, end)`` touches, clipped to it. A DST day is 23 or 25 hours long."""
    out = []
    day = start.astimezone(tz).date()
    while True:
        lo = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)
        nxt = day + timedelta(days=1)
        hi = datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).astimezone(UTC)
        if lo >= end:
            break
        out.append((max(lo, start), min(hi, end)))
        day = nxt
    return out


@dataclass(frozen=True)
class Sources:
    """Where a report's facts come from: the store and (optionally) the work-order book."""

    store: ReadingStore
    book: WorkOrders | None
    as_of: datetime
    as_of_what: str
    state: str


def build_report(cfg: SiteConfig, profiles: ProfileLibrary, sources: Sources, start: datetime, end: datetime, *,
                 charts: bool = True) -> Report:
    """The report of ``cfg``'s site for ``[start, end)`` (UTC, aware).

    Raises:
        ValueError: ``end`` not after ``start``.
        stormwatch.alerts.packs.PackError, stormwatch.alerts.engine.EngineError: the site's rules cannot run.
        stormwatch.stores.base.StoreError: the store cannot be read.
    """
    if end <= start:
        raise ValueError(f"the period must end after it starts ({format_time(start)} .. {format_time(end)})")
    pack = load_site_pack(cfg)
    storm_rule = pack.first(StormRule)
    dry_gap = timedelta(hours=storm_rule[1].dry_gap_hours) if storm_rule else timedelta(0)
    # what happened is counted up to the state's clock; the rest of the period had not happened then
    known = min(end, max(start, sources.as_of))
    horizon = end + dry_gap + TAIL_MARGIN
    while True:
        collector = Collector()
        coverage = CoverageCounter(cfg, start, known, finished=sources.as_of_what == REACHED)
        ev = evaluate(cfg, profiles, sources.store, start - LEAD_IN, horizon, trace=collector, on_rows=coverage.add)
        # a storm of the period still going on where the evaluation stopped, the store holding
        # readings after it: the rules run on until it ends, so the storm is reported whole (its
        # depth, end and inspection), never cut at the period's end (MAX_STORM_RUN at most)
        going = [s for s in ev.in_progress if s.start < end]
        if not going or horizon - end >= MAX_STORM_RUN or not _stored_after(sources.store, cfg, horizon):
            break
        horizon = min(end + MAX_STORM_RUN, max(horizon + timedelta(days=1),
                                               max(s.last_tip for s in going) + dry_gap + TAIL_MARGIN))
        log.info("%s: a storm of the period continues after it: the rules run on to %s", cfg.site.id,
                 format_time(horizon))
    tz = cfg.site.tz
    citations = {rid: rule.citation for rid, rule in pack.rules.items()}
    kinds = rule_kinds().kinds
    meanings = {rid: kinds[rule.kind].summary.split(": ", 1)[-1].split(" (§")[0]
                for rid, rule in pack.rules.items() if rule.kind in kinds}
    report = Report(
        site_id=cfg.site.id, site_name=cfg.site.name or cfg.site.id, timezone=cfg.site.timezone,
        jurisdiction=cfg.site.jurisdiction, pack_title=pack.title or pack.name, permit=_permit(cfg),
        start=start, end=end, as_of=sources.as_of, as_of_what=sources.as_of_what,
        resolution=ev.resolution, threshold=f"{storm_rule[1].threshold_in} in" if storm_rule else None,
        citations=citations, rule_meanings=meanings, state=sources.state, has_orders=sources.book is not None,
        not_yet=Interval(known, end) if known < end else None,
    )
    basin_rule = pack.first(BasinRule)
    if basin_rule and cfg.all_basins:
        report.basin_limits = (basin_rule[1].warning_fraction, basin_rule[1].cleanout_fraction)
    background = _needs_background(pack)
    watched = _watched_points(cfg, pack, background)
    if cfg.discharge_points:
        report.points = tuple((p.id, p.label) for p in watched)
    if cfg.basins:
        report.basins = tuple((b.id, b.id) for b in cfg.basins)
    routine = pack.first(RoutineRule)
    report.inspector_citation = storm_rule[1].citation if storm_rule else routine[1].citation if routine else ""
    report.coverage = coverage.result(cfg, profiles)
    report.readings = sum(c.received for c in report.coverage)
    if not report.readings and known > start and cfg.devices:
        log.warning("%s: the store holds no reading of this site's devices from %s to %s: the report shows every "
                    "sensor UNKNOWN there (is the store the site's, and the site file the store's?)", cfg.site.id,
                    format_time(start), format_time(known))
    events: dict[tuple[str, str], Event] = {(e.kind, e.occurrence): e for e in ev.events}
    # a storm, contrast or basin cycle of the period finds its order even when the order was opened
    # after the period's end (a storm ending after it, a cleanout due later)
    by_id = {o.id: o for o in sources.book.list(site=cfg.site.id)} if sources.book is not None else {}
    report.storms = _storms(cfg, ev, collector, events, by_id, sources, start, end)
    report.days = _days(ev, collector, tz, start, known) if known > start else []
    report.turbidity = _turbidity(ev.events, collector, by_id, sources, start, end)
    report.basin = _basin(ev.events, by_id, sources, start, end)
    report.unknown = _unknown(cfg, ev, collector, coverage, start, known, watched, background=background) \
        if known > start else []
    # and the orders the period's rows cite, opened after its end (a storm of the period ending after it):
    # a row never names an order the log book does not show
    outcomes = [row.outcome for rows in (report.storms, report.turbidity, report.basin) for row in rows]
    cited = {o.order.id for o in outcomes if o is not None and o.order is not None}
    orders = [o for o in by_id.values() if o.id in cited or _touches(o, start, end)]
    report.orders = [OrderRow(o, tuple(sources.book.history(o.id)), _thumbnails(sources.book, o.id))
                     for o in orders] if sources.book else []
    if report.storm is None and charts:
        from stormwatch.report.charts import charts_of  # matplotlib: imported when charts are drawn

        report.charts = charts_of(report, collector, [u.interval for u in report.unknown if u.what == "rain"])
    log.info("%s: report of %s .. %s: %d readings, %d storms, %d turbidity events, %d basin events, %d unknown "
             "intervals, %d work orders", cfg.site.id, format_time(start), format_time(end), report.readings,
             len(report.storms), len(report.turbidity), len(report.basin), len(report.unknown), len(report.orders))
    return report


#: Longest side of a photo thumbnail in the report (pixels; printed about 28 mm high).
THUMBNAIL_PX = 320


def _thumbnails(book: WorkOrders, oid: str) -> tuple[tuple[int, str, str], ...]:
    """``(seq, filename, data URI)`` of a JPEG thumbnail of each photo the web desk kept with ``oid``
    (a photo Pillow cannot read is listed by name with an empty URI)."""
    from PIL import Image, UnidentifiedImageError

    out = []
    for meta in book.photos(oid):
        photo = book.photo(oid, meta.seq)
        try:
            with Image.open(io.BytesIO(photo.data)) as img:
                img.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
                buf = io.BytesIO()
                img.convert("RGB").save(buf, "JPEG", quality=80)
            uri = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        except (UnidentifiedImageError, OSError) as exc:
            log.warning("work order %s: photo %d (%s) cannot be read: %s", oid, meta.seq, meta.filename, exc)
            uri = ""
        out.append((meta.seq, meta.filename, uri))
    return tuple(out)


def _permit(cfg: SiteConfig) -> str:
    return getattr(cfg.site, "permit", "") or ""


def _stored_after(store: ReadingStore, cfg: SiteConfig, t: datetime) -> bool:
    """Whether the store holds a reading of ``cfg``'s rain gauge at or after ``t`` (within
    :data:`MAX_STORM_RUN`).

    Raises:
        stormwatch.stores.base.StoreError: the store cannot be read.
    """
    if cfg.rain_gauge is None:
        return False
    found = series_rows(store, cfg.site.id, [(cfg.rain_gauge, "rain_tips")], t, t + MAX_STORM_RUN)
    return any(found.values())


def _touches(o: WorkOrder, start: datetime, end: datetime) -> bool:
    """Whether the order's life (opening condition to completion, or still open) touches the period."""
    return o.event_time < end and (o.completed_at is None or o.completed_at >= start)


def _find(by_id: dict[str, WorkOrder], site: str, rule: str, occurrence: str) -> WorkOrder | None:
    return by_id.get(order_id(site, rule, occurrence))


def _storms(cfg: SiteConfig, ev: Evaluation, c: Collector, events: dict[tuple[str, str], Event],
            by_id: dict[str, WorkOrder], sources: Sources, start: datetime, end: datetime) -> list[StormRow]:
    resolution = ev.resolution
    found: list[tuple[datetime, datetime, int, bool, str, Fraction, bool]] = [
        (s, last, tips, q, "confirmed" if confirmed else "not confirmed (gauge silent after the last tip)", depth,
         lower) for s, last, tips, q, confirmed, depth, lower in c.storms]
    found += [(s.start, s.last_tip, s.tips, s.qualified, "in progress at the end of the data",
               sum((TipResolution.parse(z).depth_in(n) for z, n in s.sizes), Fraction(0)), False)
              for s in ev.in_progress]
    rows = []
    for s, last, tips, qualified, ended, gauge_in, lower in sorted(found):
        if last < start or s >= end:
            continue
        occurrence = f"storm:{format_time(s)}"
        due_event = events.get(("storm_inspection_due", occurrence))
        rule = due_event.rule if due_event else next((e.rule for e in ev.events if e.occurrence == occurrence), "R1")
        order = _find(by_id, cfg.site.id, rule, occurrence) if qualified else None
        due = due_event.due_at if due_event else None
        notes = []
        if s < start:
            notes.append(f"started before the period ({local_time(s, cfg.site.tz)})")
        if last >= end:
            notes.append("continues after the period")
        flagged = due_event.details.needs_verification \
            if due_event and isinstance(due_event.details, StormDetails) else None
        if flagged:
            notes.append(f"needs verification: gauge readings flagged {', '.join(flagged)}")
        station = _station_part(ev.events, occurrence)
        depth = rain_text(tips, gauge_in, resolution)
        if lower:  # R1's own finding (StormDetails.depth_lower_bound): a gauge gap of unknown rain inside
            depth = f">= {depth}"
            notes.append("rain unknown in a rain-gauge data gap inside the storm (see Data gaps: UNKNOWN): "
                         "its depth is a lower bound")
        depth_in = float(gauge_in)
        if station is not None:
            depth += f" + {inches(station.station_depth_in or 0.0)} from {station.source}"
            depth_in += station.station_depth_in or 0.0
            far = f", {station.station_distance_km:g} km away" if station.station_distance_km is not None else ""
            notes.append(f"rain of {station.source}{far} counted for the gauge's data gap "
                         f"({inches(station.station_depth_in or 0.0)})")
        outcome = None
        if qualified:
            missing = ("no work-order state given" if sources.book is None
                       else "no inspection order in the work-order state")
            if due is None:
                missing = "inspection due once the storm ends" if order is None else missing
            outcome = outcome_of(order, due, sources.as_of, missing)
        rows.append(StormRow(
            id=order.id if order else occurrence, occurrence=occurrence, start=s, last_tip=last, tips=tips,
            depth=depth, depth_in=depth_in, qualifying=qualified, ended=ended, due_at=due,
            outcome=outcome, notes=tuple(notes)))
    return rows


def _station_part(events: Sequence[Event], occurrence: str) -> StormDetails | None:
    """The details of the storm's latest event that counted the fallback station's rain, or ``None``."""
    for e in reversed(events):
        if e.occurrence == occurrence and isinstance(e.details, StormDetails) and e.details.source:
            return e.details
    return None


def rain_text(tips: int, depth_in: Fraction, resolution: str | None) -> str:
    """Tips of the site's gauge and their depth for a person: :func:`depth_text` when they are all of
    the gauge in service now (``resolution``), else -- rain counted by a replaced gauge too -- the
    tips and the exact depth in inches, cut to 3 decimals (never rounded up to a threshold)."""
    if _one_size(tips, depth_in, resolution):
        assert resolution is not None
        return depth_text(tips, resolution)
    return f"{tips} tips = {inches_cut(depth_in)} (tips of more than one gauge, each at its own size)"


def _one_size(tips: int, depth_in: Fraction, resolution: str | None) -> bool:
    """Whether ``tips`` are all of the gauge in service now (``resolution``): their depth is ``depth_in``."""
    return resolution is not None and TipResolution.parse(resolution).depth_in(tips) == depth_in


def rain_amount(tips: int, depth_in: Fraction, resolution: str | None) -> str:
    """The number of :func:`rain_text` for a table cell: the depth in the gauge's unit
    (:func:`~stormwatch.alerts.backfill.depth_amount`: ``"0.60"``, ``"12.6"``) when every tip is of
    the gauge in service now, else the exact inches cut to 3 decimals with the unit (``"0.504 in"``)."""
    if _one_size(tips, depth_in, resolution):
        assert resolution is not None
        return depth_amount(tips, resolution)
    return inches_cut(depth_in)


def ev_depth_in(tips: int, resolution: str | None) -> float:
    """Depth in inches of ``tips`` at ``resolution`` (0 when the resolution is unknown)."""
    return float(TipResolution.parse(resolution).depth_in(tips)) if resolution else 0.0


def _days(ev: Evaluation, c: Collector, tz: ZoneInfo, start: datetime, end: datetime) -> list[DayTotal]:
    if not ev.has_gauge:
        return []
    gaps = [(g.start, g.end or ev.end) for g in ev.gaps]
    rain = sorted(c.rain)
    out = []
    i = 0
    for lo, hi in local_days(start, end, tz):
        while i < len(rain) and rain[i][0] < lo:
            i += 1
        tips = 0
        depth = Fraction(0)
        while i < len(rain) and rain[i][0] < hi:
            tips += rain[i][1]
            depth += rain[i][2]
            i += 1
        unknown = sum((max(timedelta(0), min(b, hi) - max(a, lo)) for a, b in gaps), timedelta(0))
        out.append(DayTotal(lo.astimezone(tz).date(), (hi - lo).total_seconds() / 3600, tips,
                            rain_text(tips, depth, ev.resolution), float(depth), unknown,
                            rain_amount(tips, depth, ev.resolution)))
    return out


def _turbidity(events: list[Event], c: Collector, by_id: dict[str, WorkOrder], sources: Sources,
               start: datetime, end: datetime) -> list[TurbidityRow]:
    cleared = {e.occurrence: e.event_time for e in events if e.kind == "turbidity_cleared"}
    violating: dict[str | None, list[tuple[datetime, float]]] = {}
    for w in c.windows:
        if w.status == "violating" and w.downstream is not None:
            violating.setdefault(w.point, []).append((w.start, w.downstream))
    rows = []
    for e in events:
        if e.kind != "turbidity_contrast":
            continue
        first = parse_occurrence(e.occurrence).time
        until = cleared.get(e.occurrence)
        if first >= end or (until is not None and until < start):
            continue
        stop = until or end
        point = e.details.discharge_point if isinstance(e.details, TurbidityDetails) else None
        runs = sorted(violating.get(point, []))
        starts = [v[0] for v in runs]
        peak = max((v for _, v in runs[bisect.bisect_left(starts, first):bisect.bisect_left(starts, stop)]),
                   default=None)
        evidence = e.evidence[-1] if e.evidence else {}
        allowed = evidence.get("allowed_ntu")
        order = by_id.get(e.work_order) if e.work_order else _find(by_id, e.site, e.rule, e.occurrence)
        unit = str(evidence.get("unit", "NTU"))
        rows.append(TurbidityRow(
            occurrence=e.occurrence, start=first, detected_at=e.event_time, cleared_at=until,
            upstream=e.details.upstream_ntu if isinstance(e.details, TurbidityDetails) else None,
            downstream=e.details.downstream_ntu if isinstance(e.details, TurbidityDetails) else None,
            allowed=float(allowed) if isinstance(allowed, int | float) else None, peak_downstream=peak, unit=unit,
            outcome=outcome_of(order, e.due_at, sources.as_of,
                               "no work-order state given" if sources.book is None else "no review order recorded"),
            point=point))
    return rows


def _basin(events: list[Event], by_id: dict[str, WorkOrder], sources: Sources, start: datetime,
           end: datetime) -> list[BasinRow]:
    rows = []
    for e in events:
        if not e.kind.startswith("basin_") or not start <= e.event_time < end:
            continue
        outcome = None
        if e.kind == "basin_cleanout_due":
            order = _find(by_id, e.site, e.rule, e.occurrence)
            outcome = outcome_of(order, e.due_at, sources.as_of,
                                 "no work-order state given" if sources.book is None else "no cleanout order recorded")
        d = e.details if isinstance(e.details, BasinDetails) else None
        lost = d.lost_capacity if d else None
        rows.append(BasinRow(e.kind.removeprefix("basin_").replace("_", " "), e.event_time,
                             d.sediment_depth_ft if d else None, None if lost is None else 100 * lost, e.due_at,
                             outcome, basin=d.basin if d else None))
    return rows


def _needs_background(pack: RulePack) -> bool:
    """Whether the pack's R2 criterion compares against the upstream probe (an absolute limit does not)."""
    rule = pack.first(TurbidityRule)
    return rule is None or criterion_named(rule[1].criterion, rule[1].absolute_limit_ntu).needs_background


def _watched_points(cfg: SiteConfig, pack: RulePack, background: bool) -> list[DischargePoint]:
    """The discharge points R2 runs at (:func:`stormwatch.alerts.rules.turbidity.watches`), none
    without a turbidity rule."""
    if pack.first(TurbidityRule) is None:
        return []
    return [p for p in cfg.points if watches(p, background)]


def _unjudged_probes(point: DischargePoint, background: bool, windows: Sequence[Window], coverage: CoverageCounter,
                     start: datetime, end: datetime, named: str | None) -> list[UnknownRow]:
    """The silence of each probe R2 needs where R2 judged no window at all: before its first judged
    window and after its last (R2 judges a window once a later reading arrives, so when every device
    goes quiet until the period's end, or the probes start late, no window covers that time and
    the windows R2 could not judge do not show it). A probe's silence is its coverage gap (no
    reading for more than two poll intervals), cut to those uncovered stretches."""
    if windows:
        first, last = min(w.start for w in windows), max(w.end for w in windows)
        uncovered = [Interval(start, first), Interval(last, end)]
    else:
        uncovered = [Interval(start, end)]
    probes = ([(point.upstream, "upstream (background)")] if background and point.upstream else []) + \
        ([(point.downstream, "downstream (compliance)")] if point.downstream else [])
    rows = []
    for device, role in probes:
        for gap in coverage.gaps(device):
            for u in uncovered:
                span = _clip(gap.start, gap.end, u.start, u.end)
                if span is not None:
                    rows.append(UnknownRow("turbidity contrast", device, span,
                                           f"no reading from the {role} probe: R2 could not judge", named))
    return rows


def _unknown(cfg: SiteConfig, ev: Evaluation, c: Collector, coverage: CoverageCounter, start: datetime,
             end: datetime, watched: Sequence[DischargePoint], *, background: bool = True) -> list[UnknownRow]:
    rows: list[UnknownRow] = []
    why = {e.details.gap_start: e.message for e in reversed(ev.events) if isinstance(e.details, GapDetails)}
    filled = {e.details.gap_start: e.details for e in ev.events
              if isinstance(e.details, GapDetails) and e.details.source and e.details.station_depth_in is not None}
    for g in ev.gaps:
        # a gap still open where a finished run stopped ends at its data's end: the run's end is no gap
        span = _clip(g.start, g.end or (coverage.data_end() if coverage.finished else ev.end), start, end)
        if span is not None:
            reason = why.get(g.start, "")
            reason = reason.split(": no data from")[0].removeprefix(f"rain gauge {g.device} ") or "no rain-gauge data"
            station = filled.get(g.start)
            used = (f"; {station.source} reported {inches(station.station_depth_in or 0.0)} in it, counted for R1"
                    if station is not None else "")
            rows.append(UnknownRow("rain", g.device, span,
                                   f"{reason}; rain in that time is unknown, not zero{used}"))
    for point in watched:
        named = None if cfg.turbidity_pair else point.id  # the rule's own key of the point's windows
        windows = c.windows_of(named)
        assert point.downstream is not None  # watches() holds
        run: Window | None = None
        run_end = start
        for w in [*windows, None]:
            if w is not None and w.status in _UNDECIDED and run is not None and w.start == run_end \
                    and w.reason == run.reason:
                run_end = w.end
                continue
            if run is not None:
                span = _clip(run.start, run_end, start, end)
                if span is not None:
                    rows.append(UnknownRow("turbidity contrast", point.downstream, span,
                                           f"{run.reason.replace('_', ' ')}: R2 could not judge", named))
                run = None
            if w is not None and w.status in _UNDECIDED:
                run, run_end = w, w.end
        rows += _unjudged_probes(point, background, windows, coverage, start, end, named)
    for basin in cfg.all_basins:
        for gap in coverage.gaps(basin.device):
            rows.append(UnknownRow("basin level", basin.device, gap,
                                   "no level reading for more than two poll intervals",
                                   basin.id if cfg.basins else None))
    rows.sort(key=lambda u: (u.interval.start, u.what, u.point or ""))
    return rows
