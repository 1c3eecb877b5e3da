"""``stormwatch alerts`` started in the background from a script (SIGINT inherited *ignored*, as a
shell's ``cmd &`` leaves it) still stops on SIGINT, as on SIGTERM: stormwatch.runtime.signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stormwatch import resources
from stormwatch.app import servers

pytestmark = [pytest.mark.mosquitto, pytest.mark.slow]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_alerts_in_the_background_stops_on_sigint_and_sigterm(own_mosquitto: servers.Mosquitto, tmp_path: Path,
                                                             signum: int) -> None:
    log = tmp_path / "alerts.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stormwatch", "alerts", "--site", str(resources.example_site()), "--broker",
             own_mosquitto.url, "--store", f"sqlite:///{tmp_path / 'sw.db'}", "--state-dir", str(tmp_path / "st")],
            stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # as the script's `&` leaves it
        try:
            deadline = time.monotonic() + 60
            while b"connected to" not in log.read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            proc.send_signal(signum)
            assert proc.wait(30) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert f"signal {int(signum)}: stopping the alert service" in log.read_text()
