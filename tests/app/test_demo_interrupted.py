"""A demo stopped with Ctrl-C says so ("interrupted") and exits 130: a run cut short is never
mistaken for a finished one."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_ctrl_c_says_interrupted_and_exits_130(tmp_path: Path) -> None:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "stormwatch", "demo", "--state-dir", str(tmp_path / "d")],
                                stdout=o, stderr=e)
        try:
            deadline = time.monotonic() + 120
            while b"stormwatch demo:" not in out.read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(60) == 130, err.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert err.read_text().splitlines()[-1] == "interrupted", err.read_text()
