"""One simulated clock for every service: the clock file, its end, the waiting services, and the
lateness the alert engine derives from it (stormwatch/clock.py, alerts/engine.py)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.engine import DEFAULT_LATENESS_S, lateness_for
from stormwatch.clock import (
    CLOCK_FILE_ENV,
    ClockFileError,
    ScenarioClock,
    WallClock,
    read_clock_file,
    service_clock,
    wait_for_clock_file,
    write_clock_file,
)

START = datetime(2026, 6, 1, 4, 0, tzinfo=UTC)
END = datetime(2026, 6, 2, 12, 0, tzinfo=UTC)


def test_the_clock_file_round_trips_with_its_end(tmp_path: Path) -> None:
    clock = ScenarioClock(sim_start=START, speed=1500.0, wall_start=1767225600.25, sim_end=END)
    assert read_clock_file(write_clock_file(tmp_path / "c.json", clock)) == clock
    endless = ScenarioClock(sim_start=START, speed=60.0, wall_start=1767225600.0)
    assert read_clock_file(write_clock_file(tmp_path / "d.json", endless)).sim_end is None


def test_simulated_time_stops_at_the_end() -> None:
    # started 100 real s ago at 1000x: 100,000 simulated s = 27.8 h after the start, past a 10-h end
    clock = ScenarioClock(sim_start=START, speed=1000.0, wall_start=time.time() - 100,
                          sim_end=START + timedelta(hours=10))
    assert clock.now() == START + timedelta(hours=10)
    assert clock.ended()
    running = ScenarioClock(sim_start=START, speed=1000.0, wall_start=time.time() - 100, sim_end=END)
    assert START + timedelta(seconds=99_000) < running.now() < START + timedelta(seconds=101_000)
    assert not running.ended()


def test_service_clock_order(tmp_path: Path) -> None:
    file_clock = ScenarioClock(sim_start=START, speed=500.0, wall_start=time.time(), sim_end=END)
    path = write_clock_file(tmp_path / "clock.json", file_clock)
    env_clock = ScenarioClock(sim_start=START, speed=20.0, wall_start=time.time())
    assert service_clock(path, {}) == file_clock  # --clock-file
    assert service_clock(None, {CLOCK_FILE_ENV: str(path)}) == file_clock  # $STORMWATCH_CLOCK_FILE
    assert service_clock(None, env_clock.to_env()) == env_clock  # STORMWATCH_SIM_* (a child process)
    assert isinstance(service_clock(None, {}), WallClock)
    with pytest.raises(ClockFileError, match=r"missing\.json: no such clock file"):
        service_clock(tmp_path / "missing.json", {}, wait=False)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ClockFileError, match="not a stormwatch clock file"):
        service_clock(tmp_path / "bad.json", {})


def test_a_service_waits_for_the_clock_of_a_running_simulation(tmp_path: Path, caplog) -> None:
    """A file left by a finished simulation is not joined: the service waits for the new one."""
    path = tmp_path / "clock.json"
    old = ScenarioClock(sim_start=START, speed=1000.0, wall_start=time.time() - 3600, sim_end=END)
    write_clock_file(path, old)
    assert old.ended()
    new = ScenarioClock(sim_start=START, speed=1000.0, wall_start=time.time() + 5, sim_end=END)
    writer = threading.Timer(0.5, write_clock_file, (path, new))
    writer.start()
    with caplog.at_level("INFO", logger="stormwatch.clock"):
        got = wait_for_clock_file(path, timeout_s=10)
    writer.join()
    assert got == new
    assert "its simulation ended at 2026-06-02T12:00:00+00:00" in caplog.text
    # a one-shot command (workorders list) reads the finished simulation as it is: time stopped at its end
    write_clock_file(path, old)
    assert service_clock(path, {}, wait=False).now() == END


def test_waiting_gives_up_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ClockFileError, match=r"no clock file yet after 0.3 s \(start `stormwatch simulate"):
        wait_for_clock_file(tmp_path / "never.json", timeout_s=0.3)


def test_lateness_is_judged_in_simulated_seconds() -> None:
    assert lateness_for(WallClock()) == DEFAULT_LATENESS_S == 120.0
    # 0.5 real seconds of processing delay: 750 simulated s at 1500x, 1000 s at 2000x
    assert lateness_for(ScenarioClock(sim_start=START, speed=1500.0, wall_start=0.0)) == 750.0
    assert lateness_for(ScenarioClock(sim_start=START, speed=2000.0, wall_start=0.0)) == 1000.0
    # slower than 240x the live default is the larger
    assert lateness_for(ScenarioClock(sim_start=START, speed=60.0, wall_start=0.0)) == 120.0
