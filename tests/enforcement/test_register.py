"""The MS4 register (Minnesota MNR040000 Part III.B.2: the person responsible, date and location,
description with its regulatory reference, corrective actions and schedule, date and type of
enforcement, referrals, date resolved) and the year's summary, from cases recorded by hand."""

from __future__ import annotations

import csv
import io
import subprocess
from datetime import date
from pathlib import Path

from stormwatch.enforcement.register import COLUMNS, rows_of, summary_of, to_csv, to_pdf
from stormwatch.enforcement.view import view_of
from tests.enforcement.support import book, draft, served


def test_one_row_per_enforcement_action_with_the_permits_fields(tmp_path: Path) -> None:
    b = book(tmp_path)
    warned = draft(b, "ch133", date(2026, 3, 2))
    b.record(warned.id, "verbal_warning", date(2026, 3, 2), "Sam SMO")
    b.record(warned.id, "correction_verified", date(2026, 3, 4), "Sam SMO")
    b.record(warned.id, "resolved", date(2026, 3, 4), "Sam SMO")
    case = draft(b, "ch196", date(2026, 6, 2))
    served(b, case, date(2026, 6, 3))
    b.record(case.id, "stop_work_issued", date(2026, 6, 3), "Sam SMO")
    b.record(case.id, "referral", date(2026, 6, 10), "Sam SMO", to="NYSDEC Region 3")
    b.record(case.id, "correction_verified", date(2026, 7, 1), "Sam SMO")
    b.record(case.id, "resolved", date(2026, 7, 2), "Sam SMO")
    views = [view_of(b, c) for c in b.list()]
    rows = list(csv.DictReader(io.StringIO(to_csv(rows_of(views)))))
    assert tuple(rows[0]) == COLUMNS
    assert [(r["case"], r["enforcement_date"], r["enforcement_type"]) for r in rows] == [
        ("EC-2026-001", "2026-03-02", "verbal warning"),
        ("EC-2026-002", "2026-06-03", "notice of violation"),
        ("EC-2026-002", "2026-06-03", "stop-work order"),
        ("EC-2026-002", "2026-06-10", "referral to NYSDEC Region 3")]
    nov = rows[1]
    assert nov["responsible_party"] == "Acme Builders LLC" and nov["violation_date"] == "2026-06-02"
    assert nov["location"].startswith("Riverside Commons") and nov["regulatory_reference"] == "the turbidity standard"
    assert nov["corrective_actions"].startswith("Repair") and nov["completion_schedule"] == "2026-06-16"
    assert nov["referrals"] == "2026-06-10 to NYSDEC Region 3" and nov["date_resolved"] == "2026-07-02"
    assert nov["days_to_resolution"] == "30"  # 2 June to 2 July
    assert nov["additional_violations"].startswith("4 additional weekly violations")  # 3 June to 1 July
    # Ch. 196's fine as found, marked
    assert "nor more than $1,0" in nov["penalty"] and 'reads "nor more than $1,0"' in nov["unverified"]
    assert rows[0]["days_to_resolution"] == "2" and rows[0]["unverified"] == ""
    assert [r["case"] for r in rows_of(views, 2025)] == []
    summary = summary_of(views, 2026)
    assert summary.by_type == {"verbal warning": 1, "notice of violation": 1, "stop-work order": 1, "referral": 1}
    assert (summary.opened, summary.resolved, summary.median_days, summary.open_at_end) == (2, 2, 16.0, 0)  # (2+30)/2
    pdf = tmp_path / "register.pdf"
    pdf.write_bytes(to_pdf(rows_of(views, 2026), summary, "Enforcement register 2026"))
    text = " ".join(subprocess.run(["pdftotext", "-raw", str(pdf), "-"], check=True, capture_output=True,
                                   text=True).stdout.split())
    assert "Summary of 2026" in text and "median days to resolution 16" in text
    assert "UNVERIFIED" in text and "$1,0" in text
