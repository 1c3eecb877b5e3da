"""No traceback for any user input (issue 12 item 4): every command run with bad input exits 2 with
exactly one line that names the file or option and says what is wrong -- never a traceback, never a
directory created by a typo. The cases the issue found are here (a binary site file, a CSV cell
1e308, --tip-mm 0.0000001 and 1e400, a store in a missing directory, --from after --until, an
unknown jurisdiction), with more of the same kinds for every command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import WallClock
from tests.conftest import data_file

THARANDT = ["--delimiter", ";", "--time-format", "%d.%m.%Y %H:%M"]  # the rain file's format


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
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
    state = d / "state"
    state.mkdir()
    WorkOrders(state / "alerts.db", WallClock()).close()
    return {"dir": d, "site": site, "ch999": d / "ch999.yaml", "binary": d / "binary.yaml", "latin1": d / "latin1.yaml",
            "broken": d / "broken.yaml", "big": d / "big.csv", "rain": d / "rain.csv", "bin": d / "data.bin",
            "db": d / "store.db", "state": state, "a-file": d / "a-file",
            "tharandt": data_file("tharandt_davis_tips_Sensor1.csv")}


def _cases() -> list[tuple[str, list[str], str]]:
    """``(id, args with {name} placeholders, expected text)``."""
    return [
        # a site file that is not one
        ("gateway-binary-site", ["gateway", "--check", "--site", "{binary}"], "{binary}: not a text site file: binary"),
        ("gateway-latin1-site", ["gateway", "--check", "--site", "{latin1}"],
         "not a text site file in UTF-8: byte 0xe9"),
        ("gateway-unknown-pack", ["gateway", "--check", "--site", "{ch999}"],
         "{ch999}: site.jurisdiction: no rule pack 'ch999'"),
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
        ("simulate-tip-without-file", ["simulate", "--site", "{site}", "--tip-mm", "0.2"],
         "--tip-mm describes a --rain-file"),
        ("simulate-clock-in-missing-dir", ["simulate", "--site", "{site}", "--clock-file", "{dir}/none/clock.json"],
         "--clock-file {dir}/none/clock.json: directory {dir}/none does not exist"),
        ("demo-tip-1e400", ["demo", "--rain-file", "{tharandt}", *THARANDT, "--tip-mm", "1e400"],
         "--tip-mm '1e400': a tipping bucket"),
        ("demo-from-after-until", ["demo", "--rain-file", "{tharandt}", *THARANDT, "--tip-mm", "0.2",
                                   "--from", "2018-09-24T00:00:00", "--until", "2018-09-23T00:00:00"],
         "--from 2018-09-24T00:00:00 is not before --until 2018-09-23T00:00:00"),
        ("demo-no-rain-in-window", ["demo", "--rain-file", "{tharandt}", *THARANDT, "--tip-mm", "0.2",
                                    "--from", "2030-01-01T00:00:00"], "{tharandt}: no rain from 2030-01-01"),
        ("demo-old-names", ["demo", "--rain-file", "{tharandt}", "--rain-delimiter", ";", "--rain-tip-mm", "abc"],
         "--tip-mm 'abc' is not a decimal number"),
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
         "{big}: no rain readings to replay: 1 of 1 rows rejected (too_many_tips 1)"),
        ("replay-tip-1e400", ["replay", "{rain}", "--tips", "1e400"], "--tip-mm '1e400': a tipping bucket"),
        ("replay-silence", ["replay", "{rain}", "--tip-mm", "0.2", "--silence", "maybe"], "--silence 'maybe'"),
        ("replay-unknown-pack", ["replay", "{rain}", "--tip-mm", "0.2", "--jurisdiction", "ch999"],
         "no rule pack 'ch999'"),
        ("replay-missing-file", ["replay", "{dir}/none.csv", "--tip-mm", "0.2"], "does not exist"),
        ("decode-bad-type", ["decode", "--type", "float33", "0x0000"], "float33"),
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
        # the command itself
        ("root-log-level", ["--log-level", "LOUD", "demo"], "'LOUD' is not one of DEBUG, INFO, WARNING, ERROR"),
        ("root-unknown-command", ["demonstrate"], "No such command 'demonstrate'"),
        ("root-profiles-not-a-dir", ["--profiles", "{a-file}", "profiles", "list"], "{a-file} is not a directory"),
    ]


CASES = _cases()


@pytest.mark.parametrize(("args", "expected"), [(a, e) for _, a, e in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(files: dict[str, Path], args: list[str], expected: str) -> None:
    real = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    result = CliRunner().invoke(app, real, catch_exceptions=False)
    text = result.output
    assert result.exit_code == 2, text
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    assert expected.format(**{k: str(v) for k, v in files.items()}) in lines[0], text


def test_a_typo_never_creates_directories(files: dict[str, Path]) -> None:
    assert not (files["dir"] / "nonexist").exists()
    assert not (files["dir"] / "none").exists()
    assert not (files["dir"] / "nothing").exists()


def test_a_garbage_row_in_a_demo_rain_file_is_skipped_with_its_reason_as_replay_does(tmp_path: Path) -> None:
    """`demo --rain-file` and `replay` read rain files with one reader: a bad row is skipped and
    named (file:line, reason) by both, never the end of the run."""
    from stormwatch.simulators.rain_record import load_rain_record

    path = tmp_path / "rain.csv"
    path.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\nthis is not a row\n2024-06-01T00:02:00Z,0.4\n",
                    encoding="utf-8")
    record = load_rain_record(path, tip_size="0.2", unit="mm")
    assert record.total_tips == 3 and record.skipped == (f"{path}:3: 1 fields, need at least 2",)
    replay = CliRunner().invoke(app, ["replay", str(path), "--tip-mm", "0.2", "--all-events"], catch_exceptions=False)
    assert replay.exit_code == 0, replay.output
    assert "3 rows, 3 tips = 0.6 mm (0.023 in), 1 rows rejected" in replay.output
