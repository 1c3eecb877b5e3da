"""Many gateways' MQTT sessions in one thread: the fleet simulator's network side.

With ``confirm="stored"`` each session keeps the gateway's contract (:mod:`stormwatch.gateway.outbox`):
a message is kept until ingest's stored-acknowledgement covers every reading in it, and sent again
when the broker acknowledged it and ingest did not confirm it -- once later ones were confirmed or
the broker had lost the session, and the oldest one as a probe after a silence, subscribing to the
confirmations again (the gateway's waits).

The design: docs/simulators.md ("The modules", `simulators/mqttfleet.py`).
"""

from __future__ import annotations

import json
import logging
import selectors
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from stormwatch import storedack, topics
from stormwatch.gateway.publisher import client_id
from stormwatch.runtime.mqtt import BrokerSettings, apply_credentials

log = logging.getLogger(__name__)

#: Reconnect backoff: first wait and cap (real seconds).
RECONNECT_MIN_S = 1.0
RECONNECT_MAX_S = 10.0
#: Real seconds after its last send that a message the broker acknowledged and ingest did not confirm
#: is sent again once later messages of its gateway were confirmed, or the broker lost the session (the
#: gateway's ``resend_grace_s``); the wait doubles per re-send of one message, up to RESEND_MAX_S.
RESEND_HOLE_S = 10.0
#: Real seconds without any confirmation before a gateway's oldest kept message is sent again as a
#: probe (the gateway's ``probe_after_s``; doubling while unanswered, up to RESEND_MAX_S).
PROBE_AFTER_S = 30.0
RESEND_MAX_S = 300.0
#: Which confirmation ends a message: ingest's stored-acknowledgement, or the broker's PUBACK.
CONFIRM_MODES = ("stored", "broker")


@dataclass(eq=False)
class KeptMessage:
    """A readings message kept until ingest confirmed every reading in it (``confirm="stored"``)."""

    key: int
    payload: bytes
    seqs: set[int]
    sent_at: float
    acked: bool = False  # the broker acknowledged its latest send
    ever_acked: bool = False
    sends: int = 1


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
    stored_topic: str = ""
    kept: dict[int, KeptMessage] = field(default_factory=dict)  # key -> message, in publish order
    kept_mids: dict[int, int] = field(default_factory=dict)  # packet id -> key of the kept message
    by_seq: dict[int, int] = field(default_factory=dict)  # seq -> key of the kept message holding it
    next_key: int = 0
    confirmed_top: int = -1  # the latest message key ingest confirmed
    session_lost_at: float = float("-inf")  # monotonic time of a reconnect without the broker's session
    next_probe: float = float("inf")  # monotonic time of the next probe while nothing is confirmed
    probe_wait: float = PROBE_AFTER_S
    readings_confirmed: int = 0
    resent_messages: int = 0
    resent_readings: int = 0
    resent_after_ack: set[int] = field(default_factory=set)  # seqs the broker acknowledged and we sent again

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
        confirm: ``"stored"``: keep every message until ingest confirms its readings stored, and send
            it again when needed (module docstring); ``"broker"``: a message is done at its PUBACK.

    Raises:
        ValueError: an unknown ``confirm``.
    """

    def __init__(self, broker: BrokerSettings, keepalive_s: int, now_text: Callable[[], str], *,
                 confirm: str = "broker") -> None:
        if confirm not in CONFIRM_MODES:
            raise ValueError(f"confirm must be one of {', '.join(CONFIRM_MODES)}, got {confirm!r}")
        self.confirm = confirm
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
                               topics.status(site, gateway), stored_topic=topics.stored(site, gateway))
        client.will_set(session.status_topic, json.dumps({"state": "offline"}), qos=1, retain=True)
        apply_credentials(client, self.broker)
        client.max_inflight_messages_set(0)  # unlimited: see stormwatch.gateway.publisher on paho's queue
        client.max_queued_messages_set(0)
        client.user_data_set(session)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
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

    def publish(self, session: FleetSession, payload: bytes, readings: int = 1,
                seqs: Sequence[int] = ()) -> None:
        """Publish one readings message (holding ``readings`` readings, sequence numbers ``seqs``) at
        QoS 1 (kept by paho for resending until acknowledged; with ``confirm="stored"``, kept here
        until ingest confirms ``seqs`` stored)."""
        info = session.client.publish(session.readings_topic, payload, qos=1)
        session.readings_mids[info.mid] = readings
        session.published += 1
        if self.confirm == "stored" and seqs:
            key = session.next_key
            session.next_key += 1
            session.kept[key] = KeptMessage(key, payload, set(seqs), time.monotonic())
            session.kept_mids[info.mid] = key
            for seq in seqs:
                session.by_seq[seq] = key
        self._flush(session)

    @property
    def waiting(self) -> int:
        """Readings messages published and not yet acknowledged, all sessions."""
        return sum(s.waiting for s in self.sessions)

    @property
    def unconfirmed(self) -> int:
        """Readings messages kept until ingest confirms them (``confirm="stored"``), all sessions."""
        return sum(len(s.kept) for s in self.sessions)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Wait (up to ``timeout_s``) for every acknowledgement (and stored-acknowledgement), publish
        each gateway's retained ``offline``/``stopped`` status and disconnect cleanly. ``True`` if
        nothing was left waiting."""
        deadline = time.monotonic() + timeout_s
        while (self.waiting or self.unconfirmed) and time.monotonic() < deadline:
            self.pump(0.05)
        left = self.waiting + self.unconfirmed
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
                    if session.connected and session.kept:
                        self._resend_due(session, now)
                    self._flush(session)

    def _resend_due(self, session: FleetSession, now: float) -> None:
        """Send again what the broker acknowledged and ingest has not confirmed (module docstring)."""
        if session.next_probe == float("inf"):
            session.next_probe = now + session.probe_wait
        probe = now >= session.next_probe
        if probe:  # nothing confirmed for a while: the oldest kept message asks again
            session.probe_wait = min(RESEND_MAX_S, session.probe_wait * 2)
            session.next_probe = now + session.probe_wait
            # and the subscription again: a cluster node may have failed to make it (nats-server
            # 2.9: "Unable to add JetStream consumer for subscription", not told to the client)
            session.client.subscribe(session.stored_topic, qos=1)
        for m in list(session.kept.values()):
            if not m.acked:
                continue  # paho holds it until its PUBACK (and resends it on reconnect)
            hole = m.key < session.confirmed_top or m.sent_at < session.session_lost_at
            if not (probe or (hole and now - m.sent_at >= min(RESEND_MAX_S, RESEND_HOLE_S * 2 ** min(m.sends - 1, 8)))):
                continue
            probe = False
            self._resend(session, m, now)

    def _resend(self, session: FleetSession, m: KeptMessage, now: float) -> None:
        info = session.client.publish(session.readings_topic, m.payload, qos=1)
        session.kept_mids[info.mid] = m.key
        m.acked, m.sent_at = False, now
        m.sends += 1
        session.resent_messages += 1
        session.resent_readings += len(m.seqs)
        session.resent_after_ack.update(m.seqs)

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
        if self.confirm == "stored":
            client.subscribe(session.stored_topic, qos=1)
        if session.connects > 1:
            if not flags.session_present:
                session.session_lost_at = time.monotonic()
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
        key = session.kept_mids.pop(mid, None)
        kept = None if key is None else session.kept.get(key)
        if kept is not None:
            kept.acked = kept.ever_acked = True

    def _on_message(self, _client: mqtt.Client, session: FleetSession, msg: mqtt.MQTTMessage) -> None:
        if msg.topic != session.stored_topic:
            return
        try:
            runs = storedack.decode(bytes(msg.payload))
        except storedack.StoredAckError as exc:
            log.warning("%s/%s: ignoring a malformed stored-acknowledgement (%s)", session.site, session.gateway, exc)
            return
        for boot, first, last in runs:
            if boot != session.boot:
                continue
            for seq in range(first, last + 1):
                key = session.by_seq.pop(seq, None)
                kept = None if key is None else session.kept.get(key)
                if kept is None:
                    continue
                kept.seqs.discard(seq)
                session.readings_confirmed += 1
                session.probe_wait = PROBE_AFTER_S
                session.next_probe = float("inf")
                if not kept.seqs:
                    del session.kept[kept.key]
                    session.confirmed_top = max(session.confirmed_top, kept.key)


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
