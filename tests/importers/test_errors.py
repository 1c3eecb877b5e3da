"""`stormwatch import` refuses what it cannot read, loudly: nothing stored is an error, an extra
field is a rejected row, a binary file is named as such (exit 2). (rtl_433 JSON Lines are read:
tests/importers/test_cumulative.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stormwatch.stores.urls import open_store
from tests.conftest import data_file
from tests.importers_support import THARANDT, invoke


def test_every_row_rejected_exits_1_and_says_so(site: Path, tmp_path: Path) -> None:
    # the Tharandt file's times are "01.07.2018 00:00": a year-first format fits none of its 2632 rows
    result = invoke(str(data_file(THARANDT)), "--site", str(site), "--device", "rain-1",
                    "--store", f"sqlite:///{tmp_path / 's.db'}", "--delimiter", ";", "--tips", "0.2",
                    "--time-format", "%Y-%m-%d %H:%M")
    assert result.exit_code == 1, result.output
    assert "error:" in result.output and "nothing stored: 2632 of 2632 rows rejected (bad_time 2632)" \
        in result.output
    assert f"{data_file(THARANDT)}:2:" in result.output  # the first rejected row, file:line


def test_a_row_with_an_extra_field_is_rejected_trailing_delimiter_is_not(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "turb.csv"
    path.write_text("time,turb\n"
                    "2024-05-01T00:00:00Z,3.0\n"
                    "2024-05-01T00:05:00Z,4.0,7\n"       # line 3: a third field the header does not name
                    "2024-05-01T00:10:00Z,5.0,\n", encoding="utf-8")  # a trailing comma: accepted
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = invoke(str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
                    "--value-column", "turb=turbidity:FNU", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rejected_rows"] == {"extra_fields": 1}
    assert summary["rejects"][0].startswith(f"{path}:3: 3 fields, the header names 2")
    store = open_store(url)
    try:
        assert [r.value for r in store.query_readings("import-test", device="sonde-1")] == [3.0, 5.0]
    finally:
        store.close()


def test_binary_file_is_named_as_such_exit_2(site: Path, tmp_path: Path) -> None:
    binary = tmp_path / "python.bin"
    binary.write_bytes(Path(sys.executable).resolve().read_bytes()[:16384])  # an ELF executable
    assert binary.read_bytes().startswith(b"\x7fELF")
    result = invoke(str(binary), "--site", str(site), "--device", "sonde-1",
                    "--store", f"sqlite:///{tmp_path / 's.db'}", "--value-column", "turb=turbidity:FNU")
    assert result.exit_code == 2, result.output
    assert f"error: {binary}: binary file, not a delimited text/TOA5/HOBO export" in result.output


def test_cells_follow_one_number_grammar(site: Path, tmp_path: Path) -> None:
    """``1_000`` (PEP 515 grouping) and ``١٢`` (Arabic-Indic digits) are numbers to Python's float() and
    Decimal() -- 1000 and 12 -- but not to a logger or a person: each row is rejected ``not_a_number`` with
    the cell quoted (stormwatch.numbers); ASCII decimals and exponents are read exactly."""
    path = tmp_path / "turb.csv"
    path.write_text("time,turb\n"
                    "2024-05-01T00:00:00Z,12\n"
                    "2024-05-01T00:05:00Z,1_000\n"      # line 3
                    "2024-05-01T00:10:00Z,\u0661\u0662\n"  # line 4: Arabic-Indic 12
                    "2024-05-01T00:15:00Z,1.25e1\n"
                    "2024-05-01T00:20:00Z,\uff11\uff12\n", encoding="utf-8")  # line 6: full-width 12
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = invoke(str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
                    "--value-column", "turb=turbidity:FNU", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rejected_rows"] == {"not_a_number": 3}
    assert [r.split(": ", 1)[0] for r in summary["rejects"]] == [f"{path}:3", f"{path}:4", f"{path}:6"]
    assert "'1_000' is not a number" in summary["rejects"][0]
    assert "'\u0661\u0662' is not a number" in summary["rejects"][1]
    store = open_store(url)
    try:
        assert [r.value for r in store.query_readings("import-test", device="sonde-1")] == [12.0, 12.5]
    finally:
        store.close()


def test_a_huge_cell_is_quoted_short(site: Path, tmp_path: Path) -> None:
    """A 5000-character cell once made a 5,300-character "one-line" error: a rejected cell is quoted
    by its first characters and its length."""
    path = tmp_path / "tips.csv"
    path.write_text("time,rain\n"
                    f"2024-05-01T00:00:00Z,{'9' * 5000}\n"
                    f"2024-05-01T00:05:00Z,{'x' * 5000}\n", encoding="utf-8")
    result = invoke(str(path), "--site", str(site), "--device", "rain-1", "--store",
                    f"sqlite:///{tmp_path / 's.db'}", "--tip-mm", "0.2", "-v")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) < 700, max(lines, key=len)[:200]  # two paths and the grammar
    assert "(5000 characters)" in result.output
