"""``stormwatch demo --storm-depth-in 0.4``: a storm that ends below the threshold says so on the
timeline -- its end, its depth and that no inspection is due -- and the timeline, in simulated
time, carries no service log line stamped with the wall clock (those go to the run's log file)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import WallClock

WALL_CLOCK_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING) ")


def test_a_storm_below_the_threshold_ends_on_the_timeline(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("STORMWATCH_LOG_LEVEL", "STORMWATCH_LOG_FILE")}
    state = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "stormwatch", "demo", "--storm-depth-in", "0.4",
         "--state-dir", str(state)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    ended = [line for line in lines if " storm_ended_below_threshold " in line and "×" not in line]
    # 0.4 in of 0.01-in tips: 40 tips
    assert len(ended) == 1 and "0.40 in (40 tips)" in ended[0], lines
    assert "ended below the threshold, no inspection due" in ended[0]
    assert not any(" storm_inspection_due " in line for line in lines)
    book = WorkOrders(state / "alerts.db", WallClock())
    assert [o for o in book.list() if o.kind == "storm_inspection"] == []
    book.close()
    # no wall-clock log line in the timeline or around it; what the services logged is in the file named
    logged = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if WALL_CLOCK_LINE.match(line)]
    assert logged == [], logged[:5]
    notice = [line for line in proc.stderr.splitlines() if "warning" in line and "are in" in line]
    if notice:
        assert notice[0].endswith(str(state / "demo.log")) and (state / "demo.log").stat().st_size > 0
