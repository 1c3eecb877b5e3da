"""The ordinance text a work order's citation enforces, shipped in the package (``web/ordinances/``).

Each ``web/ordinances/<pack>.yaml`` holds verbatim excerpts of the code a rule pack cites (the full
texts are in ``docs/reference/ordinances/``), keyed by the pack's citation strings, so the order
page shows the inspector the words of the law next to the deadline. A pack without excerpts, or a
citation without one, is shown with its citation only and the note that no excerpt ships.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from stormwatch.resources import builtin_dir


@dataclass(frozen=True)
class Excerpt:
    """The words of one cited section: ``heading`` (section path), ``text``, the code's ``title``
    and the ``source`` file in docs/reference/ordinances/."""

    citation: str
    heading: str
    text: str
    title: str
    source: str


def excerpts_dir() -> Path:
    """The shipped excerpt files (``web/ordinances/`` in the repository)."""
    return builtin_dir("stormwatch.web", "ordinances")


@cache
def _all(directory: Path) -> dict[str, Excerpt]:
    out: dict[str, Excerpt] = {}
    for path in sorted(directory.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for s in doc["sections"]:
            out[s["citation"]] = Excerpt(citation=s["citation"], heading=s["heading"], text=s["text"],
                                         title=doc["title"], source=doc["source"])
    return out


def excerpt(citation: str, directory: Path | None = None) -> Excerpt | None:
    """The excerpt of ``citation`` (exactly as the pack writes it), or ``None`` if none ships."""
    return _all(directory or excerpts_dir()).get(citation)
