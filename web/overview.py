"""What the pages show, computed from the store and the work-order book at the engine's time.

A *gap is unknown, never dry* (BRIEF, "Nothing lost, nothing invented"): a device whose last
reading is older than :data:`SILENCE_POLLS` poll intervals is silent, and what it measures is shown
as UNKNOWN with the time of its last reading; a 24-hour rain total whose gauge did not report for
the whole day is shown as "at least" what was recorded (or UNKNOWN when nothing was), never as a
dry day. The silence allowance is the storm rule's (``alerts/rules/storm.py``: two poll intervals).

Queries. :func:`portfolio` reads every site in a constant number of store queries
(:class:`stormwatch.stores.base.OverviewStore`: one summary, one event window, one tip window) plus one
work-order query, whatever the number of sites; :func:`site_series` reads one site's window in one
reading query and one event query.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from stormwatch.alerts.geometry import lost_capacity, stage_storage_of
from stormwatch.alerts.packs import RulePack, load_site_pack
from stormwatch.alerts.rules.basin import BasinRule, BasinRuleState
from stormwatch.alerts.rules.criteria import Criterion, criterion_named
from stormwatch.alerts.rules.storm import StormDetails, StormRule
from stormwatch.alerts.rules.turbidity import TurbidityDetails, TurbidityRule, watches
from stormwatch.alerts.workorders import REACHED, WorkOrder
from stormwatch.config import LEGACY_POINT, DischargePoint, SiteConfig, load_site
from stormwatch.contract import Event, Reading
from stormwatch.display import local_time, plural
from stormwatch.physics import FLAG_BEYOND_ENVELOPE
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import TipResolution, tip_size_of
from stormwatch.stores.base import OverviewStore, SeriesSummary
from stormwatch.tipsizes import TipSizes

#: A device is silent (its quantity unknown) once its last reading is this many poll intervals old
#: (the storm rule's silence allowance, alerts/rules/storm.py).
SILENCE_POLLS = 2

#: How far back the portfolio looks for the events that say a storm or a turbidity excursion is
#: still going on.
EVENT_LOOKBACK = timedelta(days=7)

State = Literal["ok", "warn", "alert", "unknown"]


class SiteSetupError(ValueError):
    """A site file the web application cannot use (message names the file)."""


@dataclass(frozen=True)
class SiteModel:
    """A site as the pages need it: its file, rule pack and the constants its rules use.

    Attributes:
        cfg: the site file.
        pack: the jurisdiction's pack with the site's overrides.
        resolution: the rain gauge's depth per tip (``None``: no gauge).
        storm: the pack's storm rule (R1), if any.
        criterion: the pack's turbidity criterion (R2), if the site has a turbidity pair.
        basin: the R3 state used to turn level readings into sediment depth, if the site has a basin.
        basin_rule: the pack's basin rule (fractions).
        sizes: the rain gauge's tip sizes over time (its profile and ``replaced_gauges``): only for rain
            stored without a size -- every other reading's depth is its own tips × its own ``tip_size``.
    """

    cfg: SiteConfig
    pack: RulePack
    resolution: TipResolution | None
    storm: StormRule | None
    criterion: Criterion | None
    basin: BasinRuleState | None
    basin_rule: BasinRule | None
    sizes: TipSizes | None = None
    #: on a site with ``discharge_points`` / ``basins``: the points R2 watches and every
    #: basin's R3 state, each shown apart under its id (empty: the site file's one pair / basin)
    points: tuple[DischargePoint, ...] = ()
    basins: tuple[BasinRuleState, ...] = ()
    #: on a simulated run's clock (running, or stopped past the data): the run's newest stored reading
    #: (any site's), which silence is judged at -- the run's time as far as the store knows it
    data_end: datetime | None = None
    #: a simulated run's first instant: no poll grid before it (``None``: not known, or the wall clock)
    run_start: datetime | None = None

    @property
    def id(self) -> str:
        return self.cfg.site.id

    @property
    def name(self) -> str:
        return self.cfg.site.name or self.cfg.site.id

    @property
    def tz(self) -> ZoneInfo:
        return self.cfg.site.tz

    def poll(self, device: str) -> timedelta:
        """The device's poll interval."""
        return timedelta(seconds=self.cfg.device(device).poll_interval_s)

    def judged_at(self, now: datetime) -> datetime:
        """The time devices are judged at: ``now``, or :attr:`data_end` when a simulated run set it
        and it is earlier (a clock ahead of what the pipeline has stored yet, or the run's end, is no
        silence)."""
        return now if self.data_end is None else min(now, self.data_end)

    def silent(self, device: str, last: datetime | None, now: datetime) -> bool:
        """Whether ``device``, last heard at ``last`` (``None``: not in the window), missed readings
        on its own poll grid before :meth:`judged_at` -- a grid that begins at :attr:`run_start`
        when a simulated run set it."""
        since = last if last is not None else self.run_start
        return since is None or self.judged_at(now) - since > SILENCE_POLLS * self.poll(device)

    def waiting(self, device: str, now: datetime) -> Shown | None:
        """What a device without a reading in the window shows while a simulated run has not yet
        stored its first one (``None``: it is silent instead)."""
        if self.run_start is None or self.silent(device, None, now):
            return None
        return Shown("-", "ok", f"{device}: no reading stored yet since the run's start, "
                                f"{local_time(self.run_start, self.tz)}")

    def series(self) -> list[tuple[str, str, str]]:
        """The ``(site, device, quantity)`` series the portfolio reads: each role's measured quantity
        (gauge tips, both probes' turbidity, the basin's level) -- the devices it watches for silence."""
        out = []
        if self.cfg.rain_gauge is not None:
            out.append((self.id, self.cfg.rain_gauge, "rain_tips"))
        if self.cfg.turbidity_pair is not None:
            out += [(self.id, self.cfg.turbidity_pair.upstream, "turbidity"),
                    (self.id, self.cfg.turbidity_pair.downstream, "turbidity")]
        for point in self.points:
            out += [(self.id, d, "turbidity") for d in (point.upstream, point.downstream) if d is not None]
        for b in self.basin_states:
            out.append((self.id, b.basin.device, b.level.quantity))
        return list(dict.fromkeys(out))  # a background probe two points share, once

    @property
    def basin_states(self) -> tuple[BasinRuleState, ...]:
        """Every basin's R3 state: the site file's one ``basin`` or each of its ``basins`` (empty:
        no basin, or a pack without a basin rule)."""
        return (self.basin,) if self.basin is not None else self.basins

    def depth_in(self, tips: int) -> Fraction | None:
        """``tips`` of the gauge in service now, in inches (``None``: no gauge)."""
        return None if self.resolution is None else self.resolution.depth_in(tips)

    def size_of(self, tip_size: str | None, when: datetime) -> TipResolution | None:
        """The size of a rain reading's tips: its own ``tip_size``, else (stored by an earlier
        stormwatch) the site file's for ``when`` -- see :meth:`assumed_note`."""
        if tip_size:
            return tip_size_of(tip_size)
        return self.sizes.at(when) if self.sizes is not None else self.resolution

    def reading_depth_in(self, r: Reading) -> Fraction:
        """A rain reading's depth: its tips × its own tip size (0 when the size cannot be known)."""
        size = self.size_of(r.tip_size, r.time)
        return size.depth_in(int(r.value)) if size is not None else Fraction(0)

    def assumed_note(self, tips: int, when: datetime) -> str:
        """The note shown with a depth that includes ``tips`` stored without a tip size (``""``: none)."""
        if not tips:
            return ""
        size = self.size_of(None, when)
        return f"; {tips} of them stored without a tip size, read as {size} (the site file's)"


def site_model(cfg: SiteConfig, profiles: ProfileLibrary, source: str) -> SiteModel:
    """The :class:`SiteModel` of a loaded site file.

    Raises:
        SiteSetupError: the pack cannot be loaded or a device's profile lacks what its role needs.
    """
    try:
        pack = load_site_pack(cfg, source=source)
    except ValueError as exc:
        raise SiteSetupError(str(exc)) from exc
    resolution = None
    if cfg.rain_gauge is not None:
        counter = profiles.get(cfg.device(cfg.rain_gauge).profile).counter
        resolution = counter.tip_resolution if counter is not None else None
    storm = pack.first(StormRule)
    turbidity = pack.first(TurbidityRule)
    criterion = None
    points: tuple[DischargePoint, ...] = ()
    if turbidity is not None and (cfg.turbidity_pair is not None or cfg.discharge_points):
        criterion = criterion_named(turbidity[1].criterion, turbidity[1].absolute_limit_ntu)
        points = tuple(p for p in cfg.discharge_points if watches(p, criterion.needs_background))
    basin_rule = pack.first(BasinRule)
    states = []
    for b in cfg.all_basins if basin_rule is not None else ():
        assert basin_rule is not None
        level = profiles.get(cfg.device(b.device).profile).level
        if level is None:
            raise SiteSetupError(f"{source}: basin device {b.device!r} is not a level sensor")
        states.append(BasinRuleState(cfg.site.id, basin_rule[0], basin_rule[1], b, level, stage_storage_of(b),
                                     named=cfg.basin is None))
    basin = states[0] if cfg.basin is not None and states else None
    sizes = TipSizes.of(cfg, profiles, cfg.rain_gauge) if resolution is not None and cfg.rain_gauge else None
    return SiteModel(cfg=cfg, pack=pack, resolution=resolution, storm=storm[1] if storm else None,
                     criterion=criterion, basin=basin, basin_rule=basin_rule[1] if basin_rule else None, sizes=sizes,
                     points=points, basins=tuple(states) if cfg.basins else ())


def load_sites(paths: Iterable[Path], profiles: ProfileLibrary) -> dict[str, SiteModel]:
    """Site files (or directories of ``*.yaml`` site files) → id → :class:`SiteModel`, by id.

    Raises:
        SiteSetupError: an unreadable or invalid file, a directory without site files, or two files
            with the same site id.
    """
    from stormwatch.config import ConfigError

    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob("*.yaml"))
            if not found:
                raise SiteSetupError(f"{p}: no *.yaml site files")
            files.extend(found)
        else:
            files.append(p)
    out: dict[str, SiteModel] = {}
    for f in files:
        try:
            cfg = load_site(f, profiles)
        except ConfigError as exc:
            raise SiteSetupError(str(exc)) from exc
        if cfg.site.id in out:
            raise SiteSetupError(f"{f}: site id {cfg.site.id!r} is already defined by another site file")
        out[cfg.site.id] = site_model(cfg, profiles, str(f))
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class RunClock:
    """The alert engine's clock as the pages judge devices by (:meth:`stormwatch.web.desk.EngineTime.run`).

    Attributes:
        simulated: a simulated run's clock (a demo, a scenario; running or stopped): devices are
            judged at the run's newest stored reading of any site -- a clock running ahead of what
            the pipeline has stored yet, or the run's end, is no silence; a site silent while others
            report stays silent.
        start: the run's first instant (``None``: not recorded): no poll grid before it.
        live: the run is going on.
        watermark: the newest watermark its alert engine recorded (any site's; ``None``: none yet):
            every reading made before it has arrived or is late. Devices are judged no later: a
            probe on a slower link (a serial poll at 1,500x is ~150 simulated seconds) is not
            silent while its readings are on their way.
    """

    simulated: bool = False
    start: datetime | None = None
    live: bool = False
    watermark: datetime | None = None

    def applied(self, site: SiteModel, data_end: datetime | None) -> SiteModel:
        """``site`` judged on this clock, the run's newest stored reading being ``data_end``."""
        if not self.simulated:
            return site
        return dataclasses.replace(site, data_end=data_end, run_start=self.start)


def newest(summaries: Iterable[dict[tuple[str, str], SeriesSummary]], run: RunClock) -> datetime | None:
    """A simulated run's time as far as the store and its engine know it: the newest stored reading of
    the summaries, no later than the engine's watermark (a live run's start until it records one);
    the run's start when nothing is stored yet."""
    stored = max((s.last_time for by in summaries for s in by.values()), default=run.start)
    bound = run.watermark if run.watermark is not None else run.start if run.live else None
    return bound if stored is None else stored if bound is None else min(stored, bound)


def judged_site(site: SiteModel, store: OverviewStore, sites: Sequence[SiteModel], now: datetime,
                run: RunClock) -> SiteModel:
    """``site`` judged on ``run``'s clock, as :func:`portfolio` judges it: on a simulated run's, at the
    newest reading of ``sites`` (those the user may see) in the day before ``now`` (one summary query)."""
    if not run.simulated:
        return site
    found = store.summarize(now - timedelta(hours=24), now, [x for s in sites for x in s.series()])
    return run.applied(site, newest(_summaries_by_site(found).values(), run))


# -- shown values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """A value as a person sees it: ``text``, its ``state`` (colour) and a ``detail`` line."""

    text: str
    state: State
    detail: str = ""


UNKNOWN = "UNKNOWN"


def inches(depth: Fraction | None) -> str:
    """Rain depth at the 0.01-in gauges' resolution (``1.20 in``)."""
    return "-" if depth is None else f"{float(depth):.2f} in"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.1f} %"


@dataclass(frozen=True)
class GatewayStatus:
    """The last status a gateway published (retained ``.../status``): ``online``/``offline``,
    its outbox depth, the session takeovers its process has suffered (another gateway with its
    client id; ``None``: not reported) and when it was received (wall time) or stamped (gateway time)."""

    state: str
    outbox_depth: int | None
    time: datetime | None
    session_takeovers: int | None = None


@dataclass(frozen=True)
class SiteRow:
    """One line of the portfolio."""

    site: SiteModel
    rain_24h: Shown
    storm: Shown
    open_orders: int
    overdue_orders: int
    turbidity: Shown
    basin: Shown
    gateway: Shown
    silent: tuple[str, ...]
    worst: State = "ok"


@dataclass(frozen=True)
class Portfolio:
    """Every visible site's state at ``now`` (the engine's time); on a simulated run's clock its
    devices are judged at ``data_time``, the run's newest stored reading (``None``: at ``now``)."""

    now: datetime
    clock_note: str
    rows: list[SiteRow]
    queries: int
    data_time: datetime | None = None


def _summaries_by_site(summaries: Iterable[SeriesSummary]) -> dict[str, dict[tuple[str, str], SeriesSummary]]:
    out: dict[str, dict[tuple[str, str], SeriesSummary]] = defaultdict(dict)
    for s in summaries:
        out[s.site][(s.device, s.quantity)] = s
    return out


def _rain_24h(site: SiteModel, series: dict[tuple[str, str], SeriesSummary], now: datetime) -> Shown:
    gauge = site.cfg.rain_gauge
    if gauge is None:
        return Shown("-", "ok", "no rain gauge")
    s = series.get((gauge, "rain_tips"))
    if s is None:
        return site.waiting(gauge, now) or Shown(UNKNOWN, "unknown", f"gauge {gauge}: no reading in the last 24 h")
    # each size's tips at their own size (readings flagged rain_beyond_envelope are not rain: the
    # store's total leaves them out); tips stored without a size at the site file's, said in the note
    tips = int(s.total or 0)
    depth_in = Fraction(0)
    for size, n in s.tips_by_size:
        per = site.size_of(size or None, s.last_time)
        depth_in += per.depth_in(n) if per is not None else 0
    unsized = sum(n for size, n in s.tips_by_size if not size)
    depth = inches(depth_in if site.resolution is not None else None)
    note = site.assumed_note(unsized, s.last_time)
    poll = site.poll(gauge)
    covered = s.count * poll
    # the day up to the time devices are judged at; none of it before a simulated run's start
    at = site.judged_at(now)
    day_start = max(now - timedelta(hours=24), site.run_start or now - timedelta(hours=24))
    missing = at - day_start - covered
    silent = site.silent(gauge, s.last_time, now)
    if missing <= SILENCE_POLLS * poll and not silent:
        return Shown(depth, "ok", f"{plural(tips, 'tip')}{note}")
    hours = max(missing, at - s.last_time if silent else timedelta(0)) / timedelta(hours=1)
    why = f"gauge {gauge} silent since {local_time(s.last_time, site.tz)}" if silent else \
        f"about {hours:.1f} h of gauge data missing"
    if tips == 0:
        return Shown(UNKNOWN, "unknown", f"no tips recorded, but {why}")
    return Shown(f"≥ {depth}", "unknown", f"{plural(tips, 'tip')} recorded{note}; {why}")


#: The events that end a storm in progress: it qualified (an inspection is due) or it did not.
STORM_ENDS = frozenset({"storm_inspection_due", "storm_ended_below_threshold"})


def _storm(site: SiteModel, events: list[Event], tips: list[Reading], now: datetime) -> Shown:
    """The storm in progress: the latest ``storm_started`` without its ``storm_inspection_due``."""
    if site.cfg.rain_gauge is None or site.storm is None:
        return Shown("-", "ok")
    started = [e for e in events if e.kind == "storm_started"]
    if not started:
        return Shown("none", "ok")
    last = started[-1]
    ended = any(e.kind in STORM_ENDS and e.occurrence == last.occurrence for e in events)
    if ended:
        return Shown("none", "ok")
    qualified = any(e.kind == "storm_qualified" and e.occurrence == last.occurrence for e in events)
    start = (last.details.storm_start if isinstance(last.details, StormDetails) else None) or last.event_time
    rain = [r for r in tips if r.time >= start and FLAG_BEYOND_ENVELOPE not in r.flags]  # beyond: not rain
    n = sum(int(r.value) for r in rain)
    depth = inches(sum((site.reading_depth_in(r) for r in rain), Fraction(0)) if site.resolution else None)
    since = local_time(start, site.tz)
    if qualified:
        return Shown(f"{depth} ({plural(n, 'tip')}) qualified", "alert",
                     f"since {since}; ≥ {float(site.storm.threshold):.2f} in: an inspection will be due")
    return Shown(f"{depth} ({plural(n, 'tip')})", "warn",
                 f"since {since}; below {float(site.storm.threshold):.2f} in so far")


def _each(shown: Sequence[tuple[str, Shown]]) -> Shown:
    """One cell of several discharge points' or basins' values, each named by its id; the worst state."""
    return Shown("; ".join(f"{name}: {s.text}" for name, s in shown), max((s.state for _, s in shown),
                                                                          key=lambda x: _RANK[x], default="ok"),
                 "; ".join(f"{name}: {s.detail}" for name, s in shown if s.detail))


def _turbidity(site: SiteModel, series: dict[tuple[str, str], SeriesSummary], events: list[Event],
               now: datetime) -> Shown:
    if site.points:
        return _each([(p.id, _turbidity_at(site, p.upstream, p.downstream, series,
                                           [e for e in events if isinstance(e.details, TurbidityDetails)
                                            and e.details.discharge_point == p.id], now))
                      for p in site.points if p.downstream is not None])
    pair = site.cfg.turbidity_pair
    if pair is None or site.criterion is None:
        return Shown("-", "ok", "no turbidity pair")
    return _turbidity_at(site, pair.upstream, pair.downstream, series, events, now)


def _turbidity_at(site: SiteModel, upstream: str | None, downstream: str, series: dict[tuple[str, str], SeriesSummary],
                  events: list[Event], now: datetime) -> Shown:
    """R2's state at one discharge point: its probes' last values against the allowed value."""
    assert site.criterion is not None
    up = series.get((upstream, "turbidity")) if upstream is not None else None
    down = series.get((downstream, "turbidity"))
    probes = ([(upstream, up)] if upstream is not None else []) + [(downstream, down)]
    silent = [d for d, s in probes if site.silent(d, s.last_time if s else None, now)]
    waiting = [site.waiting(d, now) for d, s in probes if s is None and d not in silent]
    if waiting and not silent:
        return waiting[0] or Shown("-", "ok")
    r2 = [e for e in events if e.kind in ("turbidity_contrast", "turbidity_cleared")]
    in_contrast = bool(r2) and r2[-1].kind == "turbidity_contrast"
    if silent:
        last = {d: local_time(s.last_time, site.tz) if s else "none in 24 h" for d, s in probes}
        detail = "; ".join(f"{d} last reading {last[d]}" for d in silent)
        return Shown(UNKNOWN, "unknown", ("contrast reported earlier; " if in_contrast else "") + detail)
    assert down is not None
    unit = down.unit
    background = float(up.last_value) if up is not None else None
    allowed = site.criterion.allowed_ntu(background)
    values = f"down {float(down.last_value):.1f} / up {float(up.last_value):.1f} {unit}" if up is not None else \
        f"down {float(down.last_value):.1f} {unit}"
    if in_contrast:
        return Shown(f"contrast: {values}", "alert",
                     f"since {local_time(r2[-1].event_time, site.tz)}; allowed ≤ {allowed:.1f} {unit}")
    if float(down.last_value) > allowed:
        return Shown(values, "warn", f"above the allowed {allowed:.1f} {unit} (not yet sustained)")
    return Shown(values, "ok", f"allowed ≤ {allowed:.1f} {unit} ({site.criterion.allowance(background)})")


def _basin(site: SiteModel, series: dict[tuple[str, str], SeriesSummary], now: datetime) -> Shown:
    if site.basins and site.basin_rule is not None:
        return _each([(b.basin.id, _basin_of(site, b, series, now)) for b in site.basins])
    if site.basin is None or site.basin_rule is None:
        return Shown("-", "ok", "no basin")
    return _basin_of(site, site.basin, series, now)


def _basin_of(site: SiteModel, basin: BasinRuleState, series: dict[tuple[str, str], SeriesSummary],
              now: datetime) -> Shown:
    """One basin's storage lost at its last level reading, against the pack's fractions."""
    assert site.basin_rule is not None
    device = basin.basin.device
    s = series.get((device, basin.level.quantity))
    if s is None:
        return site.waiting(device, now) or Shown(UNKNOWN, "unknown", f"{device}: no reading in the last 24 h")
    depth = basin.depth_of(s.quantity, float(s.last_value), s.unit)
    if depth is None or s.last_flags:
        why = ", ".join(s.last_flags) or "no target"
        return Shown(UNKNOWN, "unknown", f"{device}: last reading not usable ({why})")
    lost = lost_capacity(basin.storage, depth)
    if site.silent(device, s.last_time, now):
        return Shown(UNKNOWN, "unknown", f"{percent(lost)} at its last reading, {local_time(s.last_time, site.tz)}")
    state: State = "alert" if lost >= site.basin_rule.cleanout_fraction else \
        "warn" if lost >= site.basin_rule.warning_fraction else "ok"
    cleanout = percent(site.basin_rule.cleanout_fraction)
    return Shown(percent(lost), state, f"sediment {depth:.2f} ft; cleanout at {cleanout}")


def _gateway(site: SiteModel, series: dict[tuple[str, str], SeriesSummary], status: GatewayStatus | None,
             now: datetime) -> Shown:
    last = max((s.last_time for s in series.values()), default=None)
    heard = f"last reading {local_time(last, site.tz)}" if last else "no reading in 24 h"
    if status is None:
        return Shown("status unknown", "unknown", heard)
    since = f"; status of {local_time(status.time, site.tz)}" if status.time else ""
    if status.state == "online":
        depth = "" if status.outbox_depth is None else f", outbox {status.outbox_depth}"
        taken = status.session_takeovers or 0
        twin = (f"; its MQTT session was taken over {taken} time{'' if taken == 1 else 's'}: another gateway "
                "uses its site and gateway id") if taken else ""
        return Shown(f"online{depth}", "warn" if status.outbox_depth or taken else "ok", heard + since + twin)
    return Shown(status.state, "alert", heard + since)


_RANK: dict[State, int] = {"ok": 0, "warn": 1, "unknown": 2, "alert": 3}


def portfolio(sites: Sequence[SiteModel], store: OverviewStore, orders: Sequence[WorkOrder], now: datetime, *,
              clock_note: str = "", gateways: dict[tuple[str, str], GatewayStatus] | None = None,
              run: RunClock | None = None) -> Portfolio:
    """Each site's state at ``now`` in a constant number of store queries.

    Args:
        sites: the sites to show (already filtered by what the user may see).
        store: the readings store.
        orders: the work orders of these sites (one book query by the caller).
        now: the engine's time.
        gateways: the last status of each ``(site, gateway)``, if the application watches the broker.
        run: the engine's clock as the desk knows it: on a simulated run's (or after one,
            ``clock_note`` :data:`REACHED`) devices are judged at the run's newest stored reading.

    Raises:
        StoreError: a query failed.
    """
    ids = [s.id for s in sites]
    day = now - timedelta(hours=24)
    summaries = _summaries_by_site(store.summarize(day, now, [x for site in sites for x in site.series()]))
    events_by_site: dict[str, list[Event]] = defaultdict(list)
    for e in store.query_site_events(now - EVENT_LOOKBACK, now + timedelta(microseconds=1), ids):
        events_by_site[e.site].append(e)
    storm_starts = []
    for site in sites:
        started = [e for e in events_by_site[site.id] if e.kind == "storm_started"]
        if started:
            first = started[-1]
            storm_starts.append((first.details.storm_start if isinstance(first.details, StormDetails) else None)
                                or first.event_time)
    tips_by_site: dict[str, list[Reading]] = defaultdict(list)
    queries = 2
    if storm_starts:
        for r in store.query_tips(min(storm_starts), now + timedelta(microseconds=1), ids):
            tips_by_site[r.site].append(r)
        queries += 1
    by_site_orders: dict[str, list[WorkOrder]] = defaultdict(list)
    for o in orders:
        by_site_orders[o.site].append(o)
    rows = []
    run = run or RunClock(simulated=clock_note == REACHED)
    data_end = newest(summaries.values(), run) if run.simulated else None
    for site in sites:
        series = summaries.get(site.id, {})
        site = run.applied(site, data_end)
        events = events_by_site[site.id]
        pending = [o for o in by_site_orders[site.id] if o.status != "completed"]
        watched = dict.fromkeys(device for _, device, _ in site.series())
        silent = tuple(d for d in watched
                       if site.silent(d, max((s.last_time for (dev, _), s in series.items() if dev == d),
                                             default=None), now))
        row = SiteRow(
            site=site, rain_24h=_rain_24h(site, series, now), storm=_storm(site, events, tips_by_site[site.id], now),
            open_orders=len(pending), overdue_orders=sum(1 for o in pending if o.is_overdue(now)),
            turbidity=_turbidity(site, series, events, now), basin=_basin(site, series, now),
            gateway=_gateway(site, series, (gateways or {}).get((site.id, site.cfg.gateway_id)), now),
            silent=silent,
        )
        states = [row.rain_24h.state, row.storm.state, row.turbidity.state, row.basin.state]
        if row.overdue_orders:
            states.append("alert")
        worst = max(states, key=lambda s: _RANK[s])
        rows.append(SiteRow(**{**row.__dict__, "worst": worst}))
    return Portfolio(now=now, clock_note=clock_note, rows=rows, queries=queries,
                     data_time=None if data_end is None else min(now, data_end))


# -- one site's window -----------------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    """No reading from ``device`` between ``start`` and ``end``."""

    device: str
    start: datetime
    end: datetime


@dataclass
class PointSeries:
    """One discharge point's turbidity over the window, ready to chart.

    Attributes:
        point: the point's id (:data:`stormwatch.config.LEGACY_POINT` for a site file's one
            ``turbidity_pair``, charted as before points had ids).
        label: how people call it (``name (id)``).
        upstream_device, downstream_device: its background and compliance probes (``None``: none).
        upstream, downstream: turbidity points ``(time, NTU)`` without QC flags.
        allowed: the criterion's maximum at each upstream point (at each downstream point when the
            criterion needs no background and the point has no background probe); empty without a
            criterion.
        unit: the downstream probe's unit.
    """

    point: str
    label: str
    upstream_device: str | None
    downstream_device: str | None
    upstream: list[tuple[datetime, float]] = field(default_factory=list)
    downstream: list[tuple[datetime, float]] = field(default_factory=list)
    allowed: list[tuple[datetime, float]] = field(default_factory=list)
    unit: str = "NTU"

    @property
    def legacy(self) -> bool:
        """The site file's one ``turbidity_pair`` (no point id to show)."""
        return self.point == LEGACY_POINT


@dataclass
class BasinSeries:
    """One basin's storage lost over the window: ``lost`` is ``(time, fraction of design storage
    lost)``, from ``device``'s level readings without QC flags; ``named``: the site has ``basins``
    (show the id), not the site file's one ``basin``."""

    basin: str
    device: str
    named: bool
    lost: list[tuple[datetime, float]] = field(default_factory=list)


@dataclass
class SiteSeries:
    """One site's readings over ``[start, end)``, ready to chart.

    Attributes:
        rain_bins: ``(bin start, tips)`` per interval of ``bin``; cumulative depth is derived.
        rain_depth_bins: ``(bin start, inches)`` per interval: each reading's tips × its own tip size
            (a bin across a gauge replacement adds both sizes); readings flagged
            ``rain_beyond_envelope`` are not rain, in neither list.
        points: every discharge point with a compliance probe, in the site file's order (a site
            file's ``turbidity_pair``: one, :attr:`PointSeries.legacy`).
        basins: every basin the pack's basin rule watches, in the site file's order.
        gaps: per device, the stretches with no reading (longer than the silence allowance).
    """

    start: datetime
    end: datetime
    bin: timedelta
    rain_bins: list[tuple[datetime, int]] = field(default_factory=list)
    rain_depth_bins: list[tuple[datetime, Fraction]] = field(default_factory=list)
    points: list[PointSeries] = field(default_factory=list)
    basins: list[BasinSeries] = field(default_factory=list)
    gaps: dict[str, list[Gap]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)

    def point(self, point_id: str | None) -> PointSeries | None:
        """The series of discharge point ``point_id`` (``None``: the site's only point, if it has one)."""
        if point_id is None:
            return self.points[0] if len(self.points) == 1 else None
        return next((p for p in self.points if p.point == point_id), None)

    def basin(self, basin_id: str | None) -> BasinSeries | None:
        """The series of basin ``basin_id`` (``None``: the site's only basin, if it has one)."""
        if basin_id is None:
            return self.basins[0] if len(self.basins) == 1 else None
        return next((b for b in self.basins if b.basin == basin_id), None)


def gaps_of(times: Sequence[datetime], start: datetime, end: datetime, allowance: timedelta,
            device: str) -> list[Gap]:
    """The stretches of ``[start, end)`` longer than ``allowance`` without one of ``times`` (sorted)."""
    out = []
    prev = start
    for t in times:
        if t - prev > allowance:
            out.append(Gap(device, prev, t))
        prev = t
    if end - prev > allowance:
        out.append(Gap(device, prev, end))
    return out


def bin_width(span: timedelta) -> timedelta:
    """Rain bins: 5 min up to 12 h shown, 15 min up to 2 days, hourly beyond."""
    if span <= timedelta(hours=12):
        return timedelta(minutes=5)
    if span <= timedelta(days=2):
        return timedelta(minutes=15)
    return timedelta(hours=1)


def site_series(site: SiteModel, readings: Sequence[Reading], events: Sequence[Event], start: datetime,
                end: datetime) -> SiteSeries:
    """Chart data of one site from its readings of ``[start, end)`` (one query by the caller); gaps as
    ``site`` judges them (:func:`judged_site`)."""
    out = SiteSeries(start=start, end=end, bin=bin_width(end - start), events=list(events))
    by_device: dict[str, list[Reading]] = defaultdict(list)
    for r in readings:
        by_device[r.device].append(r)
    # no gap before a simulated run's start nor after its newest stored reading (judged_site)
    known_from, known_until = max(start, site.run_start or start), site.judged_at(end)
    for d in site.cfg.devices:
        # readings past the judged time may still be coming in out of order: no gap among them yet
        times = [r.time for r in by_device.get(d.id, []) if known_from <= r.time <= known_until]
        out.gaps[d.id] = gaps_of(times, known_from, known_until, SILENCE_POLLS * site.poll(d.id), d.id) \
            if known_until > known_from else []
    gauge = site.cfg.rain_gauge
    if gauge is not None:
        nbins = max(1, math.ceil((end - start) / out.bin))
        tips = [0] * nbins
        depths = [Fraction(0)] * nbins
        for r in by_device.get(gauge, []):
            if r.quantity == "rain_tips" and FLAG_BEYOND_ENVELOPE not in r.flags:
                i = min(nbins - 1, int((r.time - start) / out.bin))
                tips[i] += int(r.value)
                depths[i] += site.reading_depth_in(r)
        out.rain_bins = [(start + i * out.bin, n) for i, n in enumerate(tips)]
        out.rain_depth_bins = [(start + i * out.bin, d) for i, d in enumerate(depths)]
    for point in site.cfg.points:
        if point.downstream is not None:
            out.points.append(_point_series(site, point, by_device))
    for state in site.basin_states:
        b = BasinSeries(state.basin.id, state.basin.device, state.named)
        for r in by_device.get(state.basin.device, []):
            if state.wants(r) and not r.flags:
                depth = state.depth_ft(r)
                if depth is not None:
                    b.lost.append((r.time, lost_capacity(state.storage, depth)))
        out.basins.append(b)
    return out


def _point_series(site: SiteModel, point: DischargePoint, by_device: dict[str, list[Reading]]) -> PointSeries:
    """One discharge point's probes' turbidity (readings without QC flags) and the allowed band."""
    out = PointSeries(point.id, point.label, point.upstream, point.downstream)
    for r in by_device.get(point.upstream, []) if point.upstream is not None else []:
        if r.quantity == "turbidity" and not r.flags:
            out.upstream.append((r.time, float(r.value)))
            if site.criterion is not None:
                out.allowed.append((r.time, site.criterion.allowed_ntu(float(r.value))))
    assert point.downstream is not None
    for r in by_device.get(point.downstream, []):
        if r.quantity == "turbidity" and not r.flags:
            out.downstream.append((r.time, float(r.value)))
            out.unit = r.unit
            if point.upstream is None and site.criterion is not None and not site.criterion.needs_background:
                out.allowed.append((r.time, site.criterion.allowed_ntu(None)))
    return out
