"""``stormwatch dashboards build [-o DIR]``: regenerate the Grafana dashboard JSON."""

from __future__ import annotations

from pathlib import Path

import typer

from stormwatch.dashboards.build import JSON_DIR, build_all
from stormwatch.runtime.cliutil import fail, output_path

dashboards_app = typer.Typer(help="Grafana dashboards for SMOs: one site's readings and events, and a portfolio "
                                  "of sites with their work orders.",
                             no_args_is_help=True)


@dashboards_app.command("build")
def build_cmd(out: Path = typer.Option(JSON_DIR, "--output", "-o", metavar="DIR", file_okay=False,
                                       help="Write the dashboards into this directory (default: the copies "
                                            "shipped with stormwatch).")) -> None:
    """Write the Grafana dashboards (portfolio and site) as JSON files to import or provision.

    Prints each file written. The directory is created if its parent exists.
    """
    output_path(out, "--output", directory=True)
    try:
        paths = build_all(out)
    except OSError as exc:
        fail(f"cannot write dashboards to {out}: {exc}", 1)
    for path in paths:
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add ``dashboards`` to the ``stormwatch`` command line."""
    app.add_typer(dashboards_app, name="dashboards")
