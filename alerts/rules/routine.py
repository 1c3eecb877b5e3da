"""R1w: routine inspection every seven days, rain or not.

Law: Ch. 133 §133-7A(2), Ch. 196 §196-9B ("every seven days"); Spencerport: at least annually
(the pack sets ``every_days``). rules.md R1: the weekly clock is independent of storm
inspections unless the jurisdiction says otherwise (``storm_inspection_counts``).

The design: docs/rules.md ("The rule modules", `alerts/rules/routine.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import Field

from stormwatch.alerts.rules import Chunk, occurrence
from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import EventKindSpec, RuleContext, RuleKind
from stormwatch.contract import Event, Reading
from stormwatch.display import local_time


class RoutineRule(RuleParams):
    """R1w: routine inspection every ``every_days`` days (§133-7A(2), §196-9B: seven days).

    Attributes:
        every_days: cadence in whole local calendar days (a DST week is 167 or 169 h); counted from
            the last completed routine inspection, else from the site's first reading.
        storm_inspection_counts: whether a completed storm inspection restarts the cadence
            (rules.md: default no).
    """

    kind: Literal["routine"]
    every_days: int = Field(default=7, gt=0)
    storm_inspection_counts: bool = False

#: Returns the time of the site's last recorded inspection that restarts the cadence, or None.
LastInspection = Callable[[], datetime | None]
#: Returns ``(period start, due)`` of the latest routine period already in the work-order book, or None.
PeriodAnchor = Callable[[], tuple[datetime, datetime] | None]


class RoutineRuleState:
    """R1w for one site.

    Args:
        site: site id.
        rule_id: pack rule id (``R1w``).
        params: the pack's :class:`~stormwatch.alerts.packs.RoutineRule`.
        tz: the site's time zone; periods are counted in its local calendar days.
        last_inspection: callable giving the last recorded inspection time (UTC) or ``None``;
            ``None``: no work-order book (no inspection is ever recorded).
        anchor: callable giving the latest routine period already opened (work-order book), so a
            restarted engine continues that period instead of opening one from its first reading.
    """

    def __init__(self, site: str, rule_id: str, params: RoutineRule, tz: ZoneInfo,
                 last_inspection: LastInspection | None, anchor: PeriodAnchor | None = None) -> None:
        self.site = site
        self.anchor = anchor
        self.rule_id = rule_id
        self.params = params
        self.tz = tz
        self.last_inspection = last_inspection
        self._period_start: datetime | None = None
        self._due: datetime | None = None
        self.next_due: datetime | None = None  # the period's deadline (time alone opens the next period)
        #: :meth:`on_watermark` can find something: there is a book of recorded inspections
        self.watching = last_inspection is not None

    def wants(self, reading: Reading) -> bool:
        return True

    @property
    def sated(self) -> bool:
        """Readings are no longer input once a period is open (:meth:`feed` ignores them; time and
        recorded inspections move the cadence): the engine stops giving them to this rule."""
        return self._period_start is not None

    def _open(self, start: datetime, why: str) -> Event:
        self._period_start = start
        self._due = add_local_days(start, self.params.every_days, self.tz)
        self.next_due = self._due
        return Event(
            kind="routine_inspection_due", site=self.site, event_time=start, rule=self.rule_id,
            citation=self.params.citation, occurrence=occurrence("routine", self._due), due_at=self._due,
            message=f"routine inspection (every {self.params.every_days:g} days, {why}) "
                    f"due by {local_time(self._due, self.tz)}",
        )

    def feed(self, reading: Reading) -> list[Event]:
        if self._period_start is not None:
            return []
        known = self.anchor() if self.anchor is not None else None
        if known is not None and known[0] <= reading.time:
            # a restart: the book already holds this cadence's current period; continue it silently
            self._period_start, self._due = known
            self.next_due = self._due
            return [*self.check_inspection(reading.time), *self.advance_to(reading.time)]
        return [self._open(reading.time, "from the first reading"), *self.advance_to(reading.time)]

    def replay(self, chunk: Chunk) -> list[Event]:
        """A backfill chunk (:class:`~stormwatch.alerts.rules.Chunk`): only the site's first reading is
        input (:meth:`feed` returns nothing once a period is open); the periods the later readings'
        ``advance_to`` would open, in the same order, open when the backfill advances to the chunk's
        newest reading."""
        if self._period_start is not None or chunk.first is None:
            return []
        return self.feed(chunk.first)

    def on_watermark(self, t: datetime) -> list[Event]:
        """Every time the engine's watermark moves (a Rule hook): an inspection recorded since restarts
        the cadence."""
        return self.check_inspection(t)

    def check_inspection(self, t: datetime) -> list[Event]:
        """A recorded inspection after the period start (and at or before ``t``) restarts the cadence."""
        if self._period_start is None or self.last_inspection is None:
            return []
        done = self.last_inspection()
        if done is not None and self._period_start < done <= t:
            return [self._open(done, f"from the inspection of {local_time(done, self.tz)}")]
        return []

    def advance_to(self, t: datetime) -> list[Event]:
        if self._period_start is None or self._due is None:
            return []
        out: list[Event] = []
        while self._due is not None and t >= self._due:
            out.append(self._open(self._due, "the previous one was not recorded in time"))
        return out


def add_local_days(t: datetime, days: int, tz: ZoneInfo) -> datetime:
    """``t`` plus ``days`` calendar days of the zone ``tz``: the same local time ``days`` dates later (UTC).

    Across a daylight-saving change the result is 23 h or 25 h more or less than ``days`` × 24 h
    (America/New_York: 2024-11-01 00:00 EDT + 7 days = 2024-11-08 00:00 EST, 169 h). A local time
    that does not exist on the target date (spring forward) lands the gap's length later; an
    ambiguous one (fall back) takes its first occurrence (``fold=0``).

    Args:
        t: a timezone-aware instant.
        days: whole calendar days.
        tz: the site's zone.
    """
    local = t.astimezone(tz)
    return (local + timedelta(days=days)).astimezone(UTC)


def build(ctx: RuleContext) -> RoutineRuleState:
    """R1w: the cadence counted from the work-order book's last completed inspection."""
    params = ctx.params
    assert isinstance(params, RoutineRule)
    kinds = ("routine_inspection", "storm_inspection") if params.storm_inspection_counts else ("routine_inspection",)
    wo, site, rule_id = ctx.workorders, ctx.site, ctx.rule_id
    return RoutineRuleState(
        site, rule_id, params, ctx.cfg.site.tz,
        (lambda: wo.last_completed(site, kinds)) if wo is not None else None,
        (lambda: wo.latest_period(site, rule_id)) if wo is not None else None)


KIND = RuleKind(
    kind="routine", params=RoutineRule, build=build,
    summary="R1w: routine inspection every seven days, rain or not (§133-7A(2), §196-9B)",
    events=(EventKindSpec("routine_inspection_due", summary="a routine inspection period opened: due by due_at",
                          opens="routine_inspection", inspection=True, chart="rain"),),
)
