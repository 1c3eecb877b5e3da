"""The ordinance engine of one site: readings in, ordinance events (and work orders) out.

The design: docs/alerts.md ("The modules", `alerts/engine.py`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import operator
import sys
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from stormwatch.alerts import cyclepath
from stormwatch.alerts.packs import RulePack, load_site_pack
from stormwatch.alerts.rules import Rule
from stormwatch.alerts.rules.registry import BuildError, Role, RuleContext, rule_kinds
from stormwatch.alerts.rules.report import ReportRule
from stormwatch.alerts.rules.storm import GapSummary, StormRuleState, StormSummary
from stormwatch.alerts.seen import SeenIdentities
from stormwatch.alerts.statecopy import state_copy
from stormwatch.alerts.workorders import WorkOrders, closing_kinds, inspection_kinds, opening_kinds
from stormwatch.clock import Clock, ScenarioClock
from stormwatch.config import SiteConfig
from stormwatch.contract import Event, Reading
from stormwatch.errors import InputError
from stormwatch.fastwire import Cycle
from stormwatch.physics import impossible_value, plausible_range
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.base import ReadingStore, StoreError
from stormwatch.stores.rows import us_of
from stormwatch.timebounds import TimeBounds
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: Default allowed lateness (s): two 60-s polls.
DEFAULT_LATENESS_S = 120.0
#: Real seconds of processing delay tolerated between devices when time is simulated: at 1500x a
#: serial poll of 0.1 s real is 150 s simulated, so the lateness bound (event time) scales with the
#: speed (:func:`lateness_for`).
SIM_REAL_LATENESS_S = 0.5
#: How far back (event time) a late reading is re-evaluated live (s): two days.
DEFAULT_LATE_HORIZON_S = 48 * 3600.0
#: Event time of released readings the live service keeps in memory when it has a store (s): what
#: ingest may not have stored yet; the store answers for the rest of a re-evaluation window.
RECENT_WITH_STORE_S = 3600.0
#: Snapshots are kept every ``snapshot_every_s`` for this long (event time, s), then thinned to
#: one per :data:`SPARSE_SNAPSHOTS_S` (a county's memory; docs/scaling.md).
DENSE_SNAPSHOTS_S = 6 * 3600.0
SPARSE_SNAPSHOTS_S = 12 * 3600.0
#: Event time between rule-state snapshots used for late re-evaluation (s).
DEFAULT_SNAPSHOT_EVERY_S = 3600.0
#: Event time between drops of the released readings kept beyond ``recent_s`` (s): not one per release.
PRUNE_EVERY_S = 600.0

_TICK = timedelta(microseconds=1)
_PRUNE_EVERY = timedelta(seconds=PRUNE_EVERY_S)
_NO_TIME = datetime.min.replace(tzinfo=UTC)
_le = operator.le
_new_tuple = tuple.__new__
#: Event fields that do not make an event "different" when compared after a re-evaluation.
_NOT_COMPARED = {"work_order", "late_detection_s", "message", "evidence"}


def lateness_for(clock: Clock) -> float:
    """The allowed lateness (event-time seconds) of an engine whose readings arrive on ``clock``.

    :data:`DEFAULT_LATENESS_S` on the wall clock; on a :class:`~stormwatch.clock.ScenarioClock` at
    least :data:`SIM_REAL_LATENESS_S` real seconds of simulated time (1500x: 750 s), so the demo and
    the same services run apart on one simulated clock order the same readings the same way.
    """
    if isinstance(clock, ScenarioClock):
        return max(DEFAULT_LATENESS_S, SIM_REAL_LATENESS_S * clock.speed)
    return DEFAULT_LATENESS_S


class EngineError(InputError):
    """The site cannot be watched as configured (e.g. a rain gauge profile without a counter)."""


@dataclass
class _Snapshot:
    time: datetime  # rule state after every reading strictly before ``time``
    rules: list[Any]


class _Held(NamedTuple):
    """A released reading as the engine keeps it for a late re-evaluation: its fields in a tuple (about
    a fifth of a :class:`~stormwatch.contract.Reading`'s memory; thousands of sites hold hours of them)."""

    time: datetime
    site: str
    device: str
    quantity: str
    value: int | float
    unit: str
    gateway: str
    boot: str
    seq: int
    flags: tuple[str, ...]
    tip_size: str | None = None

    @classmethod
    def of(cls, r: Reading) -> _Held:
        intern = sys.intern
        return cls(r.time, intern(r.site), intern(r.device), intern(r.quantity), r.value, intern(r.unit),
                   intern(r.gateway), intern(r.boot), r.seq, r.flags,
                   None if r.tip_size is None else intern(r.tip_size))

    def reading(self) -> Reading:
        """The reading again (validated when it first came; ``raw`` is not kept: no rule reads it)."""
        return Reading.model_construct(site=self.site, device=self.device, quantity=self.quantity, value=self.value,
                                       unit=self.unit, time=self.time, gateway=self.gateway, boot=self.boot,
                                       seq=self.seq, raw=None, flags=self.flags, tip_size=self.tip_size)

    def readings(self) -> list[Reading]:
        return [self.reading()]


class _HeldCycle(NamedTuple):
    """A released poll cycle (:class:`~stormwatch.fastwire.Cycle`) as the engine keeps it for a late
    re-evaluation: its shared fields and its columns in one tuple (not a tuple per reading)."""

    time: datetime
    site: str
    gateway: str
    boot: str
    seq: int
    devices: tuple[str, ...]
    quantities: tuple[str, ...]
    values: Sequence[int | float]
    units: tuple[str, ...]
    tip_sizes: Sequence[str | None]

    def readings(self) -> list[Reading]:
        """The cycle's readings again (validated when they first came)."""
        return [Reading.model_construct(site=self.site, device=d, quantity=q, value=v, unit=u, time=self.time,
                                        gateway=self.gateway, boot=self.boot, seq=self.seq + i, raw=None, flags=(),
                                        tip_size=size)
                for i, (d, q, v, u, size) in enumerate(zip(self.devices, self.quantities, self.values, self.units,
                                                           self.tip_sizes, strict=True))]


#: A reading in the reorder buffer's heap: its order key (time, gateway, boot, seq), its arrival, itself.
_Entry = tuple[datetime, str, str, int, int, Reading]
#: The order key of a reading: (time, gateway, boot, seq).
_Key = tuple[datetime, str, str, int]
#: Readings in the reorder buffer's in-order queue: the order keys of the first and the last, and the
#: readings in the engine's order (a message's poll cycle is one batch, not one entry per reading).
_Batch = tuple[_Key, _Key, Sequence[Reading]]


#: A rule's quick feeder (``quick_feeder``): ``(time, µs, value, unit, tip_size, gateway)`` of a clean
#: reading -> its events, or ``None`` when it takes the reading only as a model (nothing done then).
_Quick = Callable[[datetime, int, Any, str, "str | None", str], "list[Event] | None"]
#: A cycle's shape fed, reading by reading: ``(i, rule, its quick feeder or None)``; a reading no rule
#: takes has :data:`_NOBODY` (the rules due before it are still advanced, as :meth:`Engine._run_part` does).
_Plan = tuple[tuple[int, Rule, "_Quick | None"], ...]


class _Nobody:
    """The taker of a cycle's reading that no rule takes: it takes it and does nothing."""

    rule_id = "-"
    next_due: datetime | None = None

    def wants(self, reading: Reading) -> bool:
        return False

    def feed(self, reading: Reading) -> list[Event]:
        return []

    def advance_to(self, t: datetime) -> list[Event]:
        return []

    def quick(self, *_fields: object) -> list[Event]:
        return []


_NOBODY = _Nobody()


def _order_key(r: Reading) -> tuple[datetime, str, str, int]:
    return (r.time, r.gateway, r.boot, r.seq)


class Engine:
    """Rules R1 (storm), R1w (routine), R2 (turbidity), R3 (basin) of one site's pack.

    Args:
        cfg: the site.
        profiles: device profiles (rain-gauge resolution, level-sensor kind).
        pack: the jurisdiction pack with the site's overrides applied (see :meth:`for_site`).
        workorders: the work-order book; ``None`` emits events without opening orders.
        lateness_s: allowed lateness in seconds (reorder window).
        store: where a late re-evaluation reads the affected window (optional).
        reevaluate_late: re-evaluate late readings (see the module docstring); off for backfills.
        late_horizon_s: how far back a late reading is re-evaluated.
        snapshot_every_s: event time between rule-state snapshots.
        recent_s: event time of released readings kept in memory for a late re-evaluation (``None``:
            the whole horizon). With a ``store`` the store holds the older ones: the live service keeps
            only what ingest may not have stored yet (:data:`RECENT_WITH_STORE_S`), so a county of
            sites fits in memory (docs/scaling.md); kept compact (:class:`_Held`), not as models.
        clock: the live service's clock: readings outside ``bounds`` of it are ignored and the
            watermark never passes it (module docstring, "Implausible times"); ``None`` (backfills):
            no such check.
        bounds: the plausible event times around the clock (default: ingest's defaults,
            :class:`stormwatch.timebounds.TimeBounds`).

    Raises:
        EngineError: a rule the pack enables cannot be built from the site's devices, or a
            negative lateness.
    """

    def __init__(self, cfg: SiteConfig, profiles: ProfileLibrary, pack: RulePack,
                 workorders: WorkOrders | None = None, lateness_s: float = DEFAULT_LATENESS_S, *,
                 store: ReadingStore | None = None, reevaluate_late: bool = False,
                 late_horizon_s: float = DEFAULT_LATE_HORIZON_S,
                 snapshot_every_s: float = DEFAULT_SNAPSHOT_EVERY_S, recent_s: float | None = None,
                 clock: Clock | None = None, bounds: TimeBounds | None = None) -> None:
        if lateness_s < 0:
            raise EngineError(f"lateness_s must be >= 0, got {lateness_s}")
        if snapshot_every_s <= 0 or late_horizon_s <= 0 or (recent_s is not None and recent_s <= 0):
            raise EngineError("snapshot_every_s, late_horizon_s and recent_s must be > 0")
        self.cfg = cfg
        self.site = cfg.site.id
        self.pack = pack
        self.workorders = workorders
        self.lateness = timedelta(seconds=lateness_s)
        self.store = store
        self.reevaluate_late = reevaluate_late
        self.late_horizon = timedelta(seconds=late_horizon_s)
        self.snapshot_every = timedelta(seconds=snapshot_every_s)
        self.recent = None if recent_s is None else timedelta(seconds=recent_s)
        self.clock = clock
        self.bounds = bounds or TimeBounds()
        # the bounds' spans as TimeBounds.latest and earliest add them (a message's check without a call)
        self._ahead = timedelta(seconds=self.bounds.max_future_s)
        self._behind = None if self.bounds.max_age_s is None else timedelta(seconds=self.bounds.max_age_s)
        self.rules: list[Rule] = []
        self.storm: StormRuleState | None = None
        self._watchers: list[Any] = []
        self._offline: list[Any] = []
        self._routes: dict[str, dict[str, tuple[Rule, ...]]] = {}  # device -> quantity -> rules
        # a cycle's shape -> per reading, its rules with their quick feeders (routes from columns)
        self._plans: dict[tuple[tuple[str, ...], tuple[str, ...]], _Plan] = {}
        self._last_plan: tuple[object, _Plan] = (None, ())
        # physics by quantities: the lowest and the highest value of each (the last shape's at hand)
        self._cycle_ranges: dict[tuple[str, ...], tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self._last_bounds: tuple[object, tuple[float, ...], tuple[float, ...]] = (None, (), ())
        self._hungry: list[Any] = []
        self._build(profiles)
        # the reorder buffer: readings that came in order are appended to _fifo as batches (a message's
        # readings at once; nearly all), the others pushed on _heap one by one; _take merges the two
        self._fifo: deque[_Batch] = deque()
        self._heap: list[_Entry] = []
        self._counter = itertools.count()
        self._seen = SeenIdentities()
        self._forget_above = 4096  # identities remembered before the next forget (see _release)
        self._ranges: dict[str, tuple[float, float]] = {}  # quantity -> its plausible range (physics)
        self._max_seen: datetime | None = None
        self._watermark: datetime | None = None
        self._hold: datetime | None = None  # the watermark stays below it (readings known to be missing)
        self._snapshots: list[_Snapshot] = []
        self._next_snapshot: datetime | None = None
        # released readings within the horizon (re-evaluation): a poll cycle's as one entry
        self._recent: deque[_Held | _HeldCycle] = deque()
        self._units: tuple[str, ...] = ()  # the last held cycle's units (interned, shared by the next)
        self._texts: tuple[str, ...] = ()  # the last held cycle's site, gateway and boot (the same)
        self._prune_at = _NO_TIME  # the watermark at which _prune next has something to do
        self._emitted: dict[tuple[str, str, str], tuple[datetime, dict[str, Any]]] = {}
        self.counts = {"fed": 0, "duplicate": 0, "late": 0, "retained": 0, "foreign": 0, "reevaluated": 0,
                       "impossible": 0, "future_time": 0, "implausible_time": 0}

    @classmethod
    def for_site(cls, cfg: SiteConfig, profiles: ProfileLibrary, workorders: WorkOrders | None = None,
                 lateness_s: float = DEFAULT_LATENESS_S, **options: Any) -> Engine:
        """An engine with the pack named by ``cfg.site.jurisdiction`` and ``cfg.rules`` overrides.

        ``options`` are the keyword arguments of the class (``store``, ``reevaluate_late``, ...).

        Raises:
            stormwatch.alerts.packs.PackError: pack missing/invalid or a bad override.
            EngineError: see the class.
        """
        return cls(cfg, profiles, load_site_pack(cfg), workorders, lateness_s, **options)

    def _build(self, profiles: ProfileLibrary) -> None:
        """One rule state per pack rule, each from its kind's factory (the registry)."""
        cfg, pack, site = self.cfg, self.pack, self.site
        registry = rule_kinds()
        for rule_id, params in pack.rules.items():
            kind = registry.rule_kind(params.kind)
            if kind.build is None:
                continue  # applied elsewhere (the report rule: by the work-order book)
            if not params.enabled:
                log.info("%s: %s (%s) is switched off for this site (enabled: false)", site, rule_id, kind.kind)
                continue
            for role in kind.roles:
                problem = self._role_problem(role, profiles)
                if problem is not None:
                    raise EngineError(f"{site}: {rule_id} ({kind.kind}): {problem}")
            ctx = RuleContext(cfg, profiles, rule_id, params, self.workorders, pack.name)
            try:
                state = kind.build(ctx)
            except BuildError as exc:
                raise EngineError(f"{site}: {exc}") from exc
            if isinstance(state, Sequence):
                self.rules.extend(state)  # one per discharge point or basin
            elif state is not None:
                self.rules.append(state)
        self._install(self.rules)
        log.info("%s: pack %s, rules %s", site, pack.name, ", ".join(r.rule_id for r in self.rules) or "none")

    def _role_problem(self, role: Role, profiles: ProfileLibrary) -> str | None:
        """Why the device the site gives a generic role (``roles:``) cannot serve it, or ``None``."""
        device = self.cfg.roles.get(role.name)
        if device is None or role.quantity is None:
            return None
        profile = profiles.get(self.cfg.device(device).profile)
        if role.quantity not in profile.quantities():
            return (f"roles.{role.name}: device {device!r} ({profile.model}) does not report {role.quantity!r} "
                    f"(it reports {', '.join(sorted(profile.quantities())) or 'nothing'})")
        return None

    def _copy_rules(self, rules: list[Rule]) -> list[Rule]:
        """A deep copy of the rules' state sharing their immutable parts (frozen parameters, geometry,
        criteria, times): a snapshot holds only what changes, a few kilobytes a site (docs/scaling.md)."""
        copied: list[Rule] = state_copy(rules, {})
        return copied

    def _install(self, rules: list[Any]) -> None:
        """Make ``rules`` (a restored snapshot) the live rule set."""
        self.rules = rules
        self.storm = next((r for r in rules if isinstance(r, StormRuleState)), None)
        # a rule may say it has nothing to watch (R1w without a work-order book): not called per release
        self._watchers = [r for r in rules if hasattr(r, "on_watermark") and getattr(r, "watching", True)]
        self._offline = [r for r in rules if hasattr(r, "source_offline")]
        # rules that stop taking readings at some point (``sated``, e.g. R1w once its period is open):
        # the routes are made again without them when they do
        self._hungry = [r for r in rules if getattr(r, "sated", True) is False]
        self._routes = {}
        self._plans, self._last_plan = {}, (None, ())

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
        late = self._admit(reading, retained)
        return late if late is not None else self._release_due()

    def feed_many(self, readings: Sequence[Reading], *, retained: bool = False) -> list[Event]:
        """Take the readings of one message (a gateway's poll cycle) that arrived together: each
        admitted as :meth:`feed` admits it, then the watermark moved once for all of them -- the
        events of feeding them one by one, without deciding between readings that came at once.

        The checks :meth:`feed` makes per reading are made per message here: the clock's bounds once,
        physics as a range per quantity; a reading that is not plainly admitted (another site, a flag,
        out of range or bounds, seen, at or before the watermark) takes :meth:`feed`'s own path."""
        if not retained and self._admit_batch(readings):
            top = self._max_seen  # _release_due, inline: once per message
            assert top is not None
            edge = top - self.lateness
            return self._release(edge if self._hold is None and self.clock is None else self._capped(edge))
        out: list[Event] = []
        admit = self._admit
        if retained:
            for reading in readings:
                admit(reading, retained)  # each skipped, counted and logged
            return out
        earliest: datetime | None = None
        latest: datetime | None = None
        if self.clock is not None:
            now = self.clock.now()
            latest = self.bounds.latest(now)
            earliest = self.bounds.earliest(now)
        site, seen, ranges = self.site, self._seen, self._ranges
        w, newest = self._watermark, self._max_seen
        # the message's new identities as one run of seqs of one (gateway, boot), remembered at once
        key: tuple[str, str] | None = None
        first = last = -1
        run_t = _NO_TIME  # the newest time of the run
        for reading in readings:
            t = reading.time
            rng = ranges.get(reading.quantity)
            if rng is None:
                rng = ranges[reading.quantity] = plausible_range(reading.quantity)
            seq = reading.seq
            if reading.site != site or reading.flags or not rng[0] <= reading.value <= rng[1] \
                    or (latest is not None and t > latest) or (earliest is not None and t < earliest) \
                    or (w is not None and t <= w):
                fresh = False
            elif key is not None and seq == last + 1 and (reading.gateway, reading.boot) == key:
                fresh = True  # the next of the run
            else:
                if key is not None:
                    seen.extend(*key, first, last, run_t)
                    key = None
                fresh = seq >= seen.fresh_from(reading.gateway, reading.boot)
                if fresh:
                    key, first, run_t = (reading.gateway, reading.boot), seq, t
            if not fresh:
                if key is not None:
                    seen.extend(*key, first, last, run_t)
                    key = None
                self._max_seen = newest
                late = admit(reading, retained)
                newest = self._max_seen
                if late:
                    out += late
                continue
            last = seq
            if t > run_t:
                run_t = t
            self._buffer(reading)
            if newest is None or t > newest:
                newest = t
        if key is not None:
            seen.extend(*key, first, last, run_t)
        self._max_seen = newest
        return out + self._release_due()

    #: a message decoded as columns: :func:`stormwatch.alerts.cyclepath.feed_cycle` (the common poll
    #: cycle in one pass; anything else :meth:`_feed_cycle`)
    feed_cycle = cyclepath.feed_cycle

    def _feed_cycle(self, cycle: Cycle, retained: bool) -> list[Event]:
        """:meth:`feed_cycle`'s general path: the cycle admitted by :meth:`_admit_cycle` as one batch of
        the reorder buffer and released by :meth:`_release`, or :meth:`feed_many` of its readings."""
        if retained or not self._admit_cycle(cycle):
            return self.feed_many(cycle.readings(), retained=retained)
        top = self._max_seen
        assert top is not None
        edge = top - self.lateness
        if self._hold is not None:
            return self._release(self._capped(edge))
        clock = self.clock  # _capped, inline: the watermark never passes the clock
        if clock is not None:
            now = clock.now()
            if now < edge:
                edge = now
        return self._release(edge)

    def _admit_cycle(self, c: Cycle) -> bool:
        """:meth:`_admit_batch` of a cycle: one batch of the reorder buffer when it is plainly admitted."""
        t = c.time
        w = self._watermark
        if (w is not None and t <= w) or c.site != self.site or not c.values:
            return False
        shape = c.shape
        bounds = self._last_bounds  # the cycles of one gateway share their shape object
        if bounds[0] is not shape:
            bounds = self._last_bounds = (shape, *self._bounds_of(c.quantities))
        values = c.values
        if not (all(map(_le, bounds[1], values)) and all(map(_le, values, bounds[2]))):
            return False
        if self.clock is not None:  # the bounds' latest and earliest, inline (once per message)
            now = self.clock.now()
            behind = self._behind
            if t > now + self._ahead or (behind is not None and t < now - behind):
                return False
        gateway, boot, seq = c.gateway, c.boot, c.seq
        end = seq + len(values) - 1
        first = (t, gateway, boot, seq)
        fifo = self._fifo
        if (fifo and not first > fifo[-1][1]) or not self._seen.take_run(gateway, boot, seq, end, t):
            return False
        fifo.append((first, (t, gateway, boot, end), c))
        top = self._max_seen
        if top is None or t > top:
            self._max_seen = t
        return True

    def _bounds_of(self, quantities: tuple[str, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The lowest and the highest value physics allows each of ``quantities`` (remembered)."""
        found = self._cycle_ranges.get(quantities)
        if found is None:
            ranges = [plausible_range(q) for q in quantities]
            found = self._cycle_ranges[quantities] = (tuple(lo for lo, _ in ranges), tuple(hi for _, hi in ranges))
        return found

    def _admit_batch(self, readings: Sequence[Reading]) -> bool:
        """Admit a message's readings as one batch of the reorder buffer when every one is plainly
        admitted -- this site, no flag, physically possible, within the clock's bounds, after the
        watermark, one unseen run of seqs of one (gateway, boot) in time order, after everything
        buffered -- (``True``); else nothing is done (``False``: :meth:`feed_many` looks at each)."""
        if not readings:
            return False
        # the fields from each model's __dict__: a pydantic model's attribute goes through its
        # __getattr__ hook (about 4x a plain object's); this is the hot path of every message
        r0 = readings[0].__dict__
        t0, gateway, boot, seq = r0["time"], r0["gateway"], r0["boot"], r0["seq"]
        w = self._watermark
        if w is not None and t0 <= w:
            return False
        site, ranges = self.site, self._ranges
        t = t0
        for reading in readings:
            r = reading.__dict__
            rng = ranges.get(r["quantity"])
            if rng is None:
                rng = ranges[r["quantity"]] = plausible_range(r["quantity"])
            rt = r["time"]
            if r["seq"] != seq or r["flags"] or r["site"] != site or r["gateway"] != gateway or r["boot"] != boot \
                    or not rng[0] <= r["value"] <= rng[1] or (rt is not t and rt < t):
                return False
            t = rt
            seq += 1
        if self.clock is not None:
            now = self.clock.now()
            earliest = self.bounds.earliest(now)
            if t > self.bounds.latest(now) or (earliest is not None and t0 < earliest):
                return False
        first = (t0, gateway, boot, r0["seq"])
        fifo = self._fifo
        if (fifo and not first > fifo[-1][1]) or not self._seen.take_run(gateway, boot, r0["seq"], seq - 1, t):
            return False
        fifo.append((first, (t, gateway, boot, seq - 1), tuple(readings)))
        if self._max_seen is None or t > self._max_seen:
            self._max_seen = t
        return True

    def _admit(self, reading: Reading, retained: bool) -> list[Event] | None:
        """Put ``reading`` in the reorder buffer (``None``), or why not: ``[]`` (skipped: another site,
        impossible, implausible time, retained or late-flagged, a duplicate) or the events of its
        re-evaluation (late)."""
        if reading.site != self.site:
            self.counts["foreign"] += 1
            log.warning("engine %s: reading of site %r ignored", self.site, reading.site)
            return []
        impossible = impossible_value(reading.quantity, reading.value)
        if impossible is not None:
            self.counts["impossible"] += 1
            log.warning("%s: reading %s/%s seq %s at %s ignored: %s (ingest dead-letters it as impossible_value)",
                        self.site, reading.gateway, reading.device, reading.seq, format_time(reading.time), impossible)
            return []
        if self.clock is not None:
            problem = self.bounds.check(reading.time, self.clock.now())
            if problem is not None:
                self.counts[problem[0]] += 1
                log.warning("%s: reading %s/%s seq %s ignored: %s: %s (ingest dead-letters it)", self.site,
                            reading.gateway, reading.device, reading.seq, problem[0], problem[1])
                return []
        flags = reading.flags
        if retained or (flags and "late" in flags):
            self.counts["retained"] += 1
            log.info("%s: %s reading %s/%s seq %s at %s is data, not a live trigger: skipped", self.site,
                     "retained" if retained else "late-flagged", reading.gateway, reading.device, reading.seq,
                     format_time(reading.time))
            return []
        gateway, boot, seq = reading.gateway, reading.boot, reading.seq
        identity = (gateway, boot, seq)
        if identity in self._seen:
            self.counts["duplicate"] += 1
            log.debug("%s: duplicate reading %s dropped", self.site, identity)
            return []
        t = reading.time
        if self._watermark is not None and t <= self._watermark:
            return self._late(reading, identity)
        self._seen.add(identity, t)
        self._buffer(reading)
        if self._max_seen is None or t > self._max_seen:
            self._max_seen = t
        return None

    def _buffer(self, reading: Reading) -> None:
        """Put one admitted reading in the reorder buffer: the in-order queue when it comes after
        everything there (nearly always), else the heap."""
        key = (reading.time, reading.gateway, reading.boot, reading.seq)
        fifo = self._fifo
        if not fifo or key > fifo[-1][1]:
            fifo.append((key, key, (reading,)))
        else:
            heapq.heappush(self._heap, (*key, next(self._counter), reading))

    def _release_due(self) -> list[Event]:
        """Release what the newest event time seen, less the lateness, lets through (capped)."""
        newest = self._max_seen
        if newest is None:
            return []
        w = newest - self.lateness
        return self._release(w if self._hold is None and self.clock is None else self._capped(w))

    def _capped(self, w: datetime) -> datetime:
        """``w``, or the clock's time when ``w`` is later: the watermark never passes the clock; nor
        does it reach a :meth:`hold`."""
        if self._hold is not None and w >= self._hold:
            w = self._hold - _TICK
        if self.clock is None:
            return w
        return min(w, self.clock.now())

    def hold(self, before: datetime | None) -> list[Event]:
        """Keep the watermark below ``before`` (``None``: no longer held); the events of what a lifted
        or later hold releases.

        The alert service holds an engine below readings a gateway made that have not arrived yet
        (:mod:`stormwatch.alerts.seqholes`): they are on their way, so no rule decides without them.
        A hold never moves the watermark back: readings at or before it are late data as always.
        """
        self._hold = before
        return self._release_due()

    @property
    def held_at(self) -> datetime | None:
        """The current :meth:`hold` (``None``: not held)."""
        return self._hold

    def advance_to(self, t: datetime) -> list[Event]:
        """Declare that no reading at or before ``t`` will come; release and evaluate up to ``t``
        (never past the clock of a live engine)."""
        return self._release(self._capped(t))

    def replay(self, readings: Sequence[Reading]) -> list[Event]:
        """Evaluate stored readings that come in event-time order (a backfill reads them so).

        The same checks as :meth:`feed` (site, physics, retained/late flags, duplicates) and the
        same rule code, without the reorder buffer: nothing can arrive out of order, so every
        reading is final at once and the watermark moves to the newest one. Call it chunk after
        chunk (each chunk later than the one before), then :meth:`flush`; the events are those of
        :meth:`feed` for every reading followed by :meth:`flush`.

        Raises:
            EngineError: a reading at or before the watermark (not in event-time order), or the
                engine keeps late re-evaluation state (a live engine takes :meth:`feed`).
        """
        if self.reevaluate_late:
            raise EngineError("replay() is for backfills; a live engine re-evaluating late data takes feed()")
        ready: list[Reading] = []
        seen = self._seen
        for reading in readings:
            if reading.site != self.site or (reading.flags and "late" in reading.flags) \
                    or impossible_value(reading.quantity, reading.value) is not None:
                self.feed(reading)  # counted and logged as feed() does; never released
                continue
            identity = (reading.gateway, reading.boot, reading.seq)
            if identity in seen:
                self.counts["duplicate"] += 1
                continue
            seen.add(identity, reading.time)
            ready.append(reading)
        if not ready:
            return []
        ready.sort(key=_order_key)
        w = self._watermark
        if (w is not None and ready[0].time <= w) or self._heap or self._fifo:
            raise EngineError(f"{self.site}: replay() needs readings in event-time order after the watermark "
                              f"{format_time(w) if w else '-'} and nothing buffered by feed()")
        last = ready[-1].time
        self._max_seen = last
        self._watermark = last
        out = self._run(ready) + self._advance_all(last)
        if len(seen) > 4096:
            seen.forget(last)
        return [self._with_order(e) for e in self._record(out)] if out else out

    def catch_up(self, readings: Sequence[Reading]) -> list[Event]:
        """Take readings read back from the store after a stretch the broker may not have delivered
        (a session that came back empty, a reconnect): the ones this engine has not seen.

        Those after the watermark are fed as live readings (:meth:`feed`). Those at or before it are
        late: with ``reevaluate_late`` they are re-evaluated *together* -- one re-run from the snapshot
        before the oldest of them, not one per reading -- and every event that was not emitted before,
        or differs from what was, is emitted with ``late_detection_s``. Readings this engine saw, readings
        flagged late (stored data, never a live trigger) and values physics forbids are skipped.
        Readings older than the re-evaluation horizon are only logged, once (run ``stormwatch evaluate``).
        """
        late: list[Reading] = []
        fresh: list[Reading] = []
        w = self._watermark
        for r in readings:
            if r.site != self.site or (r.flags and "late" in r.flags) \
                    or impossible_value(r.quantity, r.value) is not None:
                continue
            if (r.gateway, r.boot, r.seq) in self._seen:
                continue
            (late if w is not None and r.time <= w else fresh).append(r)
        out: list[Event] = []
        if late:
            assert w is not None
            late.sort(key=_order_key)
            snaps = self._snapshots
            i = bisect_right([s.time for s in snaps], late[0].time) - 1
            if not self.reevaluate_late or i < 0:
                log.warning("%s: %d reading(s) from the store the engine never received, from %s (watermark %s): %s",
                            self.site, len(late), format_time(late[0].time), format_time(w),
                            "older than the re-evaluation horizon: run `stormwatch evaluate`" if self.reevaluate_late
                            else "stored data, no live trigger")
                for r in late:  # judged: the next catch-up (every few seconds while holes are open) skips them
                    self._seen.add(r.identity, r.time)
            else:
                self.counts["late"] += len(late)
                for r in late:
                    self._seen.add(r.identity, r.time)
                out += self._reevaluate(i, late, w)
        for r in sorted(fresh, key=_order_key):
            out += self.feed(r)
        return out

    def flush(self) -> list[Event]:
        """Release every buffered reading and evaluate up to the newest event time seen.

        Used at the end of a backfill and on stop. Storms not closed by a dry gap stay open
        (:meth:`in_progress`); nothing is invented beyond the data. A live engine releases nothing
        stamped after its clock (those readings stay buffered; ingest has stored them).
        """
        if self._max_seen is None:
            return []
        return self._release(self._capped(self._max_seen))

    def source_offline(self, gateway: str, at: datetime) -> list[Event]:
        """``gateway`` was reported offline at ``at`` (its MQTT last will): open a rain-gauge data gap.

        ``at`` is the time the status arrived (the last will carries no measurement time).
        """
        found: list[Event] = []
        for rule in self._offline:
            buffered = [r.time for r in self._buffered() if rule.wants(r)]
            found += rule.source_offline(gateway, at, max(buffered) if buffered else None)
        return [self._with_order(e) for e in self._record(found)]

    def _buffered(self) -> list[Reading]:
        """Every reading in the reorder buffer (in no particular order)."""
        return [r for batch in self._fifo for r in batch[2]] + [entry[-1] for entry in self._heap]

    def held_readings(self) -> list[Reading]:
        """The readings this engine holds and a store may not have yet: those waiting in the reorder
        buffer and the released tail kept for late re-evaluation (``recent_s``), in event-time order.
        A new engine for the same site (a changed site file) takes them over."""
        held = [r for h in self._recent for r in h.readings()] + self._buffered()
        return sorted(held, key=_order_key)

    def in_progress(self) -> list[StormSummary]:
        """Storms still open at the current watermark (a backfill reports these as in progress)."""
        s = self.storm.in_progress() if self.storm is not None else None
        return [s] if s is not None else []

    def gaps(self) -> list[GapSummary]:
        """Rain-gauge data gaps seen so far (closed ones, then the open one), oldest first."""
        if self.storm is None:
            return []
        still = self.storm.open_gap()
        return [*self.storm.gaps, *([still] if still else [])]

    # -- evaluation --------------------------------------------------------------------------

    def _release(self, w: datetime) -> list[Event]:
        wm = self._watermark
        if wm is not None and w <= wm:
            return []
        self._watermark = w
        fifo = self._fifo
        if not self._heap and fifo and fifo[0][1][0] <= w and (len(fifo) == 1 or fifo[1][0][0] > w):
            ready: Sequence[Reading] = fifo.popleft()[2]  # one batch (live: the poll cycle of 2 minutes ago)
        else:
            ready = self._take(w)
        if type(ready) is Cycle:  # a cycle released alone: never empty
            out = self._run_cycle_keeping(ready) if self.reevaluate_late else self._run_cycle(ready)
        elif not ready:
            out = []
        else:
            out = self._run_keeping(ready) if self.reevaluate_late else self._run_part(ready)
        return self._after_release(w, out)

    def _after_release(self, w: datetime, out: list[Event]) -> list[Event]:
        """:meth:`_release` after the released readings' run (``out``, their events): the rules due at
        ``w`` advanced, the watchers told, what no late reading needs dropped, the events' orders."""
        if self._hungry:
            self._hungry = [r for r in self._hungry if not r.sated]
            self._routes = {}
            self._plans, self._last_plan = {}, (None, ())
        for rule in self.rules:  # _advance_all, inline: once per release
            nd = rule.next_due
            if nd is not None and nd <= w:
                out += rule.advance_to(w)
        for watch in self._watchers:
            out += watch.on_watermark(w)
        if self.reevaluate_late:
            if w >= self._prune_at:  # (see _prune: not at every release)
                self._prune(w)
        elif self._seen.count > self._forget_above:  # at or before the watermark they are late anyway
            self._seen.forget(w, including=True)
            self._forget_above = self._seen.count + 4096  # a run still growing is kept: not at every release
        if not out:
            return out
        return [self._with_order(e) for e in self._record(out)]

    def _take(self, w: datetime) -> list[Reading]:
        """The buffered readings at or before ``w``, out of the buffer, in the engine's order (the
        in-order queue and the heap merged)."""
        fifo, heap = self._fifo, self._heap
        ready: list[Reading] = []
        if not heap:  # nearly always: whole batches off the queue
            while fifo and fifo[0][1][0] <= w:
                ready += fifo.popleft()[2]
            if not fifo or fifo[0][0][0] > w:
                return ready
        # a batch straddling ``w``, or readings on the heap to merge: the queue's front batches onto the heap
        counter = self._counter
        while fifo and fifo[0][0][0] <= w:
            for r in fifo.popleft()[2]:
                heapq.heappush(heap, (r.time, r.gateway, r.boot, r.seq, next(counter), r))
        while heap and heap[0][0] <= w:
            ready.append(heapq.heappop(heap)[-1])
        return ready

    def _advance_all(self, w: datetime) -> list[Event]:
        out: list[Event] = []
        for rule in self.rules:
            nd = rule.next_due
            if nd is not None and nd <= w:
                out += rule.advance_to(w)
        for rule in self._watchers:
            out += rule.on_watermark(w)
        return out

    def _run(self, readings: Sequence[Reading]) -> list[Event]:
        """Give ``readings`` (event-time order) to the rules; the hot path of live and backfill.

        Before a reading every rule due strictly before its time is advanced to 1 µs before it
        (checked once per instant; within an instant, only a rule fed or advanced since can be due)."""
        return self._run_keeping(readings) if self.reevaluate_late else self._run_part(readings)

    def _run_part(self, readings: Sequence[Reading]) -> list[Event]:
        """:meth:`_run` of readings between two snapshots."""
        out: list[Event] = []
        rules = self.rules
        routes = self._routes
        self.counts["fed"] += len(readings)
        t_prev: datetime | None = None
        again: list[Rule] = []  # rules still due before this instant after being fed or advanced at it
        for reading in readings:
            fields = reading.__dict__  # (see _admit_batch)
            t = fields["time"]
            if t is not t_prev and t != t_prev:  # the readings of one poll cycle share their time object
                t_prev = t
                for rule in rules:
                    nd = rule.next_due
                    if nd is not None and nd < t:
                        again = self._due_before(rules, t, out)
                        break
                else:
                    again = []
            elif again:
                again = self._due_before(again, t, out)
            by_quantity = routes.get(fields["device"])
            wanting = by_quantity.get(fields["quantity"]) if by_quantity is not None else None
            if wanting is None:
                wanting = self._route(reading)
            for rule in wanting:
                found = rule.feed(reading)
                if found:
                    out += found
                nd = rule.next_due
                if nd is not None and nd < t:
                    again.append(rule)
        return out

    def _run_cycle(self, c: Cycle) -> list[Event]:
        """:meth:`_run_part` of one cycle's readings (one instant): each rule takes a reading by its quick
        feeder from the columns, or as a model when the feeder declines it (or it has none)."""
        out: list[Event] = []
        rules = self.rules
        values = c.values
        self.counts["fed"] += len(values)
        t = c.time
        again: list[Rule] = []  # as in _run_part
        for rule in rules:
            nd = rule.next_due
            if nd is not None and nd < t:
                again = self._due_before(rules, t, out)
                break
        shape = c.shape
        last = self._last_plan  # the cycles of one gateway share their shape object
        plan = last[1] if last[0] is shape else self._plan_of(c)
        cyclepath.take_plan(self, plan, c, us_of(t), again, out)
        return out

    def _run_cycle_keeping(self, c: Cycle) -> list[Event]:
        """:meth:`_run_keeping` of one cycle (one instant: one part), its readings kept from the columns."""
        self._keep_cycle(c)
        return self._run_cycle(c)

    def _keep_cycle(self, c: Cycle) -> None:
        """A snapshot when one is due before ``c`` runs, and ``c`` kept for a late re-evaluation."""
        t = c.time
        if self._next_snapshot is None or t >= self._next_snapshot:
            self._snapshot(t)
        # one entry per cycle: the shape's devices and quantities and the decoder's columns are shared
        # objects already; the cycle's own texts interned, its units shared with the last cycle's when equal
        units, texts = c.units, (c.site, c.gateway, c.boot)
        if type(units) is not tuple:  # the service's decoder gives lists: compared as a tuple
            units = tuple(units)
        if units != self._units:
            self._units = tuple(map(sys.intern, units))
        if texts != self._texts:
            self._texts = tuple(map(sys.intern, texts))
        site, gateway, boot = self._texts
        self._recent.append(_new_tuple(_HeldCycle, (t, site, gateway, boot, c.seq, c.devices, c.quantities, c.values,
                                                    self._units, c.tip_sizes)))  # made in C, no __new__ frame

    def _plan_of(self, c: Cycle) -> _Plan:
        """The rules that take each reading of ``c``'s shape, with their quick feeders, in the readings'
        order: ``(i, rule, quick)``, ``(i, _NOBODY, ...)`` for a reading no rule takes (remembered)."""
        plan = self._plans.get(c.shape)
        if plan is None:
            steps: list[tuple[int, Rule, _Quick | None]] = []
            for i, (device, quantity) in enumerate(zip(c.devices, c.quantities, strict=True)):
                by_quantity = self._routes.get(device)
                wanting = by_quantity.get(quantity) if by_quantity is not None else None
                if wanting is None:
                    wanting = self._route(c[i])
                quick = [(i, rule, self._quick(rule, device, quantity)) for rule in wanting]
                steps += quick or [(i, _NOBODY, _NOBODY.quick)]
            plan = self._plans[c.shape] = tuple(steps)
        self._last_plan = (c.shape, plan)
        return plan

    @staticmethod
    def _quick(rule: Rule, device: str, quantity: str) -> _Quick | None:
        make = getattr(rule, "quick_feeder", None)
        return None if make is None else make(device, quantity)

    def _route(self, reading: Reading) -> tuple[Rule, ...]:
        """The rules that take readings of ``reading``'s device and quantity (remembered in the routes)."""
        wanting = tuple(r for r in self.rules if r.wants(reading) and not getattr(r, "sated", False))
        self._routes.setdefault(reading.device, {})[reading.quantity] = wanting
        return wanting

    @staticmethod
    def _due_before(rules: Sequence[Rule], t: datetime, out: list[Event]) -> list[Rule]:
        """Advance each of ``rules`` due strictly before ``t`` to 1 µs before it (its events onto
        ``out``); the ones still due before ``t`` after that."""
        again: list[Rule] = []
        for rule in rules:
            nd = rule.next_due
            if nd is not None and nd < t:
                out += rule.advance_to(t - _TICK)
                nd = rule.next_due
                if nd is not None and nd < t:
                    again.append(rule)
        return again

    def _run_keeping(self, readings: Sequence[Reading]) -> list[Event]:
        """:meth:`_run` of an engine that keeps late re-evaluation state: a snapshot of the rules each
        ``snapshot_every`` and the released readings, between the readings."""
        out: list[Event] = []
        i, n = 0, len(readings)
        while i < n:
            t = readings[i].time
            if self._next_snapshot is None or t >= self._next_snapshot:
                self._snapshot(t)
            j = i + 1
            nxt = self._next_snapshot
            while j < n and (nxt is None or readings[j].time < nxt):
                j += 1
            part = readings[i:j]
            self._recent.extend(map(_Held.of, part))
            out += self._run_part(part)
            i = j
        return out

    # -- late data ---------------------------------------------------------------------------

    def _snapshot(self, t: datetime) -> None:
        self._snapshots.append(_Snapshot(t, self._copy_rules(self.rules)))
        self._next_snapshot = t - (t - datetime.min.replace(tzinfo=t.tzinfo)) % self.snapshot_every \
            + self.snapshot_every
        self._thin(t)

    def _thin(self, now: datetime) -> None:
        """Keep every snapshot of the last :data:`DENSE_SNAPSHOTS_S`, older ones :data:`SPARSE_SNAPSHOTS_S`
        apart: a late reading from then re-runs a few more hours (from the store and the readings kept),
        and a site holds about ten snapshots instead of one an hour for the whole horizon."""
        dense_from = now - timedelta(seconds=DENSE_SNAPSHOTS_S)
        sparse = timedelta(seconds=SPARSE_SNAPSHOTS_S)
        kept: list[_Snapshot] = []
        for snap in self._snapshots:
            if snap.time >= dense_from or not kept or snap.time - kept[-1].time >= sparse:
                kept.append(snap)
        self._snapshots = kept

    def _prune(self, w: datetime) -> None:
        """Drop what no late reading can need at watermark ``w``: snapshots past the horizon (when the
        next one falls off), and the readings kept and identities seen before the oldest snapshot (every
        :data:`PRUNE_EVERY_S`: kept a little longer, they are only ever filtered out of a re-run)."""
        horizon = w - self.late_horizon
        snaps = self._snapshots
        # keep the newest snapshot at or before the horizon: it is the start of the oldest window
        while len(snaps) > 1 and snaps[1].time <= horizon:
            snaps.pop(0)
        if not snaps:
            return
        self._prune_at = w + _PRUNE_EVERY if len(snaps) < 2 else min(w + _PRUNE_EVERY,
                                                                         snaps[1].time + self.late_horizon)
        oldest = snaps[0].time
        keep_from = oldest if self.recent is None else max(oldest, w - self.recent)
        recent = self._recent
        while recent and recent[0][0] < keep_from:
            recent.popleft()
        if self._seen.count > self._forget_above:
            self._seen.forget(oldest)
            self._emitted = {k: v for k, v in self._emitted.items() if v[0] >= oldest}
            self._forget_above = self._seen.count + 4096  # a run still growing is kept: not at every release

    def _record(self, events: list[Event]) -> list[Event]:
        if self.reevaluate_late:
            for e in events:
                self._emitted[e.identity()] = (
                    e.event_time, e.model_dump(exclude=_NOT_COMPARED))
        return events

    def _late(self, reading: Reading, identity: tuple[str, str, int]) -> list[Event]:
        self.counts["late"] += 1
        w = self._watermark
        assert w is not None
        snaps = self._snapshots
        i = bisect_right([s.time for s in snaps], reading.time) - 1
        if not self.reevaluate_late or i < 0:
            why = ("older than the re-evaluation horizon: run `stormwatch evaluate`" if self.reevaluate_late
                   else "stored data, no live trigger")
            log.warning("%s: late reading %s/%s %s at %s (watermark %s, lateness %gs): %s", self.site,
                        reading.gateway, reading.device, reading.quantity, format_time(reading.time),
                        format_time(w), self.lateness.total_seconds(), why)
            self._seen.add(identity, reading.time)  # judged once: a redelivery or a catch-up is not news
            return []
        self._seen.add(identity, reading.time)
        return self._reevaluate(i, [reading], w)

    def _reevaluate(self, i: int, late: list[Reading], w: datetime) -> list[Event]:
        snap = self._snapshots[i]
        log.warning("%s: %d late reading(s) from %s (watermark %s): re-evaluating from %s", self.site, len(late),
                    format_time(min(r.time for r in late)), format_time(w), format_time(snap.time))
        self.counts["reevaluated"] += 1
        window: dict[tuple[str, str, int], Reading] = {}
        if self.store is not None:
            try:
                for r in self.store.query_readings(self.site, start=snap.time, end=w + _TICK):
                    window[r.identity] = r
            except StoreError as exc:
                log.error("%s: re-evaluation could not read the store (%s): using the readings seen live", self.site,
                          exc)
        kept = (r for h in self._recent if snap.time <= h.time <= w for r in h.readings())
        for r in itertools.chain(kept, late):
            if snap.time <= r.time <= w:
                window[r.identity] = r
        replay = sorted((r for r in window.values() if not (r.flags and "late" in r.flags)), key=_order_key)
        for r in replay:
            self._seen.add(r.identity, r.time)
        self._snapshots = self._snapshots[:i]
        self._next_snapshot = None
        self._recent = deque(h for h in self._recent if h.time < snap.time)  # a cycle's readings share one time
        self._prune_at = _NO_TIME
        self._install(self._copy_rules(snap.rules))
        found = self._run(replay) + self._advance_all(w)
        out: list[Event] = []
        for e in found:
            key = e.identity()
            before = self._emitted.get(key)
            if before is not None and before[1] == e.model_dump(exclude=_NOT_COMPARED):
                continue
            delay = max(0.0, (w - e.event_time).total_seconds())
            log.warning("%s: late detection (%s after the fact): %s %s", self.site, timedelta(seconds=delay), e.kind,
                        e.occurrence)
            out.append(e.model_copy(update={"late_detection_s": delay}))
        return [self._with_order(e) for e in self._record(out)]

    # -- work orders -------------------------------------------------------------------------

    def stamp(self, event: Event) -> Event:
        """The event with its rule's parameters that the permit text in hand does not confirm (the
        pack's ``verified: false``), in ``unverified`` and said in its message. Every event the
        engine emits has passed here; a backfill that runs the rules itself
        (:func:`stormwatch.alerts.backfill.evaluate`) passes its events here too."""
        params = self.pack.rules.get(event.rule)
        if params is None or not params.unverified or event.unverified is not None:
            return event
        shown = params.unverified_values()
        return event.model_copy(update={
            "unverified": shown,
            "message": f"{event.message} [not confirmed by the permit text in hand: {', '.join(shown)}]"})

    def _with_order(self, event: Event) -> Event:
        event = self.stamp(event)
        wo = self.workorders
        if wo is None:
            return event
        opening = opening_kinds()
        if event.kind in opening:
            report = self.pack.first(ReportRule)
            order, _created = wo.open_for(
                event, report=report[1] if report and opening[event.kind] in inspection_kinds() else None,
                timezone=self.cfg.site.timezone)
            return event.model_copy(update={"work_order": order.id})
        if event.kind in closing_kinds():
            done = wo.close_for(event)
            return event.model_copy(update={"work_order": done.id}) if done else event
        existing = wo.find(event.site, event.rule, event.occurrence)
        return event.model_copy(update={"work_order": existing.id}) if existing else event

