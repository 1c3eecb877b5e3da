"""Many gateways' MQTT sessions in one thread: the fleet simulator's network side.

The design: docs/simulators.md ("The modules", `simulators/mqttfleet.py`).
"""

from __future__ import annotations

import json
import logging
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from stormwatch import topics
from stormwatch.gateway.publisher import client_id
from stormwatch.runtime.mqtt import BrokerSettings, apply_credentials

log = logging.getLogger(__name__)

#: Reconnect backoff: first wait and cap (real seconds).
RECONNECT_MIN_S = 1.0
RECONNECT_MAX_S = 10.0


@dataclass(eq=False)
class FleetSession:
    """One simulated gateway's MQTT session.

    Attributes:
        site, gateway, boot: the gateway's identity.
        client: its paho client (external loop).
        published: readings messages handed over; acknowledged: PUBACKs received for them;
        readings_acknowledged: the readings those acknowledged messages carried.
        connects: accepted connections (the first one and every reconnect).
    """

    site: str
    gateway: str
    boot: str
    client: mqtt.Client
    readings_topic: str
    status_topic: str
    published: int = 0
    acknowledged: int = 0
    readings_acknowledged: int = 0
    connects: int = 0
    connected: bool = False
    node: int = 0
    reconnect_at: float | None = None
    backoff_s: float = RECONNECT_MIN_S
    readings_mids: dict[int, int] = field(default_factory=dict)  # packet id -> readings in the message

    @property
    def waiting(self) -> int:
        """Readings messages published and not yet acknowledged."""
        return self.published - self.acknowledged


class MqttFleet:
    """The MQTT sessions of a simulated fleet, driven from one thread (not thread-safe).

    Args:
        broker: connection settings (one node, or the nodes of a cluster).
        keepalive_s: MQTT keep-alive of every session.
        now_text: the clock's time as RFC 3339 text (for the ``online`` status).
    """

    def __init__(self, broker: BrokerSettings, keepalive_s: int, now_text: Callable[[], str]) -> None:
        self.broker = broker
        self.keepalive_s = keepalive_s
        self.now_text = now_text
        self.sessions: list[FleetSession] = []
        self._selector = selectors.DefaultSelector()
        self._by_fd: dict[int, FleetSession] = {}
        self._next_misc = 0.0
        self._closing = False
        self.reconnects = 0

    # -- sessions ------------------------------------------------------------------------------

    def add(self, site: str, gateway: str, boot: str) -> FleetSession:
        """A new session for one gateway (not connected yet; :meth:`connect_all`)."""
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id(site, gateway), clean_session=False,
                             protocol=MQTTProtocolVersion.MQTTv311)
        session = FleetSession(site, gateway, boot, client, topics.readings(site, gateway),
                               topics.status(site, gateway))
        client.will_set(session.status_topic, json.dumps({"state": "offline"}), qos=1, retain=True)
        apply_credentials(client, self.broker)
        client.max_inflight_messages_set(0)  # unlimited: see stormwatch.gateway.publisher on paho's queue
        client.max_queued_messages_set(0)
        client.user_data_set(session)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = self._on_socket_close
        self.sessions.append(session)
        return session

    def connect_all(self, timeout_s: float = 60.0) -> None:
        """Connect every session and wait until the broker accepted them all.

        Raises:
            TimeoutError: some sessions are still not connected after ``timeout_s`` real seconds.
        """
        for session in self.sessions:
            self._connect(session)
        deadline = time.monotonic() + timeout_s
        while (missing := sum(not s.connected for s in self.sessions)) and time.monotonic() < deadline:
            self.pump(0.05)
        if missing:
            raise TimeoutError(f"{missing} of {len(self.sessions)} gateway sessions not accepted by "
                               f"{self.broker.safe_url()} within {timeout_s:.0f} s")

    def publish(self, session: FleetSession, payload: bytes, readings: int = 1) -> None:
        """Publish one readings message (holding ``readings`` readings) at QoS 1 (kept by paho for
        resending until acknowledged)."""
        info = session.client.publish(session.readings_topic, payload, qos=1)
        session.readings_mids[info.mid] = readings
        session.published += 1
        self._flush(session)

    @property
    def waiting(self) -> int:
        """Readings messages published and not yet acknowledged, all sessions."""
        return sum(s.waiting for s in self.sessions)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Wait (up to ``timeout_s``) for every acknowledgement, publish each gateway's retained
        ``offline``/``stopped`` status and disconnect cleanly. ``True`` if nothing was left waiting."""
        deadline = time.monotonic() + timeout_s
        while self.waiting and time.monotonic() < deadline:
            self.pump(0.05)
        left = self.waiting
        self._closing = True
        stopped = json.dumps({"state": "offline", "reason": "stopped"})
        infos = [s.client.publish(s.status_topic, stopped, qos=1, retain=True) for s in self.sessions if s.connected]
        for s in self.sessions:
            self._flush(s)
        while any(not i.is_published() for i in infos) and time.monotonic() < deadline + 5:
            self.pump(0.05)
        for s in self.sessions:
            s.reconnect_at = None
            s.client.disconnect()
            self._flush(s)
        self._selector.close()
        return left == 0

    # -- the loop ----------------------------------------------------------------------------

    def pump(self, timeout_s: float) -> None:
        """Serve the network for up to ``timeout_s`` real seconds (reads, writes, keep-alive, reconnects)."""
        for key, mask in self._selector.select(timeout_s):
            session = self._by_fd.get(key.fd)
            if session is None:
                continue
            if mask & selectors.EVENT_READ:
                session.client.loop_read()
            if mask & selectors.EVENT_WRITE:
                session.client.loop_write()
            self._flush(session)
        now = time.monotonic()
        if now >= self._next_misc:
            self._next_misc = now + 1.0
            for session in self.sessions:
                if session.reconnect_at is not None and now >= session.reconnect_at:
                    self._connect(session)
                elif session.client.socket() is not None:
                    session.client.loop_misc()
                    self._flush(session)

    def _flush(self, session: FleetSession) -> None:
        """Write what paho has queued; watch the socket for writability while something is left."""
        client = session.client
        if client.want_write():
            client.loop_write()
        sock = client.socket()
        if sock is None or sock.fileno() not in self._by_fd:
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.want_write() else 0)
        if self._selector.get_key(sock).events != events:
            self._selector.modify(sock, events)

    def _connect(self, session: FleetSession) -> None:
        host, port = self.broker.endpoints[session.node]
        session.reconnect_at = None
        try:
            session.client.connect(host, port, keepalive=self.keepalive_s)  # a reconnect keeps the session's messages
        except OSError as exc:
            self._retry_later(session, f"cannot reach broker node {host}:{port}: {exc}")
            return
        self._flush(session)

    def _retry_later(self, session: FleetSession, why: str) -> None:
        level = logging.WARNING if session.backoff_s == RECONNECT_MIN_S else logging.DEBUG
        log.log(level, "%s/%s: %s; retrying in %.0f s", session.site, session.gateway, why, session.backoff_s)
        session.reconnect_at = time.monotonic() + session.backoff_s
        session.backoff_s = min(RECONNECT_MAX_S, session.backoff_s * 2)
        session.node = (session.node + 1) % len(self.broker.endpoints)

    # -- paho callbacks (called from loop_read/loop_write/loop_misc in this thread) --------------

    def _on_socket_open(self, _client: mqtt.Client, session: FleetSession, sock: Any) -> None:
        fd = sock.fileno()
        self._by_fd[fd] = session
        self._selector.register(sock, selectors.EVENT_READ)

    def _on_socket_close(self, _client: mqtt.Client, session: FleetSession, sock: Any) -> None:
        self._by_fd.pop(sock.fileno(), None)
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def _on_connect(self, client: mqtt.Client, session: FleetSession, flags: Any, reason_code: Any,
                    _props: Any) -> None:
        if reason_code.is_failure:
            log.error("%s/%s: broker refused the connection: %s", session.site, session.gateway, reason_code)
            return
        session.connected = True
        session.connects += 1
        session.backoff_s = RECONNECT_MIN_S
        if session.connects > 1:
            self.reconnects += 1
            log.info("%s/%s: reconnected to %s (session present: %s; %d messages waiting)", session.site,
                     session.gateway, "{}:{}".format(*self.broker.endpoints[session.node]), flags.session_present,
                     session.waiting)
        status = {"state": "online", "boot": session.boot, "outbox_depth": session.waiting, "time": self.now_text()}
        client.publish(session.status_topic, json.dumps(status), qos=1, retain=True)

    def _on_disconnect(self, _client: mqtt.Client, session: FleetSession, _flags: Any, reason_code: Any,
                       _props: Any) -> None:
        was = session.connected
        session.connected = False
        if session.reconnect_at is None and not self._closing:
            # a connection lost, or an attempt the broker closed before accepting it (a cluster node
            # that cannot restore the session yet): both are retried, on the next node
            self._retry_later(session, f"connection lost ({reason_code})" if was
                              else f"broker node closed the connection attempt ({reason_code})")

    def _on_publish(self, _client: mqtt.Client, session: FleetSession, mid: int, _reason: Any, _props: Any) -> None:
        readings = session.readings_mids.pop(mid, None)
        if readings is not None:
            session.acknowledged += 1
            session.readings_acknowledged += readings


def raise_fd_limit(needed: int) -> None:
    """Raise this process's open-file limit towards ``needed`` (one socket per gateway), within the hard limit."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
