"""Every command checks a site file against its rule pack, without the layers below the alert engine
importing the packs (issue 13 item 2; ``.importlinter`` has no exception): the composition root
hands the check to every command (:func:`stormwatch.runtime.cliutil.provide_site_checks`), the
gateway and ingest load site files with :func:`stormwatch.runtime.cliutil.site_loader`.

The end-to-end cases (``gateway``/``ingest`` refusing an unknown pack or a bad override in one line,
exit 2) are in tests/app/test_cli_bad_input.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.alerts.packs import PackError
from stormwatch.alerts.sitefile import load_site_file as load_checked
from stormwatch.config import SiteConfig
from stormwatch.runtime.cliutil import load_site_file, provide_site_checks, site_checks, site_loader, standardize


@pytest.fixture
def unknown_pack(tmp_path: Path) -> Path:
    doc = yaml.safe_load(resources.example_site().read_text(encoding="utf-8"))
    doc["site"]["jurisdiction"] = "ch999"
    path = tmp_path / "ch999.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_the_runtime_alone_knows_no_pack_and_the_alert_layer_checks_it(unknown_pack: Path) -> None:
    """The service runtime checks the file and its profiles only; the pack check belongs to the alert
    layer, with the words every command uses."""
    assert load_site_file(unknown_pack).site.jurisdiction == "ch999"
    with pytest.raises(PackError, match=rf"^{unknown_pack}: site\.jurisdiction: no rule pack 'ch999' in .* \(known: "):
        load_checked(unknown_pack)
    assert site_checks() == ()  # outside a command: none


def test_a_loader_made_in_a_command_keeps_its_checks_in_another_thread(unknown_pack: Path) -> None:
    """A ``--sites`` directory is polled in another thread: the loader made in the command still
    runs the checks the root gave it (and the checks end with the command)."""
    seen: list[tuple[str, str]] = []

    def check(cfg: SiteConfig, path: Path) -> None:
        seen.append((cfg.site.jurisdiction, path.name))

    app = typer.Typer()

    @app.callback()
    def root(ctx: typer.Context) -> None:
        provide_site_checks(ctx, check)

    @app.command("watch")
    def watch() -> None:
        load = site_loader()
        thread = threading.Thread(target=load, args=(unknown_pack,))
        thread.start()
        thread.join()

    standardize(app)
    result = CliRunner().invoke(app, ["watch"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen == [("ch999", "ch999.yaml")]
    assert site_checks() == ()
