"""`stormwatch archive` / `import-archive`: a site's records round-trip losslessly through a bundle,
in SQLite and in a real InfluxDB 1.x; a changed bundle is refused before anything is written.

Records kept five years: Spencerport §276-26C. The round trip is checked against what the source
store itself returns (readings with their late flag, events, every stored column of the work orders
with history and photos), and a second import adds nothing.
"""

from __future__ import annotations

import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app import servers
from stormwatch.app.cli import app
from stormwatch.clock import WallClock
from stormwatch.contract import TIP_UNIT, Event, Reading
from stormwatch.stores.base import ReadingStore
from stormwatch.stores.urls import open_store
from tests.report_support import run_cli

SITE = """
site: {id: arch-site, name: Archive Site, jurisdiction: ch196, timezone: America/New_York}
gateway_id: gw-1
devices:
  - {id: rain-1, profile: tipping_bucket_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
  - {id: turb-up, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1}}
rain_gauge: rain-1
"""
T0 = datetime(2026, 6, 1, 4, tzinfo=UTC)
FROM, UNTIL = "2026-06-01", "2026-06-04"


def _readings() -> tuple[list[Reading], list[Reading]]:
    live, late = [], []
    for i in range(3 * 1440 // 10):
        t = T0 + timedelta(minutes=10 * i, microseconds=7 if i % 7 == 0 else 0)
        live.append(Reading(site="arch-site", device="rain-1", quantity="rain_tips", value=i % 3, unit=TIP_UNIT,
                            time=t, gateway="gw-1", boot="b1", seq=2 * i, raw=[i, 65535] if i % 2 else i,
                            flags=("counter_catch_up",) if i % 50 == 1 else ()))
        live.append(Reading(site="arch-site", device="turb-up", quantity="turbidity", value=8.0 + i / 1000,
                            unit="NTU", time=t, gateway="gw-1", boot="b1", seq=2 * i + 1,
                            raw="12.345" if i % 5 else None))
    late.append(Reading(site="arch-site", device="turb-up", quantity="turbidity", value=13, unit="NTU",
                        time=T0 + timedelta(hours=5, seconds=30), gateway="gw-1", boot="b0", seq=9))
    return live, late


def _events() -> list[Event]:
    start, last = T0 + timedelta(hours=1), T0 + timedelta(hours=9)
    return [
        Event(kind="storm_inspection_due", site="arch-site", event_time=last + timedelta(hours=6), rule="R1",
              citation="Ch. 196 §196-9B", occurrence=f"storm:{start.isoformat()}", storm_start=start,
              storm_end=last, tips=57, depth_in=0.57, due_at=last + timedelta(hours=24), message="storm ended",
              evidence=[{"time": last.isoformat(), "tips": 1}]),
        Event(kind="data_gap", site="arch-site", event_time=T0 + timedelta(days=2), rule="R1",
              citation="Ch. 196 §196-9B", occurrence="gap:rain-1:x", gap_start=T0 + timedelta(days=2),
              gap_end=T0 + timedelta(days=2, hours=1), message="gap"),
    ]


def _fill(store: ReadingStore, state: Path) -> None:
    live, late = _readings()
    store.write_readings(live)
    store.write_readings(late, late=True)
    events = _events()
    store.write_events(events)
    book = WorkOrders(state / "alerts.db", WallClock())
    from stormwatch.alerts.packs import load_pack

    report_rule = load_pack("ch196").report()
    assert report_rule is not None
    order, _ = book.open_for(events[0], report=report_rule[1], timezone="America/New_York")
    book.acknowledge(order.id, "Ann SMO", "on my way")
    book.complete(order.id, "Pat Inspector", "fence repaired", at=events[0].event_time + timedelta(hours=3))
    book.attach_photo(order.id, "Pat Inspector", "fence.jpg", "image/jpeg", b"\xff\xd8\xff\xe0 not really a jpeg")
    book.close()


def _records(store: ReadingStore, state: Path) -> dict[str, object]:
    start, end = T0 - timedelta(days=1), T0 + timedelta(days=4)
    book = WorkOrders(state / "alerts.db", WallClock())
    orders = book.export_records("arch-site", start, end)
    book.close()
    return {"live": store.query_readings("arch-site", start, end, late=False),
            "late": store.query_readings("arch-site", start, end, late=True),
            "events": store.query_events("arch-site", start, end),  # type: ignore[attr-defined]
            "orders": orders}


def _round_trip(tmp_path: Path, source_url: str, target_url: str) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE, encoding="utf-8")
    src_state, dst_state = tmp_path / "src", tmp_path / "dst"
    src_state.mkdir()
    source = open_store(source_url)
    _fill(source, src_state)
    bundle = tmp_path / "arch-site.zip"
    out = run_cli("archive", "--site", str(site), "--from", FROM, "--until", UNTIL, "-o", str(bundle),
                  "--store", source_url, "--state-dir", str(src_state))
    # 3 days of 10-minute polls of two sensors (2 x 432) and the late reading; the storm's inspection and
    # the Ch. 196 report order its completion opened
    assert "865 readings, 2 events, 2 work orders" in out
    before = _records(source, src_state)
    source.close()
    assert len(before["live"]) == 864 and len(before["late"]) == 1  # type: ignore[arg-type]
    first = run_cli("import-archive", str(bundle), "--store", target_url, "--state-dir", str(dst_state))
    assert "865 new readings (of 865), 2 new events (of 2), 2 work orders added (of 2)" in first
    target = open_store(target_url)
    after = _records(target, dst_state)
    assert after == before
    # the second load adds nothing, and says so for each kind of record
    again = run_cli("import-archive", str(bundle), "--store", target_url, "--state-dir", str(dst_state))
    assert "0 new readings (of 865), 0 new events (of 2), 0 work orders added (of 2)" in again
    assert _records(target, dst_state) == before
    target.close()
    with zipfile.ZipFile(bundle) as zf:
        assert sorted(zf.namelist()) == ["SHA256SUMS", "enforcement-register.csv", "enforcement.jsonl", "events.jsonl",
                                         "manifest.json", "readings.csv", "site.yaml", "workorders.jsonl"]


def test_sqlite_round_trip_is_lossless(tmp_path: Path) -> None:
    _round_trip(tmp_path, f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db")


def test_influxdb1_round_trip_is_lossless(tmp_path: Path, influx_server: servers.InfluxDB1) -> None:
    name = uuid.uuid4().hex[:8]
    _round_trip(tmp_path, influx_server.store_url(f"arch_a_{name}"), influx_server.store_url(f"arch_b_{name}"))


def test_a_changed_bundle_is_refused_before_anything_is_loaded(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE, encoding="utf-8")
    (tmp_path / "src").mkdir()
    url = f"sqlite:///{tmp_path}/a.db"
    store = open_store(url)
    _fill(store, tmp_path / "src")
    store.close()
    bundle = tmp_path / "b.zip"
    run_cli("archive", "--site", str(site), "--from", FROM, "--until", UNTIL, "-o", str(bundle), "--store", url,
            "--state-dir", str(tmp_path / "src"))
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(changed, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "readings.csv":
                data = data.replace(b",8.0,", b",80.0,", 1)
            dst.writestr(item, data)
    result = CliRunner().invoke(app, ["import-archive", str(changed), "--store", f"sqlite:///{tmp_path}/c.db",
                                      "--state-dir", str(tmp_path / "c")])
    assert result.exit_code == 2
    assert "readings.csv: checksum differs from SHA256SUMS" in result.output
    target = open_store(f"sqlite:///{tmp_path}/c.db")
    assert target.query_readings("arch-site") == []
    target.close()
