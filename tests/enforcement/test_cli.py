"""``stormwatch enforce`` end to end in one process: a case from open to resolution, scriptable with
--json, and every refusal one line with exit status 2 and nothing recorded."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.app.cli import app


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, Path]:
    site = tmp_path / "site.yaml"
    shutil.copy(resources.example_site(), site)
    doc = yaml.safe_load(site.read_text(encoding="utf-8"))
    doc["site"]["id"], doc["site"]["jurisdiction"] = "spencer-1", "spencerport"
    doc["rules"] = {}
    (tmp_path / "spencer.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir()
    return {"site": site, "spencer": tmp_path / "spencer.yaml", "state": state, "root": tmp_path}


def _open(world: dict[str, Path], site: str = "site", found: str = "2026-06-29") -> str:
    out = _run("enforce", "open", "--site", str(world[site]), "--found-on", found, "--party", "Acme Builders LLC",
               "--address", "12 Mill Road", "--nature", "Sediment-laden discharge at the outfall.",
               "--remedy", "Repair the silt fence.", "--correct-by", "2026-07-10", "--by", "Sam SMO",
               "--state-dir", str(world["state"]), "--json")
    return str(json.loads(out)["id"])


def _history(world: dict[str, Path], case: str) -> list[dict[str, object]]:
    return json.loads(_run("enforce", "show", case, "--state-dir", str(world["state"]), "--json"))["history"]


def test_a_case_from_open_to_resolution(world: dict[str, Path]) -> None:
    state = ["--state-dir", str(world["state"])]
    case = _open(world)
    assert case == "EC-2026-001"
    for action, extra in [("nov-issued", ["--on", "2026-06-30"]),
                          ("nov-served", ["--on", "2026-06-30", "--method", "certified_mail",
                                          "--certified", "7019 0700 0000 1234 5678"]),
                          ("appeal-filed", ["--on", "2026-07-02", "--appellant", "Acme Builders LLC"])]:
        _run("enforce", "record", case, action, *extra, "--by", "Sam SMO", *state)
    shown = json.loads(_run("enforce", "show", case, *state, "--json"))
    due = {d["name"]: (d["due"], d["state"], d["citations"]) for d in shown["deadlines"]}
    assert due["appeal"] == ("2026-07-07", "met", ["Ch. 133 §133-10A(6)", "Ch. 133 §133-11"])
    assert due["hearing"][0] == "2026-07-17" and due["hearing"][2] == ["Ch. 133 §133-11"]
    _run("enforce", "record", case, "hearing-held", "--on", "2026-07-14", "--by", "Sam SMO", *state)
    _run("enforce", "record", case, "decision", "--on", "2026-07-14", "--outcome", "upheld", "--by", "Sam SMO", *state)
    text = _run("enforce", "show", case, *state)
    # five business days after Tue 14 July: Wed 15, Thu 16, Fri 17, Mon 20, Tue 21 July
    assert "correction due" in text and "Tue 2026-07-21" in text and "Ch. 133 §133-12" in text
    for action, on in (("correction-verified", "2026-07-21"), ("resolved", "2026-07-22")):
        _run("enforce", "record", case, action, "--on", on, "--by", "Sam SMO", *state)
    listed = _run("enforce", "list", *state)
    assert "EC-2026-001" in listed and "resolved" in listed
    register = list(csv.DictReader(io.StringIO(_run("enforce", "register", "--year", "2026", *state))))
    assert [(r["case"], r["enforcement_type"], r["enforcement_date"]) for r in register] == [
        ("EC-2026-001", "notice of violation", "2026-06-30")]
    row = register[0]
    assert row["responsible_party"] == "Acme Builders LLC" and row["date_resolved"] == "2026-07-22"
    assert row["days_to_resolution"] == "23"  # 29 June to 22 July
    assert row["served"] == "2026-06-30 certified mail no. 7019 0700 0000 1234 5678"
    summary = json.loads(_run("enforce", "summary", "--year", "2026", *state, "--json"))
    assert summary["by_type"] == {"notice of violation": 1} and summary["median_days"] == 23
    html = world["root"] / "nov.html"
    _run("enforce", "letter", case, "--format", "html", "-o", str(html), "--by", "Sam SMO", *state)
    assert "Tuesday, July 7, 2026" in html.read_text(encoding="utf-8")


@pytest.mark.parametrize(("steps", "bad", "expected"), [
    ([("nov-issued", ["--on", "2026-06-30"])],
     ("nov-served", ["--on", "2026-06-29", "--method", "hand"]),
     "notice of violation served on 2026-06-29 is before the notice of violation issued on 2026-06-30"),
    ([("nov-issued", ["--on", "2026-06-30"]), ("nov-served", ["--on", "2026-06-30", "--method", "hand"]),
      ("appeal-filed", ["--on", "2026-07-02"])],
     ("decision", ["--on", "2026-07-01", "--outcome", "upheld"]),
     "the decision on 2026-07-01 is before the appeal filed on 2026-07-02"),
    ([], ("nov-issued", ["--on", "30/06/2026"]), "--on '30/06/2026': a day written YYYY-MM-DD (e.g. 2026-06-30)"),
    ([], ("nov-issued", ["--on", "2026-06-30", "--method", "hand"]), "notice of violation issued takes no method"),
])
def test_a_refused_action_is_one_line_and_records_nothing(world: dict[str, Path], steps: list[tuple[str, list[str]]],
                                                          bad: tuple[str, list[str]], expected: str) -> None:
    state = ["--state-dir", str(world["state"])]
    case = _open(world)
    for action, extra in steps:
        _run("enforce", "record", case, action, *extra, "--by", "Sam SMO", *state)
    before = _history(world, case)
    out = _run("enforce", "record", case, bad[0], *bad[1], "--by", "Sam SMO", *state, code=2)
    assert out == f"error: {expected}\n"
    assert _history(world, case) == before


def test_a_day_to_correct_before_the_violation_was_found_is_refused(world: dict[str, Path]) -> None:
    # a date order: a remedy is not due before the violation it remedies was found
    state = ["--state-dir", str(world["state"])]
    case = _open(world)  # found 2026-06-29, correct by 2026-07-10
    before = json.loads(_run("enforce", "show", case, *state, "--json"))
    out = _run("enforce", "edit", case, "--correct-by", "2026-06-28", "--by", "Sam SMO", *state, code=2)
    assert out == ("error: the day to complete the remedial measures (2026-06-28) is before the violation was "
                   "found (2026-06-29)\n")
    assert json.loads(_run("enforce", "show", case, *state, "--json")) == before
    out = _run("enforce", "open", "--site", str(world["site"]), "--found-on", "2026-06-29", "--correct-by",
               "2026-06-01", "--by", "Sam SMO", *state, code=2)
    assert "(2026-06-01) is before the violation was found (2026-06-29)" in out
    _run("enforce", "edit", case, "--correct-by", "2026-06-29", "--by", "Sam SMO", *state)  # the same day: fine


def test_a_stop_work_lift_without_the_written_confirmation_spencerport_asks(world: dict[str, Path]) -> None:
    state = ["--state-dir", str(world["state"])]
    case = _open(world, "spencer")
    _run("enforce", "record", case, "nov-issued", "--on", "2026-06-30", "--by", "Sam SMO", *state)
    _run("enforce", "record", case, "nov-served", "--on", "2026-06-30", "--method", "hand", "--by", "Sam SMO", *state)
    before = _history(world, case)
    out = _run("enforce", "record", case, "stop-work-lifted", "--on", "2026-07-10", "--by", "Sam SMO", *state, code=2)
    assert out == ("error: Spencerport Ch. 276, enforcement D: the stop-work order stays in effect until the village "
                   "confirms compliance in writing: give the written confirmation (--written-confirmation REF)\n")
    assert _history(world, case) == before
    assert "STOP-WORK" in _run("enforce", "list", *state)


def test_an_unknown_case_and_a_missing_state(world: dict[str, Path]) -> None:
    _open(world)
    out = _run("enforce", "show", "EC-2026-999", "--state-dir", str(world["state"]), code=2)
    assert out == f"error: no enforcement case 'EC-2026-999' in {world['state'] / 'enforcement.db'}\n"
    out = _run("enforce", "list", "--state-dir", str(world["root"] / "nowhere"), code=2)
    assert out.startswith(f"error: --state-dir {world['root'] / 'nowhere'}: no such directory")
    empty = world["root"] / "empty"
    empty.mkdir()
    out = _run("enforce", "list", "--state-dir", str(empty), code=2)
    assert "no enforcement.db there" in out and not (empty / "enforcement.db").exists()


def test_a_permit_site_has_no_enforcement_section(world: dict[str, Path]) -> None:
    doc = yaml.safe_load(world["site"].read_text(encoding="utf-8"))
    doc["site"]["jurisdiction"], doc["rules"] = "epa-cgp-2022", {}
    doc["options"] = {"inspection_frequency": "7-day-and-storm"}
    permit = world["root"] / "permit.yaml"
    permit.write_text(yaml.safe_dump(doc), encoding="utf-8")
    out = _run("enforce", "open", "--site", str(permit), "--found-on", "2026-06-29", "--by", "Sam SMO",
               "--state-dir", str(world["state"]), code=2)
    assert "has no enforcement section" in out and out.count("\n") == 1
