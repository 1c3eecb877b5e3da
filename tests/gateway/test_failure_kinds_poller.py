"""Failure kind #5 (docs/reference/failure-kinds.md), "Poller death": fifty consecutive Modbus
I/O errors and then the device answers again -- readings resume by themselves, no restart needed.

A real pymodbus Modbus TCP server (tests/gateway_support.py) answers the rain gauge's read
normally twice, then with exception 0x0B "gateway target device failed to respond" (what a Modbus
TCP/RTU gateway answers when the field device behind it is silent: the I/O error of the field) to
exactly 50 consecutive read attempts, then normally again. The real gateway polls it on a manual
clock. Failed attempts are counted on the server side (the gateway's backoff skips slots:
0, 1, 3, 7, 15, 15, ... -- gateway/health.py), so 50 failed attempts span 751 poll slots.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pymodbus.constants import ExcCodes

from stormwatch import topics
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.gateway.service import Gateway
from stormwatch.profiles import ProfileLibrary
from tests.gateway_support import Collector, RegisterServer

pytestmark = pytest.mark.mosquitto

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
POLL_S = 10
GOOD_BEFORE = 2  # reads answered before the outage
FAILING = 50  # consecutive failed read attempts (failure-kinds.md #5)
COUNTER_BEFORE = 1420
COUNTER_AFTER = 1425  # 5 tips fell while the device was unreachable


class FlakyCounter(RegisterServer):
    """The counter module: reads ``GOOD_BEFORE`` .. ``GOOD_BEFORE + FAILING - 1`` (0-based) answer 0x0B."""

    def __init__(self) -> None:
        super().__init__(unit_ids=(1,))
        self.attempts: list[bool] = []  # one entry per read request of the counter: answered?
        self.lock = threading.Lock()

    async def _action(self, unit: int, fc: int, start: int, address: int, count: int, current: list[int],
                      set_values: list[int] | list[bool] | None) -> ExcCodes | None:
        with self.lock:
            n = len(self.attempts)
            ok = not (GOOD_BEFORE <= n < GOOD_BEFORE + FAILING)
            self.attempts.append(ok)
        if not ok:
            return ExcCodes.GATEWAY_NO_RESPONSE
        self.registers[unit][0] = COUNTER_BEFORE if n < GOOD_BEFORE else COUNTER_AFTER
        return await super()._action(unit, fc, start, address, count, current, set_values)


def _slots_until_recovery() -> int:
    """Slot of the first answered read after the outage when no slot is missed (by hand, backoff
    0, 1, 3, 7, 15, 15, ...: the n-th failure is followed by min(2**(n-1) - 1, 15) skipped slots)."""
    slot = GOOD_BEFORE
    for n in range(1, FAILING + 1):
        slot += 1 + min(2 ** (n - 1) - 1, 15)
    return slot


def test_fifty_consecutive_modbus_errors_then_readings_resume_by_themselves(
        mosquitto_server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="stormwatch.gateway")  # last: the capture handler's level is DEBUG
    recovery_slot = _slots_until_recovery()
    assert recovery_slot == 2 + 1 + 2 + 4 + 8 + 16 * 46  # 753
    srv = FlakyCounter().start()
    site_id = f"poller-{uuid.uuid4().hex[:8]}"
    cfg = parse_site(
        {"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t",
         "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": POLL_S,
                      "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 1,
                                    "timeout_s": 0.5}}]},
        "test-site", ProfileLibrary(),
    )
    # A manual clock: the gateway's waits between slots advance it, so the 760 slots of 10 s take the
    # real time of the polls only and no slot can be missed however loaded the machine is.
    clock = ManualClock(SIM_START)
    until = SIM_START + timedelta(seconds=POLL_S * (recovery_slot + 7))
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:
        gw = Gateway(cfg, ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw", confirm="broker")
        gw.run(until=until)  # no restart anywhere: one run() across the outage
        made = gw.readings_made
        got = sub.wait_for(made, timeout_s=15)
    finally:
        sub.close()
        srv.stop()

    # Server side: exactly FAILING consecutive failed attempts between good ones, then good again.
    attempts = list(srv.attempts)
    assert attempts[:GOOD_BEFORE] == [True] * GOOD_BEFORE
    assert attempts[GOOD_BEFORE:GOOD_BEFORE + FAILING] == [False] * FAILING
    resumed = attempts[GOOD_BEFORE + FAILING:]
    assert resumed and all(resumed)
    assert gw.health("rain-1").total_failures == FAILING and gw.health("rain-1").failures == 0

    # Readings: baseline, a dry poll, then 5 tips (1420 -> 1425) at the first answered poll, then dry.
    readings = sorted(got, key=lambda r: r.seq)
    assert len(readings) == made == GOOD_BEFORE + len(resumed)
    assert [(r.value, r.raw, r.flags) for r in readings[:GOOD_BEFORE]] == [
        (0, COUNTER_BEFORE, ("counter_baseline",)), (0, COUNTER_BEFORE, ())]
    first_back = readings[GOOD_BEFORE]
    # the 5 tips fell at some unknown time of the outage (> 2 poll intervals): counted, flagged so
    # (gateway/counter.py, counter_catch_up; R1 then says needs_verification)
    assert (first_back.value, first_back.raw, first_back.flags) == (COUNTER_AFTER - COUNTER_BEFORE, COUNTER_AFTER,
                                                                    ("counter_catch_up",))
    assert all((r.value, r.raw, r.flags) == (0, COUNTER_AFTER, ()) for r in readings[GOOD_BEFORE + 1:])
    assert sum(r.value for r in readings) == 5
    assert [r.time for r in readings[:GOOD_BEFORE]] == [SIM_START, SIM_START + timedelta(seconds=POLL_S)]
    # On the manual clock no slot is missed: the first answered poll is exactly the backoff's slot.
    assert gw.missed_slots == 0
    assert first_back.time == SIM_START + timedelta(seconds=POLL_S * recovery_slot)

    # Logs: one ERROR for the whole outage, one INFO for the recovery, the repeats at DEBUG.
    mine = [r for r in caplog.records if r.name.startswith("stormwatch.gateway")]
    errors = [r for r in mine if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "rain-1" in errors[0].getMessage()
    recovered = [r for r in mine if r.levelno == logging.INFO and "recovered" in r.getMessage()]
    assert [r.getMessage() for r in recovered] == [f"device rain-1 recovered after {FAILING} failed polls"]
    assert len([r for r in mine if r.levelno == logging.DEBUG and "still failing" in r.getMessage()]) == FAILING - 1
