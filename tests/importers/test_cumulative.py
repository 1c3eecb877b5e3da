"""Cumulative counters in files go through the gateway's own counter function (issue 11 item 2).

* rtl_433 JSON Lines (tests/data/rtl433_acurite5n1_json_2023-02-11.jsonl, SOURCES.md): every message
  repeated up to 3 times (sequence_num 0/1/2) -> repeats dropped; ``rain_in`` is a running total
  that never changes in the capture -> zero new rain. Expected counts are derived here from the file
  with the json module.
* ``--tips-per-row cumulative-count --counter-bits 16``: a running tip count with a wrap and a reset,
  expected tips by hand; the reset is a data gap in evaluate and replay, never rain.
* The same counter samples give the same storms fed live (count_tips per poll -> the engine),
  imported (-> store -> evaluate) and replayed (`stormwatch replay`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner, Result

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.app.cli import app
from stormwatch.config import load_site
from stormwatch.contract import Reading
from stormwatch.gateway.counter import CounterState, count_tips
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.urls import open_store
from tests.conftest import data_file

RTL433 = "rtl433_acurite5n1_json_2023-02-11.jsonl"
RADIO = {"sequence_num", "mic", "mod", "freq", "freq1", "freq2", "rssi", "snr", "noise"}


def invoke(command: str, *args: str) -> Result:
    return CliRunner().invoke(app, [command, *args], catch_exceptions=False)


def import_json(*args: str) -> dict[str, object]:
    result = invoke("import", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def rtl433_by_hand(path: Path) -> tuple[int, int, int, dict[str, float]]:
    """(lines, rain lines, distinct rain messages, time -> rain_in) straight from the file."""
    lines = rain_lines = 0
    distinct: set[str] = set()
    totals: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        lines += 1
        obj = json.loads(line)
        if "rain_in" not in obj:
            continue
        rain_lines += 1
        distinct.add(json.dumps({k: v for k, v in obj.items() if k not in RADIO}, sort_keys=True))
        assert totals.setdefault(obj["time"], obj["rain_in"]) == obj["rain_in"]
    return lines, rain_lines, len(distinct), totals


def test_rtl433_json_lines_import_drops_repeats_and_finds_no_rain(site: Path, tmp_path: Path) -> None:
    path = data_file(RTL433)
    lines, rain_lines, distinct, totals = rtl433_by_hand(path)
    assert set(totals.values()) == {109.66}  # SOURCES.md: constant -> the correct rain is 0.00 in
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = (str(path), "--site", str(site), "--device", "rain-in", "--store", url, "--tips-in", "0.01", "--tz", "UTC")
    summary = import_json(*args)
    assert summary["format"] == "rtl433"
    assert summary["rows_read"] == distinct
    assert summary["duplicate_rows"] == rain_lines - distinct
    assert summary["ignored_lines"] == lines - rain_lines
    assert summary["readings_made"] == summary["readings_stored"] == len(totals)
    assert summary["tips"] == 0 and summary["rejected_rows"] == {}
    assert summary["flagged"] == {"counter_baseline": 1}
    store = open_store(url)
    try:
        stored = store.query_readings("import-test", device="rain-in", quantity="rain_tips")
    finally:
        store.close()
    first = min(totals)
    assert [r.time for r in stored] == [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in sorted(totals)]
    assert all(r.value == 0 for r in stored)
    assert stored[0].flags == ("counter_baseline",) and stored[0].time.isoformat().startswith(first.replace(" ", "T"))
    assert all(r.flags == () for r in stored[1:])
    assert {r.raw for r in stored} == {"109.66"}
    again = import_json(*args)
    assert again["readings_stored"] == 0 and again["already_stored"] == len(totals)


def test_rtl433_replay_says_no_rain(tmp_path: Path) -> None:
    path = data_file(RTL433)
    _, _, distinct, _ = rtl433_by_hand(path)
    result = invoke("replay", str(path), "--tips-in", "0.01", "--silence", "gap")
    assert result.exit_code == 0, result.output
    assert f"{distinct} rows, 0 tips = 0.00 in, 0 rows rejected" in result.output
    assert "storm_inspection_due" not in result.output


def test_rtl433_several_sensors_need_a_select(site: Path, tmp_path: Path) -> None:
    # A neighbour's station (the same model, id 77) heard in the same capture.
    src = data_file(RTL433).read_text(encoding="utf-8").splitlines()
    mixed = src + [line.replace('"id" : 3844', '"id" : 77').replace("109.660", "3.000") for line in src[:60]]
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(mixed) + "\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    base = (str(path), "--site", str(site), "--device", "rain-in", "--store", url, "--tips-in", "0.01")
    refused = invoke("import", *base)
    assert refused.exit_code == 2, refused.output
    assert "several sensors" in refused.output and "id=3844" in refused.output and "id=77" in refused.output
    chosen = import_json(*base, "--select", "model=Acurite-5n1", "--select", "id=3844")
    _, _, _, totals = rtl433_by_hand(data_file(RTL433))
    assert chosen["readings_made"] == len(totals) and chosen["tips"] == 0
    none = invoke("import", *base, "--select", "id=1")
    assert none.exit_code == 2 and "no rtl_433 message with id=1 carries" in none.output


# -- a running tip count with a wrap and a reset ------------------------------------------------------

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
#: (minutes after T0, counter value) of a 16-bit pulse counter read once a minute: 10 tips, a wrap
#: (65530 -> 4: 10 tips), a dry minute, a reset to 0 (the module rebooted) confirmed by 2 tips.
SAMPLES = [(0, 65520), (1, 65530), (2, 4), (3, 4), (4, 0), (5, 2), (6, 2)]
#: By hand: baseline 0; +10; +10 through the wrap; 0; suspect 0; reset: 2 since the restart sample; 0.
EXPECTED_TIPS = [0, 10, 10, 0, 0, 2, 0]
EXPECTED_FLAGS = [("counter_baseline",), (), ("counter_wrap",), (), ("counter_suspect",), ("counter_reset",), ()]


def counter_csv(path: Path, samples: list[tuple[int, int]]) -> Path:
    rows = ["time,count"] + [f"{(T0 + timedelta(minutes=m)).isoformat()},{v}" for m, v in samples]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_cumulative_count_with_wrap_and_reset(site: Path, tmp_path: Path) -> None:
    path = counter_csv(tmp_path / "counter.csv", SAMPLES)
    url = f"sqlite:///{tmp_path / 's.db'}"
    summary = import_json(str(path), "--site", str(site), "--device", "rain-in", "--store", url, "--tips-in", "0.01",
                          "--tips-per-row", "cumulative-count", "--counter-bits", "16")
    assert summary["tips"] == sum(EXPECTED_TIPS) == 22
    store = open_store(url)
    try:
        stored = store.query_readings("import-test", device="rain-in", quantity="rain_tips")
    finally:
        store.close()
    assert [r.value for r in stored] == EXPECTED_TIPS
    assert [r.flags for r in stored] == EXPECTED_FLAGS
    # Without --counter-bits the total never wraps: 65530 -> 4 is a drop, confirmed as a reset by the
    # next total (4, unchanged): the tips of that minute are unknown (a gap), never 65,000 tips.
    plain = import_json(str(path), "--site", str(site), "--device", "rain-in", "--store",
                        f"sqlite:///{tmp_path / 'p.db'}", "--tips-in", "0.01", "--tips-per-row", "cumulative-count")
    assert plain["tips"] == 10 + 0 + 2
    # A total beyond the counter width is a rejected row.
    wide = counter_csv(tmp_path / "wide.csv", [(0, 1), (1, 70000), (2, 3)])
    over = import_json(str(wide), "--site", str(site), "--device", "rain-in", "--store",
                       f"sqlite:///{tmp_path / 'w.db'}", "--tips-in", "0.01", "--tips-per-row", "cumulative-count",
                       "--counter-bits", "16")
    assert over["rejected_rows"] == {"beyond_counter_width": 1} and over["tips"] == 2


def test_counter_bits_needs_a_running_total(site: Path, tmp_path: Path) -> None:
    path = counter_csv(tmp_path / "counter.csv", SAMPLES)
    result = invoke("import", str(path), "--site", str(site), "--device", "rain-in", "--store",
                    f"sqlite:///{tmp_path / 's.db'}", "--tips-in", "0.01", "--tips-per-row", "count",
                    "--counter-bits", "16")
    assert result.exit_code == 2 and "--counter-bits applies to running totals" in result.output


def test_cumulative_reset_is_a_gap_in_replay(tmp_path: Path) -> None:
    path = counter_csv(tmp_path / "counter.csv", SAMPLES)
    result = invoke("replay", str(path), "--tips-in", "0.01", "--tips-per-row", "cumulative-count",
                    "--counter-bits", "16", "--silence", "gap", "--json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    gaps = [(e["gap_start"], e.get("gap_end")) for e in events if e["kind"] == "data_gap"]
    # the reset at minute 5 makes minute 3 (the last trusted total) to minute 5 unknown
    assert ("2024-05-01T12:03:00Z", "2024-05-01T12:05:00Z") in gaps


def test_beyond_envelope_rows_are_rejected(site: Path, tmp_path: Path) -> None:
    # Count per row: 400 tips (101.6 mm) one minute after the previous row is beyond the envelope
    # (1.5 x 422 x (1/60)^0.475 = 90.5 mm = 356 tips); 356 tips is extreme but possible.
    assert int(1.5 * 422 * (1 / 60) ** 0.475 // 0.254) == 356
    path = tmp_path / "counts.csv"
    path.write_text("time,tips\n" + "\n".join(f"{(T0 + timedelta(minutes=m)).isoformat()},{n}"
                                              for m, n in [(0, 0), (1, 356), (2, 0), (3, 400), (4, 1)]) + "\n")
    summary = import_json(str(path), "--site", str(site), "--device", "rain-in", "--store",
                          f"sqlite:///{tmp_path / 's.db'}", "--tips-in", "0.01", "--tips-per-row", "count")
    assert summary["rejected_rows"] == {"beyond_envelope": 1}
    assert summary["tips"] == 357
    assert any(":5: 400 tips" in r for r in summary["rejects"])  # line 5 of the file


def test_same_storms_live_imported_and_replayed(tmp_path: Path) -> None:
    # One counter, read every minute: 60 tips over an hour (0.60 in), a 7-h dry spell, then 20 tips.
    samples: list[tuple[int, int]] = []
    value = 65000
    for m in range(0, 10 * 60):
        if 10 <= m < 70 or 500 <= m < 520:
            value = (value + 1) % 65536
        samples.append((m, value))
    path = counter_csv(tmp_path / "counter.csv", samples)
    site_file = tmp_path / "site.yaml"
    site_file.write_text(
        "site: {id: same, jurisdiction: ch133, timezone: UTC}\ngateway_id: gw\n"
        "devices:\n  - {id: rain, profile: tipping_bucket_modbus_counter, poll_interval_s: 60,"
        " transport: {kind: modbus-tcp, host: 127.0.0.1}}\nrain_gauge: rain\n", encoding="utf-8")
    profiles = ProfileLibrary()
    cfg = load_site(site_file, profiles)
    gauge = profiles.get("tipping_bucket_modbus_counter").counter
    assert gauge is not None

    def storms(events: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return [(e["kind"], e.get("storm_start"), e.get("storm_end"), e.get("tips"), e.get("due_at"))
                for e in events if e["kind"] in ("storm_qualified", "storm_inspection_due")]

    # live: the gateway's counter per poll, readings straight into the engine
    engine = Engine(cfg, profiles, load_pack("ch133", cfg.rules), None, lateness_s=0)
    state: CounterState | None = None
    live = []
    for seq, (m, v) in enumerate(samples):
        at = T0 + timedelta(minutes=m)
        result = count_tips(state, v, at, gauge, 60)
        state = result.state
        live += engine.feed(Reading(site="same", device="rain", quantity="rain_tips", value=result.tips, unit="{tip}",
                                    time=at, gateway="gw", boot="b", seq=seq, raw=v, flags=result.flags))
    live += engine.flush()
    live_storms = storms([e.to_wire() for e in live])
    assert [s[0] for s in live_storms] == ["storm_qualified", "storm_inspection_due"]
    assert live_storms[1][3] == 60

    # imported: file -> store -> evaluate
    url = f"sqlite:///{tmp_path / 's.db'}"
    import_json(str(path), "--site", str(site_file), "--device", "rain", "--store", url, "--tips-in", "0.01",
                "--tips-per-row", "cumulative-count", "--counter-bits", "16")
    evaluated = invoke("evaluate", "--site", str(site_file), "--store", url, "--from", "2024-05-01T11:00:00Z",
                       "--to", "2024-05-01T22:00:00Z", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert storms(json.loads(evaluated.stdout)["events"]) == live_storms

    # replayed
    replayed = invoke("replay", str(path), "--tips-in", "0.01", "--tips-per-row", "cumulative-count",
                      "--counter-bits", "16", "--silence", "gap", "--all-events", "--json")
    assert replayed.exit_code == 0, replayed.output
    assert storms([json.loads(x) for x in replayed.stdout.splitlines() if x.startswith("{")]) == live_storms
