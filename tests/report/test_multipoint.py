"""A report of a site with two discharge points (issue 16) shows each point's turbidity apart: its
contrasts, its UNKNOWN windows and its probes' completeness, the shared background probe serving both.

The store holds, every minute from 9 to 12 June 2026 (New York), the gauge's 0 tips, the shared
background probe ``turb-up`` at 10.0 NTU, outfall-1's ``turb-down-1`` at 10.0 NTU except 30.0 NTU
from 10:00 to 11:00 EDT on 10 June, and outfall-2's ``turb-down-2`` at 11.0 NTU except nothing from
12:00 to 14:00 EDT that day. Ch. 133 R2 (alerts/packs/ch133.yaml; rules.md R2): 5-minute window
medians, the Washington criterion (background <= 50 NTU: allowed = background + 5 NTU), 15 min
sustained and 15 min to clear. By hand, for the period 10 June (local):

* outfall-1: the windows 10:00 .. 11:00 have a downstream median of 30.0 NTU > 15.0 NTU allowed; the
  third (10:10 .. 10:15) sustains the run: a contrast from 10:00, detected 10:15, upstream 10.0,
  downstream 30.0, allowed 15.0, peak 30.0 NTU; three compliant windows from 11:00 clear it at 11:15
  (1 h 15 min); its occurrence is ``turbidity:outfall-1:2026-06-10T14:00:00Z``;
* outfall-2: 11.0 <= 15.0 always: no contrast; its 24 windows 12:00 .. 14:00 have no downstream
  reading: UNKNOWN for 2 h 00 min on turb-down-2, of outfall-2 alone;
* completeness: 1,440 polls expected in the day; turb-down-2 got 1,440 - 120 = 1,320 (91.7 %), one
  gap from its last reading (11:59) to the next (14:00), 2 h 01 min; the others 1,440 (100.0 %).
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stormwatch.alerts.rules import occurrence, parse_occurrence
from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.stores.sqlite import SqliteStore
from tests.report_support import need_poppler, pdf_words, run_cli

NY = ZoneInfo("America/New_York")
SITE = """
site: {id: two-points, name: Two Points, jurisdiction: ch133, timezone: America/New_York}
gateway_id: gw-1
devices:
  - {id: rain-1, profile: tipping_bucket_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
  - {id: turb-up, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1, unit_id: 2}}
  - {id: turb-down-1, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1, unit_id: 3}}
  - {id: turb-down-2, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1, unit_id: 4}}
rain_gauge: rain-1
discharge_points:
  - {id: outfall-1, name: East outfall, upstream: turb-up, downstream: turb-down-1}
  - {id: outfall-2, name: West outfall, upstream: turb-up, downstream: turb-down-2}
"""
DAY = datetime(2026, 6, 10, tzinfo=NY)


def _value(device: str, t: datetime) -> float | None:
    if device == "turb-down-1":
        return 30.0 if DAY + timedelta(hours=10) <= t < DAY + timedelta(hours=11) else 10.0
    if device == "turb-down-2":
        return None if DAY + timedelta(hours=12) <= t < DAY + timedelta(hours=14) else 11.0
    return 10.0


def _store(path: Path) -> None:
    readings, seq = [], 0
    t = DAY - timedelta(days=1)
    while t < DAY + timedelta(days=2):
        seq += 1
        readings.append(Reading(site="two-points", device="rain-1", quantity="rain_tips", value=0, unit=TIP_UNIT,
                                time=t, gateway="gw-1", boot="b1", seq=seq))
        for device in ("turb-up", "turb-down-1", "turb-down-2"):
            value = _value(device, t)
            if value is not None:
                seq += 1
                readings.append(Reading(site="two-points", device=device, quantity="turbidity", value=value,
                                        unit="NTU", time=t, gateway="gw-1", boot="b1", seq=seq))
        t += timedelta(minutes=1)
    with SqliteStore(path) as store:
        store.write_readings(readings)


def test_occurrence_keys_read_back_whatever_the_id() -> None:
    t = datetime(2026, 6, 10, 14, 0, tzinfo=ZoneInfo("UTC"))
    assert occurrence("turbidity", t) == "turbidity:2026-06-10T14:00:00Z"
    assert occurrence("turbidity", t, "outfall-2") == "turbidity:outfall-2:2026-06-10T14:00:00Z"
    for key in (None, "outfall-2", "Pond 3, Inlet=N:2"):  # the id grammar allows ':'
        parsed = parse_occurrence(occurrence("basin", t + timedelta(microseconds=5), key))
        assert parsed == ("basin", key, t + timedelta(microseconds=5))
    with pytest.raises(ValueError, match="has no time"):
        parse_occurrence("R6:outfall-1:week:2026-06-08")  # a sampling reminder is keyed by a day


def test_each_discharge_point_reported_apart(tmp_path: Path) -> None:
    need_poppler()
    site = tmp_path / "site.yaml"
    site.write_text(SITE, encoding="utf-8")
    _store(tmp_path / "store.db")
    common = ["report", "--site", str(site), "--store", f"sqlite:///{tmp_path}/store.db", "--no-work-orders",
              "--from", "2026-06-10", "--until", "2026-06-11"]
    run_cli(*common, "-o", str(tmp_path / "r.csv"))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text(encoding="utf-8"))))

    (contrast,) = [r for r in rows if r["section"] == "turbidity"]
    assert (contrast["point"], contrast["item"], contrast["start"], contrast["end"], contrast["duration"]) == (
        "outfall-1", "turbidity:outfall-1:2026-06-10T14:00:00Z", "2026-06-10T10:00:00-04:00",
        "2026-06-10T11:15:00-04:00", "1 h 15 min")
    assert (contrast["upstream"], contrast["downstream"], contrast["allowed"], contrast["peak_downstream"]) == (
        "10.0", "30.0", "15.0", "30.0")
    assert contrast["note"] == "detected 2026-06-10T10:15:00-04:00"

    unknown = [(r["item"], r["id"], r["start"], r["end"], r["duration"], r["point"])
               for r in rows if r["section"] == "unknown"]
    assert unknown == [("turbidity contrast", "turb-down-2", "2026-06-10T12:00:00-04:00",
                        "2026-06-10T14:00:00-04:00", "2 h 00 min", "outfall-2")]

    sensors = {r["id"]: (r["item"], r["expected"], r["received"], r["percent"])
               for r in rows if r["section"] == "sensor"}
    assert sensors["turb-up"] == ("turbidity, upstream background of outfall-1, outfall-2 (R2)", "1440", "1440",
                                  "100.0")
    assert sensors["turb-down-1"] == ("turbidity, downstream compliance of outfall-1 (R2)", "1440", "1440", "100.0")
    assert sensors["turb-down-2"] == ("turbidity, downstream compliance of outfall-2 (R2)", "1440", "1320", "91.7")
    gaps = [(r["id"], r["start"], r["end"], r["duration"]) for r in rows if r["section"] == "sensor_gap"]
    assert gaps == [("turb-down-2", "2026-06-10T11:59:00-04:00", "2026-06-10T14:00:00-04:00", "2 h 01 min")]

    run_cli(*common, "-o", str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    one = html.index("<h3>Discharge point East outfall (outfall-1)</h3>")
    two = html.index("<h3>Discharge point West outfall (outfall-2)</h3>")
    assert one < two
    assert "30.0 NTU" in html[one:two] and "no turbidity contrast at outfall-2 in the period" in html[two:]
    assert "Turbidity at East outfall (outfall-1): downstream against background" in html
    assert "Turbidity at West outfall (outfall-2): downstream against background" in html
    assert "<td>turbidity contrast at outfall-2</td>" in html

    run_cli(*common, "-o", str(tmp_path / "r.pdf"))
    text = pdf_words(tmp_path / "r.pdf")
    assert "Discharge point East outfall (outfall-1)" in text and "Discharge point West outfall (outfall-2)" in text
    assert "no turbidity contrast at outfall-2 in the period" in text
