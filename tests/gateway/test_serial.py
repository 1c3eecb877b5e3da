"""Serial line driver (MaxBotix HRXL ``R####\\r``) over a real pseudo-terminal, and QC flags."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator

import pytest

from stormwatch.config import Serial
from stormwatch.gateway.drivers.serial_line import SerialLineDriver
from stormwatch.gateway.errors import BadDataError, NoDataError
from stormwatch.gateway.qc import check_value
from stormwatch.profiles import ProfileLibrary


class LineWriter:
    """Writes a line to the pty master every ``period_s`` (a free-running sensor)."""

    def __init__(self, fd: int, period_s: float = 0.01) -> None:
        self.fd = fd
        self.line = b"R1234\r"
        self.period_s = period_s
        self.running = threading.Event()
        self.running.set()
        self._done = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._done.is_set():
            if self.running.is_set():
                os.write(self.fd, self.line)
            time.sleep(self.period_s)

    def close(self) -> None:
        self._done.set()
        self._t.join(2)


@pytest.fixture()
def pty_port() -> Iterator[tuple[int, str]]:
    master, slave = os.openpty()
    name = os.ttyname(slave)
    yield master, name
    os.close(master)
    os.close(slave)


def driver(port: str) -> SerialLineDriver:
    profile = ProfileLibrary().get("maxbotix_hrxl")
    return SerialLineDriver("basin-level", profile, Serial(kind="serial", port=port, timeout_s=0.5))


def test_reads_latest_line_and_discards_stale(pty_port: tuple[int, str]) -> None:
    master, name = pty_port
    drv = driver(name)
    writer = LineWriter(master)
    try:
        values = drv.poll()
        assert [(v.quantity, v.unit, v.value, v.raw) for v in values] == [("distance", "mm", 1234.0, "R1234")]
        # Stale lines buffered before the poll are discarded: the poll returns the new value.
        writer.running.clear()
        time.sleep(0.05)
        os.write(master, b"R0500\rR0600\r")
        writer.line = b"R2500\r"
        writer.running.set()
        time.sleep(0.03)
        assert drv.poll()[0].value == 2500.0
    finally:
        writer.close()
        drv.close()


def test_silent_port_is_a_clear_no_data_error(pty_port: tuple[int, str]) -> None:
    _master, name = pty_port
    drv = driver(name)
    with pytest.raises(NoDataError, match="no data"):
        drv.poll()
    drv.close()


def test_garbage_is_bad_data(pty_port: tuple[int, str]) -> None:
    master, name = pty_port
    drv = driver(name)
    writer = LineWriter(master)
    writer.line = b"hello\r"
    try:
        with pytest.raises(BadDataError, match="no line matching"):
            drv.poll()
    finally:
        writer.close()
        drv.close()


def test_qc_flags() -> None:
    # MaxBotix HRXL valid range 301-9998 mm (profile): 250 mm is out of range, still published.
    v = check_value(250.0, 250.0, (301.0, 9998.0), ())
    assert v.publish and v.flags == ("out_of_range",)
    assert check_value(5.0, 5.0, (0.0, 1000.0), ()).flags == ()
    assert check_value(5.0, -9999.0, None, (-9999.0,)).flags == ("device_error",)
    assert check_value(5.0, 5.0, None, (), device_error=True).flags == ("device_error",)
    gap = check_value(math.nan, math.nan, (0.0, 1000.0), ())
    assert not gap.publish and "non-finite" in gap.reason
    assert not check_value(math.inf, math.inf, None, ()).publish
