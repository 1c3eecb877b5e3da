"""The letters as an SMO serves them: the PDF's text (pdftotext) holds the code's required contents in
the code's order, the computed last day of appeal, the penalty from the ladder; what our copy of a
code does not confirm is printed as found and marked, never filled in."""

from __future__ import annotations

import re
import subprocess
from datetime import date
from pathlib import Path

import pytest

from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.letters import notice_letter, stop_work_letter, to_html, to_pdf
from stormwatch.enforcement.view import view_of
from tests.enforcement.support import book, draft, in_order, served


def _text(pdf: bytes, tmp: Path) -> str:
    path = tmp / "letter.pdf"
    path.write_bytes(pdf)
    out = subprocess.run(["pdftotext", "-raw", str(path), "-"], check=True, capture_output=True, text=True).stdout
    return " ".join(out.split())


def test_ch133_notice_holds_its_seven_contents_in_order_and_the_last_appeal_day(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29), correct_by=date(2026, 7, 13))
    served(b, case, date(2026, 6, 30))
    text = _text(to_pdf(notice_letter(view_of(b, case, date(2026, 6, 30)), signer="Sam SMO")), tmp_path)
    in_order(text, [
        "NOTICE OF VIOLATION", "Date: Tuesday, June 30, 2026", "Acme Builders LLC", "Ch. 133 §133-10A",
        "(1) Person responsible -- Ch. 133 §133-10A(1)", "12 Mill Road",
        "(2) Location of the violation -- Ch. 133 §133-10A(2)", "Riverside Commons, Phase 2",
        "(3) Nature of the violation -- Ch. 133 §133-10A(3)", "Turbid discharge",
        "(4) Remedial measures and time schedule -- Ch. 133 §133-10A(4)", "Repair the silt fence",
        "completed by Monday, July 13, 2026",
        "(5) Penalty -- Ch. 133 §133-10A(5)", "first offense within five years", "up to $2,000",
        "Each week's continued violation shall constitute a separate additional violation.",
        "(6) Appeal -- Ch. 133 §133-10A(6)", "appealed to the Superintendent",
        "The last day to file your appeal is Tuesday, July 7, 2026", "§133-10A(6)", "§133-11",
        "(7) Abatement and restoration -- Ch. 133 §133-10A(7)", "if unpaid within 30 days",
        "Sam SMO", "Stormwater Management Officer", "Served on Tuesday, June 30, 2026 by hand"])
    assert "DRAFT" not in text and "NOT VERIFIED" not in text


def test_a_notice_not_yet_issued_is_a_draft_counted_from_its_date(tmp_path: Path) -> None:
    b = book(tmp_path, date(2026, 6, 30))
    case = draft(b, "spencerport", date(2026, 6, 29))
    text = _text(to_pdf(notice_letter(view_of(b, case), signer="Sam SMO")), tmp_path)
    # 15 days from service, counted as if served on the notice's date (30 June): 15 July
    in_order(text, ["DRAFT -- not issued", "(6) Appeal", "appealed to the municipality",
                     "Wednesday, July 15, 2026", "as if this notice is served on its date",
                     "Stop-work order -- Spencerport Ch. 276, enforcement D",
                     "until the Village confirms, in writing",
                     "Served on ____"])
    assert "not less than $250 (the code sets no maximum)" in text


def test_ch196_cut_off_fines_are_printed_as_found_and_marked(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch196", date(2026, 6, 29))
    served(b, case, date(2026, 6, 30))
    text = _text(to_pdf(notice_letter(view_of(b, case), signer="Sam SMO")), tmp_path)
    assert "not less than $500 nor more than $1,0 or imprisonment" in text  # the code's words, as found
    assert re.search(r"NOT VERIFIED against the code text in hand .*reads \"nor more than \$1,0\": the amount is cut "
                     r"off", text)
    assert "(6)" not in text  # five contents, no appeal statement: §196-12A has none
    stop = stop_work_letter(view_of(b, case), signer="Sam SMO")
    assert stop.draft and "Planning Board" in to_html(stop)


def test_ch507_order_to_correct_and_the_cut_said(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch507", date(2026, 6, 29), correct_by=date(2026, 7, 13))
    served(b, case, date(2026, 6, 30))
    text = _text(to_pdf(notice_letter(view_of(b, case), signer="Sam SMO")), tmp_path)
    in_order(text, ["NOTICE OF VIOLATION AND ORDER TO CORRECT", "(1) Person responsible", "(2) Location",
                     "(3) Nature of the violation", "Order to correct -- Ch. 507 §507-12A",
                     "completed by Monday, July 13, 2026", "NOT VERIFIED", "ends after the third required content"])
    assert "(4)" not in text and "Penalty" not in text
    with pytest.raises(CaseError, match="provides no stop-work order"):
        stop_work_letter(view_of(b, case), signer="Sam SMO")
