"""The ordinance engine of one site: readings in, ordinance events (and work orders) out.

Event time, never the wall clock (design-notes.md, "Time"): readings are held in a small reorder
buffer and released to the rules in event-time order once the site's *watermark* -- the newest
event time seen minus ``lateness_s`` -- has passed them, so readings arriving out of order within
the lateness bound give exactly the same events as in-order ones. A reading at or before the
watermark when it arrives is *late*: it is data (ingest stores it; ``stormwatch evaluate`` replays
it) but it does not trigger live alerts. Retained MQTT messages and readings flagged ``late`` are
treated the same way (failure-kinds.md #10). Duplicates (same ``(gateway, boot, seq)``) are
dropped (failure-kinds.md #9).

The same code runs live and in backfill: feed stored readings in order, then :meth:`Engine.flush`
(a storm not yet closed by a dry gap stays *in progress*, see :meth:`Engine.in_progress`).

Events of the kinds in :data:`alerts.workorders.OPENING_KINDS` open a work order (deduplicated per
``(site, rule, occurrence)``); every emitted event carries the id of the order it opened or
refers to in ``work_order``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from datetime import datetime, timedelta

from alerts.geometry import stage_storage_of
from alerts.packs import RulePack, load_pack
from alerts.rules import Rule
from alerts.rules.basin import BasinRuleState
from alerts.rules.routine import RoutineRuleState
from alerts.rules.storm import StormRuleState, StormSummary
from alerts.rules.turbidity import TurbidityRuleState
from alerts.workorders import INSPECTION_KINDS, OPENING_KINDS, WorkOrders
from stormwatch.config import SiteConfig
from stormwatch.contract import Event, Reading, format_time
from stormwatch.profiles import ProfileLibrary

log = logging.getLogger(__name__)

#: Default allowed lateness (s): two 60-s polls.
DEFAULT_LATENESS_S = 120.0

_TICK = timedelta(microseconds=1)


class EngineError(ValueError):
    """The site cannot be watched as configured (e.g. a rain gauge profile without a counter)."""


class Engine:
    """Rules R1 (storm), R1w (routine), R2 (turbidity), R3 (basin) of one site's pack.

    Args:
        cfg: the site.
        profiles: device profiles (rain-gauge resolution, level-sensor kind).
        pack: the jurisdiction pack with the site's overrides applied (see :meth:`for_site`).
        workorders: the work-order book; ``None`` emits events without opening orders.
        lateness_s: allowed lateness in seconds (reorder window).

    Raises:
        EngineError: a rule the pack enables cannot be built from the site's devices.
    """

    def __init__(self, cfg: SiteConfig, profiles: ProfileLibrary, pack: RulePack,
                 workorders: WorkOrders | None = None, lateness_s: float = DEFAULT_LATENESS_S) -> None:
        if lateness_s < 0:
            raise EngineError(f"lateness_s must be >= 0, got {lateness_s}")
        self.cfg = cfg
        self.site = cfg.site.id
        self.pack = pack
        self.workorders = workorders
        self.lateness = timedelta(seconds=lateness_s)
        self.rules: list[Rule] = []
        self.storm: StormRuleState | None = None
        self._build(profiles)
        self._heap: list[tuple[datetime, str, str, int, int, Reading]] = []
        self._counter = itertools.count()
        self._seen: dict[tuple[str, str, int], datetime] = {}
        self._max_seen: datetime | None = None
        self._watermark: datetime | None = None
        self.counts = {"fed": 0, "duplicate": 0, "late": 0, "retained": 0, "foreign": 0}

    @classmethod
    def for_site(cls, cfg: SiteConfig, profiles: ProfileLibrary, workorders: WorkOrders | None = None,
                 lateness_s: float = DEFAULT_LATENESS_S) -> Engine:
        """An engine with the pack named by ``cfg.site.jurisdiction`` and ``cfg.rules`` overrides.

        Raises:
            alerts.packs.PackError: pack missing/invalid or a bad override.
            EngineError: see the class.
        """
        return cls(cfg, profiles, load_pack(cfg.site.jurisdiction, cfg.rules), workorders, lateness_s)

    def _build(self, profiles: ProfileLibrary) -> None:
        cfg, pack, site = self.cfg, self.pack, self.site
        storm = pack.storm()
        if storm and cfg.rain_gauge:
            profile = profiles.get(cfg.device(cfg.rain_gauge).profile)
            if profile.counter is None:
                raise EngineError(f"{site}: rain gauge {cfg.rain_gauge!r} profile {profile.model!r} has no counter "
                                  "(its tip resolution is needed for R1)")
            poll = timedelta(seconds=cfg.device(cfg.rain_gauge).poll_interval_s)
            self.storm = StormRuleState(site, storm[0], storm[1], cfg.rain_gauge, profile.counter.tip_resolution,
                                        silence_allowance=2 * poll)
            self.rules.append(self.storm)
        elif storm:
            log.warning("%s: pack %s has storm rule %s but the site has no rain_gauge: R1 not watched",
                        site, pack.name, storm[0])
        routine = pack.routine()
        if routine:
            kinds = ("routine_inspection", "storm_inspection") if routine[1].storm_inspection_counts \
                else ("routine_inspection",)
            wo = self.workorders
            self.rules.append(RoutineRuleState(
                site, routine[0], routine[1],
                (lambda: wo.last_completed(site, kinds)) if wo is not None else (lambda: None)))
        turb = pack.turbidity()
        if turb and cfg.turbidity_pair:
            self.rules.append(TurbidityRuleState(site, turb[0], turb[1], cfg.turbidity_pair.upstream,
                                                 cfg.turbidity_pair.downstream))
        basin = pack.basin()
        if basin and cfg.basin:
            profile = profiles.get(cfg.device(cfg.basin.device).profile)
            if profile.level is None:
                raise EngineError(f"{site}: basin device {cfg.basin.device!r} profile {profile.model!r} has no "
                                  "'level' section (how its value becomes a height)")
            try:
                self.rules.append(BasinRuleState(site, basin[0], basin[1], cfg.basin, profile.level,
                                                 stage_storage_of(cfg.basin)))
            except ValueError as exc:
                raise EngineError(f"{site}: {exc}") from exc
        log.info("%s: pack %s, rules %s", site, pack.name, ", ".join(r.rule_id for r in self.rules) or "none")

    @property
    def watermark(self) -> datetime | None:
        """Event time up to which every reading has been given to the rules (UTC), or ``None``."""
        return self._watermark

    def feed(self, reading: Reading, *, retained: bool = False) -> list[Event]:
        """Take one reading (any arrival order); events that became true as the watermark moved.

        Args:
            reading: a reading of this site.
            retained: it came as a retained MQTT message (never triggers; failure-kinds.md #10).
        """
        if reading.site != self.site:
            self.counts["foreign"] += 1
            log.warning("engine %s: reading of site %r ignored", self.site, reading.site)
            return []
        if retained or "late" in reading.flags:
            self.counts["retained"] += 1
            log.info("%s: %s reading %s/%s seq %s at %s is data, not a live trigger: skipped", self.site,
                     "retained" if retained else "late-flagged", reading.gateway, reading.device, reading.seq,
                     format_time(reading.time))
            return []
        if reading.identity in self._seen:
            self.counts["duplicate"] += 1
            log.debug("%s: duplicate reading %s dropped", self.site, reading.identity)
            return []
        if self._watermark is not None and reading.time <= self._watermark:
            self.counts["late"] += 1
            log.warning("%s: late reading %s/%s %s at %s (watermark %s, lateness %gs): stored data, no live trigger",
                        self.site, reading.gateway, reading.device, reading.quantity, format_time(reading.time),
                        format_time(self._watermark), self.lateness.total_seconds())
            return []
        self._seen[reading.identity] = reading.time
        heapq.heappush(self._heap, (reading.time, reading.gateway, reading.boot, reading.seq,
                                    next(self._counter), reading))
        if self._max_seen is None or reading.time > self._max_seen:
            self._max_seen = reading.time
        return self._release(self._max_seen - self.lateness)

    def advance_to(self, t: datetime) -> list[Event]:
        """Declare that no reading at or before ``t`` will come; release and evaluate up to ``t``."""
        return self._release(t)

    def flush(self) -> list[Event]:
        """Release every buffered reading and evaluate up to the newest event time seen.

        Used at the end of a backfill and on stop. Storms not closed by a dry gap stay open
        (:meth:`in_progress`); nothing is invented beyond the data.
        """
        if self._max_seen is None:
            return []
        return self._release(self._max_seen)

    def in_progress(self) -> list[StormSummary]:
        """Storms still open at the current watermark (a backfill reports these as in progress)."""
        s = self.storm.in_progress() if self.storm is not None else None
        return [s] if s is not None else []

    def _release(self, w: datetime) -> list[Event]:
        if self._watermark is not None and w <= self._watermark:
            return []
        self._watermark = w
        out: list[Event] = []
        while self._heap and self._heap[0][0] <= w:
            reading = heapq.heappop(self._heap)[-1]
            self.counts["fed"] += 1
            before = reading.time - _TICK  # everything strictly before this reading is final
            for rule in self.rules:
                out += rule.advance_to(before)
            for rule in self.rules:
                if rule.wants(reading):
                    out += rule.feed(reading)
        for rule in self.rules:
            out += rule.advance_to(w)
        self._prune(w)
        return [self._with_order(e) for e in out]

    def _prune(self, w: datetime) -> None:
        # identities at or before the watermark are rejected as late anyway
        if len(self._seen) > 4096:
            self._seen = {k: t for k, t in self._seen.items() if t > w}

    def _with_order(self, event: Event) -> Event:
        wo = self.workorders
        if wo is None:
            return event
        if event.kind in OPENING_KINDS:
            report = self.pack.report()
            order, _created = wo.open_for(
                event, report=report[1] if report and OPENING_KINDS[event.kind] in INSPECTION_KINDS else None,
                timezone=self.cfg.site.timezone)
            return event.model_copy(update={"work_order": order.id})
        existing = wo.find(event.site, event.rule, event.occurrence)
        return event.model_copy(update={"work_order": existing.id}) if existing else event
