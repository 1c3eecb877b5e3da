"""What a site report holds: plain frozen records, built by :mod:`stormwatch.report.build` and
written by :mod:`stormwatch.report.render` (HTML/PDF and CSV read the same records, so they show the
same numbers).

Times are UTC datetimes (shown in the site's zone); depths are whole tips with their exact text at
the gauge's resolution (:func:`stormwatch.alerts.backfill.depth_text`); turbidity in the probes'
unit (NTU or FNU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from stormwatch.alerts.workorders import Change, WorkOrder
from stormwatch.display import local_time


@dataclass(frozen=True)
class Interval:
    """``[start, end)`` in UTC."""

    start: datetime
    end: datetime

    @property
    def duration(self) -> timedelta:
        return self.end - self.start


@dataclass(frozen=True)
class SensorCoverage:
    """Data completeness of one device over the period.

    Attributes:
        device, role, model: the device id, what the site uses it for, its profile.
        poll_s: the poll interval of the site file (one reading expected per poll).
        expected: polls in the period (period / poll interval, whole polls).
        received: distinct reading times stored in the period.
        gaps: stretches longer than two poll intervals without a reading (the engine's silence
            allowance), including the period's start and end.
    """

    device: str
    role: str
    model: str
    poll_s: float
    expected: int
    received: int
    gaps: tuple[Interval, ...]

    @property
    def percent(self) -> float | None:
        """Received / expected in percent, at most 100 (an event logger records more than its polls);
        ``None`` when nothing was expected nor received (a period wholly after the state's clock)."""
        if self.expected == 0 and self.received == 0:
            return None
        return 100.0 if self.expected == 0 else min(100.0, 100.0 * self.received / self.expected)


@dataclass(frozen=True)
class Outcome:
    """What the work-order book says about an item: the order, and whether its work was late."""

    order: WorkOrder | None
    #: ``on time``, ``late by ...``, ``OVERDUE``, ``open``, or why there is no order.
    verdict: str

    @property
    def done(self) -> str:
        o = self.order
        if o is None or o.completed_at is None:
            return ""
        return o.inspector or ""


@dataclass(frozen=True)
class StormRow:
    """One storm with a tip in the period (R1: tips separated by less than the dry gap).

    Attributes:
        id: the storm's work-order id when it has one, else ``storm:<start>`` (its occurrence).
        tips, depth: whole tips and their exact depth at the gauge's resolution.
        qualifying: reached the pack's threshold (0.5 in).
        ended: ``confirmed`` (the gauge reported the dry gap), ``not confirmed`` (gauge silent
            after the last tip) or ``in progress`` (still open at the end of the data).
        due_at: the inspection deadline (qualifying storms that ended).
        outcome: the inspection work order and its verdict.
        notes: started before / continues after the period, needs verification...
    """

    id: str
    occurrence: str
    start: datetime
    last_tip: datetime
    tips: int
    depth: str
    depth_in: float
    qualifying: bool
    ended: str
    due_at: datetime | None
    outcome: Outcome | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DayTotal:
    """Rain of one local calendar day of the site's zone (23, 24 or 25 hours long).

    ``unknown`` is how long of that day the gauge gave no data: the total is then a lower bound
    (shown ``>=``), never a dry day. ``depth`` is the whole text (``"60 tips = 0.60 in"``),
    ``amount`` its number for the rain calendar's cell (:func:`stormwatch.report.build.rain_amount`:
    ``"0.60"`` in the gauge's unit).
    """

    day: date
    hours: float
    tips: int
    depth: str
    depth_in: float
    unknown: timedelta
    amount: str

    @property
    def no_data(self) -> bool:
        """The gauge gave no data all day (its part of the period): the rain is UNKNOWN, not a
        lower bound of 0."""
        return self.tips == 0 and self.unknown >= timedelta(hours=self.hours)


@dataclass(frozen=True)
class TurbidityRow:
    """One turbidity contrast (R2): a sustained run of violating windows.

    Attributes:
        start: start of the first violating window; ``detected_at``: when it was sustained.
        cleared_at: when the criterion was met again for the clearing time (``None``: not in the data).
        upstream, downstream, allowed: window medians when it was detected.
        peak_downstream: the highest downstream window median of the run.
        point: the discharge point's id (``None``: the site file's one ``turbidity_pair``).
    """

    occurrence: str
    start: datetime
    detected_at: datetime
    cleared_at: datetime | None
    upstream: float | None
    downstream: float | None
    allowed: float | None
    peak_downstream: float | None
    unit: str
    outcome: Outcome | None
    point: str | None = None

    @property
    def duration(self) -> timedelta | None:
        return None if self.cleared_at is None else self.cleared_at - self.start


@dataclass(frozen=True)
class BasinRow:
    """A basin event (R3): capacity warning, cleanout due, cleanout done (measured drop); ``basin``:
    the basin's id on a site with ``basins`` (``None``: the site file's one ``basin``)."""

    kind: str
    at: datetime
    depth_ft: float | None
    lost_percent: float | None
    due_at: datetime | None
    outcome: Outcome | None
    basin: str | None = None


@dataclass(frozen=True)
class UnknownRow:
    """An interval where a rule could not decide: shown as UNKNOWN with its duration.

    ``what``: ``rain`` (R1: no rain-gauge data), ``turbidity contrast`` (R2: a window without
    clean readings of a probe) or ``basin level`` (R3: no level readings). ``point``: the discharge
    point or basin it is of, on a site with several (``None``: the site's one, or rain).
    """

    what: str
    device: str
    interval: Interval
    why: str
    point: str | None = None

    @property
    def item(self) -> str:
        """``what``, with the point or basin it is of (``turbidity contrast at outfall-2``)."""
        return self.what if self.point is None else f"{self.what} at {self.point}"


@dataclass(frozen=True)
class OrderRow:
    """A work order of the period with its full history and photos (``(seq, filename, data URI)``)."""

    order: WorkOrder
    history: tuple[Change, ...]
    photos: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class Chart:
    """One chart as SVG markup, with a caption."""

    title: str
    svg: str
    caption: str


@dataclass
class Report:
    """A site log-book report of one period (or of one storm: ``storm`` set).

    Attributes:
        site_id, site_name, timezone, jurisdiction, pack_title, permit: the cover.
        start, end: the period ``[start, end)`` (UTC).
        as_of: the time work orders are judged at (the alert engine's clock).
        as_of_what: which clock that is, in a few words.
        resolution: the rain gauge's tip size (``0.01 in``), if the site has one.
        threshold: the storm rule's threshold text (``0.5 in``) and citations per rule.
        state: where the work orders came from, or why there are none.
        has_orders: whether a work-order book was given (``--no-work-orders``: no; the tables then
            leave out their work-order columns, and the log book says once why).
    """

    site_id: str
    site_name: str
    timezone: str
    jurisdiction: str
    pack_title: str
    permit: str
    start: datetime
    end: datetime
    as_of: datetime
    as_of_what: str
    resolution: str | None
    threshold: str | None
    citations: dict[str, str]
    state: str
    #: rule id -> what the rule requires, in words (its rule kind's summary): the log book defines
    #: R1, R1w ... where it first names them
    rule_meanings: dict[str, str] = field(default_factory=dict)
    has_orders: bool = True
    readings: int = 0
    coverage: list[SensorCoverage] = field(default_factory=list)
    storms: list[StormRow] = field(default_factory=list)
    days: list[DayTotal] = field(default_factory=list)
    turbidity: list[TurbidityRow] = field(default_factory=list)
    basin: list[BasinRow] = field(default_factory=list)
    unknown: list[UnknownRow] = field(default_factory=list)
    orders: list[OrderRow] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    storm: StormRow | None = None
    report_due: datetime | None = None
    #: the basin rule's warning and cleanout fractions (0..1), if the pack watches a basin
    basin_limits: tuple[float, float] | None = None
    #: the part of the period after ``as_of`` (the state's clock): it had not happened when the state
    #: was written -- not counted in completeness, never a gap (``None``: the period lies before it)
    not_yet: Interval | None = None
    #: who signs (the storm rule's wording of the inspector) and under which section
    inspector_citation: str = ""
    #: ``(id, label)`` of each discharge point R2 watches and of each basin, on a site with
    #: ``discharge_points`` / ``basins`` (empty: the site file's one ``turbidity_pair`` / ``basin``)
    points: tuple[tuple[str, str], ...] = ()
    basins: tuple[tuple[str, str], ...] = ()

    def not_yet_text(self) -> str:
        """What the cover says of :attr:`not_yet` (empty when the whole period had happened)."""
        if self.not_yet is None:
            return ""
        whole = ("the whole period" if self.not_yet.start == self.start
                 else f"the period from {local_time(self.not_yet.start, self.tz)}")
        return (f"{whole} is after the state's clock ({self.as_of_what}, {local_time(self.as_of, self.tz)}): it had "
                "not happened when the state was written -- not counted in data completeness, not a gap, and work "
                "orders are shown as they stood then")

    def turbidity_of(self, point: str | None) -> list[TurbidityRow]:
        """The turbidity contrasts of one discharge point (``None``: all of a single-point site)."""
        return [t for t in self.turbidity if point is None or t.point == point]

    def basin_of(self, basin: str | None) -> list[BasinRow]:
        """The basin events of one basin (``None``: all of a single-basin site)."""
        return [b for b in self.basin if basin is None or b.basin == basin]

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)
