"""``stormwatch gateway --check`` over the site files of a fleet (issue 12 item 1): two gateways with
one gateway id (or one MQTT client id) are refused with one line naming both files; several
``--site`` files or a directory are accepted for the check, not for a run."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from stormwatch.app.cli import app
from tests.conftest import REPO

EXAMPLE = yaml.safe_load((REPO / "examples" / "site.yaml").read_text())


def _site(path: Path, site_id: str, gateway_id: str) -> Path:
    doc = dict(EXAMPLE)
    doc["site"] = {**EXAMPLE["site"], "id": site_id}
    doc["gateway_id"] = gateway_id
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def _check(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["gateway", "--check", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output.splitlines()


def test_two_sites_sharing_a_gateway_id_are_refused_naming_both_files(tmp_path: Path) -> None:
    a = _site(tmp_path / "a.yaml", "riverside-commons", "gw-1")
    b = _site(tmp_path / "b.yaml", "hilltop", "gw-1")  # another site, the same box id copied over
    code, lines = _check("--site", str(a), "--site", str(b))
    assert code == 2
    assert lines == [f"error: gateway id 'gw-1' is used by {a} (site riverside-commons) and {b} (site hilltop): "
                     "give each gateway its own id"]


def test_a_directory_is_checked_as_a_fleet(tmp_path: Path) -> None:
    fleet = tmp_path / "sites"
    _site(fleet / "a.yaml", "riverside-commons", "gw-1")
    _site(fleet / "b.yml", "hilltop", "gw-2")
    (fleet / "README.txt").write_text("not a site")
    code, lines = _check("--site", str(fleet))
    assert code == 0
    assert [line.split(",")[0:2] for line in lines] == [["ok: site riverside-commons", " gateway gw-1"],
                                                        ["ok: site hilltop", " gateway gw-2"]]
    _site(fleet / "c.yaml", "meadow", "gw-2")
    code, lines = _check("--site", str(fleet))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: gateway id 'gw-2' is used by ") and "(site meadow)" in lines[0]


def test_distinct_gateway_ids_that_make_one_mqtt_client_id_are_refused(tmp_path: Path) -> None:
    # stormwatch-<site>-<gateway>: site "north-a" + gateway "b" and site "north" + gateway "a-b"
    a = _site(tmp_path / "a.yaml", "north-a", "b")
    b = _site(tmp_path / "b.yaml", "north", "a-b")
    code, lines = _check("--site", str(a), "--site", str(b))
    assert code == 2
    assert lines == [f"error: MQTT client id 'stormwatch-north-a-b' is shared by {a} and {b}: rename a site or "
                     "gateway id"]


def test_several_sites_are_for_the_check_only_and_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    a = _site(tmp_path / "a.yaml", "riverside-commons", "gw-1")
    b = _site(tmp_path / "b.yaml", "hilltop", "gw-2")
    result = CliRunner().invoke(app, ["gateway", "--site", str(a), "--site", str(b), "--state-dir",
                                      str(tmp_path / "state")])
    assert result.exit_code == 2
    assert result.output.splitlines() == ["error: --site: a gateway runs one site, got 2 site files (several are "
                                          "for --check)"]
    (tmp_path / "empty").mkdir()
    code, lines = _check("--site", str(tmp_path / "empty"))
    assert (code, lines) == (2, [f"error: --site {tmp_path / 'empty'}: directory holds no site file (*.yaml, *.yml)"])
