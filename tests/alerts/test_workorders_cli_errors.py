"""Error messages of `stormwatch evaluate` / `workorders` / `alerts`: a missing store, a state file
that is not SQLite and a bad rule override are clear errors ("error: ..." prefix, exit 2), never a
traceback or a silent "0 readings"."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner, Result

from stormwatch.app.cli import app
from tests.alerts_support import site_doc


def write_site(tmp_path: Path, **changes: object) -> Path:
    doc = site_doc("ch133")
    doc.update(changes)
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def evaluate(site: Path, store: str) -> Result:
    return CliRunner().invoke(app, ["evaluate", "--site", str(site), "--from", "2024-06-01T00:00:00Z",
                                    "--to", "2024-06-02T00:00:00Z", "--store", store], catch_exceptions=False)


def test_evaluate_on_a_store_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    site = write_site(tmp_path)
    missing = tmp_path / "nonexist" / "dir" / "x.db"
    result = evaluate(site, f"sqlite:///{missing}")  # sqlite:////abs/path
    assert result.exit_code == 2, result.output
    assert f"no SQLite store at {missing}" in result.output and result.output.startswith("error: --store ")
    assert "0 readings" not in result.output
    assert not (tmp_path / "nonexist").exists()  # nothing created by a read-only command
    bare = tmp_path / "missing.db"
    result = evaluate(site, str(bare))
    assert result.exit_code == 2 and f"no SQLite store at {bare}" in result.output
    assert not bare.exists()


def test_workorders_on_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    state = tmp_path / "notes.txt"
    state.write_text("this is a text file, not a work-order database\n" * 20, encoding="utf-8")
    for args in (["list"], ["show", "wo-1"], ["ack", "wo-1", "--by", "me"], ["ical"]):
        result = CliRunner().invoke(app, ["workorders", *args, "--state", str(state)], catch_exceptions=False)
        assert result.exit_code == 2, (args, result.output)
        assert f"error: {state}: not a work-order state file (SQLite): file is not a database" in result.output
    missing = CliRunner().invoke(app, ["workorders", "list", "--state", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "error: no work-order state file" in missing.output


def test_workorders_on_an_empty_file_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    empty = state_dir / "alerts.db"
    empty.touch()
    for args in (["list"], ["show", "wo-1"], ["ack", "wo-1", "--by", "me"], ["ical"]):
        result = CliRunner().invoke(app, ["workorders", *args, "--state-dir", str(state_dir)], catch_exceptions=False)
        assert result.exit_code == 2, (args, result.output)
        assert f"error: {empty}: not a work-order state file (an empty file)" in result.output
        assert empty.stat().st_size == 0 and sorted(state_dir.iterdir()) == [empty]  # nothing written


def test_rule_override_errors_name_the_site_file(tmp_path: Path) -> None:
    site = write_site(tmp_path, rules={"R1": {"dry_gaps": 4}})
    db = tmp_path / "store.db"
    db.touch()
    result = evaluate(site, f"sqlite:///{db}")
    assert result.exit_code == 2, result.output
    assert f"error: {site}: rules.R1.dry_gaps: not a parameter of R1" in result.output
    site = write_site(tmp_path, rules={"R9": {"x": 1}})
    result = evaluate(site, f"sqlite:///{db}")
    assert result.exit_code == 2 and f"error: {site}: rules.R9: no rule 'R9' in pack ch133" in result.output
    site = write_site(tmp_path, rules={"R1": {"dry_gap_hours": -1}})
    result = evaluate(site, f"sqlite:///{db}")
    assert result.exit_code == 2 and f"error: {site}: rules.R1.dry_gap_hours:" in result.output
    alerts = CliRunner().invoke(app, ["alerts", "--site", str(write_site(tmp_path, rules={"R1": {"dry_gaps": 4}})),
                                      "--state", str(tmp_path / "wo.db")], catch_exceptions=False)
    assert alerts.exit_code == 2 and f"error: {site}: rules.R1.dry_gaps: not a parameter of R1" in alerts.output
