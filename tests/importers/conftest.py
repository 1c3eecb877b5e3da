"""Fixtures of the importer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.importers_support import SITE_YAML


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """The importer tests' site file (SITE_YAML: a 0.2-mm and a 0.01-in gauge, turbidity, stage)."""
    path = tmp_path / "site.yaml"
    path.write_text(SITE_YAML, encoding="utf-8")
    return path
