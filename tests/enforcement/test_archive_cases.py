"""A site's enforcement cases go into its archive bundle with their history and register rows, and come
back as they were; a bundle without cases (written before) still loads."""

from __future__ import annotations

import csv
import io
import shutil
import zipfile
from datetime import UTC, date, datetime
from pathlib import Path

from stormwatch import resources
from stormwatch.alerts.sitefile import load_site_file
from stormwatch.enforcement.cases import EnforcementBook
from stormwatch.report.archive import load_bundle, write_bundle
from stormwatch.stores.urls import open_store
from tests.enforcement.support import book, draft, served


def test_cases_round_trip_through_a_bundle(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    shutil.copy(resources.example_site(), site)
    cfg = load_site_file(site)
    (tmp_path / "src").mkdir()
    b = book(tmp_path / "src")
    case = draft(b, "ch133", date(2026, 6, 2))
    served(b, case, date(2026, 6, 3))
    draft(b, "ch133", date(2026, 7, 1))  # the period ends 1 July 00:00 EDT: not in the bundle
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    bundle = tmp_path / "bundle.zip"
    counts = write_bundle(bundle, cfg, site, store, None, datetime(2026, 6, 1, 4, tzinfo=UTC),
                          datetime(2026, 7, 1, 4, tzinfo=UTC), cases=b)
    assert counts.cases == 1
    with zipfile.ZipFile(bundle) as zf:
        rows = list(csv.DictReader(io.StringIO(zf.read("enforcement-register.csv").decode("utf-8"))))
    assert [(r["case"], r["enforcement_type"]) for r in rows] == [("EC-2026-001", "notice of violation")]
    (tmp_path / "dst").mkdir()
    target = EnforcementBook(tmp_path / "dst" / "enforcement.db", b.clock)
    _manifest, loaded = load_bundle(bundle, open_store(f"sqlite:///{tmp_path / 'b.db'}"), None, target)
    assert loaded.cases == 1
    assert target.export_records(cfg.site.id) == [r for r in b.export_records(cfg.site.id) if r["id"] == case.id]
    _manifest, again = load_bundle(bundle, open_store(f"sqlite:///{tmp_path / 'b.db'}"), None, target)
    assert again.cases == 0
