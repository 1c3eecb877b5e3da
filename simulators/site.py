"""A whole simulated site: every device of a site config on its real transport.

:class:`SimulatedSite` runs its servers on **its own event loop in a background thread**, so the
same object works from a synchronous orchestrator (``stormwatch demo``), from plain pytest tests
and from async code (its loop never blocks the caller's). ``start()`` returns once every server is
listening (or raises the first startup error); ``stop()`` shuts them down and joins the thread.

The design: docs/simulators.md ("The modules", `simulators/site.py`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import threading
from collections.abc import Coroutine, Mapping
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from stormwatch.clock import Clock
from stormwatch.config import ModbusRtu, ModbusTcp, Serial, SiteConfig
from stormwatch.profiles import DeviceProfile, ProfileLibrary
from stormwatch.simulators.modbus_server import ModbusRtuSim, ModbusTcpSim, SimulatedModbusDevice
from stormwatch.simulators.scenario import Scenario, SiteScenario
from stormwatch.simulators.serial_device import HrxlSim

log = logging.getLogger(__name__)

#: how long a stop (or an abandoned start) waits for the servers' thread to finish
STOP_TIMEOUT_S = 10.0



def _run_to_end(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to its end on ``loop``: a ``loop.stop`` an abandoning start scheduled may still be
    queued, and it would otherwise cut the servers' stop short (leaving a port bound)."""
    task = loop.create_task(coro)
    while True:
        try:
            loop.run_until_complete(task)
            return
        except RuntimeError:
            if task.done():
                raise

class SimulatedSite:
    """All simulated devices of one site.

    Args:
        cfg: the site config.
        profiles: a :class:`ProfileLibrary` or a mapping device id → profile.
        scenario: the physics.
        clock: the simulated clock shared with the gateway (usually a ScenarioClock).
        hrxl_lines_per_s: real-time line rate of simulated HRXL sensors.

    Attributes (after :meth:`start`):
        state: the :class:`SiteScenario` answering values at an event time.
        tcp_servers: ``(host, port)`` → server (``port`` is the bound port).
        rtu_lines: config port path → RTU line (``.path`` is what a client opens).
        serial_devices: device id → HRXL simulator (``.path``).
        skipped: device id → reason, for devices this simulator does not model.

    Raises:
        ValueError: from :class:`SiteScenario` (e.g. a rain gauge profile without a counter).
    """

    def __init__(
        self,
        cfg: SiteConfig,
        profiles: ProfileLibrary | Mapping[str, DeviceProfile],
        scenario: Scenario,
        clock: Clock,
        hrxl_lines_per_s: float = 10.0,
    ) -> None:
        self.cfg = cfg
        if isinstance(profiles, ProfileLibrary):
            self.profiles = {d.id: profiles.get(d.profile) for d in cfg.devices}
        else:
            self.profiles = {d.id: profiles[d.id] for d in cfg.devices}
        self.scenario = scenario
        self.clock = clock
        self.state = SiteScenario(scenario, cfg, self.profiles)
        self.hrxl_lines_per_s = hrxl_lines_per_s
        self.tcp_servers: dict[tuple[str, int], ModbusTcpSim] = {}
        self.rtu_lines: dict[str, ModbusRtuSim] = {}
        self.serial_devices: dict[str, HrxlSim] = {}
        self.skipped: dict[str, str] = {}
        self._modbus_devices: dict[str, SimulatedModbusDevice] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._plan()

    # ------------------------------------------------------------------ plan
    def _plan(self) -> None:
        tcp: dict[tuple[str, int], list[SimulatedModbusDevice]] = {}
        rtu: dict[str, list[SimulatedModbusDevice]] = {}
        rtu_settings: dict[str, ModbusRtu] = {}
        for dev in self.cfg.devices:
            profile = self.profiles[dev.id]
            tr = dev.transport
            if isinstance(tr, ModbusTcp | ModbusRtu):
                if profile.protocol != "modbus":
                    self.skipped[dev.id] = f"profile {profile.model} is {profile.protocol}, transport is {tr.kind}"
                    continue
                sim = SimulatedModbusDevice(dev.id, tr.unit_id, profile, self.state, self.clock)
                self._modbus_devices[dev.id] = sim
                if isinstance(tr, ModbusTcp):
                    tcp.setdefault((tr.host, tr.port), []).append(sim)
                else:
                    rtu.setdefault(tr.port, []).append(sim)
                    rtu_settings.setdefault(tr.port, tr)
            elif isinstance(tr, Serial):
                if profile.protocol != "serial_line" or profile.level is None or profile.level.kind != "distance_down":
                    self.skipped[dev.id] = f"serial profile {profile.model} is not simulated (only HRXL-style lines)"
                    continue
                basin = self.state.basin_of.get(dev.id)
                if basin is None:
                    self.skipped[dev.id] = "a level sensor over no basin of the site: nothing to measure"
                    continue
                self.serial_devices[dev.id] = HrxlSim(
                    dev.id, partial(self.state.distance_mm, basin=basin), self.clock, link=tr.port,
                    lines_per_s=self.hrxl_lines_per_s,
                )
        for (host, port), devs in tcp.items():
            self.tcp_servers[(host, port)] = ModbusTcpSim(devs, host, port)
        for line, devs in rtu.items():
            s = rtu_settings[line]
            self.rtu_lines[line] = ModbusRtuSim(devs, link=line, baud=s.baud, parity=s.parity, stopbits=s.stopbits)
        for dev_id, reason in self.skipped.items():
            log.warning("not simulating %s: %s", dev_id, reason)

    # ------------------------------------------------------------------ lifecycle
    def _servers(self) -> list[ModbusTcpSim | ModbusRtuSim | HrxlSim]:
        return [*self.tcp_servers.values(), *self.rtu_lines.values(), *self.serial_devices.values()]

    async def _start_all(self) -> None:
        for server in self._servers():
            await server.start()
        # TCP servers may have bound port 0: re-key by the real port.
        self.tcp_servers = {(s.host, s.port): s for s in self.tcp_servers.values()}

    async def _stop_all(self) -> None:
        for server in reversed(self._servers()):
            try:
                await server.stop()
            except Exception:
                log.exception("stopping %s failed", server)

    def start(self, timeout_s: float = 10.0) -> None:
        """Start every server in a background thread; return when all listen.

        Raises:
            RuntimeError: already started.
            Exception: the first startup error (e.g. a TCP port in use, a link path that is a file).
        """
        if self._thread is not None:
            raise RuntimeError("SimulatedSite already started")
        loop = asyncio.new_event_loop()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        # Set before the stop is scheduled: a stop that lands while the start is finishing is
        # consumed by run_until_complete, so run() looks at this before serving on.
        abandoned = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            starting = loop.create_task(self._start_all())
            try:
                loop.run_until_complete(starting)
            except BaseException as exc:
                starting.cancel()  # a start stopped half-way must not bind after the stop below
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(starting)
                _run_to_end(loop, self._stop_all())
                loop.close()
                ready.set_exception(exc)
                return
            ready.set_result(None)
            if not abandoned.is_set():
                loop.run_forever()
            _run_to_end(loop, self._stop_all())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="stormwatch-simulated-site", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout=timeout_s)
        except BaseException:  # a failed, late or Ctrl-C'd start leaves no loop serving behind
            abandoned.set()
            with contextlib.suppress(RuntimeError):  # the loop closed itself on a startup error
                loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=STOP_TIMEOUT_S)
            self._thread = None
            self._loop = None
            raise
        log.info("simulated site %s: %s", self.cfg.site.id, self.describe())

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every server and join the thread (idempotent)."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            log.warning("simulated site thread did not stop within %.1f s", timeout_s)
        self._thread = None
        self._loop = None

    def __enter__(self) -> SimulatedSite:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ what is running
    def endpoints(self) -> dict[str, str]:
        """device id → where to reach it (``tcp://host:port#unit``, ``rtu:PATH#unit``, ``serial:PATH``)."""
        out: dict[str, str] = {}
        for (host, port), srv in self.tcp_servers.items():
            for d in srv.devices:
                out[d.device_id] = f"tcp://{host}:{port}#{d.unit_id}"
        for line in self.rtu_lines.values():
            for d in line.devices:
                out[d.device_id] = f"rtu:{line.path if line.pty else line.link}#{d.unit_id}"
        for dev_id, hrxl in self.serial_devices.items():
            out[dev_id] = f"serial:{hrxl.path if hrxl.pty else hrxl.link}"
        return out

    def describe(self) -> str:
        return "; ".join(f"{k} {v}" for k, v in sorted(self.endpoints().items())) or "no devices"

    def modbus_requests(self) -> dict[str, int]:
        """device id → Modbus requests served so far."""
        return {k: d.requests for k, d in self._modbus_devices.items()}


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (bound to port 0 and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def isolate_site(cfg: SiteConfig, link_dir: str | Path, host: str = "127.0.0.1") -> SiteConfig:
    """``cfg`` with every Modbus TCP address moved to ``host`` on a free port and every serial/RTU
    port moved into ``link_dir`` (devices sharing an address or a port still share one).

    Returns:
        A new, validated SiteConfig; the original is unchanged.
    """
    link_dir = Path(link_dir)
    data = cfg.model_dump(mode="json")
    ports: dict[tuple[str, int], int] = {}
    paths: dict[str, str] = {}
    for dev in data["devices"]:
        tr = dev["transport"]
        if tr["kind"] == "modbus-tcp":
            key = (tr["host"], int(tr["port"]))
            if key not in ports:
                ports[key] = free_tcp_port(host)
            tr["host"], tr["port"] = host, ports[key]
        else:
            old = tr["port"]
            if old not in paths:
                name = Path(old).name or dev["id"]
                candidate = str(link_dir / name)
                while candidate in paths.values():
                    candidate += "_"
                paths[old] = candidate
            tr["port"] = paths[old]
    return SiteConfig.model_validate(data)
