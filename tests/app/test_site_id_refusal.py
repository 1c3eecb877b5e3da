"""Every command taking ``--site-id`` as a filter refuses a site id it does not know in one line,
exit 2, naming the sites it knows -- a typo never gives an empty list or an empty calendar."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.clock import WallClock
from stormwatch.enforcement.cases import CASES_FILE, EnforcementBook
from stormwatch.stores.base import SiteInfo
from stormwatch.stores.sqlite import SqliteStore

#: command -> its arguments besides --site-id and --state-dir
FILTERS: dict[str, list[str]] = {
    "workorders list": [],
    "workorders ical": [],
    "enforce list": [],
    "enforce register": [],
    "enforce ical": [],
    "users add": ["bob", "--role", "inspector", "--password-stdin"],
}
#: services: --site-id picks sites of their --site/--sites (tests/runtime covers the refusal)
SERVICES = {"alerts", "ingest"}


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in list(group.commands):
        cmd, path = group.commands[name], f"{prefix}{name}"
        if hasattr(cmd, "commands"):
            found.update(_commands(cmd, path + " "))
        else:
            found[path] = cmd
    return found


def test_every_command_with_site_id_is_checked_here() -> None:
    root = typer.main.get_command(app)
    taking = {path for path, cmd in _commands(root).items()
              if any("--site-id" in getattr(p, "opts", ()) for p in cmd.params)}
    assert taking == set(FILTERS) | SERVICES


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("known-sites")
    store = SqliteStore(d / "stormwatch.db")
    store.write_sites([SiteInfo(s, "America/New_York", "ch133") for s in ("mill-creek", "riverside-commons")],
                      datetime(2026, 6, 1, tzinfo=UTC))
    store.close()
    from stormwatch.alerts.workorders import WorkOrders

    WorkOrders(d / "alerts.db", WallClock()).close()
    EnforcementBook(d / CASES_FILE, WallClock()).close()
    return d


@pytest.mark.parametrize("command", sorted(FILTERS))
def test_unknown_site_id_is_refused(command: str, state: Path) -> None:
    args = [*command.split(), *FILTERS[command], "--site-id", "riversde-commons", "--state-dir", str(state)]
    result = CliRunner().invoke(app, args, input="longenough123\n")
    assert result.exit_code == 2, result.output
    assert result.output == (f"error: --site-id riversde-commons: no such site in --state-dir {state} "
                             "(its sites: mill-creek, riverside-commons)\n")


@pytest.mark.parametrize("command", ["workorders list", "workorders ical", "enforce list", "enforce ical"])
def test_known_site_id_is_answered(command: str, state: Path) -> None:
    result = CliRunner().invoke(app, [*command.split(), "--site-id", "riverside-commons", "--state-dir", str(state)])
    assert result.exit_code == 0, result.output
