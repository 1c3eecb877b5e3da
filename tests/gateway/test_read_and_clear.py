"""A read-and-clear Modbus counter whose reply is lost: its tips are gone, so the next count is a gap.

A pulse counter that keeps tips since the last read (``counter.mode: delta``) zeroes them when it
answers. The device here (a real pymodbus TCP server) clears on the second read and answers after
the gateway's timeout: the gateway must not read again within the poll (the client has no retries),
and the next count it publishes must carry ``counter_reset`` -- never a clean count presented as
the whole interval (failure-kinds.md, "A retried command repeats its side effect").
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pymodbus.simulator import DataType, SimData, SimDevice

from stormwatch.clock import WallClock
from stormwatch.config import parse_site
from stormwatch.gateway.counter import FLAG_BASELINE, FLAG_RESET
from stormwatch.gateway.drivers.build import build_driver
from stormwatch.gateway.errors import TransportError
from stormwatch.gateway.plan import compile_plan
from stormwatch.gateway.readings import DeviceReadings
from stormwatch.profiles import ProfileLibrary
from tests.gateway_support import DeviceServer

PROFILE = """\
model: pulse_counter_read_clear
manufacturer: generic
description: Tipping-bucket gauge on a pulse counter that clears its count on every read.
source: test profile (a read-and-clear counter register).
protocol: modbus
modbus:
  points:
    - {quantity: rain_tips, unit: "{tip}", table: holding, address: 0x0000, type: uint16}
counter: {quantity: rain_tips, mode: delta, width_bits: 16, resolution: "0.01 in"}
"""
TIMEOUT_S = 0.3
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class ClearingCounter:
    """Tips fall between reads (``made[k]`` before read ``k``); a read returns and clears them;
    the replies to reads in ``late`` come after the gateway's timeout."""

    def __init__(self, made: list[int], late: set[int]) -> None:
        self.made, self.late = made, late
        self.reads = 0
        self.cleared: list[int] = []

    async def action(self, fc: int, start: int, address: int, count: int, current: list[int],
                     set_values: object) -> None:
        if set_values is not None or address != 0:
            return
        n = self.reads
        self.reads += 1
        current[0] = self.made[n]
        self.cleared.append(self.made[n])
        if n in self.late:
            await asyncio.sleep(TIMEOUT_S * 3)


def test_a_lost_reply_of_a_clearing_read_makes_the_next_count_a_gap(tmp_path: Path) -> None:
    (tmp_path / "pulse_counter_read_clear.yaml").write_text(PROFILE)
    device = ClearingCounter(made=[2, 5, 6, 7], late={1})
    srv = DeviceServer([SimDevice(id=1, simdata=[SimData(0, count=16, values=0, datatype=DataType.REGISTERS)],
                                  action=device.action)])
    srv.start()
    profiles = ProfileLibrary(tmp_path)
    cfg = parse_site({"site": {"id": "pulse", "jurisdiction": "ch133"}, "devices": [
        {"id": "rain-1", "profile": "pulse_counter_read_clear", "transport": {
            "kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "timeout_s": TIMEOUT_S}}]}, "t", profiles)
    plan = compile_plan(cfg, profiles)
    dev = plan.devices[0]
    driver = build_driver(dev, plan.profile(dev), WallClock(), {})
    readings = DeviceReadings(dev.id, plan.profile(dev), 60.0)
    published: list[tuple[int | float, tuple[str, ...]]] = []
    try:
        for k in range(4):
            at = T0 + timedelta(minutes=k)
            try:
                values = driver.poll()
            except TransportError:
                assert k == 1
                continue
            pending, state = readings.readings(values, at)
            readings.advanced(state)
            published += [(value, flags) for _q, value, _u, _raw, flags, _size in pending]
    finally:
        driver.close()
        srv.stop()
    assert device.reads == 4  # one read per poll: the timed-out read is not repeated
    assert device.cleared == [2, 5, 6, 7]
    # the 5 tips the lost reply cleared are unknown: the next count (6) is flagged, the interval a gap
    assert published == [(0, (FLAG_BASELINE,)), (6, (FLAG_RESET,)), (7, ())]
