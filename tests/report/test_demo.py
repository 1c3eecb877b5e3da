"""`stormwatch report` of the demo scenario: the default storm, the turbidity plume and the basin
cleanout appear in the PDF, the HTML and the CSV with values this test derives itself.

Expected values come from the stored readings and by hand, independently of the report code:
the storm is 1.2 in at 0.01 in per tip = 120 tips (hydrology.md; tests/e2e/test_pipeline.py), its last tip
the last stored rain reading with tips, due exactly 24 h after it (Ch. 133 §133-7A(2)); the
turbidity contrast from a Washington-rule check of the stored series written in tests/e2e/test_pipeline.py;
the basin cleanout when the stored level says sediment reached the depth that holds half the
design volume (bisection on the prismoidal formula, tests/e2e/test_pipeline.py). The storm inspection is
completed two hours after its deadline (late) and the cleanout on time, by named people.
"""

from __future__ import annotations

import csv
import io
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from PIL import Image

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.pipeline import Pipeline
from stormwatch.clock import WallClock
from stormwatch.config import load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.stores.urls import open_store
from tests.demo_support import EXAMPLE_SITE, half_volume_depth_ft, washington_violation_start
from tests.report_support import blank_pages, need_poppler, pdf_words, run_cli

pytestmark = pytest.mark.slow  # runs the demo scenario, then the report

NY = ZoneInfo("America/New_York")


def local(t: datetime) -> str:
    return t.astimezone(NY).strftime("%a %d %b %Y %H:%M %Z")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    work = tmp_path_factory.mktemp("demo")
    profiles = ProfileLibrary()
    cfg = load_site(EXAMPLE_SITE, profiles)
    scenario = load_scenario("default")
    result = Pipeline(cfg, profiles, scenario, work).run()  # lockstep: no poll slot skipped
    assert result.missed_slots == 0
    # 32 h of the example site's polls: 1,920 one-minute slots of the rain gauge (1 reading) and the two
    # turbidity probes (turbidity and temperature), 384 five-minute slots of the basin level sensor --
    # less the readings of polls that failed (a device error, logged: a gap, never a reading made up)
    per_poll = {"rain-1": 1, "turb-up": 2, "turb-down": 2, "basin-level": 1}
    lost = sum(per_poll[device] * n for device, n in result.failed_polls.items())
    assert result.readings_stored == result.readings_made == 1920 * (1 + 2 + 2) + 384 - lost
    store = open_store(f"sqlite:///{work / 'stormwatch.db'}")
    readings = store.query_readings(cfg.site.id)
    store.close()
    rain = [r for r in readings if r.quantity == "rain_tips" and r.value]
    last_tip = max(r.time for r in rain)
    up = {r.time: float(r.value) for r in readings if r.device == "turb-up"}
    down = {r.time: float(r.value) for r in readings if r.device == "turb-down"}
    d_half = half_volume_depth_ft()
    crossed = next(r.time for r in readings if r.device == "basin-level" and 8.0 - r.value / 304.8 >= d_half)
    book = WorkOrders(work / "alerts.db", WallClock())
    orders = {o.kind: o for o in book.list()}
    storm_order = orders["storm_inspection"]
    book.complete(storm_order.id, "Pat Inspector", "silt fence at outfall 2 repaired",
                  at=last_tip + timedelta(hours=26))
    png = io.BytesIO()
    Image.new("RGB", (640, 480), (120, 90, 40)).save(png, "PNG")
    book.attach_photo(storm_order.id, "Pat Inspector", "outfall-2.png", "image/png", png.getvalue())
    cleanout = orders["basin_cleanout"]
    assert cleanout.due_at is not None
    book.complete(cleanout.id, "Sam Operator", "basin dredged to design grade", at=cleanout.due_at - timedelta(hours=1))
    book.close()
    return {"work": work, "tips": sum(r.value for r in rain), "last_tip": last_tip,
            "violation_at": washington_violation_start(up, down), "crossed": crossed,
            "storm_order": storm_order.id, "cleanout_order": cleanout.id, "start": scenario.start,
            "end": scenario.end}


def _args(demo: dict[str, object], out: Path, *more: str) -> list[str]:
    work = demo["work"]
    start = demo["start"]
    assert isinstance(start, datetime)
    return ["report", "--site", str(EXAMPLE_SITE), "--store", f"sqlite:///{work}/stormwatch.db",  # type: ignore[str-bytes-safe]
            "--state-dir", str(work), "--from", "2026-06-01", "--until", "2026-06-03", "-o", str(out), *more]


@pytest.mark.timeout(600)
def test_demo_report_pdf_lists_the_storm_the_plume_and_the_cleanout(demo: dict[str, object], tmp_path: Path) -> None:
    need_poppler()
    assert demo["tips"] == 120  # 1.2 in / 0.01 in per tip
    last_tip = demo["last_tip"]
    assert isinstance(last_tip, datetime)
    due = last_tip + timedelta(hours=24)
    pdf = tmp_path / "june.pdf"
    run_cli(*_args(demo, pdf))
    text = pdf_words(pdf)
    assert "120 tips = 1.20 in" in text
    assert local(last_tip) in text and local(due) in text
    assert "LATE by 2 h 00 min" in text and "Pat Inspector" in text
    assert demo["storm_order"] in text
    violation_at = demo["violation_at"]
    assert isinstance(violation_at, datetime)
    # the contrast's row gives its date once: detected the same local day reads as its clock alone
    turbidity = text[text.index("Downstream (compliance) probe"):text.index("Sediment basin")]
    detected = [f"{(violation_at + timedelta(minutes=m)).astimezone(NY):%H:%M %Z}" for m in (-5, 0, 5)]
    assert any(d in turbidity for d in detected), (detected, turbidity)
    assert f"{violation_at.astimezone(NY):%a %d %b %Y}" in turbidity
    assert "cleanout due" in text and demo["cleanout_order"] in text and "Sam Operator" in text
    assert "on time" in text
    assert "Qualified inspector" in text and "Signature" in text
    # for people: device models by name, every rule id defined where the rules are listed, no file
    # path of the machine that wrote it
    assert "tipping_bucket_modbus_counter" not in text and "Tipping-bucket rain gauge" in text
    assert "R1w routine inspection every seven days" in text and "R1 inspection within 24 h of a storm" in text
    assert str(demo["work"]) not in text and "alerts.db" not in text
    pages = int(subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True, text=True).stdout
                .split("Pages:")[1].split()[0])
    # the print stylesheet's running footer (it had been HTML-escaped into the template, and WeasyPrint
    # dropped its quoted declarations: no page numbers, no sans-serif font)
    assert all(f"page {n} of {pages}" in text for n in range(1, pages + 1)), text[-500:]
    assert "photos: 1. outfall-2.png" in text  # the web desk's photo, as a thumbnail
    images = subprocess.run(["pdfimages", "-list", str(pdf)], check=True, capture_output=True, text=True).stdout
    assert len(images.strip().splitlines()) == 3  # two header lines, one image
    assert blank_pages(pdf, tmp_path) == []


def test_demo_report_csv_carries_the_same_numbers(demo: dict[str, object], tmp_path: Path) -> None:
    need_poppler()
    out = tmp_path / "june.csv"
    run_cli(*_args(demo, out))
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    (storm,) = [r for r in rows if r["section"] == "storm"]
    last_tip = demo["last_tip"]
    assert isinstance(last_tip, datetime)
    assert storm["tips"] == "120" and storm["depth"] == "120 tips = 1.20 in" and storm["qualifying"] == "yes"
    assert datetime.fromisoformat(storm["end"]) == last_tip
    assert datetime.fromisoformat(storm["due"]) == last_tip + timedelta(hours=24)
    assert storm["done_by"] == "Pat Inspector" and storm["verdict"] == "LATE by 2 h 00 min"
    (turb,) = [r for r in rows if r["section"] == "turbidity"]
    violation_at = demo["violation_at"]
    assert isinstance(violation_at, datetime)
    detected = datetime.fromisoformat(turb["note"].removeprefix("detected "))
    assert abs(detected - violation_at) <= timedelta(minutes=5)
    assert float(turb["downstream"]) > float(turb["upstream"]) + 5  # Washington: background + 5 NTU
    (basin,) = [r for r in rows if r["section"] == "basin" and r["item"] == "cleanout due"]
    crossed = demo["crossed"]
    assert isinstance(crossed, datetime)
    assert crossed <= datetime.fromisoformat(basin["start"]) <= crossed + timedelta(minutes=30)
    assert float(basin["percent"]) >= 50.0 and basin["done_by"] == "Sam Operator"
    # the same numbers in the PDF
    pdf = tmp_path / "june.pdf"
    run_cli(*_args(demo, pdf))
    text = pdf_words(pdf)
    for value in (storm["depth"], f"{turb['downstream']} NTU", f"{turb['upstream']} NTU", f"{basin['percent']} %"):
        assert value in text, value
    days = {r["id"]: r for r in rows if r["section"] == "day"}
    assert set(days) == {"2026-06-01", "2026-06-02"}
    assert sum(int(d["tips"]) for d in days.values()) == 120
    # the run's own end is no data gap: the engine's clock stopped minutes after the last reading,
    # and no device's UNKNOWN stretch may end there (a device that missed readings on its grid may)
    book = WorkOrders(Path(str(demo["work"])) / "alerts.db", WallClock())
    engine = book.engine_clock()
    book.close()
    assert engine is not None and engine.stopped
    tails = [r for r in rows if r["section"] == "unknown" and datetime.fromisoformat(r["end"]) >= engine.last_now]
    assert tails == [], tails
    # every column says its unit: the basin's sediment depth in feet
    assert basin["depth"].endswith(" ft"), basin


def test_an_order_a_row_cites_is_in_the_log_book_though_opened_after_the_period(demo: dict[str, object],
                                                                               tmp_path: Path) -> None:
    # The demo's storm starts on 1 June and its last tip is on 2 June (EDT); its inspection order is
    # opened after it ends. A log book of 1 June alone reports the storm whole and cites that order:
    # the work-order section must hold it too (its history, the inspector's completion).
    out = tmp_path / "first-day.csv"
    args = _args(demo, out)
    args[args.index("--until") + 1] = "2026-06-02"
    run_cli(*args)
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    (storm,) = [r for r in rows if r["section"] == "storm"]
    assert storm["id"] == demo["storm_order"] and storm["tips"] == "120"
    assert demo["storm_order"] in {r["id"] for r in rows if r["section"] == "work_order"}


def test_storm_report_is_the_same_document_for_one_storm(demo: dict[str, object], tmp_path: Path) -> None:
    need_poppler()
    pdf = tmp_path / "storm.pdf"
    work = demo["work"]
    run_cli("report", "--site", str(EXAMPLE_SITE), "--store", f"sqlite:///{work}/stormwatch.db",
            "--state-dir", str(work), "--storm", str(demo["storm_order"]), "-o", str(pdf))
    text = pdf_words(pdf)
    assert "storm inspection report" in text and "120 tips = 1.20 in" in text
    assert "LATE by 2 h 00 min" in text
    assert blank_pages(pdf, tmp_path) == []


def test_html_report_is_one_self_contained_document(demo: dict[str, object], tmp_path: Path) -> None:
    out = tmp_path / "june.html"
    run_cli(*_args(demo, out))
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 3
    assert "120 tips = 1.20 in" in html
    assert "<link" not in html and 'src="http' not in html  # nothing fetched from elsewhere
