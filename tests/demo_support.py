"""The example site and the demo scenario's expected values worked by hand (hydrology.md, rules.md R2),
independently of the pipeline's code: the basin's half-volume depth and the first sustained turbidity
violation."""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from tests.conftest import REPO

EXAMPLE_SITE = REPO / "examples" / "site.yaml"


def prismoid_ft3(h: float, length: float = 40, width: float = 20, z: float = 3) -> float:
    """V(h) of a rectangular basin with z:1 side slopes, by the prismoidal rule h/6·(A0 + 4·Am + Ah)."""

    def area(y: float) -> float:
        return (length + 2 * z * y) * (width + 2 * z * y)

    return h / 6 * (area(0) + 4 * area(h / 2) + area(h))


def half_volume_depth_ft(height: float = 4.0) -> float:
    lo, hi = 0.0, height
    target = prismoid_ft3(height) / 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if prismoid_ft3(mid) < target else (lo, mid)
    return (lo + hi) / 2


def washington_violation_start(up: dict[datetime, float], down: dict[datetime, float]) -> datetime:
    """First end of a 15-min run of 5-min windows whose downstream median exceeds background + 5 NTU
    (background ≤ 50 NTU) or +10 % (background > 50) -- WAC 173-201A-200, rules.md R2."""
    windows: dict[datetime, tuple[list[float], list[float]]] = {}
    for t, v in up.items():
        w = t - timedelta(minutes=t.minute % 5, seconds=t.second, microseconds=t.microsecond)
        windows.setdefault(w, ([], []))[0].append(v)
    for t, v in down.items():
        w = t - timedelta(minutes=t.minute % 5, seconds=t.second, microseconds=t.microsecond)
        windows.setdefault(w, ([], []))[1].append(v)
    run = 0
    for w in sorted(windows):
        u, d = windows[w]
        if not u or not d:
            run = 0
            continue
        bg, dn = statistics.median(u), statistics.median(d)
        limit = bg + 5 if bg <= 50 else bg * 1.10
        run = run + 1 if dn > limit else 0
        if run == 3:
            return w + timedelta(minutes=5)
    raise AssertionError("no sustained violation in the stored turbidity")


def write_site(tmp_path: Path, doc: dict) -> Path:
    """``doc`` written as ``tmp_path/site.yaml``."""
    p = tmp_path / "site.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def example_doc() -> dict:
    """examples/site.yaml as a document to change."""
    return yaml.safe_load(EXAMPLE_SITE.read_text())


def own_site_file(tmp: Path, name: str) -> tuple[Path, str]:
    """examples/site.yaml with its own site id (topics of its own on a shared broker: no retained
    status of another run), free Modbus TCP ports and pty links under ``tmp``; (path, site id)."""
    import uuid

    from stormwatch.config import load_site
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.simulators.site import isolate_site

    profiles = ProfileLibrary()
    cfg = load_site(EXAMPLE_SITE, profiles)
    site_id = f"{name}-{uuid.uuid4().hex[:8]}"
    doc = isolate_site(cfg, tmp / f"links-{name}").model_dump(mode="json")
    doc["site"]["id"] = site_id
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    load_site(path, profiles)  # the file is valid as written
    return path, site_id
