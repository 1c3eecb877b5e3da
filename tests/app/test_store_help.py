"""Where an SQLite store URL's file is, said where a user looks: every `--store` option's help ends
with the rule, and the rule is what the store's URL parser does (docs/stores.md, "Store URLs")."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.runtime.cliutil import SQLITE_PATHS
from stormwatch.stores.urls import sqlite_path
from tests.conftest import REPO


def _with_store() -> list[str]:
    """Every leaf command that has a ``--store`` option, as its words (``["workorders", "list"]``)."""
    out: list[str] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        elif any("--store" in getattr(p, "opts", ()) for p in getattr(cmd, "params", [])):
            out.append(" ".join(path))

    walk(typer.main.get_command(app), [])
    return out


def test_the_rule_is_the_parsers() -> None:
    assert "sqlite:///var/x.db is var/x.db under the current directory" in SQLITE_PATHS
    assert sqlite_path("sqlite:///var/x.db") == "var/x.db" and not Path(sqlite_path("sqlite:///var/x.db")).is_absolute()
    assert "sqlite:////var/x.db (four slashes) is /var/x.db" in SQLITE_PATHS
    assert sqlite_path("sqlite:////var/x.db") == "/var/x.db"
    assert "a bare path is a path" in SQLITE_PATHS and sqlite_path("var/x.db") == "var/x.db"


def test_every_store_option_says_where_an_sqlite_file_is() -> None:
    commands = _with_store()
    assert {"ingest", "alerts", "evaluate", "web", "demo", "report", "import"} <= set(commands), commands
    for command in commands:
        result = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
        assert SQLITE_PATHS in text, command


def test_the_stores_page_and_the_readme_say_it() -> None:
    stores = " ".join((REPO / "docs" / "stores.md").read_text(encoding="utf-8").split())
    assert "`sqlite:///var/stormwatch.db` is `var/stormwatch.db` under the current directory" in stores
    assert ("`sqlite:////var/lib/stormwatch/stormwatch.db` (four slashes) is "
            "`/var/lib/stormwatch/stormwatch.db`") in stores
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "`sqlite:///var/stormwatch.db` is `var/stormwatch.db` under the current directory" in readme
