"""A late RTU reply is never published as the next device's reading.

Two devices behind one RS-485 adapter (a pseudo-terminal; the device side is written here, byte
by byte): A reads holding 0-9, B reads holding 100-109. The device answers A's request late -- only
once the gateway has given up on it (its 0.3 s reply window expired: ``ModbusLink.failed`` is
called), so the reply is late however slowly a loaded machine runs either side -- and B's at once
(5 ms); its registers hold 1000 + n at
address n and 2000 + (n - 100) at address n >= 100. Unguarded, B's read decodes A's late reply --
``[1000 ... 1009]`` for registers 100-109. Here A's poll fails (a gap), the late reply is
discarded as ``late_reply`` (counted, logged), and B gets its own ``[2000 ... 2009]``; for the same
unit id and for different unit ids. Replies of the wrong function, unit or length in a request's
window are discarded with their reason too. End to end, the gateway publishes B's true values on
Mosquitto and nothing for A's late slots.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pymodbus.framer.rtu import FramerRTU

from stormwatch import topics
from stormwatch.clock import ScenarioClock, WallClock
from stormwatch.config import ModbusRtu
from stormwatch.gateway.drivers.modbus import ModbusDriver, ModbusLink, client_factory, rtu_frame_gap_s
from stormwatch.gateway.errors import DeviceError, TransportError
from stormwatch.gateway.plan import (
    DevicePlan,
    GatewayPlan,
    ModbusPlan,
    ModbusRtuLink,
    PointPlan,
    ProfilePlan,
)
from stormwatch.gateway.service import Gateway
from stormwatch.profiles import DeviceProfile
from stormwatch.simulators.pty import PtyPair
from tests.gateway_support import Collector
from tests.waits import wait_until

WINDOW_S = 0.3  # the gateway's reply window (transport timeout_s)
A_BASE, B_BASE = 0, 100  # register blocks of device A and device B


def crc_frame(body: bytes) -> bytes:
    """body + Modbus CRC-16, via pymodbus's own CRC (low byte first on the wire)."""
    return body + FramerRTU.compute_CRC(body).to_bytes(2, "big")


def true_words(address: int, count: int) -> list[int]:
    """What the device's registers hold: 1000 + n for A's block, 2000 + (n - 100) for B's."""
    return [(2000 + a - B_BASE) if a >= B_BASE else (1000 + a) for a in range(address, address + count)]


#: (unit, fc, addr, count) -> (delay s, bytes), or (None, bytes): held until the gateway gives up on the request.
Reply = Callable[[int, int, int, int], tuple[float | None, bytes] | None]


def normal_reply(unit: int, fc: int, address: int, count: int) -> bytes:
    words = true_words(address, count)
    return crc_frame(bytes([unit, fc, 2 * count]) + b"".join(w.to_bytes(2, "big") for w in words))


class SlowDevice:
    """The device side of the pty: reads 8-byte requests, answers each after ``reply()``'s delay.

    Like a real single-threaded slave it answers in order: a request that arrives while an answer
    is still pending is answered after it. Records each request with its arrival time. A reply
    with no delay is held until :meth:`release_late` (the gateway gave up on the request; see
    :func:`late_is_after_giving_up`), which writes it and records when (``late_sent``).
    """

    def __init__(self, fd: int, reply: Reply) -> None:
        self.fd = fd
        self.reply = reply
        self.requests: list[tuple[float, int, int, int, int]] = []
        self.late_sent: list[float] = []
        self._held: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buf = b""
        queue: list[tuple[float, bytes]] = []  # (send at, bytes)
        free_at = 0.0
        while not self._stop.is_set():
            r, _, _ = select.select([self.fd], [], [], 0.002)
            if r:
                try:
                    buf += os.read(self.fd, 256)
                except BlockingIOError:
                    pass
            while len(buf) >= 8:
                req, buf = buf[:8], buf[8:]
                assert crc_frame(req[:6]) == req, req.hex()
                unit, fc = req[0], req[1]
                address, count = int.from_bytes(req[2:4], "big"), int.from_bytes(req[4:6], "big")
                now = time.monotonic()
                self.requests.append((now, unit, fc, address, count))
                answer = self.reply(unit, fc, address, count)
                if answer is not None:
                    delay, data = answer
                    if delay is None:
                        with self._lock:
                            self._held.append(data)
                        continue
                    at = max(now + delay, free_at)
                    free_at = at + 0.002
                    queue.append((at, data))
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                os.write(self.fd, queue.pop(0)[1])

    def release_late(self) -> int:
        """Write the held replies now (called in the gateway's thread once it gave up on them); the
        number of bytes written."""
        with self._lock:
            held, self._held = self._held, []
            for data in held:
                self.late_sent.append(time.monotonic())
                os.write(self.fd, data)
        return sum(len(data) for data in held)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)


@pytest.fixture()
def late_is_after_giving_up(monkeypatch: pytest.MonkeyPatch) -> Callable[[SlowDevice], None]:
    """``attach(device)``: the device's held replies are written when the gateway's link gives up on
    a request (``ModbusLink.failed``, before its drain of the line), so they arrive after the reply
    window by construction, never within it because the gateway's thread ran late. The drain starts
    once the kernel has handed them to the gateway's side of the pty (on a busy machine that can take
    longer than the drain's quiet window, and a late reply still on its way when the port is closed
    is flushed unseen: discarded, but not counted)."""
    def attach(device: SlowDevice) -> None:
        real = ModbusLink.failed

        def failed(link: ModbusLink, device_id: str) -> str:
            sent = device.release_late()
            client = link._rtu()
            if sent and client is not None and client.socket is not None:
                port = client.socket
                wait_until(lambda: port.in_waiting >= sent, 10, "the late reply at the gateway's side", every_s=0.001)
            return real(link, device_id)
        monkeypatch.setattr(ModbusLink, "failed", failed)
    return attach


def profile(base: int) -> DeviceProfile:
    return DeviceProfile.model_validate({
        "model": f"block_{base}", "manufacturer": "test", "description": "ten holding registers", "source": "test",
        "protocol": "modbus",
        "modbus": {"points": [{"quantity": f"r{base + i}", "unit": "1", "address": base + i} for i in range(10)]},
    })


@pytest.fixture()
def pty() -> Iterator[PtyPair]:
    pair = PtyPair()
    yield pair
    pair.close()


def late_for_a(units: dict[int, int]) -> Reply:
    """A's block answered late (held until the gateway gives up on it); B's at once (5 ms)."""
    def reply(unit: int, fc: int, address: int, count: int) -> tuple[float | None, bytes] | None:
        if address == A_BASE and unit == units[A_BASE]:
            return None, normal_reply(unit, fc, address, count)
        if address == B_BASE and unit == units[B_BASE]:
            return 0.005, normal_reply(unit, fc, address, count)
        return None
    return reply


@pytest.mark.parametrize("unit_b", [1, 2], ids=["same unit id", "different unit ids"])
def test_a_late_reply_is_never_decoded_as_the_next_devices_registers(
        pty: PtyPair, unit_b: int, caplog: pytest.LogCaptureFixture,
        late_is_after_giving_up: Callable[[SlowDevice], None]) -> None:
    trials = 6
    device = SlowDevice(pty.master_fd, late_for_a({A_BASE: 1, B_BASE: unit_b}))
    late_is_after_giving_up(device)
    transport = ModbusRtu(kind="modbus-rtu", port=pty.slave_path, timeout_s=WINDOW_S)
    link = ModbusLink("rtu-late", client_factory(transport), frame_gap_s=rtu_frame_gap_s(9600))
    a = ModbusDriver("dev-a", profile(A_BASE), 1, link, WallClock())
    b = ModbusDriver("dev-b", profile(B_BASE), unit_b, link, WallClock())
    caplog.set_level(logging.DEBUG, logger="stormwatch.gateway")
    b_values = []
    try:
        for _ in range(trials):
            with pytest.raises(TransportError):  # A's reply misses its window: a gap, not a value
                a.poll()
            b_values.append([v.value for v in b.poll()])
    finally:
        device.close()
        link.close()
    expected_b = [float(w) for w in true_words(B_BASE, 10)]
    assert expected_b == [2000.0 + i for i in range(10)]
    assert b_values == [expected_b] * trials  # never A's [1000 ... 1009]
    assert link.discarded == {"late_reply": trials}  # each late reply drained and counted
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and "late_reply" in r.getMessage()]
    assert len(warnings) == 1 and "unit 1 function 0x03, byte count 20" in warnings[0]
    # B's request went out only after the line had been silent for a whole window after A's reply
    times: dict[tuple[int, int], list[float]] = {key: [] for key in ((1, A_BASE), (unit_b, B_BASE))}
    for t, unit, _fc, address, _count in device.requests:
        times[(unit, address)].append(t)
    assert len(times[(1, A_BASE)]) == len(device.late_sent) == trials
    for t_late, t_b in zip(device.late_sent, times[(unit_b, B_BASE)], strict=True):
        assert t_b - t_late >= WINDOW_S


@pytest.mark.parametrize(("name", "bad", "reason"), [
    ("other function", lambda u, a, c: crc_frame(bytes([u, 0x04, 2 * c]) + bytes(2 * c)), "wrong_function"),
    ("other unit first", lambda u, a, c: normal_reply(u + 1, 3, a, c) + normal_reply(u, 3, a, c), "wrong_unit"),
    ("two replies at once", lambda u, a, c: normal_reply(u, 3, 0, c) + normal_reply(u, 3, a, c), "wrong_length"),
])
def test_a_reply_that_does_not_answer_the_request_is_discarded(pty: PtyPair, name: str,
                                                               bad: Callable[[int, int, int], bytes],
                                                               reason: str) -> None:
    calls = []

    def reply(unit: int, fc: int, address: int, count: int) -> tuple[float, bytes]:
        calls.append(address)
        if len(calls) == 1:
            return 0.005, bad(unit, address, count)
        return 0.005, normal_reply(unit, fc, address, count)

    device = SlowDevice(pty.master_fd, reply)
    transport = ModbusRtu(kind="modbus-rtu", port=pty.slave_path, timeout_s=WINDOW_S)
    link = ModbusLink("rtu-bad", client_factory(transport), frame_gap_s=rtu_frame_gap_s(9600))
    b = ModbusDriver("dev-b", profile(B_BASE), 1, link, WallClock())
    try:
        with pytest.raises(DeviceError, match=reason):  # pymodbus swallows the reply behind another
            b.poll()                                    # unit's frame: a timeout, with the reason
        assert [v.value for v in b.poll()] == [float(w) for w in true_words(B_BASE, 10)]  # the line recovers
    finally:
        device.close()
        link.close()
    assert link.discarded == {reason: 1}, name


def test_bytes_waiting_before_a_request_are_discarded(pty: PtyPair) -> None:
    device = SlowDevice(pty.master_fd, lambda u, f, a, c: (0.005, normal_reply(u, f, a, c)))
    transport = ModbusRtu(kind="modbus-rtu", port=pty.slave_path, timeout_s=WINDOW_S)
    link = ModbusLink("rtu-stale", client_factory(transport), frame_gap_s=rtu_frame_gap_s(9600))
    b = ModbusDriver("dev-b", profile(B_BASE), 1, link, WallClock())
    try:
        assert b.poll()[0].value == 2000.0
        os.write(pty.master_fd, normal_reply(1, 3, A_BASE, 10))  # nobody asked: A's block, unsolicited
        time.sleep(0.05)
        assert [v.value for v in b.poll()] == [float(w) for w in true_words(B_BASE, 10)]
    finally:
        device.close()
        link.close()
    assert link.discarded == {"late_reply": 1}


@pytest.mark.mosquitto
def test_gateway_publishes_b_true_values_and_nothing_for_a(
        mosquitto_server, pty: PtyPair, tmp_path: Path, late_is_after_giving_up: Callable[[SlowDevice], None]) -> None:
    """End to end on MQTT: A answers every request late; B's readings are 2000 ... 2009, A has none."""
    site = f"late-{uuid.uuid4().hex[:8]}"
    device = SlowDevice(pty.master_fd, late_for_a({A_BASE: 1, B_BASE: 1}))
    late_is_after_giving_up(device)

    def profile_plan(base: int) -> ProfilePlan:
        points = tuple(PointPlan(f"r{base + i}", "1", address=base + i) for i in range(10))
        return ProfilePlan(f"block_{base}", "modbus", modbus=ModbusPlan(points))

    line = ModbusRtuLink(pty.slave_path, timeout_s=WINDOW_S)
    plan = GatewayPlan(site, "gw-late", (DevicePlan("dev-a", "block_0", line), DevicePlan("dev-b", "block_100", line)),
                       {"block_0": profile_plan(A_BASE), "block_100": profile_plan(B_BASE)})
    start = datetime(2026, 6, 1, tzinfo=UTC)
    clock = ScenarioClock(sim_start=start, speed=30.0, wall_start=time.time() + 0.2)  # a 60 s slot per 2 real s
    sub = Collector(mosquitto_server.port, topics.readings(site, "gw-late"), f"sub-{site}")
    gw = Gateway.from_plan(plan, clock, mosquitto_server.url, tmp_path / "gw", confirm="broker")
    try:
        gw.run(until=start + timedelta(minutes=4))
        got = sub.wait_for(4 * 10)
    finally:
        sub.close()
        device.close()
    b = sorted((r for r in got if r.device == "dev-b"), key=lambda r: (r.time, int(r.quantity[1:])))
    slots = sorted({r.time for r in b})
    assert len(slots) >= 2
    for t in slots:
        assert [(r.quantity, r.value) for r in b if r.time == t] == [
            (f"r{a}", float(w)) for a, w in zip(range(B_BASE, B_BASE + 10), true_words(B_BASE, 10), strict=True)]
    assert not [r for r in got if r.device == "dev-a"]  # A's late replies: gaps, never values
    assert gw.health("dev-a").total_failures >= 1
    late = gw.discarded_replies()[f"modbus-rtu://{pty.slave_path}"]
    assert late == {"late_reply": gw.health("dev-a").total_failures}  # every late reply counted
