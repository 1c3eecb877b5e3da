"""Golden cases as folders (tests/cases/README.md): every ``tests/cases/<name>/`` is run through the
real ``stormwatch replay`` or ``stormwatch import`` + ``stormwatch evaluate`` and its events are
compared with its ``expected.jsonl``. Adding a case is adding a folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from stormwatch.app.cli import app
from tests.conftest import DATA
from tests.importers_support import CASES

#: Set to write each case's expected.jsonl from what the code emits (then read it before committing).
WRITE = os.environ.get("STORMWATCH_WRITE_CASES") == "1"
#: Left out of the comparison (a storm's evidence lists every tip).
NOT_COMPARED = ("evidence",)


def _input(case: Path, name: str) -> Path:
    for where in (case / name, DATA / name):
        if where.is_file():
            return where
    raise FileNotFoundError(f"{case.name}: input {name!r} is neither in the case folder nor in tests/data")


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, f"stormwatch {' '.join(args)}\n{result.output}"
    return result.stdout


def run_case(case: Path, tmp: Path) -> list[dict[str, Any]]:
    """The events a case folder's ``case.yaml`` produces, as ``--json`` prints them."""
    spec = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
    if "replay" in spec:
        r = spec["replay"]
        out = _invoke("replay", str(_input(case, r["file"])), *map(str, r.get("args", [])), "--json")
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    elif "evaluate" in spec:
        e = spec["evaluate"]
        site, store = str(case / "site.yaml"), f"sqlite:///{tmp / 'case.db'}"
        for item in e["inputs"]:
            _invoke("import", str(_input(case, item["file"])), "--site", site, "--device", item["device"],
                    "--store", store, *map(str, item.get("args", [])), "--json")
        out = _invoke("evaluate", "--site", site, "--store", store, "--from", str(e["from"]), "--to", str(e["to"]),
                      "--json")
        events = json.loads(out)["events"]
    else:
        raise AssertionError(f"{case.name}/case.yaml: needs 'replay' or 'evaluate' (tests/cases/README.md)")
    return [{k: v for k, v in ev.items() if k not in NOT_COMPARED} for ev in events]


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "case.yaml").is_file()))
def test_golden_case(case: str, tmp_path: Path) -> None:
    folder = CASES / case
    got = run_case(folder, tmp_path)
    expected_file = folder / "expected.jsonl"
    if WRITE:
        expected_file.write_text("".join(json.dumps(ev, ensure_ascii=False) + "\n" for ev in got), encoding="utf-8")
        pytest.fail(f"wrote {expected_file} ({len(got)} events): read it, then run without STORMWATCH_WRITE_CASES")
    expected = [json.loads(line) for line in expected_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(got) == len(expected), f"{case}: {len(got)} events, expected {len(expected)}"
    for i, (g, x) in enumerate(zip(got, expected, strict=True)):
        assert g == x, f"{case}: event {i} differs"


def test_every_case_folder_is_complete() -> None:
    """A folder under tests/cases is a case (case.yaml, expected.jsonl; site.yaml for evaluate)."""
    for folder in sorted(p for p in CASES.iterdir() if p.is_dir()):
        assert (folder / "case.yaml").is_file(), f"{folder.name}: no case.yaml"
        assert (folder / "expected.jsonl").is_file(), f"{folder.name}: no expected.jsonl"
        spec = yaml.safe_load((folder / "case.yaml").read_text(encoding="utf-8"))
        assert spec.get("description"), f"{folder.name}: case.yaml needs a description"
        if "evaluate" in spec:
            assert (folder / "site.yaml").is_file(), f"{folder.name}: an evaluate case needs site.yaml"
