"""Acceptance of the lockstep clock: `stormwatch demo --json` gives the same events on every run.

Each run is the real command in its own process (simulators on real Modbus TCP/RTU and serial
ptys, the embedded broker -- Mosquitto when installed -- SQLite); nothing is shared between runs.
A test's own run is compared with the session's run of the same scenario (tests/shared_runs.py).
The events must be identical in everything but the run's own ids (the gateway's boot id in the
evidence), and no poll slot may be skipped (no ``data_gap``), with or without a CPU hog beside the
run. docs/simulators.md ("The lockstep clock").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.answers_support import without_run_ids
from tests.shared_runs import DemoRun, demo_env


def _demo(tmp: Path, *args: str, cpus: set[int] | None = None) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "stormwatch", "demo", "--json", *args],
        capture_output=True, text=True, timeout=900, cwd=tmp, env=demo_env(),
        preexec_fn=None if cpus is None else _pinned_to(cpus),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "skipped" not in proc.stderr, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _pinned_to(cpus: set[int]) -> Callable[[], None]:
    """A child's set-up that pins it, and every process it starts, to ``cpus``."""
    return lambda: os.sched_setaffinity(0, cpus)


def _assert_same(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> None:
    assert [e["kind"] for e in first] == [e["kind"] for e in second]
    assert without_run_ids(first) == without_run_ids(second)  # times, depths, percentages, due times
    assert not [e for e in first + second if e["kind"] == "data_gap"]


@pytest.mark.timeout(1900)
def test_two_default_runs_give_the_same_events(default_demo: DemoRun, tmp_path: Path) -> None:
    assert "skipped" not in default_demo.stderr, default_demo.stderr[-3000:]
    first, second = default_demo.events, _demo(tmp_path)
    _assert_same(first, second)
    kinds = [e["kind"] for e in first]
    assert {"storm_inspection_due", "turbidity_contrast", "basin_cleanout_due"} <= set(kinds)
    storm = next(e for e in first if e["kind"] == "storm_inspection_due")
    assert storm["tips"] == 120 and storm["depth_in"] == 1.2  # the scenario's 1.2 in, every tip stored


@pytest.mark.timeout(1900)
def test_two_outfalls_runs_give_the_same_events(two_outfalls_demo: DemoRun, tmp_path: Path) -> None:
    assert "skipped" not in two_outfalls_demo.stderr, two_outfalls_demo.stderr[-3000:]
    _assert_same(two_outfalls_demo.events, _demo(tmp_path, "--scenario", "two-outfalls"))


@pytest.mark.timeout(1900)
def test_a_run_beside_a_cpu_hog_gives_the_same_events(default_demo: DemoRun, tmp_path: Path) -> None:
    """Two stress-ng CPU workers on the run's one core: the run is slower, never different (from the
    session's default run, made without the hog). The run and the hog share the machine's last core,
    so the run has a third of a core at most and the tests beside it keep the others."""
    stress = shutil.which("stress-ng")
    if stress is None:
        if os.environ.get("CI") == "true":
            pytest.fail("stress-ng is not installed (.ci/run installs it)")
        pytest.skip("stress-ng is not installed")
    assert "skipped" not in default_demo.stderr, default_demo.stderr[-3000:]
    quiet = default_demo.events
    core = {max(os.sched_getaffinity(0))}
    hog = subprocess.Popen([stress, "--cpu", "2", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           preexec_fn=_pinned_to(core))
    try:
        loaded = _demo(tmp_path, cpus=core)
    finally:
        hog.terminate()
        hog.wait(30)
    _assert_same(quiet, loaded)
