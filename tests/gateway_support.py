"""Test helpers for the gateway tests (no tests here): a real pymodbus Modbus TCP server whose
registers the test sets, a real paho subscriber that collects readings, a TCP proxy to cut, and the
conductor and scripted participant of a lockstep clock (docs/simulators.md "The lockstep clock").

The server is pymodbus's own ``ModbusTcpServer`` with ``SimDevice``/``SimData`` (pymodbus 3.16),
running its asyncio loop in a background thread; an ``action`` hook overlays the test's register
values on every read and records writes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from stormwatch.app import servers
from stormwatch.contract import Reading, parse_readings
from stormwatch.gateway.service import Gateway
from stormwatch.lockstep import LockstepClock
from tests.waits import wait_until

RegisterSource = Callable[[int, int], int | None]  # (address, read_index) -> word or None


class DeviceServer:
    """A real pymodbus ``ModbusTcpServer`` on 127.0.0.1 serving ``devices`` (pymodbus ``SimDevice``),
    its asyncio loop in a background thread: :meth:`start` returns once the port accepts
    connections, :meth:`stop` shuts the server down and joins the thread. ``port``: a free one by
    default, or a given one (a device that comes back on the port it had)."""

    def __init__(self, devices: list[SimDevice], port: int | None = None) -> None:
        self.port = servers.free_port() if port is None else port
        self._devices = devices
        self._loop = asyncio.new_event_loop()
        self._server: ModbusTcpServer | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._server = ModbusTcpServer(self._devices, address=("127.0.0.1", self.port))
            self._ready.set()
            await self._server.serve_forever()

        self._loop.run_until_complete(main())

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(5)
        servers.wait_port(self.port, 5)

    def stop(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.shutdown(), self._loop).result(5)
        self._thread.join(5)


class RegisterServer:
    """A real Modbus TCP server on 127.0.0.1 with one SimDevice per unit id.

    Attributes:
        registers: unit id → {address: word} served on reads (missing → 0).
        dynamic: unit id → function(address, read_no) → word|None, consulted first.
        reads: list of (unit, address, count); writes: list of (unit, address, values).
    """

    def __init__(self, unit_ids: tuple[int, ...] = (1,), port: int | None = None) -> None:
        self.registers: dict[int, dict[int, int]] = {u: {} for u in unit_ids}
        self.dynamic: dict[int, RegisterSource] = {}
        self.reads: list[tuple[int, int, int]] = []
        self.writes: list[tuple[int, int, list[int]]] = []
        self._serving = DeviceServer([
            SimDevice(
                id=u,
                simdata=[SimData(0, count=0x4000, values=0, datatype=DataType.REGISTERS)],
                action=partial(self._action, u),
            )
            for u in unit_ids
        ], port)
        self.port = self._serving.port

    async def _action(self, unit: int, fc: int, start: int, address: int, count: int, current: list[int],
                      set_values: list[int] | list[bool] | None) -> None:
        if set_values is not None and fc in (5, 6, 15, 16):
            self.writes.append((unit, address, [int(v) for v in set_values]))
            return None
        read_no = sum(1 for r in self.reads if r[0] == unit and r[1] == address)
        self.reads.append((unit, address, count))
        for a in range(address, address + count):
            word = None
            if unit in self.dynamic:
                word = self.dynamic[unit](a, read_no)
            if word is None:
                word = self.registers[unit].get(a, 0)
            current[a - start] = word
        return None

    def start(self) -> RegisterServer:
        self._serving.start()
        return self

    def stop(self) -> None:
        self._serving.stop()


class Collector:
    """A real paho subscriber that parses readings (optionally a persistent session)."""

    def __init__(self, url_port: int, topic: str, client_id: str, clean: bool = True) -> None:
        self.readings: list[Reading] = []
        self.identities: set[tuple[str, str, int]] = set()  # of every reading received (duplicates once)
        self.lock = threading.Lock()
        self._subscribed = threading.Event()
        self.topic = topic
        self._barrier_topic = f"stormwatch-test/barrier/{client_id}"
        self._barrier = threading.Event()
        self.client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean,
            protocol=MQTTProtocolVersion.MQTTv311,
        )
        self.client.reconnect_delay_set(1, 2)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: self._subscribed.set()
        self.client.connect("127.0.0.1", url_port, keepalive=30)
        self.client.loop_start()
        if not self._subscribed.wait(10):
            raise TimeoutError("subscription not acknowledged")

    def _on_connect(self, client: mqtt.Client, *_args: object) -> None:
        client.subscribe([(self.topic, 1), (self._barrier_topic, 1)])

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        if msg.topic == self._barrier_topic:
            self._barrier.set()
            return
        readings = parse_readings(msg.payload)
        with self.lock:
            self.readings.extend(readings)
            self.identities.update(r.identity for r in readings)

    def wait_for(self, n: int, timeout_s: float = 15.0) -> list[Reading]:
        """The readings received once there are ``n`` of them, or when ``timeout_s`` passes (the
        caller asserts on what came)."""

        def enough() -> bool:
            with self.lock:
                return len(self.readings) >= n

        wait_until(enough, timeout_s, f"{n} readings", fail=False)
        with self.lock:
            return list(self.readings)

    def barrier(self, timeout_s: float = 15.0) -> list[Reading]:
        """The readings received once everything the broker queued for this subscriber before now has
        arrived: a message it publishes to itself comes back behind them (the broker delivers one
        client's messages in order) -- e.g. a duplicate, if there were one."""
        self._barrier.clear()
        self.client.publish(self._barrier_topic, b"barrier", qos=1)
        wait_until(self._barrier.is_set, timeout_s, "the subscriber's barrier message back")
        with self.lock:
            return list(self.readings)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class LoopThread:
    """An asyncio event loop in a background thread, for simulators with async start/stop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: object, timeout_s: float = 10.0) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)  # type: ignore[arg-type]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class TcpProxy:
    """A TCP proxy on 127.0.0.1 that the test can cut (every connection dropped, new ones refused)
    and restore on the same port: an uplink outage without touching the broker. :meth:`stall`
    makes the open connections stop passing bytes without closing (a NAT mapping that timed out).
    """

    def __init__(self, target_port: int) -> None:
        import socket

        self._socket = socket
        self.target_port = target_port
        self.port = servers.free_port()
        self._conns: list[object] = []
        self._lock = threading.Lock()
        self._listener: object | None = None
        self._up = False
        self._stalled: set[int] = set()  # ids of the sockets whose bytes are swallowed

    def start(self) -> TcpProxy:
        s = self._socket.socket()
        s.setsockopt(self._socket.SOL_SOCKET, self._socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(16)
        self._listener = s
        self._up = True
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()
        return self

    def _accept(self, listener: object) -> None:
        while self._up:
            try:
                client, _ = listener.accept()  # type: ignore[attr-defined]
            except OSError:
                return
            upstream = self._socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: object, dst: object) -> None:
        try:
            while data := src.recv(65536):  # type: ignore[attr-defined]
                if id(src) in self._stalled:
                    continue  # swallowed: both ends keep an open, silent connection
                dst.sendall(data)  # type: ignore[attr-defined]
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()  # type: ignore[attr-defined]
            except OSError:
                pass

    def cut(self) -> None:
        self._up = False
        if self._listener is not None:
            try:
                # wakes the accepting thread (Linux): a close alone leaves it blocked in accept(), the
                # port listening, and the next connection let through
                self._listener.shutdown(self._socket.SHUT_RDWR)  # type: ignore[attr-defined]
            except OSError:
                pass
            self._listener.close()  # type: ignore[attr-defined]
            self._listener = None
        with self._lock:
            for c in self._conns:
                try:
                    c.shutdown(self._socket.SHUT_RDWR)  # type: ignore[attr-defined]
                    c.close()  # type: ignore[attr-defined]
                except OSError:
                    pass
            self._conns.clear()

    def restore(self) -> None:
        self.start()

    def stall(self) -> None:
        """Every connection open now stops forwarding in both directions and is never closed by
        the proxy; connections made afterwards are forwarded normally."""
        with self._lock:
            self._stalled.update(id(c) for c in self._conns)


class Conductor:
    """A :class:`~stormwatch.lockstep.LockstepClock`'s conductor in a background thread: it moves the
    clock while the test's gateway polls; :meth:`join` returns once the run has ended and re-raises
    what stopped it (``LockstepStalled`` names whom it waited for)."""

    def __init__(self, clock: LockstepClock, stall_s: float = 60.0) -> None:
        self.clock = clock
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(stall_s,), name="conductor", daemon=True)
        self._thread.start()

    def _run(self, stall_s: float) -> None:
        try:
            self.clock.run(stall_s=stall_s)
        except BaseException as exc:  # re-raised in the test's thread by join()
            self.error = exc
            self.clock.stop()

    def join(self, timeout_s: float = 120.0) -> None:
        self._thread.join(timeout_s)
        if self.error is not None:
            raise self.error
        assert not self._thread.is_alive(), f"the clock still runs at {self.clock.now().isoformat()}"


class Script:
    """A participant of a lockstep clock (:class:`~stormwatch.lockstep.Participant`): at each instant
    ``owed(t)`` says what is still owed (``None``: done), and at the instants of ``actions`` the
    action runs once everything else due then is done -- a broker stopped, an uplink cut, a device
    unplugged, at a fixed simulated instant whatever the machine's load."""

    def __init__(self, name: str, actions: dict[datetime, Callable[[], None]],
                 owed: Callable[[datetime], str | None] = lambda t: None) -> None:
        self.name = name
        self.actions = dict(sorted(actions.items()))
        self.owed = owed
        self.ran: dict[datetime, bool] = {}

    def pending(self, t: datetime) -> str | None:
        return self.owed(t)

    def next_due(self, t: datetime) -> datetime | None:
        return next((at for at in self.actions if at > t), None)

    def at(self, t: datetime) -> None:
        action = self.actions.get(t)
        if action is not None and not self.ran.get(t):
            self.ran[t] = True
            action()


def run_on_lockstep(cfg: Any, lib: Any, broker_url: str, state: Path, start: datetime, until: datetime,
                    **options: Any) -> Gateway:
    """A :class:`~stormwatch.gateway.service.Gateway` polling ``cfg`` from ``start`` to ``until`` on a
    lockstep clock, returned once the run has ended: every slot is polled, however busy the machine."""
    clock = LockstepClock(start, until)
    try:
        gw = Gateway(cfg, lib, clock, broker_url, state, confirm="broker", **options)
        conductor = Conductor(clock)
        gw.run(until=until)
        conductor.join()
    finally:
        clock.stop()
    return gw

