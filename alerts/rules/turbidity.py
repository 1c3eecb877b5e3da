"""R2: turbidity contrast against natural conditions (background).

Law: Ch. 133 §133-6C, Ch. 196 §196-8C ("no ... increase in turbidity that will result in
substantial visible contrast to natural conditions in surface waters"); Ch. 133 §133-7C(1)(c).
Operational form (``docs/reference/rules.md`` R2): downstream against upstream (background) as
5-minute medians, a violation sustained over three windows, judged by a named criterion.

The design: docs/rules.md ("The rule modules", `alerts/rules/turbidity.py`).
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any, ClassVar, Literal, NamedTuple
from zoneinfo import ZoneInfo

from pydantic import Field

from stormwatch.alerts.rules import Chunk, RuleTrace, occurrence
from stormwatch.alerts.rules.criteria import criterion_named
from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import EventKindSpec, Role, RuleContext, RuleKind
from stormwatch.config import DischargePoint
from stormwatch.contract import Event, EventDetails, EventKind, Reading
from stormwatch.display import UTC_ZONE, local_time, names, turbidity
from stormwatch.stores.base import ROW_FLAGS, ROW_TIME, ROW_UNIT, ROW_VALUE
from stormwatch.stores.rows import time_of_us, us_of
from stormwatch.stores.seriesrows import SeriesRows, times_of
from stormwatch.wire import format_time

log = logging.getLogger(__name__)


class TurbidityRule(RuleParams):
    """R2: turbidity contrast against background (rules.md R2).

    Attributes:
        criterion: ``washington`` (WAC 173-201A-200), ``california`` (CDFW table) or ``absolute``.
        absolute_limit_ntu: the limit for ``absolute`` (e.g. Maryland COMAR 26.08.02.03-3: 150).
        median_window_min: window length; windows aligned to multiples of it in event time (UTC).
        sustained_min: consecutive violating windows must cover this long.
        clear_min: consecutive compliant windows needed to clear (hysteresis).
        confirm_within_hours: due time of the SMO-confirmation work order (our choice).
    """

    kind: Literal["turbidity"]
    criterion: Literal["washington", "california", "absolute"] = "washington"
    absolute_limit_ntu: float = Field(default=150.0, gt=0)
    median_window_min: float = Field(default=5.0, gt=0)
    sustained_min: float = Field(default=15.0, gt=0)
    clear_min: float = Field(default=15.0, gt=0)
    confirm_within_hours: float = Field(default=24.0, gt=0)

Status = Literal["compliant", "violating", "undetermined", "needs_verification"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _median(values: Iterable[float]) -> float:
    """The median of ``values`` (non-empty), computed exactly as :func:`statistics.median` does."""
    data = sorted(values)
    n = len(data)
    if n % 2 == 1:
        return data[n // 2]
    i = n // 2
    return (data[i - 1] + data[i]) / 2


_US = timedelta(microseconds=1)
_TIME, _VALUE, _UNIT, _FLAGS = (itemgetter(ROW_TIME), itemgetter(ROW_VALUE), itemgetter(ROW_UNIT),
                                itemgetter(ROW_FLAGS))  # of a StoredRow


class _Window:
    """The clean readings of one window as columns -- event times in µs since the epoch (a datetime
    is made only for the evidence of an event) and values, the i-th of each one reading -- and how
    many carried QC flags."""

    __slots__ = ("down_flagged", "down_t", "down_units", "down_v", "up_flagged", "up_t", "up_units", "up_v")
    #: containers of values only: a snapshot copies them flat (stormwatch.alerts.statecopy)
    state_flat: ClassVar[frozenset[str]] = frozenset({"down_t", "down_units", "down_v", "up_t", "up_units", "up_v"})

    def __init__(self) -> None:
        self.up_t: list[int] = []
        self.up_v: list[float] = []
        self.down_t: list[int] = []
        self.down_v: list[float] = []
        self.up_flagged = 0
        self.down_flagged = 0
        self.up_units: set[str] = set()
        self.down_units: set[str] = set()


class _Result(NamedTuple):
    start: datetime
    end: datetime
    status: Status
    reason: str
    up_median: float | None = None
    down_median: float | None = None
    allowed: float | None = None
    unit: str = "NTU"
    #: the window's clean readings (:class:`_Window`'s columns: µs since the epoch, values)
    up_t: Sequence[int] = ()
    up_v: Sequence[float] = ()
    down_t: Sequence[int] = ()
    down_v: Sequence[float] = ()

    def evidence(self, criterion: str) -> dict[str, Any]:
        """The window as an event's evidence: its medians, the allowed value and ``criterion`` (the
        R2 criterion judged by: ``washington``, ``absolute``...; a name, never a cause), and for a
        window that could not be judged the ``reason`` why (``no downstream reading``)."""
        out: dict[str, Any] = {
            "window_start": format_time(self.start), "window_end": format_time(self.end),
            "upstream_median_ntu": self.up_median, "downstream_median_ntu": self.down_median,
            "allowed_ntu": self.allowed, "unit": self.unit, "status": self.status, "criterion": criterion,
        }
        if self.status not in ("violating", "compliant"):
            out["reason"] = self.reason
        out["upstream"] = [[format_time(time_of_us(t)), v] for t, v in zip(self.up_t, self.up_v, strict=True)]
        out["downstream"] = [[format_time(time_of_us(t)), v] for t, v in zip(self.down_t, self.down_v, strict=True)]
        return out


class TurbidityRuleState:
    """R2 for one discharge point's upstream/downstream probe pair (or its single compliance probe,
    under a criterion that needs no background).

    Args:
        site: site id.
        rule_id: pack rule id (``R2``).
        params: the pack's :class:`~stormwatch.alerts.packs.TurbidityRule`.
        upstream, downstream: device ids of the background and compliance probes (``upstream``
            ``None``: a single compliance probe).
        point: the discharge point's id, named in every event and occurrence (``None``: the site
            file's one ``turbidity_pair``, whose events name no point, as before discharge points).
    """

    #: containers of values only (judged windows): a snapshot copies them flat (stormwatch.alerts.statecopy)
    state_flat: ClassVar[frozenset[str]] = frozenset({"_run"})

    def __init__(self, site: str, rule_id: str, params: TurbidityRule, upstream: str | None, downstream: str,
                 point: str | None = None, tz: ZoneInfo = UTC_ZONE) -> None:
        self.site = site
        self.tz = tz  # times in messages are site-local (the events' fields stay UTC)
        self.rule_id = rule_id
        self.params = params
        self.upstream = upstream
        self.downstream = downstream
        self.point = point
        self._where = f"discharge point {point}: " if point else ""
        self.criterion = criterion_named(params.criterion, params.absolute_limit_ntu)
        self.window = timedelta(minutes=params.median_window_min)
        self._window_us = self.window // _US
        self.need = math.ceil(params.sustained_min / params.median_window_min - 1e-9)
        self.clear_need = math.ceil(params.clear_min / params.median_window_min - 1e-9)
        self._windows: dict[int, _Window] = {}
        self._next: int | None = None
        self._last_status: Status | None = None
        self._run: list[_Result] = []
        self._in_violation: _Result | None = None  # first window of the active violation run
        self._ok = 0
        self.next_due: datetime | None = None  # end of the window waiting to be evaluated
        # the window of the latest clean reading, not yet judged: its span and itself (the hot path);
        # empty (start after end) when there is none
        self._cur_start = 1  # µs since the epoch
        self._cur_end = 0
        self._cur: _Window | None = None
        self.trace: RuleTrace | None = None  # a report's observer (backfill only)

    def wants(self, reading: Reading) -> bool:
        return reading.quantity == "turbidity" and reading.device in (self.upstream, self.downstream)

    def _start(self, idx: int) -> datetime:
        return _EPOCH + idx * self.window

    def feed(self, reading: Reading) -> list[Event]:
        # the fields from the model's __dict__: a pydantic model's attribute goes through its
        # __getattr__ hook (about 4x a plain object's); this is the hot path of every probe reading
        fields = reading.__dict__
        t = fields["time"]
        w = self._cur
        us = us_of(t)
        if w is None or fields["flags"] or not self._cur_start <= us < self._cur_end:
            return self._feed_window(reading, t)
        # a clean reading in the current window (nearly every one): its columns
        value = fields["value"]
        if fields["device"] == self.upstream:
            w.up_t.append(us)
            w.up_v.append(value if type(value) is float else float(value))
            if fields["unit"] not in w.up_units:
                w.up_units.add(fields["unit"])
        else:
            w.down_t.append(us)
            w.down_v.append(value if type(value) is float else float(value))
            if fields["unit"] not in w.down_units:
                w.down_units.add(fields["unit"])
        return []

    def quick_feeder(self, device: str, quantity: str) -> Callable[..., list[Event] | None] | None:
        """What takes a clean reading of ``device``'s ``quantity`` from a cycle's columns (the engine's
        ``feed_cycle``): :meth:`feed`'s common case, or ``None`` (nothing done) for :meth:`feed`."""
        if quantity != "turbidity":
            return None
        if device == self.upstream:
            return self._quick_up
        return self._quick_down if device == self.downstream else None

    def _quick_up(self, t: datetime, us: int, value: float, unit: str, tip_size: str | None,
                  gateway: str) -> list[Event] | None:
        w = self._cur
        if (w is None or not self._cur_start <= us < self._cur_end) and (w := self._enter(t)) is None:
            return None
        w.up_t.append(us)
        w.up_v.append(value if type(value) is float else float(value))
        if unit not in w.up_units:
            w.up_units.add(unit)
        return []

    def _quick_down(self, t: datetime, us: int, value: float, unit: str, tip_size: str | None,
                    gateway: str) -> list[Event] | None:
        w = self._cur
        if (w is None or not self._cur_start <= us < self._cur_end) and (w := self._enter(t)) is None:
            return None
        w.down_t.append(us)
        w.down_v.append(value if type(value) is float else float(value))
        if unit not in w.down_units:
            w.down_units.add(unit)
        return []

    def _enter(self, t: datetime) -> _Window | None:
        """The window of a clean reading at ``t`` made current, as :meth:`_feed_window` makes it, or
        ``None`` (nothing done) when it is in a window already evaluated."""
        idx = (t - _EPOCH) // self.window
        if self._next is None:
            self._next = idx
            self.next_due = self._start(idx + 1)
        if idx < self._next:
            return None
        w = self._windows.get(idx)
        if w is None:
            w = self._windows[idx] = _Window()
        self._cur, self._cur_start, self._cur_end = w, idx * self._window_us, (idx + 1) * self._window_us
        return w

    def _feed_window(self, reading: Reading, t: datetime) -> list[Event]:
        """:meth:`feed` of a reading outside the current window or with flags: its window found
        (made current), counted or ignored."""
        idx = (t - _EPOCH) // self.window
        if self._next is None:
            self._next = idx
            self.next_due = self._start(idx + 1)
        if idx < self._next:
            log.warning("%s: turbidity reading at %s is in an already evaluated window: ignored",
                        self.site, format_time(reading.time))
            return []
        w = self._windows.get(idx)
        if w is None:
            w = self._windows[idx] = _Window()
        self._cur, self._cur_start, self._cur_end = w, idx * self._window_us, (idx + 1) * self._window_us
        up = reading.device == self.upstream
        if reading.flags:
            if up:
                w.up_flagged += 1
            else:
                w.down_flagged += 1
            return []
        (w.up_t if up else w.down_t).append(us_of(t))
        (w.up_v if up else w.down_v).append(float(reading.value))
        (w.up_units if up else w.down_units).add(reading.unit)
        return []

    def replay(self, chunk: Chunk) -> list[Event]:
        """Both probes' rows of a backfill chunk (:class:`~stormwatch.alerts.rules.Chunk`) into their
        windows, as :meth:`feed` puts them; nothing is judged here. A window is judged only by
        ``advance_to`` a time at or after its end, when every reading in it -- all earlier -- is in,
        so judging the chunk's windows after all its rows (the backfill's ``advance_to`` its newest
        reading) judges each on the same readings, in the same order, as reading by reading."""
        up = (chunk.rows.get((self.upstream, "turbidity")) or []) if self.upstream is not None else []
        down = chunk.rows.get((self.downstream, "turbidity")) or []
        if not up and not down:
            return []
        window = self.window // _US
        if self._next is None:
            idx = min(rows[0][ROW_TIME] for rows in (up, down) if rows) // window
            self._next = idx
            self.next_due = self._start(idx + 1)
        windows, first = self._windows, self._next
        for rows, is_up in ((up, True), (down, False)):
            # the rows are in time order: take them a window at a time; a chunk's rows without a flag
            # (nearly every one) have their values made floats and their units found once, not window by window
            times = times_of(rows)
            if isinstance(rows, SeriesRows):  # columns: one unit, no flag (nearly every chunk)
                flagged, units = False, {rows.unit}
                values = list(map(float, rows.values))
            else:
                flagged = any(map(_FLAGS, rows))
                values = [] if flagged else list(map(float, map(_VALUE, rows)))
                units = set(map(_UNIT, rows)) if not flagged else set()
            i, n = 0, len(rows)
            while i < n:
                idx = times[i] // window
                j = bisect_left(times, (idx + 1) * window, i)
                if idx < first:
                    for us in times[i:j]:
                        log.warning("%s: turbidity reading at %s is in an already evaluated window: ignored",
                                    self.site, format_time(time_of_us(us)))
                    i = j
                    continue
                w = windows.get(idx)
                if w is None:
                    w = windows[idx] = _Window()
                if not flagged:
                    (w.up_t if is_up else w.down_t).extend(times[i:j])
                    (w.up_v if is_up else w.down_v).extend(values[i:j])
                    target = w.up_units if is_up else w.down_units
                    if len(units) == 1:
                        target |= units
                    else:
                        target.update(map(_UNIT, rows[i:j]))
                    i = j
                    continue
                part = rows[i:j]
                i = j
                if any(map(_FLAGS, part)):
                    clean = [r for r in part if not r[ROW_FLAGS]]
                    if is_up:
                        w.up_flagged += len(part) - len(clean)
                    else:
                        w.down_flagged += len(part) - len(clean)
                    part = clean
                (w.up_t if is_up else w.down_t).extend(map(_TIME, part))
                (w.up_v if is_up else w.down_v).extend(map(float, map(_VALUE, part)))
                (w.up_units if is_up else w.down_units).update(map(_UNIT, part))
        return []

    def advance_to(self, t: datetime) -> list[Event]:
        out: list[Event] = []
        if self._next is None:
            return out
        start = self._start(self._next)
        end = start + self.window
        while end <= t:
            idx = self._next
            self._next += 1
            w = self._windows.pop(idx, None)
            if w is self._cur:
                self._cur, self._cur_start, self._cur_end = None, 1, 0
            out += self._step(self._evaluate(start, end, _Window() if w is None else w))
            start, end = end, end + self.window
        self.next_due = end
        return out

    def _evaluate(self, start: datetime, end: datetime, w: _Window) -> _Result:
        def undecided(status: Status, reason: str, down_median: float | None = None) -> _Result:
            return _Result(start, end, status, reason, down_median=down_median, up_t=tuple(w.up_t),
                           up_v=tuple(w.up_v), down_t=tuple(w.down_t), down_v=tuple(w.down_v))

        if not w.down_v:
            if w.down_flagged:
                return undecided("needs_verification", "downstream readings carry QC flags")
            return undecided("undetermined", "no downstream reading")
        down_median = _median(w.down_v)
        if self.criterion.needs_background:
            if not w.up_v:
                if w.up_flagged:
                    return undecided("needs_verification", "upstream (background) readings carry QC flags", down_median)
                return undecided("undetermined", "no upstream (background) reading", down_median)
            if w.up_units != w.down_units or len(w.up_units) != 1:
                return undecided("undetermined", f"probe units differ ({names(w.up_units)} vs {names(w.down_units)})")
            up_median: float | None = _median(w.up_v)
        else:
            up_median = _median(w.up_v) if w.up_v else None
        allowed = self.criterion.allowed_ntu(up_median)
        status: Status = "violating" if down_median > allowed else "compliant"
        unit = next(iter(w.down_units)) if len(w.down_units) == 1 else "NTU"
        # the columns as tuples: a result is a value (a snapshot shares it)
        return _Result(start, end, status, self.criterion.name, up_median, down_median, allowed, unit,
                       tuple(w.up_t), tuple(w.up_v), tuple(w.down_t), tuple(w.down_v))

    def _event(self, kind: EventKind, r: _Result, occurrence: str, message: str, **extra: Any) -> Event:
        return Event(kind=kind, site=self.site, event_time=r.end, rule=self.rule_id, citation=self.params.citation,
                     occurrence=occurrence, message=self._where + message,
                     details=TurbidityDetails(upstream_ntu=r.up_median, downstream_ntu=r.down_median,
                                              turbidity_unit=r.unit if r.down_median is not None else None,
                                              discharge_point=self.point),
                     **extra)

    def _allowance(self, r: _Result) -> str:
        """What the allowed value is, in words (``background 7.9 NTU + 5 NTU``): the criterion's
        rule at this background, never its code name (docs/rules.md R2)."""
        rule = self.criterion.allowance(r.up_median)
        if r.up_median is None or not self.criterion.needs_background:
            return rule
        return rule.replace("background", f"background {turbidity(r.up_median, r.unit)}", 1)

    def _step(self, r: _Result) -> list[Event]:
        out: list[Event] = []
        if self.trace is not None:
            self.trace.turbidity_window(r.start, r.end, r.status, r.reason, r.up_median, r.down_median, r.allowed,
                                        point=self.point)
        changed = r.status != self._last_status
        self._last_status = r.status
        if r.status == "violating":
            self._run.append(r)
            self._ok = 0
            if self._in_violation is None and len(self._run) >= self.need:
                first = self._run[0]
                self._in_violation = first
                out.append(self._event(
                    "turbidity_contrast", r, occurrence("turbidity", first.start, self.point),
                    f"possible turbidity violation: downstream median {turbidity(r.down_median, r.unit)} > "
                    f"allowed {turbidity(r.allowed, r.unit)} ({self._allowance(r)}) for "
                    f"{(r.end - first.start).total_seconds() / 60:g} min since {local_time(first.start, self.tz)}; "
                    "for the SMO to confirm",
                    due_at=r.end + timedelta(hours=self.params.confirm_within_hours),
                    evidence=[x.evidence(self.criterion.name) for x in self._run],
                ))
            return out
        self._run = []
        if r.status == "compliant":
            if self._in_violation is not None:
                self._ok += 1
                if self._ok >= self.clear_need:
                    first = self._in_violation
                    self._in_violation = None
                    self._ok = 0
                    out.append(self._event(
                        "turbidity_cleared", r, occurrence("turbidity", first.start, self.point),
                        f"turbidity back within the allowed for {self.params.clear_min:g} min (downstream "
                        f"{turbidity(r.down_median, r.unit)}, allowed {turbidity(r.allowed, r.unit)}: "
                        f"{self._allowance(r)})",
                        evidence=[r.evidence(self.criterion.name)],
                    ))
            return out
        self._ok = 0
        if changed:
            kind: EventKind = (
                "turbidity_undetermined" if r.status == "undetermined" else "turbidity_needs_verification"
            )
            out.append(self._event(
                kind, r, occurrence(kind, r.start, self.point),
                f"turbidity {r.status.replace('_', ' ')} from {local_time(r.start, self.tz)}: {r.reason}",
                evidence=[r.evidence(self.criterion.name)],
            ))
        return out


class TurbidityDetails(EventDetails):
    """Details of the turbidity events: the window medians in ``turbidity_unit`` (``NTU`` or ``FNU``,
    as both probes report; ``None`` where a window had no clean reading) and the discharge point
    (absent for a site file's one ``turbidity_pair``)."""

    upstream_ntu: float | None = None
    downstream_ntu: float | None = None
    turbidity_unit: str | None = None
    discharge_point: str | None = None

    def summary(self, tz: ZoneInfo) -> str:
        where = f"{self.discharge_point}: " if self.discharge_point else ""
        if self.downstream_ntu is None:
            return where.rstrip(": ")
        unit = self.turbidity_unit or "NTU"
        if self.upstream_ntu is None:
            return f"{where}downstream {turbidity(self.downstream_ntu, unit)}"
        return (f"{where}downstream {turbidity(self.downstream_ntu, unit)} vs upstream "
                f"{turbidity(self.upstream_ntu, unit)}")


def watches(point: DischargePoint, needs_background: bool) -> bool:
    """Whether R2 runs at ``point``: it has a compliance probe and, under a criterion that compares
    against background (``needs_background``), a background probe too."""
    return point.downstream is not None and (point.upstream is not None or not needs_background)


def build(ctx: RuleContext) -> list[TurbidityRuleState]:
    """R2 on each discharge point's probes: its upstream/downstream pair, or its single compliance
    probe when the criterion needs no background (``absolute``); a point without a compliance probe
    (sampled by hand) has no R2."""
    assert isinstance(ctx.params, TurbidityRule)
    needs_background = criterion_named(ctx.params.criterion, ctx.params.absolute_limit_ntu).needs_background
    legacy = ctx.cfg.turbidity_pair is not None
    states = []
    for point in ctx.cfg.points:
        if point.downstream is None:
            continue
        if not watches(point, needs_background):
            log.info("%s: %s (%s criterion) needs a background probe; discharge point %s has only a compliance "
                     "probe: not watched there", ctx.site, ctx.rule_id, ctx.params.criterion, point.id)
            continue
        states.append(TurbidityRuleState(ctx.site, ctx.rule_id, ctx.params, point.upstream, point.downstream,
                                         None if legacy else point.id, tz=ctx.cfg.site.tz))
    return states


KIND = RuleKind(
    kind="turbidity", params=TurbidityRule, build=build,
    summary="R2: turbidity contrast against background (§133-6C, §196-8C)",
    roles=(Role("turbidity_upstream", "turbidity", "background probe (turbidity_pair.upstream)"),
           Role("turbidity_downstream", "turbidity", "compliance probe (turbidity_pair.downstream)")),
    events=(
        EventKindSpec("turbidity_contrast", TurbidityDetails, "a sustained possible violation, for the SMO to confirm",
                      opens="turbidity_review", chart="turbidity"),
        EventKindSpec("turbidity_cleared", TurbidityDetails, "back within the criterion (hysteresis)"),
        EventKindSpec("turbidity_undetermined", TurbidityDetails, "no clean background or downstream data"),
        EventKindSpec("turbidity_needs_verification", TurbidityDetails, "the window's only data carry QC flags"),
    ),
)
