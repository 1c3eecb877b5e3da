"""The backfill reads rows, rule by rule (:func:`stormwatch.alerts.backfill.evaluate`), and gives
exactly what the engine gives fed every stored reading in event-time order (:meth:`Engine.replay`,
the way backfills ran before ``benchmarks/report.py`` asked for a year in seconds).

The fixture is three days of 1-minute readings of the test site (chunks of one day, so storms,
gaps and windows cross chunk boundaries) with what makes the rules branch: a gauge silence, tips
at one instant from two boots, counter_suspect / counter_reset / device_error flags, a tip count
beyond the world-record envelope, a late-flagged reading and a negative value (the engine refuses
both), a turbidity plume, flagged and missing probe windows, a basin filling past half its volume,
a cleanout, a flagged and a no-target level reading, a storm still open when the gauge falls silent
for good. Compared: every rule's events in order (all fields), the rules' trace (tips counted,
storms closed, windows judged, settled depths), storms in progress, rain-gauge gaps.

Independently derived (by hand from the fixture below; dry gap 6 h): storm A = 60 one-minute tips
from minute 30, 2 tips of a second boot at minute 35, 20 tips from minute 400, 2 tips flagged
counter_reset at minute 700 (84 tips, last at 700: every pause is under 6 h); the gauge silence from
minute 200 to 260 and the envelope reading at minute 800 (500 tips in a minute, not counted) are
gaps; storm C across the day boundary = 50 tips (minute 1400 + 2 k, k < 50), its device_error
reading makes it need verification; storm D (60 tips from minute 3700) is closed by the gauge's
silence after minute 3800 (nothing from it for the dry gap), end not confirmed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path

from stormwatch.alerts.backfill import CHUNK, _gaps, evaluate
from stormwatch.alerts.engine import Engine
from stormwatch.alerts.rules.basin import BasinRuleState
from stormwatch.alerts.rules.storm import StormRuleState
from stormwatch.alerts.rules.turbidity import TurbidityRuleState
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.report.build import Collector, CoverageCounter
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import T0, Feeder, site, site_doc

MIN = timedelta(minutes=1)
DAYS = 3
START = T0 - timedelta(hours=12)  # 2026-06-01 00:00 UTC: day chunks start at midnight
END = START + timedelta(days=DAYS)


def fixture() -> list[Reading]:
    feed = Feeder()
    other = Feeder(boot="b2", seq=10_000)
    out: list[Reading] = []
    for i in range(DAYS * 1440):
        t = START + i * MIN
        # rain gauge (1-minute polls)
        if not (200 <= i < 260) and not (i > 3800):
            flags: tuple[str, ...] = ()
            tips = 0
            if 30 <= i < 90 or 3700 <= i < 3760:
                tips = 1
            elif 400 <= i < 420:  # still storm A (less than 6 h after minute 89)
                tips = 1
            elif 1400 <= i < 1500 and i % 2 == 0:
                tips = 1
            if i == 1:
                flags = ("counter_baseline",)
            if i == 600:
                flags = ("counter_suspect",)
            if i == 700:
                tips, flags = 2, ("counter_reset",)
            if i == 800:
                tips = 500
            if i == 1450:
                flags = ("device_error",)
            out.append(feed("rain", "rain_tips", tips, "{tip}", t, flags))
            if i == 35:
                out.append(other("rain", "rain_tips", 2, "{tip}", t))
            if i == 900:
                out.append(other("rain", "rain_tips", 3, "{tip}", t + timedelta(seconds=20), ("late",)))
        # turbidity pair
        up_flags = ("fouling",) if 1100 <= i < 1110 else ()
        out.append(feed("up", "turbidity", 20.0 + (i % 7) * 0.5, "NTU", t, up_flags))
        if not 1200 <= i < 1215:
            down = 40.0 if 1000 <= i < 1060 else 21.0 + (i % 5) * 0.25
            out.append(feed("down", "turbidity", down, "NTU", t, ("fouling",) if 1100 <= i < 1110 else ()))
        if i == 950:
            out.append(other("down", "turbidity", -1.0, "NTU", t + timedelta(seconds=30)))
        # basin level: sediment 1 ft -> 3.2 ft, cleanout at minute 3000 to 0.5 ft
        depth_ft = 0.5 if i >= 3000 else 1.0 + 2.2 * i / 3000
        value = round((8.0 - depth_ft) * 304.8, 1)
        if i == 1700:
            value = 9999.0  # no target
        out.append(feed("lvl", "distance", value, "mm", t, ("out_of_range",) if i == 1800 else ()))
        if i % 5 == 0:
            out.append(feed("press", "pressure", 0.1, "bar", t))
    return out


def reference(cfg, store: SqliteStore, trace: Collector, end: datetime = END) -> tuple[Engine, list[Event]]:
    """The engine fed every stored reading in event-time order, a chunk at a time (the old backfill)."""
    engine = Engine.for_site(cfg, ProfileLibrary(), None)
    for rule in engine.rules:
        if isinstance(rule, StormRuleState | TurbidityRuleState | BasinRuleState):
            rule.trace = trace
    events: list[Event] = []
    t = START
    while t < end:
        upto = min(end, t + CHUNK)
        events += engine.replay(store.query_readings(cfg.site.id, start=t, end=upto))
        t = upto
    return engine, events + engine.flush()


def by_rule(events: list[Event]) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for e in events:
        out.setdefault(e.rule, []).append(e.model_dump())
    return out


def test_rows_backfill_equals_the_engine_fed_reading_by_reading(tmp_path: Path) -> None:
    cfg = parse_site(site_doc("ch133", rain_poll_s=60), "test-site.yaml")
    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(fixture())
    old = Collector()
    engine, old_events = reference(cfg, store, old)
    new = Collector()
    coverage = CoverageCounter(cfg, START, END)
    ev = evaluate(cfg, ProfileLibrary(), store, START, END, trace=new, on_rows=coverage.add)
    store.close()

    assert by_rule(ev.events) == by_rule(old_events)
    assert new == old
    assert ev.in_progress == engine.in_progress()
    assert ev.gaps == _gaps(engine, START, END)

    # by hand (module docstring)
    storms = [(s - START, last - START, tips, q, confirmed) for s, last, tips, q, confirmed, _, _ in new.storms]
    assert all(depth == Fraction(tips, 100) for _, _, tips, _, _, depth, _ in new.storms)  # 0.01 in per tip
    lower = {s - START: low for s, *_, low in new.storms}
    # storm A holds the gauge silence of minutes 200-260 (rain unknown): its depth is a lower bound
    assert (lower[30 * MIN], lower[1400 * MIN], lower[3700 * MIN]) == (True, False, False)
    assert storms[0] == (30 * MIN, 700 * MIN, 84, True, True)
    storm_c = next(s for s in storms if s[0] == 1400 * MIN)
    assert storm_c[1:] == (1498 * MIN, 50, True, True)
    storm_d = next(s for s in storms if s[0] == 3700 * MIN)
    assert storm_d[1:] == (3759 * MIN, 60, True, False)  # the gauge went silent after minute 3800
    assert ev.in_progress == []
    gaps = [(g.start - START, None if g.end is None else g.end - START) for g in ev.gaps]
    assert (199 * MIN, 260 * MIN) in gaps  # last reading before the silence, first after it
    assert (799 * MIN, 800 * MIN) in gaps  # 500 tips in a minute: not rain, unknown
    assert gaps[-1] == (3800 * MIN, None)
    due = [e for e in ev.events if e.kind == "storm_inspection_due"]
    storm_c_due = [e for e in due if e.occurrence == f"storm:{START + 1400 * MIN:%Y-%m-%dT%H:%M:%SZ}"]
    assert [e.details.needs_verification for e in storm_c_due] == [["device_error"]]
    # completeness: distinct reading times per device (the late and negative readings are stored: they count)
    counted = {c.device: (c.expected, c.received) for c in coverage.result(cfg, ProfileLibrary())}
    rain_received = DAYS * 1440 - 60 - (DAYS * 1440 - 3801) + 1  # + the late reading's own instant
    assert counted["rain"] == (DAYS * 1440, rain_received)
    assert counted["up"] == (DAYS * 1440, DAYS * 1440)
    assert counted["down"] == (DAYS * 1440, DAYS * 1440 - 15 + 1)
    assert counted["press"] == (DAYS * 1440, DAYS * 1440 // 5)


def test_a_site_without_rows_gives_what_the_engine_gives(tmp_path: Path) -> None:
    cfg = site("ch133")
    store = SqliteStore(tmp_path / "store.db")
    engine, old_events = reference(cfg, store, Collector())
    ev = evaluate(cfg, ProfileLibrary(), store, START, END)
    store.close()
    assert ev.events == old_events == []
    assert ev.gaps == _gaps(engine, START, END)


def test_quiet_runs_read_as_columns_equal_the_engine_fed_reading_by_reading(tmp_path: Path) -> None:
    """R1's replay of a gauge's clean day as columns (:class:`~stormwatch.stores.seriesrows.SeriesRows`:
    quiet runs found at C speed) against the engine fed every reading. Four days of 1-minute polls,
    every day clean (one gateway, no flag), with what ends a quiet run: a storm across midnight
    (minutes 1380-1499), a silence inside a storm (minutes 3000-3019, 3 allowances), one outside
    (minutes 2000-2099), a storm whose dry gap of 6 h ends exactly on a reading (tips 4000-4009,
    closed by the reading of minute 4009 + 360), a gauge without a tip size on day 4 (assumed), a
    burst of 3 tips in one minute."""
    feed = Feeder()
    readings = []
    for i in range(4 * 1440):
        if 2000 <= i < 2100 or 3000 <= i < 3020:
            continue
        tips = 1 if 1380 <= i < 1500 or 2990 <= i < 3040 or 4000 <= i < 4010 else 0
        if i == 4500:
            tips = 3
        readings.append(feed("rain", "rain_tips", tips, "{tip}", START + i * MIN))
    cfg = parse_site(site_doc("ch133", rain_poll_s=60), "test-site.yaml")
    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(readings)
    engine_end = START + 4 * 1440 * MIN
    old = Collector()
    engine, old_events = reference(cfg, store, old, engine_end)
    new = Collector()
    ev = evaluate(cfg, ProfileLibrary(), store, START, engine_end, trace=new)
    chunks = list(store.series_chunks(cfg.site.id, [("rain", "rain_tips")],
                                      [(START + k * CHUNK, START + (k + 1) * CHUNK) for k in range(4)]))
    store.close()
    assert all(type(c[("rain", "rain_tips")]).__name__ == "SeriesRows" for c in chunks)  # the columns path
    assert by_rule(ev.events) == by_rule(old_events)
    assert new == old
    assert ev.gaps == _gaps(engine, START, engine_end)
    # by hand: storms of 120 tips (1380-1499), 50 counted tips around the silence (2990-3039 less
    # the 20 minutes not sent: 30), 10 tips, the burst of 3
    assert [(s - START, tips) for s, _, tips, *_ in new.storms] == [
        (1380 * MIN, 120), (2990 * MIN, 30), (4000 * MIN, 10), (4500 * MIN, 3)]
    assert [low for *_, low in new.storms] == [False, True, False, False]
