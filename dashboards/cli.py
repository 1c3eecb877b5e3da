"""``stormwatch dashboards build [--out DIR]``: regenerate the Grafana dashboard JSON."""

from __future__ import annotations

from pathlib import Path

import typer

from stormwatch.cliutil import fail
from stormwatch.dashboards.build import JSON_DIR, build_all

dashboards_app = typer.Typer(help="Grafana dashboards generated from code (grafana-foundation-sdk).",
                             no_args_is_help=True)


@dashboards_app.command("build")
def build_cmd(out: Path = typer.Option(JSON_DIR, "--out", help="Output directory (default: the committed copies).")
              ) -> None:
    """Write every dashboard as <uid>.json into --out (the committed copies by default)."""
    try:
        paths = build_all(out)
    except OSError as exc:
        fail(f"cannot write dashboards to {out}: {exc}", 1)
    for path in paths:
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add ``dashboards`` to the ``stormwatch`` command line."""
    app.add_typer(dashboards_app, name="dashboards")
