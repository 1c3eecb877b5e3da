"""The embedded MQTT broker for zero-setup runs (``stormwatch demo``): amqtt, in-process.

amqtt's limits, which every stormwatch consumer is built to survive: MQTT 3.1.1 only (no MQTT 5
reason codes), no shared subscriptions, and it may deliver retained messages to clients that did
not subscribe to them -- consumers filter by topic (:func:`stormwatch.topics.matches`).

When a ``mosquitto`` binary is available, :func:`start_embedded_broker` can start that instead
(``prefer="mosquitto"``) on a free port with the project's configuration.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
from pathlib import Path
from typing import Literal, Protocol

from stormwatch.app import servers

log = logging.getLogger(__name__)


class RunningBroker(Protocol):
    """A broker this process started: its URL and how to stop it."""

    @property
    def url(self) -> str: ...

    def stop(self) -> None: ...


def _open_auth_plugin() -> type:
    """An amqtt auth plugin that admits every client *without* marking it anonymous.

    amqtt keeps no QoS 1 queue for anonymous sessions, even with ``clean_session=False``; a
    loopback demo broker must still honour persistent sessions so a restarting consumer loses
    nothing (design-notes.md, "Delivery").
    """
    from dataclasses import dataclass

    from amqtt.plugins.base import BaseAuthPlugin

    class OpenAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]  # amqtt ships no type information
        @dataclass
        class Config:
            pass

        async def authenticate(self, *, session: object) -> bool:
            return True

    return OpenAuthPlugin


class AmqttBroker:
    """amqtt on 127.0.0.1:``port`` in a background thread with its own event loop."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or servers.free_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: object | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 15.0) -> None:
        """Start the broker and wait until it accepts connections.

        Raises:
            RuntimeError: the broker failed to start.
        """
        self._thread = threading.Thread(target=self._run, name="amqtt-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s) or self._error is not None:
            raise RuntimeError(f"embedded amqtt broker failed to start: {self._error}")
        # broker.start() returned: the listener is bound. (Probing the port with a bare TCP connect
        # would make amqtt log an error for the empty session.)
        log.info("embedded MQTT broker (amqtt, MQTT 3.1.1) listening on %s", self.url)

    def _run(self) -> None:
        from amqtt.broker import Broker

        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{self.port}", "max_connections": 0}},
            "plugins": {
                "stormwatch.app.broker.OpenAuthPlugin": {},
            },
        }

        async def boot() -> None:
            broker = Broker(config)
            self._broker = broker
            await broker.start()

        try:
            loop.run_until_complete(boot())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.close()

    def stop(self) -> None:
        """Shut the broker down and join its thread."""
        loop, broker = self._loop, self._broker
        if loop is None or broker is None or self._thread is None:
            return

        async def down() -> None:
            await broker.shutdown()  # type: ignore[attr-defined]

        fut = asyncio.run_coroutine_threadsafe(down(), loop)
        try:
            fut.result(10)
        except Exception as exc:  # shutting down: log, never raise over the caller's own error
            log.warning("embedded broker shutdown: %s", exc)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        self._thread = None


class MosquittoBroker:
    """A ``mosquitto`` child process with the project's configuration (see stormwatch.app.servers)."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="stormwatch-mosquitto-")
        self._srv = servers.mosquitto(data_dir or Path(self._tmp.name))  # type: ignore[union-attr]

    @property
    def url(self) -> str:
        return self._srv.url

    def start(self) -> None:
        """Start Mosquitto; a start that fails or is interrupted leaves neither it nor its directory.

        Raises:
            RuntimeError: Mosquitto did not start.
        """
        try:
            self._srv.start()
            log.info("MQTT broker (mosquitto) listening on %s", self.url)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop Mosquitto, then remove its temporary directory (also when the stop is interrupted)."""
        try:
            self._srv.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None


def __getattr__(name: str) -> type:
    # amqtt loads plugins by dotted path; build the class lazily so importing this module does not
    # import amqtt.
    if name == "OpenAuthPlugin":
        return _open_auth_plugin()
    raise AttributeError(name)


def start_embedded_broker(prefer: Literal["amqtt", "mosquitto"] = "amqtt") -> RunningBroker:
    """Start a local broker: amqtt in-process, or mosquitto when preferred and installed."""
    if prefer == "mosquitto" and servers.find_binary("mosquitto"):
        broker: AmqttBroker | MosquittoBroker = MosquittoBroker()
    else:
        broker = AmqttBroker()
    broker.start()
    return broker
