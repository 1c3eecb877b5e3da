"""Render the dashboards to Grafana JSON files (deterministic: same code, same bytes).

``stormwatch dashboards build [-o DIR]`` writes ``DIR/<uid>.json`` for every dashboard;
the committed copies live in ``dashboards/json/`` (provisioned into Grafana by
``deploy/grafana/provisioning/dashboards/stormwatch.yaml``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from stormwatch import resources
from stormwatch.dashboards import portfolio, site

#: Where the committed JSON lives (shipped in the package: ``stormwatch.dashboards/json``).
JSON_DIR = resources.dashboards_json_dir()

#: uid → builder of every dashboard.
DASHBOARDS: dict[str, Callable[[], dash.Dashboard]] = {
    site.UID: site.build,
    portfolio.UID: portfolio.build,
}


def render(board: dash.Dashboard) -> str:
    """The dashboard's JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(board.build(), cls=JSONEncoder, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def build_all(out_dir: Path = JSON_DIR) -> list[Path]:
    """Write every dashboard to ``out_dir/<uid>.json`` and return the paths. ``out_dir`` is created
    if missing, but not its parents (a typo must not create a tree of directories).

    Raises:
        OSError: the directory (or its parent) or a file cannot be written.
    """
    out_dir.mkdir(exist_ok=True)
    written = []
    for uid, make in DASHBOARDS.items():
        path = out_dir / f"{uid}.json"
        path.write_text(render(make()), encoding="utf-8")
        written.append(path)
    return written
