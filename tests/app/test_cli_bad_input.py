"""No traceback for any user input: every command run with bad input exits 2 with
exactly one line that names the file or option and says what is wrong -- never a traceback, never a
directory created by a typo. The cases the issue found are here (a binary site file, a CSV cell
1e308, --tip-mm 0.0000001 and 1e400, a store in a missing directory, --from after --until, an
unknown jurisdiction), with more of the same kinds for every command."""

from __future__ import annotations

import shutil
import socket
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import WallClock
from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.stores.urls import open_store
from tests.conftest import data_file

THARANDT = ["--delimiter", ";", "--time-format", "%d.%m.%Y %H:%M"]  # the rain file's format


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    d = tmp_path_factory.mktemp("bad-input")
    site = d / "site.yaml"
    shutil.copy(resources.example_site(), site)
    doc = yaml.safe_load(site.read_text(encoding="utf-8"))
    doc["site"]["jurisdiction"] = "ch999"
    (d / "ch999.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    (d / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (d / "latin1.yaml").write_bytes("site: {id: caf\xe9}\n".encode("latin-1"))
    (d / "broken.yaml").write_text("site: [riverside\ndevices: {}\n", encoding="utf-8")
    (d / "big.csv").write_text("time,rain\n2024-06-01T00:00:00Z,1e308\n", encoding="utf-8")
    (d / "rain.csv").write_text("time,rain\n2024-06-01T00:00:00Z,0.2\n2024-06-01T00:01:00Z,0.4\n", encoding="utf-8")
    (d / "data.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(2048))
    (d / "store.db").touch()
    (d / "a-file").write_text("not a directory\n", encoding="utf-8")
    sites = d / "sites"
    sites.mkdir()
    shutil.copy(resources.example_site(), sites / "site.yaml")
    state = d / "state"
    state.mkdir()
    WorkOrders(state / "alerts.db", WallClock()).close()
    (d / "empty-state").mkdir()  # a directory without a work-order book
    (d / "a-dir.db").mkdir()
    furlongs = d / "furlongs"  # a turbidity point in a unit no rule reads
    furlongs.mkdir()
    y511 = resources.builtin_profiles_dir() / "yosemitech_y511.yaml"
    (furlongs / y511.name).write_text(y511.read_text(encoding="utf-8").replace("unit: NTU", "unit: furlongs"),
                                      encoding="utf-8")
    _site_variant(doc_of(site), d / "negative-poll.yaml",
                  lambda x: [dev.update(poll_interval_s=-5) for dev in x["devices"][:3]])
    _site_variant(doc_of(site), d / "bad-override.yaml", lambda x: x.update(rules={"R1": {"dry_gap_hours": -6}}))
    _site_variant(doc_of(site), d / "one-probe.yaml", lambda x: x["turbidity_pair"].update(downstream="turb-up"))
    _site_variant(doc_of(site), d / "tall-basin.yaml", lambda x: x["basin"]["geometry"].update(design_height_ft=20))
    _site_variant(doc_of(site), d / "low-sensor.yaml", lambda x: x["basin"].update(sensor_mount_height_ft=2))
    _site_variant(doc_of(site), d / "huge-deadline.yaml",
                  lambda x: x.update(rules={"R1": {"inspection_within_hours": 1e308}}))
    _site_variant(doc_of(site), d / "infinite-basin.yaml",
                  lambda x: x["basin"]["geometry"].update(bottom_length_ft=float("inf")))
    _site_variant(doc_of(site), d / "wide-basin.yaml", lambda x: x["basin"]["geometry"].update(bottom_width_ft=1e308))
    _site_variant(doc_of(site), d / "flat-table.yaml", lambda x: x["basin"].update(
        geometry=None, stage_storage=[[0, 0], [1, 0], [4, 0]], design_height_ft=4))
    _site_variant(doc_of(site), d / "huge-table.yaml", lambda x: x["basin"].update(
        geometry=None, stage_storage=[[0, 0], [1, 1e300], [4, 1e301]], design_height_ft=4))
    _site_variant(doc_of(site), d / "poll-true.yaml", lambda x: x["devices"][0].update(poll_interval_s=True))
    _site_variant(doc_of(site), d / "poll-1e308.yaml", lambda x: x["devices"][0].update(poll_interval_s=1e308))
    _site_variant(doc_of(site), d / "override-true.yaml", lambda x: x.update(rules={"R1": {"dry_gap_hours": True}}))
    _site_variant(doc_of(site), d / "bad-host.yaml", lambda x: x["devices"][0]["transport"].update(host="not a host!!"))
    _site_variant(doc_of(site), d / "odd-baud.yaml", lambda x: x["devices"][2]["transport"].update(baud=12345))
    _site_variant(doc_of(site), d / "two-typos.yaml",
                  lambda x: [dev.update(profile=f"{dev['id']}-typo") for dev in x["devices"][1:3]])
    (d / "twice-id.yaml").write_text(site.read_text(encoding="utf-8").replace("site:\n", "site:\n  id: other\n", 1),
                                     encoding="utf-8")  # site.id written twice: the next line is the file's own
    (d / "empty.db").write_bytes(b"")  # a 0-byte file: an empty SQLite database, not a store
    foreign = sqlite3.connect(d / "foreign.db")  # another program's database
    foreign.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    foreign.commit()
    foreign.close()
    used = open_store(f"sqlite:///{d / 'used.db'}", WallClock())  # holds a reading inside the demo's window
    used.write_readings([Reading(site="riverside-commons", device="rain-1", quantity="rain_tips", value=0,
                                 unit=TIP_UNIT, time=datetime(2026, 6, 1, 5, 0, tzinfo=UTC), gateway="gw",
                                 boot="b", seq=1, tip_size="0.01 in")])
    used.close()
    busy = socket.socket()  # another server on a port: the desk must say so in one line
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    yield {"busy_port": busy.getsockname()[1], "dir": d, "site": site, "ch999": d / "ch999.yaml",
           "furlongs": d / "furlongs", "binary": d / "binary.yaml", "latin1": d / "latin1.yaml",
            "broken": d / "broken.yaml", "big": d / "big.csv", "rain": d / "rain.csv", "bin": d / "data.bin",
            "db": d / "store.db", "state": state, "a-file": d / "a-file", "sites": sites,
            "tharandt": data_file("tharandt_davis_tips_Sensor1.csv"), "empty-state": d / "empty-state",
            "a-dir-db": d / "a-dir.db", "used": d / "used.db", "empty-db": d / "empty.db",
            "foreign-db": d / "foreign.db",
            **{name: d / f"{name}.yaml" for name in ("negative-poll", "bad-override", "one-probe", "tall-basin",
                                                     "low-sensor", "huge-deadline", "twice-id", "infinite-basin",
                                                     "wide-basin", "flat-table", "huge-table", "poll-true",
                                                     "poll-1e308", "override-true", "bad-host", "odd-baud",
                                                     "two-typos")}}
    busy.close()


def doc_of(path: Path) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _site_variant(doc: dict, path: Path, change: Callable[[dict], object]) -> None:  # type: ignore[type-arg]
    """The example site with one mistake, as a newcomer writes it."""
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _cases() -> list[tuple[str, list[str], str]]:
    """``(id, args with {name} placeholders, expected text)``."""
    return [
        # a site file that is not one
        ("gateway-binary-site", ["gateway", "--check", "--site", "{binary}"], "{binary}: not a text site file: binary"),
        ("gateway-latin1-site", ["gateway", "--check", "--site", "{latin1}"],
         "not a text site file in UTF-8: byte 0xe9"),
        ("gateway-unknown-pack", ["gateway", "--check", "--site", "{ch999}"],
         "{ch999}: site.jurisdiction: no rule pack 'ch999'"),
        ("ingest-unknown-pack", ["ingest", "--site", "{ch999}", "--store", "sqlite:///{dir}/never.db"],
         "{ch999}: site.jurisdiction: no rule pack 'ch999'"),
        ("ingest-bad-override", ["ingest", "--site", "{bad-override}", "--store", "sqlite:///{dir}/never.db"],
         "{bad-override}: rules.R1.dry_gap_hours: Input should be greater than 0"),
        ("gateway-missing-site", ["gateway", "--check", "--site", "{dir}/nope.yaml"],
         "--site {dir}/nope.yaml: no such file"),
        ("gateway-broken-yaml", ["gateway", "--check", "--site", "{broken}"],
         "{broken}:2:8: not valid YAML: expected ',' or ']'"),
        ("gateway-bad-broker", ["gateway", "--check", "--site", "{site}", "--broker", "foo://x"], "mqtt://"),
        ("ingest-binary-site", ["ingest", "--site", "{binary}"], "not a text site file"),
        ("ingest-store-in-missing-dir", ["ingest", "--site", "{site}", "--store", "sqlite:///{dir}/nonexist/dir/x.db"],
         "directory {dir}/nonexist/dir does not exist"),
        ("alerts-unknown-pack", ["alerts", "--site", "{ch999}"], "no rule pack 'ch999'"),
        ("alerts-bad-store", ["alerts", "--site", "{site}", "--store", "ftp://x", "--state-dir", "{dir}/alerts"],
         "unknown store URL scheme 'ftp'"),
        ("evaluate-from-after-until", ["evaluate", "--site", "{site}", "--from", "2026-06-02", "--until", "2026-06-01",
                                       "--store", "{db}"], "--from 2026-06-02 is not before --until 2026-06-01"),
        ("evaluate-bad-time", ["evaluate", "--site", "{site}", "--from", "yesterday", "--until", "2026-06-01"],
         "'yesterday' is not an ISO 8601 time"),
        # tip sizes no bucket has, windows with no rain
        ("simulate-tip-1e400", ["simulate", "--site", "{site}", "--rain-file", "{tharandt}", *THARANDT,
                                "--tip-mm", "1e400"], "--tip-mm '1e400': a tipping bucket tips at 0.01 to 10 mm"),
        ("simulate-tip-tiny", ["simulate", "--site", "{site}", "--rain-file", "{tharandt}", *THARANDT,
                               "--tip-mm", "0.0000001"], "--tip-mm '0.0000001': a tipping bucket"),
        ("simulate-from-after-until", ["simulate", "--site", "{site}", "--rain-file", "{tharandt}", *THARANDT,
                                       "--tip-mm", "0.2", "--from", "2018-09-24T00:00:00",
                                       "--until", "2018-09-23T00:00:00"], "is not before --until"),
        ("simulate-lockstep-no-participants", ["simulate", "--site", "{site}", "--lockstep",
                                               "--lockstep-participants", " , "],
         "--lockstep-participants ' , ': name at least one (gateway, ingest, alerts)"),
        ("simulate-tip-without-file", ["simulate", "--site", "{site}", "--tip-mm", "0.2"],
         "--tip-mm describes a --rain-file"),
        ("simulate-clock-in-missing-dir", ["simulate", "--site", "{site}", "--clock-file", "{dir}/none/clock.json"],
         "--clock-file {dir}/none/clock.json: directory {dir}/none does not exist"),
        ("gateway-two-unknown-profiles", ["gateway", "--check", "--site", "{two-typos}"],
         "devices.1.profile: no profile 'turb-up-typo' (device turb-up, line 18); devices.2.profile: no profile "
         "'turb-down-typo' (device turb-down, line 26); profiles searched in "),
        ("gateway-profile-unit-furlongs", ["gateway", "--check", "--site", "{site}", "--profiles", "{furlongs}"],
         "{furlongs}/yosemitech_y511.yaml: modbus.points.1: unit 'furlongs' is not a unit of turbidity the rules "
         "read (NTU, FNU)"),
        # the fleet's options without --fleet: refused, never silently ignored
        ("simulate-duration-without-fleet", ["simulate", "--site", "{site}", "--duration-h", "16"],
         "--duration-h needs --fleet"),
        ("simulate-seed-without-fleet", ["simulate", "--site", "{site}", "--seed", "3"], "--seed needs --fleet"),
        ("simulate-start-without-fleet", ["simulate", "--site", "{site}", "--start", "2026-06-01T00:00:00"],
         "--start needs --fleet"),
        ("simulate-start-wall-without-fleet", ["simulate", "--site", "{site}", "--start-wall", "1900000000"],
         "--start-wall needs --fleet"),
        # every service refuses it as simulate does, rather than wait for ever for a file no one can write
        ("ingest-clock-in-missing-dir", ["ingest", "--site", "{site}", "--store", "sqlite:///{dir}/never.db",
                                         "--clock-file", "{dir}/none/clock.json"],
         "--clock-file {dir}/none/clock.json: directory {dir}/none does not exist"),
        ("gateway-clock-in-missing-dir", ["gateway", "--site", "{site}", "--state-dir", "{dir}",
                                          "--clock-file", "{dir}/none/clock.json"],
         "--clock-file {dir}/none/clock.json: directory {dir}/none does not exist"),
        ("alerts-clock-in-missing-dir", ["alerts", "--site", "{site}", "--state-dir", "{dir}",
                                         "--clock-file", "{dir}/none/clock.json"],
         "--clock-file {dir}/none/clock.json: directory {dir}/none does not exist"),
        ("demo-tip-1e400", ["demo", "--rain-file", "{tharandt}", *THARANDT, "--tip-mm", "1e400"],
         "--tip-mm '1e400': a tipping bucket"),
        ("demo-from-after-until", ["demo", "--rain-file", "{tharandt}", *THARANDT, "--tip-mm", "0.2",
                                   "--from", "2018-09-24T00:00:00", "--until", "2018-09-23T00:00:00"],
         "--from 2018-09-24T00:00:00 is not before --until 2018-09-23T00:00:00"),
        ("demo-no-rain-in-window", ["demo", "--rain-file", "{tharandt}", *THARANDT, "--tip-mm", "0.2",
                                    "--from", "2030-01-01T00:00:00"], "{tharandt}: no rain from 2030-01-01"),
        ("demo-old-names", ["demo", "--rain-file", "{tharandt}", "--rain-delimiter", ";", "--rain-tip-mm", "abc"],
         "--tip-mm 'abc' is not a number"),
        ("demo-binary-site", ["demo", "--site", "{binary}"], "not a text site file"),
        ("demo-unknown-pack", ["demo", "--site", "{ch999}"], "no rule pack 'ch999'"),
        ("demo-store-in-missing-dir", ["demo", "--store", "sqlite:///{dir}/nonexist/x.db"],
         "directory {dir}/nonexist does not exist"),
        ("demo-speed", ["demo", "--speed", "0"], "Invalid value for '--speed'"),
        ("demo-log-file-in-missing-dir", ["demo", "--log-file", "{dir}/none/demo.log"],
         "--log-file {dir}/none/demo.log: directory {dir}/none does not exist"),
        # logger files
        ("import-binary-file", ["import", "{bin}", "--site", "{site}", "--device", "rain-1", "--tip-in", "0.01",
                                "--store", "sqlite:///{dir}/i.db"], "{bin}: binary file"),
        ("import-tip-tiny", ["import", "{rain}", "--site", "{site}", "--device", "rain-1", "--tip-mm", "0.0000001",
                             "--store", "sqlite:///{dir}/i.db"], "--tip-mm '0.0000001': a tipping bucket"),
        ("import-store-in-missing-dir", ["import", "{rain}", "--site", "{site}", "--device", "rain-1", "--tip-in",
                                         "0.01", "--store", "sqlite:///{dir}/nonexist/dir/x.db"],
         "directory {dir}/nonexist/dir does not exist"),
        ("import-unknown-zone", ["import", "{rain}", "--site", "{site}", "--device", "turb-up", "--value-column",
                                 "rain=turbidity", "--tz", "Mars/Olympus_Mons", "--store", "sqlite:///{dir}/i.db"],
         "--tz 'Mars/Olympus_Mons': unknown IANA time zone"),
        ("import-bad-value-column", ["import", "{rain}", "--site", "{site}", "--device", "turb-up",
                                     "--value-column", "rain", "--store", "sqlite:///{dir}/i.db"],
         "--value-column 'rain': expected NAME=QUANTITY[:UNIT]"),
        ("replay-cell-1e308", ["replay", "{big}", "--tip-mm", "0.2"],
         "{big}: no rain readings to replay: 1 of 1 row rejected (too_many_tips 1)"),
        ("replay-tip-1e400", ["replay", "{rain}", "--tips", "1e400"], "--tip-mm '1e400': a tipping bucket"),
        ("replay-silence", ["replay", "{rain}", "--tip-mm", "0.2", "--silence", "maybe"], "--silence 'maybe'"),
        ("replay-unknown-pack", ["replay", "{rain}", "--tip-mm", "0.2", "--jurisdiction", "ch999"],
         "no rule pack 'ch999'"),
        ("replay-missing-file", ["replay", "{dir}/none.csv", "--tip-mm", "0.2"], "does not exist"),
        ("decode-bad-type", ["decode", "--type", "float33", "0x0000"], "float33"),
        ("decode-scale-nan", ["decode", "--scale", "nan", "12"], "Invalid value for '--scale': 'nan' is not a number"),
        ("decode-grouped-word", ["decode", "1_0"], "register word '1_0' is not a decimal or 0x-hex number"),
        ("decode-arabic-indic-word", ["decode", "\u0661"], "register word '\u0661' is not a decimal or 0x-hex"),
        ("decode-negative-word", ["decode", "--", "-1"], "register word '-1' is negative: a word as read from the wire "
                                                         "is 0..65535 (a signed value's word is its two's complement"),
        # work orders
        ("workorders-no-state", ["workorders", "list", "--state-dir", "{dir}/nothing"], "no work-order state file"),
        ("workorders-empty-by", ["workorders", "ack", "WO-x", "--by", " ", "--state-dir", "{state}"],
         "must not be empty"),
        ("workorders-complete-without-note", ["workorders", "complete", "WO-x", "--by", "ann", "--state-dir",
                                              "{state}"], "Missing option '--notes'"),
        ("workorders-status", ["workorders", "list", "--status", "late", "--state-dir", "{state}"],
         "--status 'late': expected one of open, acknowledged, completed"),
        ("workorders-ical-missing-dir", ["workorders", "ical", "--state-dir", "{state}", "-o", "{dir}/none/x.ics"],
         "--output {dir}/none/x.ics"),
        ("dashboards-output-is-a-file", ["dashboards", "build", "-o", "{a-file}"], "{a-file}"),
        ("dashboards-output-in-missing-dir", ["dashboards", "build", "-o", "{dir}/nonexist/x"],
         "--output {dir}/nonexist/x: directory {dir}/nonexist does not exist"),
        # reports and archives: the output is checked before the work
        ("report-output-in-missing-dir", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                          "--store", "{db}", "-o", "{dir}/nonexist/x.pdf"],
         "--output {dir}/nonexist/x.pdf: directory {dir}/nonexist does not exist"),
        # a period no store can hold: one line, never "unexpected OverflowError: date value out of range"
        ("report-until-9999", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "9999-12-31",
                               "--store", "{db}", "--state-dir", "{state}", "-o", "{dir}/x.csv"],
         "--until 9999-12-31: more than a year after the state's clock (wall-clock time: "),
        ("report-until-9999-late", ["report", "--site", "{site}", "--from", "2026-06-01", "--until",
                                    "9999-12-31T23:00", "--store", "{db}", "--state-dir", "{state}", "-o",
                                    "{dir}/x.csv"],
         "'9999-12-31T23:00' is beyond the dates a time can hold"),
        ("report-from-year-1", ["report", "--site", "{site}", "--from", "0001-01-01", "--until", "2026-06-02",
                                "--store", "{db}", "--state-dir", "{state}", "-o", "{dir}/x.csv"],
         "--from 0001-01-01: before 1970-01-01, when event times begin (no reading can be older)"),
        # local times the site's clocks skip or show twice (America/New_York, 2026: 8 Mar and 1 Nov)
        ("report-from-skipped-hour", ["report", "--site", "{site}", "--from", "2026-03-08T02:30", "--until",
                                      "2026-03-09", "--store", "{db}", "--state-dir", "{state}", "-o", "{dir}/x.csv"],
         "'2026-03-08T02:30' does not exist in America/New_York: the clocks jump ahead over it that night "
         "(EST to EDT)"),
        ("evaluate-until-repeated-hour", ["evaluate", "--site", "{site}", "--from", "2026-10-31", "--until",
                                          "2026-11-01T01:30", "--store", "{db}"],
         "'2026-11-01T01:30' happens twice in America/New_York (the clocks fall back that night): give the offset, "
         "2026-11-01T01:30:00-04:00 (EDT, the first) or 2026-11-01T01:30:00-05:00 (EST, an hour later)"),
        ("readings-add-skipped-hour", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by", "J",
                                       "--turbidity-ntu", "12", "--sampled-at", "2026-03-08T02:30",
                                       "--store", "{db}"],
         "'2026-03-08T02:30' does not exist in America/New_York"),
        ("report-missing-store", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                  "--store", "sqlite:///{dir}/nothing.db", "--state-dir", "{state}"],
         "no SQLite store at {dir}/nothing.db"),
        ("archive-output-in-missing-dir", ["archive", "--site", "{site}", "--from", "2026-06-01", "--until",
                                           "2026-06-02", "--store", "{db}", "-o", "{dir}/nonexist/b.zip"],
         "--output {dir}/nonexist/b.zip: directory {dir}/nonexist does not exist"),
        ("archive-binary-store", ["archive", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                  "--store", "sqlite:///{bin}", "--state-dir", "{state}", "-o", "{dir}/b.zip"],
         "{bin} is not an SQLite database"),
        ("import-archive-not-a-zip", ["import-archive", "{rain}", "--store", "sqlite:///{dir}/ia2.db", "--state-dir",
                                      "{state}"],
         "error: {rain}: not a readable archive: File is not a zip file"),  # the path said once
        ("readings-huge-turbidity", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by", "ann",
                                     "--turbidity-ntu", "1e6", "--store", "sqlite:///{dir}/m.db"],
         "error: --turbidity-ntu 1000000: outside 0 to 4000 NTU"),  # a number for people, not 1e+06
        ("import-archive-missing-bundle", ["import-archive", "{dir}/none.zip", "--store", "sqlite:///{dir}/ia.db",
                                          "--state-dir", "{dir}/ia"], "{dir}/none.zip: no such file"),
        # store URLs: one vocabulary, one line for a malformed one
        ("web-ipv6-missing-bracket", ["web", "--store", "http://[::1", "--state-dir", "{state}"],
         "--store http://[::1: not a URL: Invalid IPv6 URL (an IPv6 host is written in brackets"),
        ("import-ipv6-missing-bracket", ["import", "{rain}", "--site", "{site}", "--device", "rain-1", "--tip-in",
                                         "0.01", "--store", "influx1://[::1/db"],
         "--store influx1://[::1/db: not a URL: Invalid IPv6 URL"),
        ("web-base-url-not-a-url", ["web", "--store", "{db}", "--state-dir", "{state}", "--base-url", "not a url"],
         "--base-url 'not a url': has spaces in it"),
        ("web-base-url-no-scheme", ["web", "--store", "{db}", "--state-dir", "{state}", "--base-url", "desk.example"],
         "--base-url 'desk.example': is not an http:// or https:// address"),
        ("web-base-url-bad-port", ["web", "--store", "{db}", "--state-dir", "{state}", "--base-url",
                                   "https://desk.example:99999"], "has a port that is not a number"),
        ("web-missing-store", ["web", "--store", "sqlite:///{dir}/nothing.db", "--state-dir", "{state}"],
         "no SQLite store at {dir}/nothing.db"),
        ("ingest-binary-store", ["ingest", "--site", "{site}", "--store", "sqlite:///{bin}"],
         "--store sqlite:///{bin}: {bin} is not an SQLite database"),
        # a reading command never writes into a file that is not a stormwatch store (opening it as one
        # would add the tables, switch the file to WAL and report "no data" of it)
        ("report-empty-store", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                "--no-work-orders", "--store", "sqlite:///{empty-db}", "-o", "{dir}/e.csv"],
         "--store sqlite:///{empty-db}: {empty-db} is an empty file, not a stormwatch store"),
        ("report-foreign-store", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                  "--no-work-orders", "--store", "sqlite:///{foreign-db}", "-o", "{dir}/f.csv"],
         "{foreign-db} is an SQLite database without stormwatch's readings table, not a stormwatch store"),
        ("evaluate-binary-store", ["evaluate", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                   "--store", "sqlite:///{bin}"], "{bin} is not an SQLite database"),
        ("evaluate-http-store", ["evaluate", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                 "--store", "http://127.0.0.1:8086"],
         "an HTTP address, not a store URL: for InfluxDB 1.x write influx1://127.0.0.1:8086/DATABASE"),
        ("demo-http-store", ["demo", "--store", "http://127.0.0.1:8086"],
         "--store http://127.0.0.1:8086: an HTTP address, not a store URL"),
        ("alerts-http-store", ["alerts", "--site", "{site}", "--store", "http://127.0.0.1:8086", "--state-dir",
                               "{dir}/alerts"], "an HTTP address, not a store URL"),
        ("import-store-port-0", ["import", "{rain}", "--site", "{site}", "--device", "rain-1", "--tip-in", "0.01",
                                 "--store", "influx1://127.0.0.1:0/db"], "bad port: 0 is not a TCP port"),
        # state directories
        ("alerts-state-dir-is-a-file", ["alerts", "--site", "{site}", "--state-dir", "{a-file}"],
         "--state-dir {a-file}: is a file, not a directory"),
        ("web-state-dir-is-a-file", ["web", "--store", "{db}", "--state-dir", "{a-file}"],
         "--state-dir {a-file}: is a file, not a directory"),
        ("station-binary-file", ["station", "import", "{bin}", "--site", "{site}", "--store", "sqlite:///{dir}/s.db"],
         "{bin}: binary file"),
        # readings entered by hand: the option named, a finite number within what the method gives
        ("readings-ph-1e400", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by", "ann",
                               "--ph", "1e400", "--store", "sqlite:///{dir}/m.db"],
         "Invalid value for '--ph': '1e400' is beyond the range of a number"),
        ("readings-ph-nan", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by", "ann",
                             "--ph", "nan", "--store", "sqlite:///{dir}/m.db"],
         "Invalid value for '--ph': 'nan' is not a number"),
        ("readings-transparency-minus-inf", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair",
                                             "--by", "ann", "--transparency-cm", "-inf", "--store",
                                             "sqlite:///{dir}/m.db"],
         "Invalid value for '--transparency-cm': '-inf' is not a number"),
        # one number grammar (stormwatch.numbers): Python's float()/int() would take these as 10, 7, 1000
        ("readings-turbidity-grouped", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by",
                                        "ann", "--turbidity-ntu", "1_0", "--store", "sqlite:///{dir}/m.db"],
         "Invalid value for '--turbidity-ntu': '1_0' is not a number (numbers are ASCII digits"),
        ("readings-ph-arabic-indic", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by",
                                      "ann", "--ph", "\u0667", "--store", "sqlite:///{dir}/m.db"],
         "Invalid value for '--ph': '\u0667' is not a number"),
        ("ingest-batch-size-grouped", ["ingest", "--site", "{site}", "--batch-size", "1_000"],
         "Invalid value for '--batch-size': '1_000' is not an integer"),
        ("import-gap-value-grouped", ["import", "{rain}", "--site", "{site}", "--device", "rain-1", "--tip-mm", "0.2",
                                      "--gap-value", "-9_999", "--store", "sqlite:///{dir}/g.db"],
         "--gap-value: '-9_999' is not a number"),
        ("readings-turbidity-1e308", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by",
                                      "ann", "--turbidity-ntu", "1e308", "--store", "sqlite:///{dir}/m.db"],
         "--turbidity-ntu 1e+308: outside 0 to 4000 NTU (grab sample, hand turbidimeter)"),
        ("readings-ph-15", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by", "ann",
                            "--ph", "15", "--store", "sqlite:///{dir}/m.db"], "--ph 15: outside 0 to 14 [pH]"),
        ("readings-unknown-point", ["readings", "add", "--site", "{site}", "--point", "outfall-9", "--by", "ann",
                                    "--ph", "7", "--store", "sqlite:///{dir}/m.db"],
         "'outfall-9' is not a discharge point of site 'riverside-commons': samples are taken where "
         "stormwater leaves the site (its points: turbidity_pair)"),
        ("readings-at-a-device", ["readings", "add", "--site", "{site}", "--point", "rain-1", "--by", "ann",
                                  "--ph", "7", "--store", "sqlite:///{dir}/m.db"],
         "'rain-1' is a device of site 'riverside-commons', not a discharge point: samples are taken where "
         "stormwater leaves the site (its points: turbidity_pair)"),
        # accounts of the desk
        ("users-unknown-site", ["users", "add", "bob", "--role", "inspector", "--site-id", "nowhere", "--sites",
                                "{sites}", "--password-stdin", "--state-dir", "{dir}/users"],
         "--site-id nowhere: no such site in --sites {sites} (its sites: riverside-commons)"),
        ("users-old-site-name", ["users", "add", "bob", "--role", "inspector", "--site", "nowhere", "--sites",
                                 "{sites}", "--password-stdin", "--state-dir", "{dir}/users"],
         "--site-id nowhere: no such site"),
        ("users-bad-site-id", ["users", "add", "bob", "--role", "inspector", "--site-id", "a/b", "--password-stdin",
                               "--state-dir", "{dir}/users"],
         "--site-id 'a/b': character 2 '/' is not allowed in an id"),
        ("users-unknown-role", ["users", "add", "bob", "--role", "boss", "--password-stdin", "--state-dir",
                                "{state}"], "unknown role 'boss'"),
        # brokers
        ("demo-broker-port-0", ["demo", "--broker", "mqtt://h:0"], "bad broker URL: port 0 is not a TCP port"),
        # the command itself
        ("root-log-level", ["--log-level", "LOUD", "demo"], "'LOUD' is not one of DEBUG, INFO, WARNING, ERROR"),
        ("root-unknown-command", ["demonstrate"], "No such command 'demonstrate'"),
        ("root-profiles-not-a-dir", ["--profiles", "{a-file}", "profiles", "list"],
         "--profiles {a-file}: is not a directory"),
        ("root-profiles-missing", ["--profiles", "{dir}/nonexist", "profiles", "list"],
         "--profiles {dir}/nonexist: no such directory"),
        ("root-packs-missing", ["--packs", "{dir}/nonexist", "packs", "list"],
         "--packs {dir}/nonexist: no such directory"),
        # a newcomer's list (issue: CLI problems): wrong exits and several lines, now one line and exit 2
        ("replay-dry-gap-1e308", ["replay", "{rain}", "--tip-mm", "0.2", "--dry-gap-hours", "1e308"],
         "Invalid value for '--dry-gap-hours'"),
        ("replay-dry-gap-over-a-week", ["replay", "{rain}", "--tip-mm", "0.2", "--dry-gap-hours", "169"],
         "less than or equal to 168"),
        ("site-override-1e308-hours", ["gateway", "--check", "--site", "{huge-deadline}"],
         "{huge-deadline}: rules.R1.inspection_within_hours: 1e+308 hours is longer than 10 years"),
        ("web-host-999", ["web", "--host", "999.1.1.1", "--store", "{db}", "--state-dir", "{state}"],
         "--host 999.1.1.1: not an address or host name to listen on"),
        ("web-port-in-use", ["web", "--port", "{busy_port}", "--store", "{db}", "--state-dir", "{state}"],
         "--port {busy_port}: address already in use on 127.0.0.1 (another server listens there"),
        ("demo-web-port-in-use", ["demo", "--web", "--web-port", "{busy_port}"], "--web-port {busy_port}: address "
                                                                                 "already in use"),
        ("evaluate-store-is-a-directory", ["evaluate", "--site", "{site}", "--from", "2026-06-01", "--until",
                                           "2026-06-02", "--store", "sqlite:///{a-dir-db}"],
         "{a-dir-db} is a directory, not an SQLite file"),
        ("ingest-store-is-a-directory", ["ingest", "--site", "{site}", "--store", "sqlite:///{a-dir-db}"],
         "is a directory, not an SQLite file"),
        ("demo-used-store", ["demo", "--store", "sqlite:///{used}"],
         "--store sqlite:///{used}: already holds 1 reading of site riverside-commons between "
         "2026-06-01T04:00:00+00:00 and"),
        ("site-negative-poll-interval", ["gateway", "--check", "--site", "{negative-poll}"],
         "{negative-poll}: devices.0.poll_interval_s: Input should be greater than 0 (device rain-1, line "),
        ("site-negative-poll-names-every-device", ["ingest", "--site", "{negative-poll}"],
         "(device turb-up, line "),
        ("site-bad-override", ["gateway", "--check", "--site", "{bad-override}"],
         "{bad-override}: rules.R1.dry_gap_hours: Input should be greater than 0"),
        # silently accepted nonsense, refused now by every command
        ("site-one-probe-pair", ["gateway", "--check", "--site", "{one-probe}"],
         "turbidity_pair: upstream and downstream are the same device 'turb-up': a probe compared with itself "
         "never shows a contrast (R2 could never fire)"),
        ("site-one-probe-pair-alerts", ["alerts", "--site", "{one-probe}", "--state-dir", "{state}"],
         "the same device 'turb-up'"),
        ("site-sensor-below-the-rim", ["gateway", "--check", "--site", "{tall-basin}"],
         "basin.sensor_mount_height_ft: 8 ft is not above the basin's design height 20 ft"),
        ("site-sensor-below-the-design-height", ["evaluate", "--site", "{low-sensor}", "--from", "2026-06-01",
                                                 "--until", "2026-06-02", "--store", "{db}"],
         "basin.sensor_mount_height_ft: 2 ft is not above the basin's design height 4 ft"),
        ("site-infinite-basin", ["gateway", "--check", "--site", "{infinite-basin}"],
         "{infinite-basin}: basin.geometry.bottom_length_ft: Input should be a finite number (line "),
        ("site-1e308-basin", ["gateway", "--check", "--site", "{wide-basin}"],
         "{wide-basin}: basin.geometry.bottom_width_ft: Input should be less than or equal to 5000 (line "),
        ("site-1e308-basin-evaluate", ["evaluate", "--site", "{wide-basin}", "--from", "2026-06-01", "--until",
                                       "2026-06-02", "--store", "{db}"], "bottom_width_ft: Input should be less than"),
        ("site-flat-stage-storage", ["gateway", "--check", "--site", "{flat-table}"],
         "{flat-table}: basin: stage_storage holds 0 ft³ below design_height_ft 4 ft: a basin with no design storage "
         "has no capacity to lose (R3 divides by it)"),
        ("site-flat-stage-storage-evaluate", ["evaluate", "--site", "{flat-table}", "--from", "2026-06-01", "--until",
                                              "2026-06-02", "--store", "{db}"], "stage_storage holds 0 ft³ below"),
        ("site-huge-stage-storage", ["gateway", "--check", "--site", "{huge-table}"],
         "{huge-table}: basin.stage_storage.1.1: Input should be less than or equal to 1000000000 (line "),
        ("site-poll-interval-true", ["gateway", "--check", "--site", "{poll-true}"],
         "{poll-true}: devices.0.poll_interval_s: true is a yes/no value, not a number (YAML reads true/false, yes/no "
         "and on/off so); give the number (device rain-1, line "),
        ("site-poll-interval-true-ingest", ["ingest", "--site", "{poll-true}"], "true is a yes/no value, not a number"),
        ("site-poll-interval-1e308", ["gateway", "--check", "--site", "{poll-1e308}"],
         "{poll-1e308}: devices.0.poll_interval_s: Input should be less than or equal to 86400 (device rain-1, line "),
        ("site-poll-interval-1e308-evaluate", ["evaluate", "--site", "{poll-1e308}", "--from", "2026-06-01", "--until",
                                               "2026-06-02", "--store", "{db}"],
         "devices.0.poll_interval_s: Input should be less than or equal to 86400"),
        ("site-override-true", ["gateway", "--check", "--site", "{override-true}"],
         "{override-true}: rules.R1.dry_gap_hours: true is a yes/no value, not a number"),
        ("site-bad-host", ["gateway", "--check", "--site", "{bad-host}"],
         "{bad-host}: devices.0.transport.modbus-tcp.host: 'not a host!!' is not a host: ' ' is not allowed in a host "
         "name (letters, digits, '-' and '.'; RFC 1123) nor is it an IP address (device rain-1, line "),
        ("site-odd-baud", ["gateway", "--check", "--site", "{odd-baud}"],
         "{odd-baud}: devices.2.transport.modbus-rtu.baud: 12345 is not a standard baud rate (the common ones: 1200, "
         "2400, 4800, 9600, 19200, 38400, 57600, 115200; see the device's manual) (device turb-down, line "),
        ("alerts-broker-host-with-a-space", ["alerts", "--site", "{site}", "--broker", "mqtt://bad host",
                                             "--state-dir", "{dir}/never-alerts"],
         "--broker: bad broker URL: host 'bad host' is not a host: ' ' is not allowed in a host name"),
        ("ingest-broker-host-with-a-space", ["ingest", "--site", "{site}", "--broker", "mqtt://bad host", "--store",
                                             "sqlite:///{dir}/never.db"], "--broker: bad broker URL: host 'bad host'"),
        ("gateway-broker-host-with-a-space", ["gateway", "--check", "--site", "{site}", "--broker", "mqtt://bad host"],
         "bad broker URL: host 'bad host' is not a host"),
        ("alerts-broker-cluster-node-with-a-space", ["alerts", "--site", "{site}", "--broker", "mqtt://a:1883,b c:1883",
                                                     "--state-dir", "{dir}/never-alerts"],
         "--broker: bad broker URL node 'b c:1883': host 'b c' is not a host"),
        ("site-key-twice", ["gateway", "--check", "--site", "{twice-id}"],
         "{twice-id}:5:3: not valid YAML: key 'id' given twice, at lines 4 and 5 (YAML would keep only the last"),
        ("site-key-twice-evaluate", ["evaluate", "--site", "{twice-id}", "--from", "2026-06-01", "--until",
                                     "2026-06-02", "--store", "{db}"], "key 'id' given twice, at lines 4 and 5"),
        ("workorders-by-newline", ["workorders", "ack", "WO-x", "--by", "ina\nx", "--state-dir", "{state}"],
         "the name of who acknowledges (--by) 'ina\\nx': character 4 '\\n' is not allowed"),
        ("readings-by-bell", ["readings", "add", "--site", "{site}", "--point", "turbidity_pair", "--by", "ann\x07",
                              "--ph", "7", "--store", "sqlite:///{dir}/m.db"],
         "the inspector's name 'ann\\x07': character 4 '\\x07' is not allowed"),
        ("users-name-escape", ["users", "add", "ina", "--name", "Ina\x1b[31m", "--role", "smo", "--password-stdin",
                               "--state-dir", "{state}"], "(--name) 'Ina\\x1b[31m': character 4 '\\x1b'"),
        ("users-state-dir-typo", ["users", "add", "ina", "--role", "smo", "--password-stdin", "--state-dir",
                                  "{dir}/nothing-users"], "--state-dir {dir}/nothing-users: no such directory"),
        ("users-list-state-dir-typo", ["users", "list", "--state-dir", "{dir}/nothing-users"], "no such directory"),
        ("web-state-dir-typo", ["web", "--store", "{db}", "--state-dir", "{dir}/nothing-web"],
         "--state-dir {dir}/nothing-web: no such directory (the alert service's state directory"),
        ("alerts-state-dir-in-missing-dir", ["alerts", "--site", "{site}", "--state-dir", "{dir}/none/alerts"],
         "--state-dir {dir}/none/alerts: directory {dir}/none does not exist (create it first"),
        ("gateway-state-dir-in-missing-dir", ["gateway", "--site", "{site}", "--state-dir", "{dir}/none/gw"],
         "--state-dir {dir}/none/gw: directory {dir}/none does not exist"),
        ("demo-state-dir-in-missing-dir", ["demo", "--state-dir", "{dir}/none/demo"],
         "--state-dir {dir}/none/demo: directory {dir}/none does not exist"),
        ("import-archive-state-dir-in-missing-dir", ["import-archive", "{a-file}", "--store", "sqlite:///{dir}/ia.db",
                                                     "--state-dir", "{dir}/none/ia"],
         "--state-dir {dir}/none/ia: directory {dir}/none does not exist"),
        ("ingest-unknown-site-id", ["ingest", "--site", "{site}", "--site-id", "nope"],
         "--site-id nope: no --site file names it (their sites: riverside-commons)"),
        ("alerts-unknown-site-id", ["alerts", "--site", "{site}", "--site-id", "nope", "--state-dir", "{state}"],
         "--site-id nope: no --site file names it"),
        ("ingest-inflight-below-batch", ["ingest", "--site", "{site}", "--max-inflight", "10", "--batch-size", "500"],
         "--max-inflight 10 is below --batch-size 500"),
        ("report-docx", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02", "--store",
                         "{db}", "--state-dir", "{state}", "-o", "{dir}/x.docx"],
         "--output {dir}/x.docx: .docx is not a report format: name the file .pdf, .html or .csv"),
        ("report-suffix-contradicts-format", ["report", "--site", "{site}", "--from", "2026-06-01", "--until",
                                              "2026-06-02", "--store", "{db}", "--state-dir", "{state}", "--format",
                                              "pdf", "-o", "{dir}/x.html"],
         "--output {dir}/x.html: the name says html, --format says pdf"),
        ("report-no-such-day", ["report", "--site", "{site}", "--from", "2026-02-30", "--until", "2026-03-02",
                                "--store", "{db}", "--state-dir", "{state}"],
         "'2026-02-30': no such time (day is out of range for month)"),
        ("report-storm-and-period", ["report", "--site", "{site}", "--storm", "WO-1", "--from", "2026-06-01",
                                     "--store", "{db}", "--state-dir", "{state}"],
         "--storm gives the report's period (the storm and its inspection): leave out --from and --until"),
        ("report-state-dir-typo", ["report", "--site", "{site}", "--from", "2026-06-01", "--until", "2026-06-02",
                                   "--store", "{db}", "--state-dir", "{dir}/nothing-report"],
         "--state-dir {dir}/nothing-report: no such directory: give the --state-dir of the alert service"),
        ("report-state-dir-without-book", ["report", "--site", "{site}", "--from", "2026-06-01", "--until",
                                           "2026-06-02", "--store", "{db}", "--state-dir", "{empty-state}"],
         "--state-dir {empty-state}: no work-order book (alerts.db) there"),
        ("archive-state-dir-without-book", ["archive", "--site", "{site}", "--from", "2026-06-01", "--until",
                                            "2026-06-02", "--store", "{db}", "--state-dir", "{empty-state}", "-o",
                                            "{dir}/a.zip"], "no work-order book (alerts.db) there"),
    ]


CASES = _cases()


@pytest.mark.parametrize(("args", "expected"), [(a, e) for _, a, e in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(files: dict[str, object], args: list[str], expected: str) -> None:
    real = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    if real[0] == "web" and "--port" not in real:
        real += ["--port", "0"]  # any free port: the desk listens before it opens the store, and 8080 may be taken
    result = CliRunner().invoke(app, real, catch_exceptions=False)
    text = result.output
    assert result.exit_code == 2, text
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    assert expected.format(**{k: str(v) for k, v in files.items()}) in lines[0], text


def test_a_typo_never_creates_directories(files: dict[str, Path]) -> None:
    for name in ("nonexist", "none", "nothing", "nothing-users", "nothing-web", "nothing-report", "ia.db", "x.docx",
                 "x.html", "a.zip", "never.db", "never-alerts"):
        assert not (files["dir"] / name).exists(), name


def test_a_garbage_row_in_a_demo_rain_file_is_skipped_with_its_reason_as_replay_does(tmp_path: Path) -> None:
    """`demo --rain-file` and `replay` read rain files with one reader: a bad row is skipped and
    named (file:line, reason) by both, never the end of the run."""
    from stormwatch.simulators.rain_record import load_rain_record

    path = tmp_path / "rain.csv"
    path.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\nthis is not a row\n2024-06-01T00:02:00Z,0.4\n",
                    encoding="utf-8")
    record = load_rain_record(path, tip_size="0.2", unit="mm")
    assert record.total_tips == 3 and record.skipped == (f"{path}:3: 1 field, need at least 2",)
    replay = CliRunner().invoke(app, ["replay", str(path), "--tip-mm", "0.2", "--all-events"], catch_exceptions=False)
    assert replay.exit_code == 0, replay.output
    assert "3 rows, 3 tips = 0.6 mm (0.023 in), 1 row rejected" in replay.output


@pytest.mark.parametrize(("variable", "command"), [("STORMWATCH_PROFILES", "profiles"), ("STORMWATCH_PACKS", "packs")])
def test_a_missing_directory_in_the_environment_is_named_not_skipped(tmp_path: Path, variable: str,
                                                                     command: str) -> None:
    result = CliRunner().invoke(app, [command, "list"], env={variable: str(tmp_path / "nonexist")},
                                catch_exceptions=False)
    assert result.exit_code == 2
    assert result.output == f"error: {variable} directory {tmp_path / 'nonexist'}: no such directory\n"


@pytest.mark.slow  # a stormwatch process
def test_a_closed_stdout_ends_quietly() -> None:
    """`stormwatch --help | head` and `stormwatch example-site | head -1`: the reader went away; no
    "unexpected BrokenPipeError ... (a bug in stormwatch)", no traceback, on stderr."""
    import os
    import subprocess
    import sys

    for args in (["--help"], ["example-site"], ["packs", "list"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first byte: every write to stdout fails (EPIPE)
        try:
            done = subprocess.run([sys.executable, "-m", "stormwatch", *args], stdout=write, stderr=subprocess.PIPE,
                                  timeout=60, check=False)
        finally:
            os.close(write)
        assert done.stderr == b"", (args, done.stderr)
        assert done.returncode == 1, args


@pytest.mark.influxdb
def test_evaluate_refuses_a_database_the_server_does_not_have(files: dict[str, Path], influx_server) -> None:  # type: ignore[no-untyped-def]
    """As the web desk does: no "0 readings" from a database that is not there (and none created)."""
    from stormwatch.stores.influx1 import Influx1Store

    url = f"influx1://127.0.0.1:{influx_server.port}/nodb_bad_input"
    result = CliRunner().invoke(app, ["evaluate", "--site", str(files["site"]), "--from", "2026-06-01",
                                      "--until", "2026-06-02", "--store", url], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert result.output == (f"error: --store {url}: the server has no database 'nodb_bad_input' (the database "
                             "ingest writes; check the name)\n")
    probe = Influx1Store(f"http://127.0.0.1:{influx_server.port}", "nodb_bad_input")
    try:
        assert not probe.database_exists()
    finally:
        probe.close()


@pytest.mark.slow  # runs the demo
def test_a_garbage_row_in_a_demo_rain_file_is_told_once(tmp_path: Path) -> None:
    """The demo reads its rain file three times (the command, the pipeline, the simulated gauge);
    the skipped row is told once -- in the run's header on stdout, not also as WARNINGs on stderr."""
    import subprocess
    import sys

    path = tmp_path / "rain.csv"
    path.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\nthis is not a row\n2024-06-01T00:02:00Z,0.4\n",
                    encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "stormwatch", "demo", "--rain-file", str(path), "--tip-mm", "0.2",
                           "--speed", "10000", "--state-dir", str(tmp_path / "demo")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    skip = f"{path}:3: 1 field, need at least 2"
    assert done.stdout.count(skip) == 1 and f"rain file: 1 row skipped; first: {skip}" in done.stdout
    assert skip not in done.stderr


@pytest.mark.slow  # a stormwatch process
def test_users_add_without_a_terminal_says_password_stdin_in_one_line(files: dict[str, Path]) -> None:
    """No terminal to hide a password on (a script, a pipe, a container without -t; here: no
    controlling terminal and standard input from /dev/null): one line naming --password-stdin,
    exit 2 -- not getpass's GetPassWarning, "Warning: Password input may be echoed." and "Aborted."."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "stormwatch", "users", "add", "ina", "--role", "smo", "--state-dir",
                           str(files["state"])], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False, start_new_session=True)  # a new session: no /dev/tty
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith("error: no terminal to ask the password on: give it on standard input with "
                                  "--password-stdin") and done.stderr.count("\n") == 1, done.stderr
    assert "ina" not in subprocess.run([sys.executable, "-m", "stormwatch", "users", "list", "--state-dir",
                                        str(files["state"])], capture_output=True, text=True, timeout=60,
                                       env={**os.environ}, check=False).stdout


def test_a_state_directory_is_started_one_level_deep_and_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                  ) -> None:
    """The one rule for --state-dir (stormwatch.runtime.cliutil.use_state_dir, README): a command that starts
    a state makes the directory in a parent that exists and says so; one that reads a state never
    creates it; a missing parent is refused by both."""
    from stormwatch.errors import InputError
    from stormwatch.runtime.cliutil import use_state_dir

    made = use_state_dir(tmp_path / "alerts", create=True)
    assert made.is_dir() and capsys.readouterr().err == f"--state-dir {made}: created (a new state directory)\n"
    assert use_state_dir(made, create=True) == made and capsys.readouterr().err == ""  # there already: silent
    with pytest.raises(InputError, match=r"directory .*/var does not exist"):
        use_state_dir(tmp_path / "var" / "alerts", create=True)
    with pytest.raises(InputError, match="no such directory"):
        use_state_dir(tmp_path / "alretrs", create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alerts"]


def test_a_timeline_says_whose_gap_and_why(tmp_path: Path) -> None:
    """data_gap lines name the rain gauge and the reason (its message, without the note every gap
    carries), as the alert service logs them -- not "no data since ..." alone."""
    rain = tmp_path / "polls.csv"  # 1-minute polls, then 10 minutes without a row
    rows = [f"2024-06-01T00:{m:02d}:00Z,0\n" for m in (*range(0, 10), *range(20, 30))]
    rain.write_text("time,rain\n" + "".join(rows), encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(rain), "--tip-mm", "0.2", "--silence", "gap"],
                                catch_exceptions=False)
    gaps = [line for line in result.output.splitlines() if " data_gap " in line]
    assert gaps and all("rain gauge rain " in line for line in gaps), result.output
    assert any("silent for more than" in line for line in gaps) and any("reported again" in line for line in gaps)
    assert not any("unknown, not zero" in line for line in gaps)
