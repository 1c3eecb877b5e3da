"""A report for a period after the state's clock (the alert engine's as-of time) says so: the part of
the period after it "had not happened when the state was written" -- on the cover, in the CSV
(section ``not_yet``) -- and is neither counted in data completeness nor listed as a gap.

The store is tests/report/test_gaps.py's: a gauge polling every minute on 2026-06-10 (New York)
except 09:00 to 14:00 EDT. With the state's clock at 12:00 EDT, by hand, for the day 2026-06-10:
* not yet happened: 12:00 to 24:00 EDT, 12 h;
* expected polls: 00:00 to 12:00 = 720; received 00:00 .. 08:59 = 540 (75.0 %);
* the rain gap runs from the last reading, 08:59, to the state's clock: 3 h 01 min (not 5 h 01 min).
For 2026-06-20, wholly after the clock: nothing expected, nothing unknown, completeness "-".
"""

from __future__ import annotations

import csv
import io
from datetime import datetime
from pathlib import Path

from stormwatch.alerts.sitefile import load_site_file
from stormwatch.profiles import ProfileLibrary
from stormwatch.report.build import Sources, build_report
from stormwatch.report.render import to_csv, to_html
from stormwatch.stores.sqlite import SqliteStore
from tests.report_support import GAP_SITE, NY, gap_store

AS_OF = datetime(2026, 6, 10, 12, 0, tzinfo=NY)


def _report(tmp_path: Path, start: datetime, end: datetime) -> tuple[str, str]:
    site = tmp_path / "site.yaml"
    site.write_text(GAP_SITE, encoding="utf-8")
    gap_store(tmp_path / "store.db")
    profiles = ProfileLibrary()
    cfg = load_site_file(site, profiles)
    with SqliteStore(tmp_path / "store.db") as store:
        report = build_report(cfg, profiles, Sources(store, None, AS_OF, "simulated time the alert engine reached",
                                                     "no work-order state"), start, end, charts=False)
    return to_csv(report), to_html(report)


def test_the_part_after_the_clock_is_not_yet_not_a_gap(tmp_path: Path) -> None:
    text, html = _report(tmp_path, datetime(2026, 6, 10, tzinfo=NY), datetime(2026, 6, 11, tzinfo=NY))
    rows = list(csv.DictReader(io.StringIO(text)))
    (not_yet,) = [r for r in rows if r["section"] == "not_yet"]
    assert (not_yet["start"], not_yet["end"], not_yet["duration"]) == (
        "2026-06-10T12:00:00-04:00", "2026-06-11T00:00:00-04:00", "12 h 00 min")
    assert not_yet["note"].startswith("the period from Wed 10 Jun 2026 12:00 EDT is after the state's clock")
    assert "it had not happened when the state was written" in not_yet["note"]
    (sensor,) = [r for r in rows if r["section"] == "sensor"]
    assert (sensor["expected"], sensor["received"], sensor["percent"]) == ("720", "540", "75.0")
    assert [(r["start"], r["end"], r["duration"]) for r in rows if r["section"] == "unknown"] == [
        ("2026-06-10T08:59:00-04:00", "2026-06-10T12:00:00-04:00", "3 h 01 min")]
    assert "Not yet happened" in html and "had not happened when the state was written" in html


def test_a_period_wholly_after_the_clock_is_not_zero_percent_nor_unknown(tmp_path: Path) -> None:
    text, html = _report(tmp_path, datetime(2026, 6, 20, tzinfo=NY), datetime(2026, 6, 21, tzinfo=NY))
    rows = list(csv.DictReader(io.StringIO(text)))
    (not_yet,) = [r for r in rows if r["section"] == "not_yet"]
    assert not_yet["note"].startswith("the whole period is after the state's clock (simulated time the alert "
                                      "engine reached, Wed 10 Jun 2026 12:00 EDT)")
    (sensor,) = [r for r in rows if r["section"] == "sensor"]
    assert (sensor["expected"], sensor["received"], sensor["percent"]) == ("0", "0", "")
    assert [r for r in rows if r["section"] in ("unknown", "day")] == []
    assert "the whole period is after the state" in html
