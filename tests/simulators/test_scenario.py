"""Scenario physics of the simulators, checked against hand arithmetic on the reference tables."""

from __future__ import annotations

import re
import statistics
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stormwatch.config import SiteConfig, device_profiles, load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import TipResolution
from stormwatch.simulators.basin import prismoid_volume_ft3
from stormwatch.simulators.cli import build_scenario
from stormwatch.simulators.design_storm import design_storm_tip_offsets
from stormwatch.simulators.rain_record import RainRecordError, load_rain_record, record_day_tips
from stormwatch.simulators.scenario import Scenario, ScenarioError, SiteScenario, load_scenario
from stormwatch.simulators.site import isolate_site
from tests.conftest import REPO, data_file

LIB = ProfileLibrary()
GAUGE_RES = LIB.get("tipping_bucket_modbus_counter").counter.tip_resolution  # type: ignore[union-attr]


def _hydrology_hour(column: int, hour: int) -> Fraction:
    """The cumulative fraction at ``hour`` from hydrology.md's table (column 0 = Type II, 1 = Type III)."""
    text = (REPO / "docs" / "reference" / "hydrology.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for i in (0, 3):
            if len(cells) > i + 2 and cells[i] == str(hour):
                return Fraction(cells[i + 1 + column])
    raise AssertionError(f"hour {hour} not in hydrology.md")


def _site_scenario(scenario_name: str = "default") -> SiteScenario:
    cfg = load_site(REPO / "examples" / "site.yaml", LIB)
    return SiteScenario(load_scenario(scenario_name), cfg, device_profiles(cfg, LIB))


@pytest.mark.parametrize(("dist", "column"), [("type_ii", 0), ("type_iii", 1)])
def test_design_storm_tip_counts_follow_the_table(dist: str, column: int) -> None:
    assert GAUGE_RES.inches == Fraction(1, 100)
    depth = Fraction("1.2")
    offsets = design_storm_tip_offsets(dist, depth, GAUGE_RES.inches)  # type: ignore[arg-type]
    assert len(offsets) == 120  # 1.2 in / 0.01 in
    assert offsets == sorted(offsets)
    assert offsets[-1] == 24  # the last tip completes the storm
    for hour in (1, 6, 11, 12, 13, 18):
        expected = int(_hydrology_hour(column, hour) * depth / GAUGE_RES.inches)  # floor
        assert sum(1 for h in offsets if h <= hour) == expected, hour
    if dist == "type_ii":
        assert sum(1 for h in offsets if h <= 12) == 79  # floor(0.663 * 1.2 / 0.01)


def test_depth_not_a_multiple_of_the_resolution_floors_exactly() -> None:
    assert len(design_storm_tip_offsets("type_ii", Fraction("0.999"), Fraction(1, 100))) == 99
    mm_res = TipResolution.of("0.2", "mm").inches  # 0.2 mm = 1/127 in
    assert len(design_storm_tip_offsets("type_ii", Fraction(1), mm_res)) == 127  # 25.4 mm / 0.2 mm


def test_default_scenario_rain_counter_and_wrap() -> None:
    ss = _site_scenario()
    start = ss.scenario.start
    storm = start + timedelta(hours=1)
    assert ss.counter_at(storm - timedelta(seconds=1)) == 0
    assert ss.counter_at(storm + timedelta(hours=12)) == 79
    assert ss.counter_at(storm + timedelta(hours=24)) == 120
    assert ss.scenario.end >= ss.tips.times[-1] + timedelta(hours=6)
    wrapped = ss.scenario.model_copy(update={"rain": ss.scenario.rain.model_copy(update={"counter_offset": 65530})})
    ss2 = SiteScenario(wrapped, ss.cfg, ss.profiles)
    assert ss2.counter_at(storm + timedelta(hours=24)) == (65530 + 120) - 65536  # 16-bit wrap -> 114


def test_storm_depth_override_and_type_iii() -> None:
    sc = build_scenario("default", storm_depth_in="0.5")
    cfg = load_site(REPO / "examples" / "site.yaml", LIB)
    ss = SiteScenario(sc, cfg, device_profiles(cfg, LIB))
    assert len(ss.tips) == 50


def test_initial_basin_fill_solves_the_stage_storage_equation() -> None:
    ss = _site_scenario()
    # examples/site.yaml: L=40, W=20, z=3, H=4 ft; V(h) = LWh + (L+W)zh^2 + 4/3 z^2 h^3 (hydrology.md)
    def v(h: float) -> float:
        return 40 * 20 * h + (40 + 20) * 3 * h**2 + 4 / 3 * 9 * h**3

    assert v(2) == pytest.approx(2416)  # hydrology.md's worked example
    assert prismoid_volume_ft3(40, 20, 3, 2) == pytest.approx(2416)
    d0 = ss.initial_sediment_depth_ft
    assert v(d0) == pytest.approx(0.45 * v(4), rel=1e-7)
    assert v(4) == pytest.approx(3200 + 2880 + 768)  # V(H) = 6848 ft³ by hand
    # note: sides slope outward, so the upper half of the depth holds more than half the volume:
    # 45 % lies above H/2 here (V(2) = 2416 < 0.45 * 6848 = 3081.6)
    assert 2 < d0 < 4
    # distance-down reading: (8 ft - d0) * 304.8 mm/ft
    assert ss.distance_mm(ss.scenario.start) == pytest.approx((8 - d0) * 304.8)
    storm = ss.scenario.start + timedelta(hours=1)
    assert ss.sediment_fraction(storm) < 0.5 < ss.sediment_fraction(storm + timedelta(hours=24))
    crossing = next(t for t in ss.tips.times if ss.sediment_fraction(t) >= 0.5)
    assert storm < crossing < storm + timedelta(hours=24)
    d_end = ss.sediment_depth_ft(ss.scenario.end)
    assert v(d_end) == pytest.approx((0.45 + 0.10 * 1.2) * v(4), rel=1e-7)


def _five_minute_excess(ss: SiteScenario, start: datetime, minutes: int) -> list[float]:
    """Median(down) - median(up) of 1-minute samples over consecutive 5-minute windows (rules.md R2)."""
    out = []
    for w in range(minutes // 5):
        ts = [start + timedelta(minutes=5 * w + i) for i in range(5)]
        down = statistics.median(ss.downstream_ntu(t) for t in ts)
        out.append(down - statistics.median(ss.upstream_ntu(t) for t in ts))
    return out


def test_default_turbidity_violates_washington_rule_at_the_peak_only() -> None:
    ss = _site_scenario()
    storm = ss.scenario.start + timedelta(hours=1)
    before = _five_minute_excess(ss, ss.scenario.start, 60)
    assert max(before) < 5.0  # within +5 NTU of background before the storm
    peak = _five_minute_excess(ss, storm + timedelta(hours=11, minutes=30), 60)
    runs, run = [], 0
    for x in peak:
        run = run + 1 if x > 5.0 else 0
        runs.append(run)
    assert max(runs) >= 3  # >= 15 minutes of 5-minute medians over background + 5 NTU
    assert max(peak) > 30
    upstream = [ss.upstream_ntu(storm + timedelta(minutes=m)) for m in range(0, 24 * 60, 7)]
    assert 7 < min(upstream) and max(upstream) < 9  # background stays near 8 NTU
    assert _site_scenario().downstream_ntu(storm + timedelta(hours=11)) == ss.downstream_ntu(
        storm + timedelta(hours=11)
    )  # deterministic


def test_tharandt_record_day_and_replay() -> None:
    path = data_file("tharandt_davis_tips_Sensor1.csv")
    rec = load_rain_record(path, tip_size="0.2", unit="mm", delimiter=";", time_format="%d.%m.%Y %H:%M", tz="UTC")
    assert rec.total_tips == 2631  # SOURCES.md (first row is a 0 start marker)
    assert record_day_tips(rec, datetime(2018, 9, 23, tzinfo=UTC)) == 134
    assert max(n for _, n in rec.rows) == 7  # up to 7 tips share one minute, all kept
    assert len(rec.gauge_tips(rec.tip)) == 2631
    # 526.2 mm as 0.01-in tips: floor(526.2 / 0.254) = 2071
    assert len(rec.gauge_tips(GAUGE_RES)) == int(Fraction("526.2") / Fraction("0.254"))


def _tharandt_day() -> tuple[Path, Scenario, SiteConfig, SiteScenario]:
    """The Tharandt tip file's 23 Sep 2018 (0.2-mm tips) played on the example site's 0.01-in gauge."""
    path = data_file("tharandt_davis_tips_Sensor1.csv")
    sc = build_scenario(
        "default", rain_file=path, rain_tip_mm="0.2", rain_delimiter=";", rain_time_format="%d.%m.%Y %H:%M",
        rain_from=datetime(2018, 9, 23), rain_until=datetime(2018, 9, 24),
    )
    cfg = load_site(REPO / "examples" / "site.yaml", LIB)
    return path, sc, cfg, SiteScenario(sc, cfg, device_profiles(cfg, LIB))


def test_rain_record_replayed_by_the_scenario() -> None:
    path, sc, cfg, ss = _tharandt_day()
    # 134 tips x 0.2 mm = 26.8 mm; as 0.01-in gauge tips: floor(26.8 / 0.254) = 105
    assert len(ss.tips) == 105
    # the record's first tip is moved to start + 1 h; 0.2 mm < 0.254 mm, so the first gauge tip
    # falls at the second record tip (0.4 mm)
    rec = load_rain_record(path, tip_size="0.2", unit="mm", delimiter=";", time_format="%d.%m.%Y %H:%M")
    day = rec.window(datetime(2018, 9, 23, tzinfo=UTC), datetime(2018, 9, 24, tzinfo=UTC))
    second_tip = day.rows[0][0] if day.rows[0][1] >= 2 else day.rows[1][0]
    assert ss.tips.times[0] == sc.start + timedelta(hours=1) + (second_tip - day.rows[0][0])
    # the run says the 2018 rain was moved to the scenario's date: from when to when, site-local
    # (the file's times are read in the site's zone: the first tip's wall-clock time there)
    zone = ZoneInfo(cfg.site.timezone)
    moved = (f"its rain was moved to the scenario's date: the first tip, "
             f"{day.rows[0][0].replace(tzinfo=zone):%a %d %b %Y %H:%M %Z}, plays at "
             f"{(sc.start + timedelta(hours=1)).astimezone(zone):%a %d %b %Y %H:%M %Z}")
    assert moved in ss.rain_times, ss.rain_times


def test_a_rain_file_played_at_another_tip_size_says_what_was_rounded() -> None:
    """134 tips x 0.2 mm = 26.8 mm; the 0.01-in gauge carries 105 whole tips = 1.05 in = 26.67 mm:
    the 0.13 mm (0.13 / 25.4 = 0.005118 in) after the last whole tip is said, once, with the sizes."""
    path, _, _, ss = _tharandt_day()
    assert ss.rain_rounding == (
        f"rain file {path}: its 134 tips of 0.2 mm (26.8 mm) play as 105 tips of the gauge's 0.01 in (1.05 in); "
        "the 0.00512 in (0.13 mm) after the last whole tip is left out, and each gauge tip falls at the file's tip "
        "that completes it")
    rec = load_rain_record(path, tip_size="0.2", unit="mm", delimiter=";", time_format="%d.%m.%Y %H:%M")
    assert rec.rounding(rec.tip) == ""  # the gauge's own size: nothing changes, nothing said
    assert rec.rounding(TipResolution.parse("0.1 mm")).endswith("(526.2 mm); nothing is left out, and each gauge "
                                                                 "tip falls at the file's tip that completes it")


def test_bad_record_and_scenario_errors_name_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "rain.csv"
    bad.write_text("time,mm\n2020-01-01T00:00:00,0.3\n", encoding="utf-8")
    with pytest.raises(RainRecordError, match=r"rain.csv:2: .*not a whole number"):
        load_rain_record(bad, tip_size="0.2", unit="mm")
    sc = tmp_path / "s.yaml"
    sc.write_text("start: 2026-06-01T00:00:00Z\nduration_h: 5\nrain: {storm: {depth_in: -1}}\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=re.escape(f"{sc}: rain.storm.depth_in")):
        load_scenario(sc)


def test_isolate_site_keeps_shared_addresses_shared(tmp_path: Path) -> None:
    cfg = load_site(REPO / "examples" / "site.yaml", LIB)
    iso = isolate_site(cfg, tmp_path)
    rain, up = iso.device("rain-1").transport, iso.device("turb-up").transport
    assert (rain.host, rain.port) == (up.host, up.port) != ("127.0.0.1", 5020)  # type: ignore[union-attr]
    assert iso.device("turb-down").transport.port == str(tmp_path / "turb-down")  # type: ignore[union-attr]
    assert iso.device("basin-level").transport.port == str(tmp_path / "basin-level")  # type: ignore[union-attr]


def test_each_discharge_point_and_basin_has_its_own_physics() -> None:
    """simulators/scenarios/two-outfalls.yaml on examples/two-outfalls.yaml, by hand: outfall-2 has no
    plume (downstream = background + 1 NTU, always), outfall-1 the default one; basin-1 fills from
    45 % and trap-2 from 32 %, both by 10 % of their design volume per inch of rain."""
    sc = load_scenario("two-outfalls")
    assert sc.site is not None and sc.site.name == "two-outfalls.yaml"
    # a point's section completes itself from the top-level defaults
    assert sc.discharge_points["outfall-2"].turbidity.gain_ntu_per_in_h == 0.0
    assert sc.discharge_points["outfall-2"].turbidity.background_ntu == 8.0
    assert sc.basins["trap-2"].sediment.initial_fraction == 0.32
    assert sc.basins["trap-2"].sediment.fraction_per_in == 0.10
    cfg = load_site(sc.site, LIB)
    ss = SiteScenario(sc, cfg, device_profiles(cfg, LIB))
    assert ss.roles == {"rain-1": "rain", "turb-up": "turbidity_upstream", "turb-down-1": "turbidity_downstream",
                        "turb-down-2": "turbidity_downstream", "basin-level-1": "basin_level",
                        "basin-level-2": "basin_level"}
    assert ss.basin_of == {"basin-level-1": "basin-1", "basin-level-2": "trap-2"}
    for h in range(0, 32):
        t = sc.start + timedelta(hours=h, minutes=7)
        up = ss.value("turb-up", "turbidity", t)
        assert ss.value("turb-down-2", "turbidity", t) == pytest.approx(up + 1.0, abs=1e-12)
        assert ss.value("turb-down-1", "turbidity", t) == pytest.approx(up + 1.0 + ss.plume_ntu(t, "outfall-1"))
    peak = sc.start + timedelta(hours=13)
    assert ss.plume_ntu(peak, "outfall-1") > 30 and ss.plume_ntu(peak, "outfall-2") == 0.0
    # trap-2: a stage-storage table [0,0] [1,300] [2,800] [3,1500], H = 3 ft
    end = sc.end
    assert ss.sediment_fraction(sc.start, "trap-2") == pytest.approx(0.32)
    assert ss.sediment_depth_ft(sc.start, "trap-2") == pytest.approx(1 + (480 - 300) / 500)  # 1.36 ft
    assert ss.sediment_fraction(end, "trap-2") == pytest.approx(0.32 + 0.10 * 1.2)  # 44 %: never 50 %
    assert ss.sediment_depth_ft(end, "trap-2") == pytest.approx(1 + (660 - 300) / 500)  # 1.72 ft
    assert ss.value("basin-level-2", "distance", end) == pytest.approx((6 - 1.72) * 304.8, abs=1e-4)
    assert ss.sediment_fraction(end, "basin-1") == pytest.approx(0.45 + 0.12)
    # the 40 % warning of trap-2 after 0.8 in = 80 tips; basin-1's 50 % after 0.5 in = 50 tips
    assert ss.sediment_fraction(ss.tips.times[79], "trap-2") == pytest.approx(0.40)
    assert ss.sediment_fraction(ss.tips.times[49], "basin-1") == pytest.approx(0.50)


def test_a_scenario_for_another_sites_places_is_refused() -> None:
    cfg = load_site(REPO / "examples" / "site.yaml", LIB)
    with pytest.raises(ValueError, match=r"scenario two-outfalls: discharge_points outfall-1, outfall-2: site "
                                         r"riverside-commons has no such discharge point \(it has: turbidity_pair\)"):
        SiteScenario(load_scenario("two-outfalls"), cfg, device_profiles(cfg, LIB))
