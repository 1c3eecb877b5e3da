"""``--help`` fills the terminal, whatever its width: at ``COLUMNS=80`` no line of any command's
help is longer than 80 characters, and a description paragraph has no line breaks of its own (a
docstring's breaks near column 100 made ragged lines on an 80-column terminal)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from stormwatch.app.cli import app
from tests.runtime.test_cli_vocabulary import ALL


def _help(path: str, columns: int) -> list[str]:
    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[p for p, _ in ALL])
def test_help_fits_80_columns(path: str, cmd: Any) -> None:
    too_long = [line for line in _help(path, 80) if len(line) > 80]
    assert not too_long, f"stormwatch {path} --help at COLUMNS=80: {too_long[:3]}"


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[p for p, _ in ALL])
def test_help_paragraphs_have_no_hard_breaks(path: str, cmd: Any) -> None:
    for paragraph in (cmd.help or "").split("\n\n"):
        breaks = [line for line in paragraph.splitlines()[1:] if not line.startswith(("* ", "- ", "  "))]
        assert not breaks, f"stormwatch {path}: a line break inside a paragraph before {breaks[0]!r}"


def test_demo_help_flows_at_80_columns() -> None:
    text = [line.strip() for line in _help("demo", 80)]
    start = next(i for i, line in enumerate(text) if line.startswith("Simulated rain gauge"))
    assert all(len(line) >= 60 for line in text[start:start + 5]), text[start:start + 5]  # filled, not ragged
    assert any("protocols; the gateway polls them" in line for line in text)
