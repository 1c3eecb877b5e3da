"""Every query of the committed dashboards runs against a real InfluxDB 1.x loaded with a storm.

The data is written through ingest's store (``open_store("influx1://...")``), so the schema is the
one production writes: a 1.2-in NRCS Type II storm at 0.01 in per tip polled every minute (120
tips), upstream/downstream turbidity with a one-hour hole in the downstream probe, a basin
distance sensor, an hour in which every probe reading carries a QC flag (a -9999 error code,
out-of-range values: the rules ignore them, so must the dashboard medians), hand-made ordinance
events at two sites, and the two sites' records (time zones New York and Denver) as ingest writes
them. Rain describes itself: every rain reading carries its tip size (``tip_size``, 0.01 in), the
hilltop gauge was replaced by a 0.2 mm one halfway through its ten tips, and one impossible count
(5,000 tips in a minute) is stored flagged ``rain_beyond_envelope`` as ingest stores it -- no rain
panel may count it; ``$tz`` is resolved from them the way Grafana resolves the variable. Grafana's
macros (``$timeFilter``, ``$__interval``, ``$__interval_ms``) and the dashboard variables are expanded by
:func:`expand` the way Grafana does for InfluxQL, and every result is checked against values
derived here by hand (the tip list, the Washington criterion of alerts/rules/criteria.py, the
geometry of the sensor mount). A query in the JSON without a check below fails the test.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from stormwatch.alerts.rules.criteria import Washington
from stormwatch.app import servers
from stormwatch.contract import Event, Reading
from stormwatch.dashboards.build import JSON_DIR
from stormwatch.simulators.design_storm import design_storm_tip_times
from stormwatch.stores.base import SiteInfo
from stormwatch.stores.lineprotocol import from_ns
from stormwatch.stores.urls import open_store
from stormwatch.wire import format_time

pytestmark = pytest.mark.influxdb

DB = "dash_storm"
SITE, OTHER = "riverside-commons", "hilltop"
GW = "gw-riverside-1"
S = datetime(2026, 6, 1, 5, 0, tzinfo=UTC)  # storm start: 01:00 EDT
RANGE = (S - timedelta(hours=1), S + timedelta(hours=32))
HOUR = timedelta(hours=1)
TIP = Fraction(1, 100)
TIPS = design_storm_tip_times("type_ii", Fraction(6, 5), TIP, S)
GAP = (S + 2 * HOUR, S + 3 * HOUR)  # turb-down silent
NS = 1_000_000_000


def _polls() -> list[tuple[datetime, int]]:
    """(poll time, tips since the previous poll) every 60 s from S - 1 h to S + 26 h."""
    out, i = [], 0
    t = S - HOUR
    while t <= S + 26 * HOUR:
        n = 0
        while i < len(TIPS) and TIPS[i] <= t:
            n, i = n + 1, i + 1
        out.append((t, n))
        t += timedelta(seconds=60)
    return out


POLLS = _polls()
FIVE_MIN = [S + timedelta(minutes=5 * k) for k in range(72)]  # S .. S+6h (exclusive)
UP = {t: 8.0 if t < S + 3 * HOUR else 60.0 for t in FIVE_MIN}
DOWN = {t: 10.0 if t < S + 3 * HOUR else 70.0 for t in FIVE_MIN if not GAP[0] <= t < GAP[1]}
DIST = {t: 1828.8 if t < S + 3 * HOUR else 1524.0 for t in FIVE_MIN}  # 6 ft and 5 ft below an 8 ft mount
OTHER_POLLS = [S + HOUR + timedelta(minutes=k) for k in range(10)]
#: The hilltop gauge: 0.01 in per tip, replaced at 06:05Z by a 0.2 mm gauge (its last five tips).
OTHER_SIZES = ["0.01 in"] * 5 + ["0.2 mm"] * 5
OTHER_DEPTH_IN = 5 * 0.01 + 5 * 0.2 / 25.4  # 0.05 in + 1 mm = 0.0893700787... in
#: A count physics rules out (5,000 tips of 0.01 in = 1,270 mm in one minute; the envelope allows 356
#: tips), between two polls of the storm's tail, stored flagged as ingest flags it.
IMPOSSIBLE = (S + 20 * HOUR + timedelta(seconds=30), 5000)
# S+6h .. S+7h: every probe reading is flagged -- the upstream probe reports its -9999 error code
# (device_error), the downstream one 4500 NTU above its range, the basin sensor 9000 mm out of range.
FLAGGED_HOUR = [S + 6 * HOUR + timedelta(minutes=5 * k) for k in range(12)]
FLAGGED = {"turb-up": (-9999.0, "device_error"), "turb-down": (4500.0, "out_of_range"),
           "basin-level": (9000.0, "out_of_range")}
ZONES = {SITE: "America/New_York", OTHER: "America/Denver"}  # site.timezone of the two site files


def _readings() -> list[Reading]:
    seq = iter(range(1_000_000))

    def r(device: str, quantity: str, unit: str, t: datetime, value: float | int, site: str = SITE,
          flags: tuple[str, ...] = (), tip_size: str | None = None) -> Reading:
        if quantity == "rain_tips" and tip_size is None:
            tip_size = "0.01 in"
        return Reading(site=site, device=device, quantity=quantity, value=value, unit=unit, time=t,
                       gateway=GW if site == SITE else "gw-hill-1", boot="b1", seq=next(seq), flags=flags,
                       tip_size=tip_size)

    out = [r("rain-1", "rain_tips", "{tip}", t, n) for t, n in POLLS]
    out.append(r("rain-1", "rain_tips", "{tip}", IMPOSSIBLE[0], IMPOSSIBLE[1], flags=("rain_beyond_envelope",)))
    out += [r("turb-up", "turbidity", "NTU", t, v) for t, v in UP.items()]
    last_down = max(DOWN)
    out += [r("turb-down", "turbidity", "NTU", t, v, flags=("spike",) if t == last_down else ())
            for t, v in DOWN.items()]
    out += [r("basin-level", "distance", "mm", t, v) for t, v in DIST.items()]
    for device, (value, flag) in FLAGGED.items():
        quantity, unit = ("distance", "mm") if device == "basin-level" else ("turbidity", "NTU")
        out += [r(device, quantity, unit, t, value, flags=(flag,)) for t in FLAGGED_HOUR]
    out += [r("rain-h", "rain_tips", "{tip}", t, 1, site=OTHER, tip_size=z) for t, z in zip(OTHER_POLLS, OTHER_SIZES,
                                                                                            strict=True)]
    return out


def _events() -> list[Event]:
    def e(kind: str, t: datetime, rule: str, site: str = SITE, **kw: Any) -> Event:
        return Event(kind=kind, site=site, event_time=t, rule=rule, citation="Ch. 133 §133-7A(2)",
                     occurrence=f"{kind}-{t.isoformat()}", message=f"{kind} at {site}", **kw)

    return [
        e("storm_qualified", TIPS[49], "R1", storm_start=TIPS[0], tips=50, depth_in=0.5),
        e("storm_inspection_due", TIPS[-1] + 6 * HOUR, "R1", work_order="WO-1", due_at=TIPS[-1] + 24 * HOUR,
          storm_start=TIPS[0], storm_end=TIPS[-1], tips=120, depth_in=1.2),
        e("basin_capacity_warning", S + HOUR, "R3", lost_capacity=0.42, sediment_depth_ft=2.0),
        e("basin_cleanout_due", S + 4 * HOUR, "R3", lost_capacity=0.51, sediment_depth_ft=3.0, work_order="WO-2",
          due_at=S + 76 * HOUR),
        e("data_gap", GAP[1], "GAP", gap_start=GAP[0], gap_end=GAP[1]),
        e("turbidity_contrast", S + 4 * HOUR, "R2", upstream_ntu=60.0, downstream_ntu=70.0),
        e("routine_inspection_due", S, "R1w", site=OTHER, work_order="WO-3", due_at=S + 2 * HOUR),
        e("inspection_overdue", S + 2 * HOUR + timedelta(minutes=1), "R1w", site=OTHER, work_order="WO-3",
          due_at=S + 2 * HOUR),
    ]


@pytest.fixture(scope="module")
def loaded(influx_server: servers.InfluxDB1) -> Iterator[servers.InfluxDB1]:
    influx_server.query(f'DROP DATABASE "{DB}"')
    store = open_store(influx_server.store_url(DB))
    try:
        store.write_readings(_readings())
        store.write_events(_events())
        store.write_sites([SiteInfo(SITE, ZONES[SITE], "ch133"), SiteInfo(OTHER, ZONES[OTHER], "ch196")], S)
    finally:
        store.close()
    yield influx_server


# -- Grafana's macro expansion for InfluxQL --------------------------------------------------------

def _interval_text(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def expand(query: str, interval_s: int, variables: dict[str, str]) -> str:
    """``query`` with ``$timeFilter``, ``$__interval``, ``$__interval_ms`` and ``$var`` expanded.

    ``$timeFilter`` becomes ``time >= <from>ms and time <= <to>ms`` (Grafana's InfluxQL form).

    Raises:
        KeyError: a variable the test does not define.
    """
    start_ms, end_ms = (int(t.timestamp() * 1000) for t in RANGE)
    values = {
        "timeFilter": f"time >= {start_ms}ms and time <= {end_ms}ms",
        "__interval": _interval_text(interval_s),
        "__interval_ms": str(interval_s * 1000),
        **variables,
    }
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], query)


SITE_VARS = {"site": SITE, "upstream": "turb-up", "downstream": "turb-down", "mount_ft": "8.0"}
PORTFOLIO_VARS = {"site": f"({OTHER}|{SITE})"}


def run(server: servers.InfluxDB1, query: str, interval_s: int, variables: dict[str, str]) -> list[dict[str, Any]]:
    """Rows of every series (tags merged in, ``time`` as a UTC datetime)."""
    result = server.query(expand(query, interval_s, variables), DB)["results"][0]
    assert "error" not in result, result
    rows = []
    for series in result.get("series", []):
        for values in series["values"]:
            row = dict(zip(series["columns"], values, strict=True))
            row.update(series.get("tags", {}))
            if "time" in row and row["time"] is not None:
                row["time"] = from_ns(int(row["time"]))  # to the microsecond: the ns below are the store's slot
            rows.append(row)
    return rows


def by_time(rows: list[dict[str, Any]], column: str) -> dict[datetime, Any]:
    return {r["time"]: r[column] for r in rows}


def hour_of(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


# -- expectations per (dashboard uid, panel title, refId) ----------------------------------------

Check = Callable[[servers.InfluxDB1, str], None]
CHECKS: dict[tuple[str, str, str], Check] = {}


def check(uid: str, title: str, ref: str = "A") -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        CHECKS[(uid, title, ref)] = fn
        return fn
    return deco


SITE_UID, PF = "stormwatch-site", "stormwatch-portfolio"


def _hourly_tips() -> Counter[datetime]:
    hourly: Counter[datetime] = Counter()
    for t, n in POLLS:
        hourly[hour_of(t)] += n
    return hourly


@check(SITE_UID, "Rain intensity (in/h)")
def _intensity(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "intensity_in_h")
    expected = {h: n * 0.01 for h, n in _hourly_tips().items()}  # tips per hour × 0.01 in = in/h
    assert got.keys() == expected.keys()
    for h, v in expected.items():
        assert got[h] == pytest.approx(v, abs=1e-9)
    # 15-minute buckets scale by 4: same tips, a quarter of the time.
    quarter = run(srv, q, 900, SITE_VARS)
    assert sum(r["intensity_in_h"] for r in quarter) / 4 == pytest.approx(1.2)
    peak = max(got, key=lambda h: got[h])
    assert peak == S + 11 * HOUR  # Type II: the 11-12 h step holds 0.663 - 0.235 of the depth


@check(SITE_UID, "Cumulative rainfall (in)")
def _cumulative(srv: servers.InfluxDB1, q: str) -> None:
    rows = run(srv, q, 3600, SITE_VARS)
    assert rows[-1]["depth_in"] == pytest.approx(1.2, abs=1e-9)  # the storm depth: 120 tips × 0.01 in
    first_over = next(r["time"] for r in rows if r["depth_in"] >= 0.5 - 1e-9)
    poll_of_50th = next(t for t, _ in POLLS if t >= TIPS[49])
    assert first_over == hour_of(poll_of_50th)
    assert [r["depth_in"] for r in rows] == sorted(r["depth_in"] for r in rows)


def zone_of(srv: servers.InfluxDB1, site: str) -> str:
    """``$tz`` for ``$site`` = ``site``, resolved as Grafana does: the committed ``tz`` variable's query."""
    board = json.loads((JSON_DIR / f"{SITE_UID}.json").read_text())
    var = next(v for v in board["templating"]["list"] if v["name"] == "tz")
    values = [r["value"] for r in run(srv, var["query"], 3600, {"site": site})]
    assert len(values) == 1, values
    return str(values[0])


def _local_days(polls: list[tuple[datetime, int]], zone: str) -> Counter[datetime]:
    """Tips per local calendar day of ``zone``, keyed by the day's midnight in UTC."""
    tz = ZoneInfo(zone)
    days: Counter[datetime] = Counter()
    for t, n in polls:
        days[t.astimezone(tz).replace(hour=0, minute=0, second=0, microsecond=0).astimezone(UTC)] += n
    return days


@check(SITE_UID, "Daily rainfall (in, local days)")
def _daily(srv: servers.InfluxDB1, q: str) -> None:
    assert {site: zone_of(srv, site) for site in ZONES} == ZONES  # each site's own zone, not one for all
    got = by_time(run(srv, q, 3600, {**SITE_VARS, "tz": zone_of(srv, SITE)}), "depth_in")
    expected = _local_days(POLLS, ZONES[SITE])
    # buckets start at local midnight (04:00Z in June, EDT)
    assert sorted(got) == sorted(expected) == [datetime(2026, 6, 1, 4, tzinfo=UTC), datetime(2026, 6, 2, 4, tzinfo=UTC)]
    for day, tips in expected.items():
        assert got[day] == pytest.approx(tips * 0.01, abs=1e-9)
    assert sum(got.values()) == pytest.approx(1.2)
    assert got[datetime(2026, 6, 2, 4, tzinfo=UTC)] != pytest.approx(
        sum(n for t, n in POLLS if t >= datetime(2026, 6, 2, tzinfo=UTC)) * 0.01)  # not UTC days
    # The hilltop site is in Denver: its ten tips of 06:00-06:09Z fall on Denver's June 1, whose day
    # starts at 06:00Z (MDT, UTC-6) -- under New York's zone they would be a bucket at 04:00Z.
    other = by_time(run(srv, q, 3600, {**SITE_VARS, "site": OTHER, "tz": zone_of(srv, OTHER)}), "depth_in")
    denver = _local_days([(t, 1) for t in OTHER_POLLS], ZONES[OTHER])
    assert list(denver) == [datetime(2026, 6, 1, 6, tzinfo=UTC)]
    # ... and its gauge was replaced halfway: five tips of 0.01 in and five of 0.2 mm, each at its own size
    assert other == pytest.approx({datetime(2026, 6, 1, 6, tzinfo=UTC): OTHER_DEPTH_IN}, abs=1e-12)
    assert other[datetime(2026, 6, 1, 6, tzinfo=UTC)] != pytest.approx(10 * 0.01)  # not one size for all


def _hourly_medians(values: dict[datetime, float]) -> dict[datetime, float]:
    hours: dict[datetime, list[float]] = {}
    for t, v in values.items():
        hours.setdefault(hour_of(t), []).append(v)
    return {h: sorted(vs)[len(vs) // 2] for h, vs in hours.items()}  # constant within each hour


@check(SITE_UID, "Turbidity: upstream vs downstream (NTU)", "A")
def _upstream(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "upstream NTU")
    assert got == _hourly_medians(UP)
    assert S + 6 * HOUR not in got  # the hour of -9999 error codes is no median (the rules: needs_verification)


@check(SITE_UID, "Turbidity: upstream vs downstream (NTU)", "B")
def _downstream(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "downstream NTU")
    assert got == _hourly_medians(DOWN)  # the spike-flagged last reading is left out like the flagged hour
    assert GAP[0] not in got  # the silent hour is a gap, not a zero
    assert S + 6 * HOUR not in got  # 4500 NTU out of range: not a median


def _allowed(srv: servers.InfluxDB1) -> dict[datetime, float]:
    """max(C, D) per hour, as the panel's reduceRow transformation computes it."""
    board = json.loads((JSON_DIR / f"{SITE_UID}.json").read_text())
    panel = next(p for p in board["panels"] if p["title"] == "Turbidity: upstream vs downstream (NTU)")
    q = {t["refId"]: t["query"] for t in panel["targets"]}
    c = by_time(run(srv, q["C"], 3600, SITE_VARS), "allowed +5 NTU")
    d = by_time(run(srv, q["D"], 3600, SITE_VARS), "allowed +10 %")
    return {h: max(c[h], d[h]) for h in c}


@check(SITE_UID, "Turbidity: upstream vs downstream (NTU)", "C")
def _allowed_abs(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "allowed +5 NTU")
    assert got == {h: v + 5.0 for h, v in _hourly_medians(UP).items()}


@check(SITE_UID, "Turbidity: upstream vs downstream (NTU)", "D")
def _allowed_pct(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "allowed +10 %")
    assert got == pytest.approx({h: v * 1.1 for h, v in _hourly_medians(UP).items()})
    # The band the panel draws is exactly the Washington criterion of R2 (13 NTU at 8, 66 NTU at 60).
    allowed = _allowed(srv)
    for h, up in _hourly_medians(UP).items():
        assert allowed[h] == pytest.approx(Washington().allowed_ntu(up))
    assert sorted(set(round(v, 9) for v in allowed.values())) == [13.0, 66.0]


@check(SITE_UID, "Sediment depth (ft)")
def _sediment(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "sediment_ft")
    # 8 ft mount - 1828.8 mm (6 ft) = 2 ft; - 1524 mm (5 ft) = 3 ft; the out-of-range hour is left out
    assert got == pytest.approx({S + k * HOUR: 2.0 if k < 3 else 3.0 for k in range(6)})


@check(SITE_UID, "Basin lost capacity (%)")
def _lost(srv: servers.InfluxDB1, q: str) -> None:
    got = by_time(run(srv, q, 3600, SITE_VARS), "lost_capacity_pct")
    assert got == pytest.approx({S + HOUR: 42.0, S + 4 * HOUR: 51.0})


@check(SITE_UID, "Devices: last value and last seen")
def _devices(srv: servers.InfluxDB1, q: str) -> None:
    rows = {(r["device"], r["quantity"]): r for r in run(srv, q, 3600, SITE_VARS)}
    assert set(rows) == {("rain-1", "rain_tips"), ("turb-up", "turbidity"), ("turb-down", "turbidity"),
                         ("basin-level", "distance")}
    assert rows[("rain-1", "rain_tips")]["time"] == POLLS[-1][0]
    assert rows[("rain-1", "rain_tips")]["flags"] == ""  # clean
    # the device table shows the last reading as it is, flags included: the probes' last hour is flagged
    for device, quantity in (("turb-up", "turbidity"), ("turb-down", "turbidity"), ("basin-level", "distance")):
        value, flag = FLAGGED[device]
        assert (rows[(device, quantity)]["time"], rows[(device, quantity)]["last_value"],
                rows[(device, quantity)]["flags"]) == (FLAGGED_HOUR[-1], value, flag)
    assert rows[("basin-level", "distance")]["unit"] == "mm"
    assert {r["gateway"] for r in rows.values()} == {GW}


@check(SITE_UID, "Work orders and due dates")
def _orders(srv: servers.InfluxDB1, q: str) -> None:
    rows = {r["work_order"]: r for r in run(srv, q, 3600, SITE_VARS)}
    assert set(rows) == {"WO-1", "WO-2"}
    assert rows["WO-1"]["due_at"] == format_time(TIPS[-1] + 24 * HOUR)
    assert rows["WO-1"]["kind"] == "storm_inspection_due"
    assert rows["WO-2"]["due_at"] == format_time(S + 76 * HOUR)
    assert rows["WO-2"]["rule"] == "R3"


@check(PF, "Sites: readings and last seen", "A")
def _site_counts(srv: servers.InfluxDB1, q: str) -> None:
    got = {r["site"]: r["readings"] for r in run(srv, q, 3600, PORTFOLIO_VARS)}
    assert got == {SITE: len(POLLS) + 1 + len(UP) + len(DOWN) + len(DIST) + len(FLAGGED) * len(FLAGGED_HOUR),
                   OTHER: len(OTHER_POLLS)}  # the impossible count is stored (kept, flagged): it is a reading


@check(PF, "Sites: readings and last seen", "B")
def _site_last(srv: servers.InfluxDB1, q: str) -> None:
    got = {r["site"]: (r["time"], r["device"]) for r in run(srv, q, 3600, PORTFOLIO_VARS)}
    assert got == {SITE: (POLLS[-1][0], "rain-1"), OTHER: (OTHER_POLLS[-1], "rain-h")}


@check(PF, "Work orders: opened and overdue", "A")
def _opened(srv: servers.InfluxDB1, q: str) -> None:
    assert {r["site"]: r["opened"] for r in run(srv, q, 3600, PORTFOLIO_VARS)} == {SITE: 2, OTHER: 1}


@check(PF, "Work orders: opened and overdue", "B")
def _overdue(srv: servers.InfluxDB1, q: str) -> None:
    assert {r["site"]: r["overdue"] for r in run(srv, q, 3600, PORTFOLIO_VARS)} == {OTHER: 1}


@check(PF, "Overdue inspections")
def _overdue_list(srv: servers.InfluxDB1, q: str) -> None:
    rows = run(srv, q, 3600, PORTFOLIO_VARS)
    assert [(r["site"], r["work_order"], r["due_at"]) for r in rows] == [(OTHER, "WO-3", format_time(S + 2 * HOUR))]


@check(PF, "Last qualifying storm")
def _last_storm(srv: servers.InfluxDB1, q: str) -> None:
    rows = run(srv, q, 3600, PORTFOLIO_VARS)
    assert [(r["site"], r["depth_in"], r["tips"], r["storm_start"], r["time"]) for r in rows] == [
        (SITE, 0.5, 50, format_time(TIPS[0]), TIPS[49])]


@check(PF, "Data gaps (events)")
def _gap_events(srv: servers.InfluxDB1, q: str) -> None:
    rows = run(srv, q, 3600, PORTFOLIO_VARS)
    assert [(r["site"], r["gap_start"], r["gap_end"]) for r in rows] == [
        (SITE, format_time(GAP[0]), format_time(GAP[1]))]


@check(PF, "Readings per device per 15 min (0 = data gap)")
def _slots(srv: servers.InfluxDB1, q: str) -> None:
    rows = run(srv, q, 3600, PORTFOLIO_VARS)
    down = {r["time"]: r["readings"] for r in rows if r["device"] == "turb-down"}
    for k in range(4):  # the silent hour: four empty 15-minute slots
        assert down[GAP[0] + timedelta(minutes=15 * k)] == 0
    assert down[S + HOUR] == 3  # a 5-minute probe: three readings per slot
    rain = {r["time"]: r["readings"] for r in rows if r["device"] == "rain-1"}
    assert rain[S] == 15
    assert {r["site"] for r in rows} == {SITE, OTHER}


# -- the walk over the committed JSON ------------------------------------------------------------

def _queries() -> list[tuple[str, str, str, str]]:
    """(uid, panel title, refId, InfluxQL) of every panel target of every committed dashboard."""
    out = []
    for path in sorted(JSON_DIR.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                assert target["datasource"]["uid"] == "stormwatch-influxql", panel["title"]
                out.append((board["uid"], panel["title"], target["refId"], target["query"]))
    return out


def test_every_panel_query_has_a_check() -> None:
    assert {(u, t, r) for u, t, r, _ in _queries()} == set(CHECKS)


@pytest.mark.parametrize(("uid", "title", "ref", "query"), _queries(), ids=lambda v: str(v)[:40])
def test_panel_query(loaded: servers.InfluxDB1, uid: str, title: str, ref: str, query: str) -> None:
    CHECKS[(uid, title, ref)](loaded, query)


def test_annotation_and_variable_queries(loaded: servers.InfluxDB1) -> None:
    for path in sorted(JSON_DIR.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        variables = SITE_VARS if board["uid"] == SITE_UID else PORTFOLIO_VARS
        influx = [a for a in board["annotations"]["list"] if a["datasource"]["type"] == "influxdb"]
        assert len(influx) == 1
        rows = run(loaded, influx[0]["target"]["query"], 3600, SITE_VARS)
        assert sorted(r["kind"] for r in rows) == sorted(e.kind for e in _events() if e.site == SITE)
        assert all(r["title"] and r["text"] for r in rows)
        for var in board["templating"]["list"]:
            if var["type"] != "query":
                continue
            values = {r["value"] for r in run(loaded, var["query"], 3600, variables)}
            if var["name"] == "site":
                assert values == {SITE, OTHER}
            elif var["name"] == "tz":
                assert values == {ZONES[SITE]}  # the selected site's own zone (zone_of checks both)
            else:
                assert values == {"turb-up", "turb-down"}
