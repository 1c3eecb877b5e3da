"""``stormwatch demo --workdir DIR`` run twice gives the same answer: every run starts clean.

The default scenario's rain is 1.2 in at 0.01 in per tip = 120 tips (hydrology.md; scenario
``default``); a rerun that kept the first run's store counted 240 and repeated its events.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.app.pipeline import Pipeline, PipelineError
from stormwatch.app.workdir import MARKER, WorkdirError, prepare_workdir
from stormwatch.clock import WallClock
from stormwatch.config import load_site
from stormwatch.contract import Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.stores.urls import open_store
from tests.answers_support import without_run_ids
from tests.conftest import REPO
from tests.shared_runs import DemoRun

pytestmark = pytest.mark.slow  # reruns the session's demo run on a copy of its state

runner = CliRunner()


def _demo(workdir: Path) -> list[dict]:
    env = {**os.environ, "STORMWATCH_LOG_LEVEL": "WARNING"}
    proc = subprocess.run(
        [sys.executable, "-m", "stormwatch", "demo", "--json", "--workdir", str(workdir)],
        capture_output=True, text=True, timeout=280, env=env, cwd=workdir.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _stored_tips(workdir: Path) -> tuple[int, int]:
    with sqlite3.connect(workdir / "stormwatch.db") as db:
        rows = db.execute("SELECT value FROM readings WHERE quantity = 'rain_tips'").fetchall()
    return sum(int(v) for (v,) in rows), len(rows)


def _orders(workdir: Path) -> Counter[str]:
    book = WorkOrders(workdir / "alerts.db", WallClock())
    try:
        return Counter(o.kind for o in book.list())
    finally:
        book.close()


@pytest.mark.timeout(600, func_only=True)  # setup: the session's demo run, its own 900 s
def test_a_rerun_on_the_same_workdir_starts_clean(default_demo: DemoRun, tmp_path: Path) -> None:
    first = default_demo.events  # the first run: the session's, on a copy of its state
    work = default_demo.copy_state(tmp_path / "demo")
    assert (work / MARKER).is_file()
    keep = work / "notes.txt"
    keep.write_text("mine\n")
    tips_1, rows_1 = _stored_tips(work)
    orders_1 = _orders(work)

    second = _demo(work)
    tips_2, rows_2 = _stored_tips(work)
    assert tips_1 == tips_2 == 120  # 1.2 in / 0.01 in, never 240
    assert rows_1 == rows_2 == 1920  # one 60-s poll grid over 32 h, every slot polled (lockstep)
    storms = [e for e in second if e["kind"] == "storm_inspection_due"]
    assert len(storms) == 1 and storms[0]["tips"] == 120 and storms[0]["depth_in"] == 1.2
    assert not any(e.get("late_detection_s") for e in second)
    assert without_run_ids(second) == without_run_ids(first)
    # one order of each kind, as after the first run: no second basin order
    assert _orders(work) == orders_1
    assert orders_1 == Counter({"routine_inspection": 1, "turbidity_review": 1, "basin_cleanout": 1,
                                "storm_inspection": 1})
    assert keep.read_text() == "mine\n"  # only the run's own state is removed


def test_prepare_workdir_marks_cleans_and_refuses(tmp_path: Path) -> None:
    new = tmp_path / "new"
    assert prepare_workdir(new) == []
    assert (new / MARKER).is_file()
    (new / "stormwatch.db").write_bytes(b"x")
    (new / "gateway").mkdir()
    (new / "gateway" / "gateway.sqlite3").write_bytes(b"x")
    (new / "report.pdf").write_bytes(b"x")
    assert sorted(prepare_workdir(new)) == ["gateway", "stormwatch.db"]
    assert sorted(p.name for p in new.iterdir()) == [MARKER, "report.pdf"]

    services = tmp_path / "var"  # what the services recipe leaves: never the demo's to delete
    services.mkdir()
    (services / "stormwatch.db").write_bytes(b"field data")
    with pytest.raises(WorkdirError, match="not empty and not made by `stormwatch demo`"):
        prepare_workdir(services)
    assert (services / "stormwatch.db").read_bytes() == b"field data"
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(WorkdirError, match="not a directory"):
        prepare_workdir(a_file)


def test_demo_refuses_a_foreign_workdir_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "alerts.db").write_bytes(b"orders")
    result = runner.invoke(app, ["demo", "--workdir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "not empty and not made by `stormwatch demo`" in result.output
    assert "Traceback" not in result.output
    assert (tmp_path / "alerts.db").read_bytes() == b"orders"


def test_a_store_holding_the_scenario_window_is_refused(tmp_path: Path) -> None:
    """Another store (--influx) cannot be cleaned by the demo: readings of the run's site and window
    already there would be counted again, so the run is refused before any service starts."""
    profiles = ProfileLibrary()
    cfg = load_site(REPO / "examples" / "site.yaml", profiles)
    scenario = load_scenario("default")
    url = f"sqlite:///{tmp_path / 'other.db'}"
    store = open_store(url)
    store.write_readings([Reading(site=cfg.site.id, device="rain-1", quantity="rain_tips", value=3, unit="tip",
                                  time=datetime(2026, 6, 1, 6, 0, tzinfo=UTC), gateway="gw-old", boot="b0", seq=1)])
    store.close()
    with pytest.raises(PipelineError, match=r"already holds 1 reading of site riverside-commons .* twice; .* it$"):
        Pipeline(cfg, profiles, scenario, tmp_path / "work", store_url=url).run()
