"""Stored rain describes itself (issue 11 item 3).

Every rain reading carries the size of its tips (``tip_size``) in both stores; every reader computes
depth from it, a site file naming another size is a clear error unless it records the replacement,
and stores written before this existed still open (their rain read with the site file's size, said
in a WARNING). Expected values are derived here by hand: 0.01 in = 0.254 mm exactly, 0.2 mm =
1/127 in (1 in = 25.4 mm by definition; docs/reference/sensors.md).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import textwrap
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from stormwatch import resources, topics
from stormwatch.alerts.backfill import evaluate
from stormwatch.app import servers
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.config import ConfigError, SiteConfig, parse_site
from stormwatch.contract import Reading, dump_readings, parse_readings
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.base import ReadingStore
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.tipsizes import TipSizeMismatch, TipSizes
from tests.names import RUN

SITE = "riverside-commons"
GW = "gw-riverside-1"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
#: The example site's gauge was a 0.01-in bucket until 12:30Z, a 0.2-mm one from then on.
SWAP = T0 + 30 * MIN


def site_doc(**rain: Any) -> dict[str, Any]:
    """The example site file, its rain gauge's entry updated with ``rain``."""
    doc: dict[str, Any] = yaml.safe_load(resources.example_site().read_text(encoding="utf-8"))
    doc["devices"][0].update(rain)
    return doc


def replaced_site() -> SiteConfig:
    """The example site after its gauge was replaced at 12:30Z by a 0.2-mm bucket."""
    return parse_site(site_doc(profile="tipping_bucket_0_2mm_modbus_counter",
                               replaced_gauges=[{"tip_size": "0.01 in", "until": "2026-06-01T08:30:00-04:00",
                                                 "note": "TE525, serial 1234"}]),
                      "replaced.yaml", ProfileLibrary())


def rain(seq: int, at: datetime, tips: int, tip_size: str | None, flags: tuple[str, ...] = (),
         gateway: str = GW) -> Reading:
    return Reading(site=SITE, device="rain-1", quantity="rain_tips", value=tips, unit="{tip}", time=at,
                   gateway=gateway, boot="b1", seq=seq, raw=seq, flags=flags, tip_size=tip_size)


# -- the contract and the site file ------------------------------------------------------------------------


def test_a_rain_reading_names_its_tip_size_on_the_wire() -> None:
    r = rain(1, T0, 3, "0.254 mm")
    assert r.tip_size == "0.01 in"  # canonical: 0.254 mm is exactly 0.01 in
    assert r.tip_resolution is not None and r.tip_resolution.inches == Fraction(1, 100)
    wire = r.to_wire()
    assert list(wire)[:6] == ["site", "device", "quantity", "value", "unit", "tip_size"]
    assert parse_readings(dump_readings([r])) == [r]
    assert "tip_size" not in Reading(site=SITE, device="turb-up", quantity="turbidity", value=1.0, unit="NTU",
                                     time=T0, gateway=GW, boot="b", seq=1).to_wire()
    with pytest.raises(ValidationError, match="only a rain_tips reading has a tip size"):
        Reading(site=SITE, device="turb-up", quantity="turbidity", value=1.0, unit="NTU", time=T0, gateway=GW,
                boot="b", seq=1, tip_size="0.01 in")
    assert rain(2, T0, 1, "0.2 mm").tip_size == "0.2 mm"  # 1/127 in has no short decimal: kept in mm


def test_a_gauge_replacement_is_recorded_in_the_site_file_and_checked_at_load() -> None:
    cfg = replaced_site()
    sizes = TipSizes.of(cfg, ProfileLibrary(), "rain-1")
    assert sizes is not None and sizes.replaced
    assert sizes.text_at(SWAP - timedelta(microseconds=1)) == "0.01 in"
    assert sizes.text_at(SWAP) == "0.2 mm"  # the replacement instant is the new gauge's
    assert sizes.text_at(SWAP + timedelta(days=400)) == "0.2 mm"
    assert "replaced_gauges.0 (until 2026-06-01T12:30:00Z)" in sizes.source_at(T0)
    assert "tipping_bucket_0_2mm_modbus_counter" in sizes.source_at(SWAP)

    profiles = ProfileLibrary()
    bad = [
        ([{"tip_size": "0.01 in", "until": "2026-06-01T08:30:00"}], "with its UTC offset"),  # no offset
        ([{"tip_size": "0.01 in", "until": "2026-06-01"}], "with its UTC offset"),  # a date: which instant?
        ([{"tip_size": "3 furlongs", "until": "2026-06-01T12:30:00Z"}], "tip resolution"),
        ([{"tip_size": "0.01 in", "until": "2026-06-02T00:00:00Z"},
          {"tip_size": "0.1 mm", "until": "2026-06-01T00:00Z"}], "oldest first"),
        ([{"tip_size": "0.01 in"}], "until: Field required"),
    ]
    for entries, word in bad:
        with pytest.raises(ConfigError, match=word) as refused:
            parse_site(site_doc(replaced_gauges=entries), "site.yaml", profiles)
        assert str(refused.value).startswith("site.yaml: devices.0")
    doc = site_doc()
    doc["devices"][1]["replaced_gauges"] = [{"tip_size": "0.01 in", "until": "2026-06-01T12:30:00Z"}]
    with pytest.raises(ConfigError, match=r"devices.1.replaced_gauges: device 'turb-up' .* does not count tips"):
        parse_site(doc, "site.yaml", profiles)


# -- both stores keep it ------------------------------------------------------------------------------------


def _influx(srv: servers.InfluxDB1, db: str, q: str) -> list[dict[str, Any]]:
    res = srv.query(q, db)["results"][0]
    assert "error" not in res, res
    return [dict(zip(s["columns"], v, strict=True)) | (s.get("tags") or {})
            for s in res.get("series", []) for v in s["values"]]


@pytest.mark.influxdb
def test_both_stores_hold_each_readings_size_and_depth(influx_server: servers.InfluxDB1, tmp_path: Path) -> None:
    readings = [rain(1, T0, 3, "0.01 in"), rain(2, T0 + MIN, 5, "0.2 mm"), rain(3, T0 + 2 * MIN, 0, "0.2 mm"),
                rain(4, T0 + 3 * MIN, 2, None),  # stored by an earlier stormwatch's way: no size
                rain(5, T0 + 4 * MIN, 900, "0.2 mm", flags=("rain_beyond_envelope",))]
    db = f"tipsize_both_{RUN}"
    sqlite_store, influx_store = SqliteStore(tmp_path / "rain.db"), Influx1Store(influx_server.url, db)
    try:
        for s in (sqlite_store, influx_store):
            assert s.write_readings(readings) == 5
            assert s.query_readings(SITE) == readings  # the size comes back exactly as written
        # Independent readers (sqlite3, InfluxQL on the real server) of what each store holds.
        con = sqlite3.connect(tmp_path / "rain.db")
        in_sqlite = {seq: size for seq, size in con.execute("SELECT seq, tip_size FROM readings")}
        con.close()
        points = _influx(influx_server, db, 'SELECT "seq", "tips", "depth_in", "tip_size" FROM "readings"')
        in_influx = {p["seq"]: p["tip_size"] for p in points}
        assert in_sqlite == in_influx == {1: "0.01 in", 2: "0.2 mm", 3: "0.2 mm", 4: None, 5: "0.2 mm"}
        depth = {p["seq"]: p["depth_in"] for p in points}
        # 3 x 0.01 in; 5 x 0.2 mm = 1 mm = 1/25.4 in; no size: no depth the dashboards could sum wrongly
        assert depth[1] == pytest.approx(0.03, abs=1e-15) and depth[2] == pytest.approx(1 / 25.4, abs=1e-15)
        assert depth[3] == 0.0 and depth[4] is None
        # The desk's summary: tips per size, the impossible count left out (it is not rain).
        for s in (sqlite_store, influx_store):
            (summary,) = s.summarize(T0, T0 + 10 * MIN, [(SITE, "rain-1", "rain_tips")])  # type: ignore[attr-defined]
            assert (summary.total, summary.tips_by_size) == (10, (("", 2), ("0.01 in", 3), ("0.2 mm", 5)))
            assert summary.count == 5
    finally:
        sqlite_store.close()
        influx_store.close()


# -- the gauge replaced: each period at its own size --------------------------------------------------------


def _replacement_readings() -> list[Reading]:
    """One tip a minute: 12:00-12:29 by the 0.01-in gauge (30 tips = 0.30 in), 12:30-12:55 by the 0.2-mm
    one (26 tips = 5.2 mm), then dry polls to 19:00 (the storm ends after its 6-h dry gap)."""
    out = [rain(i + 1, T0 + i * MIN, 1, "0.01 in") for i in range(30)]
    out += [rain(31 + i, SWAP + i * MIN, 1, "0.2 mm") for i in range(26)]
    t, seq = SWAP + 26 * MIN, 57
    while t <= T0 + 7 * timedelta(hours=1):
        out.append(rain(seq, t, 0, "0.2 mm"))
        t, seq = t + MIN, seq + 1
    return out


@pytest.mark.influxdb
def test_a_storm_across_a_gauge_replacement_adds_each_gauges_depth(influx_server: servers.InfluxDB1,
                                                                  tmp_path: Path) -> None:
    cfg, profiles = replaced_site(), ProfileLibrary()
    # Through ingest's validation: each reading's size is the one the site file gives for its time.
    validator = Validator.for_sites([cfg], profiles, ManualClock(T0 + timedelta(hours=8)))
    topic = topics.readings(SITE, GW)
    result = validator.validate(topic, dump_readings(_replacement_readings()))
    assert not result.dead and len(result.accepted) == len(_replacement_readings())
    db = f"tipsize_swap_{RUN}"
    stores: list[ReadingStore] = [SqliteStore(tmp_path / "swap.db"), Influx1Store(influx_server.url, db)]
    try:
        outcomes = []
        for s in stores:
            s.write_readings(result.accepted)
            ev = evaluate(cfg, profiles, s, T0, T0 + timedelta(hours=8))
            outcomes.append([(e.kind, e.event_time, e.details.depth_in, e.details.tips, e.message)
                             for e in ev.events if e.kind.startswith("storm_")])
        assert outcomes[0] == outcomes[1]  # the same storm from either store
        kinds = {kind: (t, depth, tips, msg) for kind, t, depth, tips, msg in outcomes[0]}
        # By hand: after k tips of the new gauge the storm holds 3/10 + k/127 in; 25 tips: 631/1270 =
        # 0.4968 in < 0.5; the 26th tip (12:55) makes 641/1270 = 0.50472 in >= 0.5 (Ch. 133 §133-7A(2)).
        t, depth, tips, msg = kinds["storm_qualified"]
        assert t == SWAP + 25 * MIN and tips == 56
        assert depth == pytest.approx(float(Fraction(3, 10) + Fraction(26, 127)), abs=1e-12)
        assert "30 tips of 0.01 in + 26 tips of 0.2 mm" in msg
        t, depth, tips, msg = kinds["storm_inspection_due"]
        assert depth == pytest.approx(641 / 1270, abs=1e-12) and tips == 56
        # Under one size for all the same tips would be 0.56 in (0.01 in) or 11.2 mm = 0.441 in (0.2 mm).
        assert depth != pytest.approx(0.56) and depth != pytest.approx(56 * 0.2 / 25.4)
    finally:
        for s in stores:
            s.close()


def test_ingest_refuses_a_size_the_site_file_does_not_give_and_pins_a_missing_one(
        caplog: pytest.LogCaptureFixture) -> None:
    cfg, profiles = replaced_site(), ProfileLibrary()
    validator = Validator.for_sites([cfg], profiles, ManualClock(T0 + timedelta(hours=1)))
    topic = topics.readings(SITE, GW)
    sent = [rain(1, T0 + 10 * MIN, 1, "0.2 mm"),  # before the replacement: the 0.01-in gauge's time
            rain(2, SWAP + 10 * MIN, 1, "0.01 in"),  # after it: the 0.2-mm gauge's
            rain(3, T0 + 20 * MIN, 1, None), rain(4, SWAP + 20 * MIN, 1, None)]  # an earlier gateway: no size
    with caplog.at_level(logging.WARNING, "stormwatch.ingest.validate"):
        result = validator.validate(topic, dump_readings(sent))
    assert [(d.reason, json.loads(d.payload)["seq"]) for d in result.dead] == [("tip_size_mismatch", 1),
                                                                               ("tip_size_mismatch", 2)]
    assert "tips are 0.2 mm, but the site file gives the gauge 0.01 in" in result.dead[0].detail
    assert "replaced_gauges" in result.dead[0].detail
    # stamped with the size of its own period, and said once (the device is named)
    assert [(r.seq, r.tip_size) for r in result.accepted] == [(3, "0.01 in"), (4, "0.2 mm")]
    stamped = [r.getMessage() for r in caplog.records if "without a tip size" in r.getMessage()]
    assert len(stamped) == 1 and "rain-1" in stamped[0]
    assert validator.stamped == {(SITE, "rain-1"): 2}


# -- a site file that names another size --------------------------------------------------------------------


def _storm_csv(path: Path) -> Path:
    path.write_text("time,tips\n" + "".join(f"2026-06-01T12:{i:02d}:00Z,1\n" for i in range(60)), encoding="utf-8")
    return path


def test_evaluate_with_another_gauge_size_is_an_error_naming_both(tmp_path: Path) -> None:
    # The reproduction: 60 tips of 0.01 in imported; the site file's gauge then changed to a
    # 0.2-mm profile. Reading them as 0.2 mm would be 12 mm = 0.472 in -- no storm, silently.
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(site_doc()), encoding="utf-8")
    store = f"sqlite:///{tmp_path / 'x.db'}"
    runner = CliRunner()
    imported = runner.invoke(app, ["import", str(_storm_csv(tmp_path / "storm.csv")), "--site", str(site),
                                   "--device", "rain-1", "--tip-in", "0.01", "--tips-per-row", "count",
                                   "--store", store])
    assert imported.exit_code == 0, imported.output
    window = ["--from", "2026-06-01T00:00Z", "--until", "2026-06-03T00:00Z", "--store", store, "--json"]
    ok = runner.invoke(app, ["evaluate", "--site", str(site), *window])
    assert ok.exit_code == 0, ok.output
    qualified = [e for e in json.loads(ok.stdout)["events"] if e["kind"] == "storm_qualified"]
    assert [(e["tips"], e["depth_in"]) for e in qualified] == [(50, 0.5)]

    site.write_text(yaml.safe_dump(site_doc(profile="tipping_bucket_0_2mm_modbus_counter")), encoding="utf-8")
    wrong = runner.invoke(app, ["evaluate", "--site", str(site), *window])
    assert wrong.exit_code == 2
    (line,) = [ln for ln in wrong.output.splitlines() if ln.startswith("error:")]
    assert "tips of 0.01 in" in line and "gives the gauge 0.2 mm" in line and "replaced_gauges" in line
    assert "Traceback" not in wrong.output

    # Recorded: the 0.01-in gauge was replaced on June 2 -- each period at its own size again.
    site.write_text(yaml.safe_dump(site_doc(profile="tipping_bucket_0_2mm_modbus_counter", replaced_gauges=[
        {"tip_size": "0.01 in", "until": "2026-06-02T09:00:00-04:00"}])), encoding="utf-8")
    again = runner.invoke(app, ["evaluate", "--site", str(site), *window])
    assert again.exit_code == 0, again.output
    assert [(e["tips"], e["depth_in"]) for e in json.loads(again.stdout)["events"]
            if e["kind"] == "storm_qualified"] == [(50, 0.5)]


def test_an_import_of_another_size_is_refused_and_one_across_the_replacement_is_split(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(site_doc(profile="tipping_bucket_0_2mm_modbus_counter", replaced_gauges=[
        {"tip_size": "0.01 in", "until": "2026-06-01T12:30:00Z"}])), encoding="utf-8")
    common = ["--site", str(site), "--device", "rain-1", "--tips-per-row", "count", "--store",
              f"sqlite:///{tmp_path / 'x.db'}"]
    runner = CliRunner()
    foreign = runner.invoke(app, ["import", str(_storm_csv(tmp_path / "storm.csv")), "--tip-mm", "0.1", *common])
    assert foreign.exit_code == 2 and "earlier gauges of 0.01 in (replaced_gauges)" in foreign.output
    across = runner.invoke(app, ["import", str(tmp_path / "storm.csv"), "--tip-in", "0.01", *common])
    assert across.exit_code == 2
    assert "the row at 2026-06-01T12:30:00Z has tips of 0.01 in" in across.output
    assert "imported in two parts" in across.output


# -- stores written before stored rain described itself -----------------------------------------------------

#: The readings table of SQLite stores of schema 1 (stormwatch before issue 11 item 3), as it created it.
SCHEMA_1 = textwrap.dedent("""
    CREATE TABLE readings (
        id INTEGER PRIMARY KEY, site TEXT NOT NULL, device TEXT NOT NULL, quantity TEXT NOT NULL,
        value NOT NULL, unit TEXT NOT NULL, time_us INTEGER NOT NULL, time TEXT NOT NULL,
        gateway TEXT NOT NULL, boot TEXT NOT NULL, seq INTEGER NOT NULL, raw TEXT NOT NULL,
        flags TEXT NOT NULL, late INTEGER NOT NULL DEFAULT 0, received_at_us INTEGER NOT NULL,
        UNIQUE (gateway, boot, seq));
    PRAGMA user_version=1;
""")


def _old_store(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript(SCHEMA_1)
    us0 = int(T0.timestamp()) * 1_000_000
    con.executemany("INSERT INTO readings (site, device, quantity, value, unit, time_us, time, gateway, boot, seq,"
                    " raw, flags, late, received_at_us) VALUES (?, 'rain-1', 'rain_tips', 1, '{tip}', ?, ?, ?,"
                    " 'b1', ?, '1', '[]', 0, ?)",
                    [(SITE, us0 + i * 60_000_000, f"2026-06-01T12:{i:02d}:00Z", GW, i, us0) for i in range(60)])
    con.commit()
    con.close()


def test_a_store_of_the_previous_version_opens_and_says_what_it_assumes(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    with caplog.at_level(logging.WARNING):
        store = SqliteStore(path)
    try:
        assert any("schema 1 -> 2, added readings.tip_size" in r.getMessage() for r in caplog.records)
        con = sqlite3.connect(path)
        assert con.execute("PRAGMA user_version").fetchone() == (2,)
        assert "tip_size" in {row[1] for row in con.execute("PRAGMA table_info(readings)")}
        con.close()
        old = store.query_readings(SITE)
        assert len(old) == 60 and {r.tip_size for r in old} == {None}  # never invented
        store.write_readings([rain(100, T0 + 2 * timedelta(hours=1), 1, "0.01 in")])  # new rows carry theirs
        assert store.query_readings(SITE)[-1].tip_size == "0.01 in"
        profiles = ProfileLibrary()
        for doc, size, storm in ((site_doc(), "0.01 in", [(50, 0.5)]),
                                 (site_doc(profile="tipping_bucket_0_2mm_modbus_counter"), "0.2 mm", [])):
            caplog.clear()
            with caplog.at_level(logging.WARNING, "stormwatch.alerts"):
                ev = evaluate(parse_site(doc, "site.yaml", profiles), profiles, store, T0, T0 + 90 * MIN)
            said = [r.getMessage() for r in caplog.records if "carry no tip size" in r.getMessage()]
            # 60 old readings, from 12:00 to 12:59, read as the site file's size -- and said so
            assert len(said) == 1
            assert "60 stored reading(s) from 2026-06-01T12:00:00Z to 2026-06-01T12:59:00Z" in said[0]
            assert f"read as {size}" in said[0]
            assert [(e.details.tips, e.details.depth_in) for e in ev.events if e.kind == "storm_qualified"] == storm
    finally:
        store.close()


def test_the_mismatch_error_names_the_reading_time_and_both_sizes() -> None:
    sizes = TipSizes.of(replaced_site(), ProfileLibrary(), "rain-1")
    assert sizes is not None
    with pytest.raises(TipSizeMismatch) as err:
        sizes.check("0.2 mm", T0)
    assert (err.value.stored, err.value.expected, err.value.at) == ("0.2 mm", "0.01 in", T0)
    assert "from 2026-06-01T12:00:00Z have tips of 0.2 mm" in str(err.value)
    assert sizes.check("0.2 mm", SWAP).inches == Fraction(1, 127)
    assert sizes.check(None, T0).inches == Fraction(1, 100)  # no size: the site file's for its time
