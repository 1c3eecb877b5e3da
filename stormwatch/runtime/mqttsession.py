"""One MQTT session for every stormwatch client: the gateway publisher, ingest and the alert service
(and the one-shot publisher of manual readings, :func:`publish_once`).

:class:`SessionClient` is a paho-mqtt 2.x client (callback API VERSION2) set up once for all of them:
credentials and TLS, the last will, a keep-alive that finds a dead link, reconnects with backoff
across a cluster's nodes, and session takeovers told apart from lost connections.

The design: docs/runtime.md ("The modules", `stormwatch/runtime/mqttsession.py`).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion, _ConnectionState
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from stormwatch.runtime.mqtt import BrokerSettings, ConnectFailureLog, apply_credentials, stop_network_loop
from stormwatch.runtime.mqtttakeover import SESSION_TAKEN_OVER, TakeoverGuard

#: A connection is dead when the broker has sent nothing for this many keep-alive periods.
DEAD_AFTER = 1.25
#: The keep-alive check runs at least this often (fraction of the keep-alive; at most every second).
TICK_FRACTION = 0.1
#: The paho internals the keep-alive check relies on (paho-mqtt 2.1/2.2).
_INTERNALS = ("_check_keepalive", "_send_pingreq", "_sock_close", "_do_on_disconnect", "_loop")
WATCHDOG_SUPPORTED = all(hasattr(mqtt.Client, name) for name in _INTERNALS)
#: paho's reason for a connection that ended without a DISCONNECT (the broker closed it, or a socket error).
_UNSPECIFIED_ERROR = 0x80
#: MQTT 5 reason code "Packet too large" (MQTT 5.0 section 2.4, table 2-6).
PACKET_TOO_LARGE = 0x95
#: MQTT 5 Session Expiry Interval of a persistent session: "never expires" (MQTT 5.0 section 3.1.2.11.2).
_SESSION_NEVER_EXPIRES = 0xFFFFFFFF


@dataclass(frozen=True)
class Will:
    """The last will the broker publishes when the connection dies without a DISCONNECT.

    Attributes:
        topic: where it is published.
        payload: its text (JSON in stormwatch).
        qos, retain: MQTT publish options (QoS 1, retained: a status topic keeps its last state).
    """

    topic: str
    payload: str
    qos: int = 1
    retain: bool = True


@dataclass(frozen=True)
class SessionOptions:
    """How one stormwatch client holds its MQTT session.

    Attributes:
        client_id: fixed MQTT client id (the broker keeps the persistent session under it; two
            processes with one id take the session from each other).
        keepalive_s: MQTT keep-alive in seconds (sent in CONNECT; a dead link is found within
            1.25 × keepalive + a tick, see the module docstring). 0 disables it.
        will: last will, or ``None``.
        manual_ack: acknowledge QoS 1/2 messages only when the application calls ``ack()``.
        reconnect_min_s, reconnect_max_s: reconnect backoff in whole seconds (paho doubles the
            wait from the minimum up to the maximum while attempts fail).
        takeover_max_s: the reconnect delay once a takeover episode is ``takeover_settle_s`` old (whole s);
            it doubles up to it from ``reconnect_min_s`` before (:mod:`stormwatch.runtime.mqtttakeover`).
        takeover_settle_s: seconds from a takeover episode's first takeover to the settled delay.
        sides: what this process and the other one with its client id are, as far as known (in the
            takeover ERROR), e.g. from the retained statuses (:class:`stormwatch.gateway.publisher.MqttPublisher`).
        loss_hint: asked at every lost connection the broker closed without a reason (MQTT 3.1.1): a
            sentence naming a likelier cause than a takeover (a packet over the broker's limit), or ``None``.
        duplicate_hint: what a duplicate client id most likely means for this service, in a sentence
            or two (in the takeover ERROR), e.g. "Are two gateways configured with gateway id 'gw'?".
        lost_note: appended to the WARNING of a lost connection (e.g. "the outbox keeps the readings").
        clean_session: ask the broker for a clean session that ends with the connection: for a
            one-shot client (:func:`publish_once`) whose random client id would otherwise leave a
            persistent session behind on the broker for every message.

    Raises:
        ValueError: a negative keep-alive, or reconnect delays below 1 s or out of order.
    """

    client_id: str
    keepalive_s: int = 30
    will: Will | None = None
    manual_ack: bool = False
    reconnect_min_s: int = 1
    reconnect_max_s: int = 30
    takeover_max_s: int = 300
    takeover_settle_s: float = 60.0
    sides: Callable[[], str] | None = None
    loss_hint: Callable[[], str | None] | None = None
    duplicate_hint: str = "Are two processes configured with the same client id?"
    lost_note: str = ""
    clean_session: bool = False

    def __post_init__(self) -> None:
        if self.keepalive_s < 0:
            raise ValueError(f"keepalive_s must be >= 0, got {self.keepalive_s}")
        if not 1 <= self.reconnect_min_s <= min(self.reconnect_max_s, self.takeover_max_s):
            raise ValueError(f"need 1 <= reconnect_min_s <= reconnect_max_s and takeover_max_s, got "
                             f"{self.reconnect_min_s}, {self.reconnect_max_s}, {self.takeover_max_s}")


def _no_delay(_client: mqtt.Client, _userdata: Any, sock: Any) -> None:
    """Send each packet at once: with Nagle's algorithm a small PUBLISH or PUBACK waits for the
    previous one's TCP acknowledgement (up to 40 ms of delayed ACK on Linux) -- a lockstep clock's
    every round trip paid it."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):  # not a TCP socket (a unix socket, a websocket wrapper)
        pass


class SessionClient(mqtt.Client):
    """A paho client holding one stormwatch MQTT session (module docstring).

    The service passes its hooks, sets ``on_message``/``on_publish``/``on_subscribe`` if it needs
    them, and calls :meth:`start` once, :meth:`stop` at the end; paho's network thread reconnects in
    between. ``on_connect``, ``on_disconnect`` and ``on_connect_fail`` belong to the session.

    Args:
        broker: where to connect (:func:`stormwatch.runtime.mqtt.parse_broker_url`).
        options: client id, keep-alive, will, acknowledgement mode, reconnect backoff, log wording.
        logger: the owning service's logger (every session log line goes there).
        on_session: called with ``session_present`` after every accepted connection.
        on_lost: called after every lost connection (also the one :meth:`stop` ends).

    Attributes (counters, read from any thread):
        connects: connections the broker accepted.
        losses: connections lost, not counting :meth:`stop`.
        takeovers: losses counted as session takeovers (:mod:`stormwatch.runtime.mqtttakeover`).
        dead_links: connections found dead by the keep-alive check.

    Raises:
        OSError / ssl.SSLError: a TLS file of ``broker`` cannot be read.
    """

    def __init__(self, broker: BrokerSettings, options: SessionOptions, logger: logging.Logger, *,
                 on_session: Callable[[bool], None] | None = None, on_lost: Callable[[], None] | None = None) -> None:
        v5 = broker.protocol == 5
        super().__init__(CallbackAPIVersion.VERSION2, client_id=options.client_id,
                         clean_session=None if v5 else options.clean_session,
                         protocol=MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311,
                         manual_ack=options.manual_ack)
        self.broker = broker
        self.options = options
        self.log = logger
        self._on_session = on_session
        self._on_lost = on_lost
        self.connects = 0
        self.losses = 0
        self.dead_links = 0
        self._guard = TakeoverGuard(min_delay_s=options.reconnect_min_s, max_delay_s=options.takeover_max_s,
                                    settle_s=options.takeover_settle_s)
        #: The broker's packet limit as it announced it in the last CONNACK (MQTT 5), or ``None``.
        self.announced_packet_size: int | None = None
        self._outage = ConnectFailureLog(broker, logger)
        self._refused = False  # a refusal was logged at ERROR; repeats at DEBUG until connected
        self._dead_reason: str | None = None  # set by the keep-alive check for the disconnect that follows
        self._stopping = False
        self._node = 0  # index of the cluster node in use (broker.endpoints)
        self._answered = threading.Event()  # the broker answered a CONNECT (accepted or refused)
        self._refusal: str | None = None  # the reason of the last refused connection
        self._hinted: str | None = None  # the last loss hint logged at ERROR (repeats at DEBUG)
        if options.will is not None:
            w = options.will
            self.will_set(w.topic, w.payload, qos=w.qos, retain=w.retain)
        apply_credentials(self, broker)
        self.reconnect_delay_set(min_delay=options.reconnect_min_s, max_delay=options.reconnect_max_s)
        self.on_connect = self._connected
        self.on_connect_fail = self._connect_failed
        self.on_disconnect = self._disconnected
        self.on_socket_open = _no_delay

    @property
    def takeovers(self) -> int:
        return self._guard.takeovers

    @property
    def packet_limit(self) -> int | None:
        """The broker's packet limit in bytes: the smaller of the configured one and the announced one."""
        limits = [n for n in (self.broker.max_packet_size, self.announced_packet_size) if n is not None]
        return min(limits) if limits else None

    def _connect_args(self) -> dict[str, Any]:
        """MQTT 5: a persistent session is asked for with clean start off and a session that never expires."""
        if self.broker.protocol != 5:
            return {}
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        if not self.options.clean_session:
            props.SessionExpiryInterval = _SESSION_NEVER_EXPIRES
        return {"clean_start": self.options.clean_session, "properties": props}

    @property
    def taken_over(self) -> bool:
        """A takeover episode has been reported and no connection has held long enough since to end it."""
        return self._guard.in_episode

    def start(self) -> None:
        """Connect in the background (paho's network thread retries until the broker answers)."""
        self._stopping = False
        self.connect_async(self.broker.host, self.broker.port, keepalive=self.options.keepalive_s,
                           **self._connect_args())
        self.loop_start()

    @property
    def node(self) -> str:
        """``host:port`` of the broker node this client connects (or last connected) to."""
        host, port = self.broker.endpoints[self._node]
        return f"{host}:{port}"

    def _next_node(self) -> None:
        """Try the next node of a broker cluster at the next (re)connect; one node: nothing changes."""
        nodes = self.broker.endpoints
        if len(nodes) > 1:
            self._node = (self._node + 1) % len(nodes)
            self._host, self._port = nodes[self._node]  # what paho's reconnect() connects to
            self.log.debug("next connection attempt to broker node %s", self.node)

    def connect_now(self, timeout_s: float) -> None:
        """Connect in this thread, trying each node of the broker (:attr:`BrokerSettings.endpoints`)
        once in order, start paho's network thread and return once the broker accepted the
        connection: for a one-shot client that must tell its user at once that nothing was sent
        (:func:`publish_once`); a service calls :meth:`start` instead.

        Raises:
            OSError: no node could be reached (the last node's error); ``ConnectionRefusedError``:
                the broker refused the connection (its reason, e.g. "Not authorized");
                ``TimeoutError``: no answer to CONNECT within ``timeout_s``.
        """
        self._stopping = False
        self._answered.clear()
        error: OSError | None = None
        for i, (host, port) in enumerate(self.broker.endpoints):
            try:
                self.connect(host, port, keepalive=self.options.keepalive_s, **self._connect_args())
            except OSError as exc:
                error = exc
                continue
            self._node = i
            break
        else:
            assert error is not None
            raise error
        self.loop_start()
        if not self._answered.wait(timeout_s):
            self.stop()
            raise TimeoutError(f"no answer to CONNECT within {timeout_s:g} s")
        if self.connects == 0:
            self.stop()
            raise ConnectionRefusedError(f"the broker refused the connection as {self.options.client_id}: "
                                         f"{self._refusal}")

    def _connect_failed(self, client: mqtt.Client, userdata: object) -> None:
        self._outage.on_connect_fail(client, userdata)
        self._next_node()

    def stop(self) -> None:
        """Disconnect cleanly (DISCONNECT: the broker does not publish the will) and end the network thread."""
        self._stopping = True
        self.disconnect()
        stop_network_loop(self)

    # -- connection lifecycle (paho's network thread) -----------------------------------------

    def _connected(self, _client: mqtt.Client, _userdata: Any, flags: mqtt.ConnectFlags, reason_code: Any,
                   props: Any) -> None:
        url, cid = self.broker.safe_url(), self.options.client_id
        if len(self.broker.endpoints) > 1:
            url = f"{url} (node {self.node})"
        if reason_code.is_failure:
            self._refusal = str(reason_code)
            self._answered.set()
            level = logging.DEBUG if self._refused else logging.ERROR
            self._refused = True
            self.log.log(level, "broker %s refused the connection as %s: %s; retrying%s", url, cid, reason_code,
                         "" if level == logging.DEBUG else " (repeats logged at DEBUG)")
            return
        self._refused = False
        self.announced_packet_size = getattr(props, "MaximumPacketSize", None) if props is not None else None
        self.connects += 1
        self._guard.connected(time.monotonic())
        failed = self._outage.connected()
        present = bool(flags.session_present)
        self.log.log(logging.DEBUG if self._guard.in_episode else logging.INFO,
                     "connected to %s as %s (session present: %s%s)", url, cid, present,
                     f"; after {failed} failed attempts" if failed else "")
        self._answered.set()
        if self._on_session is not None:
            self._on_session(present)

    def _disconnected(self, _client: mqtt.Client, _userdata: Any, flags: mqtt.DisconnectFlags, reason_code: Any,
                      _props: Any) -> None:
        dead, self._dead_reason = self._dead_reason, None
        if self._stopping:
            self.log.debug("disconnected from %s (%s)", self.broker.safe_url(), reason_code)
        else:
            self.losses += 1
            self._classify(flags, reason_code, dead)
            self._next_node()
        if self._on_lost is not None:
            self._on_lost()

    def _classify(self, flags: mqtt.DisconnectFlags, reason_code: Any, dead: str | None) -> None:
        url, cid, opts = self.broker.safe_url(), self.options.client_id, self.options
        from_broker = bool(flags.is_disconnect_packet_from_server)
        code = getattr(reason_code, "value", None)
        broker_closed = dead is None and not from_broker and code == _UNSPECIFIED_ERROR
        hint = opts.loss_hint() if opts.loss_hint is not None and (broker_closed or code == PACKET_TOO_LARGE) else None
        if hint is None and code == PACKET_TOO_LARGE:
            hint = "a packet over its max packet size (MQTT reason 0x95)"
        verdict = self._guard.lost(time.monotonic(), taken_over=from_broker and code == SESSION_TAKEN_OVER,
                                   broker_closed=broker_closed and hint is None)
        note = f"; {opts.lost_note}" if opts.lost_note else ""
        if hint is not None:
            self.log.log(logging.DEBUG if self._hinted == hint else logging.ERROR,
                         "disconnected from %s by the broker (%s): %s%s", url, reason_code, hint, note)
            self._hinted = hint
        elif verdict.report:
            why = ("the broker said so: MQTT reason 0x8E" if code == SESSION_TAKEN_OVER
                   else f"the broker closed this connection right after accepting it, {verdict.streak} times in a row")
            sides = f" {opts.sides()}." if opts.sides is not None else ""
            self.log.error("session taken over: another client connects to %s with client id %r (%s).%s %s "
                           "Backing off: after %.0f s of this, one reconnect every %d s; further takeovers logged "
                           "at DEBUG", url, cid, why, sides, opts.duplicate_hint, opts.takeover_settle_s,
                           opts.takeover_max_s)
        elif verdict.quiet:
            self.log.debug("session %r taken over again (%d in a row; %d in all); reconnecting in %d s", cid,
                           verdict.streak, self._guard.takeovers, verdict.reconnect_delay_s)
        elif dead is not None:
            self.log.warning("%s: connection presumed dead; reconnecting%s", dead, note)
        else:
            self.log.warning("disconnected from %s: %s; reconnecting%s", url,
                             _loss_text(from_broker, code, reason_code), note)
        # paho resets its delay to the minimum on every accepted connection: a takeover raises the minimum.
        delay = verdict.reconnect_delay_s
        self.reconnect_delay_set(min_delay=delay, max_delay=max(delay, opts.reconnect_max_s))

    # -- keep-alive (paho internals, see the module docstring) ----------------------------------

    def _loop(self, timeout: float = 1.0) -> MQTTErrorCode:
        if WATCHDOG_SUPPORTED and self._keepalive > 0:
            timeout = min(timeout, max(0.05, self._keepalive * TICK_FRACTION))
        return super()._loop(timeout)

    def _check_keepalive(self) -> None:
        keepalive = self._keepalive
        if not WATCHDOG_SUPPORTED or keepalive == 0:
            super()._check_keepalive()
            return
        if self._sock is None:
            return
        now = mqtt.time_func()
        with self._msgtime_mutex:
            last_out = self._last_msg_out
            last_in = self._last_bytes_received  # updated per packet read (and on connect) only
        silent = now - last_in
        if silent >= DEAD_AFTER * keepalive:
            self._declare_dead(silent, keepalive)
            return
        if self._state != _ConnectionState.MQTT_CS_CONNECTED:
            return  # waiting for CONNACK: only the dead check applies
        if self._ping_due(now, last_in, last_out):
            try:
                self._send_pingreq()
            except Exception:  # paho's own handling of a failed PINGREQ
                self._sock_close()
                self._do_on_disconnect(packet_from_broker=False, v1_rc=MQTTErrorCode.MQTT_ERR_CONN_LOST)
                return
            with self._msgtime_mutex:
                self._last_msg_out = now

    def _ping_due(self, now: float | None = None, last_in: float | None = None,
                  last_out: float | None = None) -> bool:
        """A PINGREQ is due (cheap enough to ask per packet; times default to now and paho's own).

        Due after a keep-alive without sending, or without hearing from the broker, when no PINGREQ
        is unanswered -- or, with one unanswered, when nothing was sent for a keep-alive while the
        broker *is* sending: its PINGRESP is queued behind data the application reads slowly (ingest
        holding at its in-flight limit) and the broker must still hear from us (paho does the same).
        """
        keepalive = self._keepalive
        if keepalive <= 0:
            return False
        now = mqtt.time_func() if now is None else now
        silent = now - (self._last_bytes_received if last_in is None else last_in)
        quiet = now - (self._last_msg_out if last_out is None else last_out)
        if self._ping_t == 0:
            return silent >= keepalive or quiet >= keepalive
        return silent < keepalive and quiet >= keepalive

    def _declare_dead(self, silent: float, keepalive: int) -> None:
        self.dead_links += 1
        self._dead_reason = (f"no packet from broker {self.broker.safe_url()} for {silent:.1f} s (keepalive "
                             f"{keepalive} s{', PINGREQ unanswered' if self._ping_t > 0 else ''})")
        self._sock_close()
        if self._state in (_ConnectionState.MQTT_CS_DISCONNECTING, _ConnectionState.MQTT_CS_DISCONNECTED):
            self._state = _ConnectionState.MQTT_CS_DISCONNECTED
            rc = MQTTErrorCode.MQTT_ERR_SUCCESS
        else:
            self._state = _ConnectionState.MQTT_CS_CONNECTION_LOST
            rc = MQTTErrorCode.MQTT_ERR_KEEPALIVE
        self._do_on_disconnect(packet_from_broker=False, v1_rc=rc)

    # -- a hold: the network thread reads nothing on purpose (paho internals) -------------------

    @property
    def can_hold(self) -> bool:
        """This paho has the internals :meth:`keep_alive_unread` uses (:data:`WATCHDOG_SUPPORTED`)."""
        return WATCHDOG_SUPPORTED

    def keep_alive_unread(self) -> None:
        """Keep the session while the network thread deliberately reads nothing: call it from that
        thread, from inside a callback that holds it (ingest at its in-flight limit,
        :class:`stormwatch.ingest.consumer.Ingest`), several times per keep-alive.

        Not reading the socket is MQTT 3.1.1's only flow control, yet the broker drops a client it
        has not heard from for 1.5 × keepalive, and its PINGRESPs wait unread behind the held data:
        a PINGREQ is written at once (this is the network thread: ``loop_write`` is its own) whenever
        nothing was sent for half a keep-alive, a margin for a loaded machine. A write that fails
        closes the connection as paho does. The dead-link check does not run meanwhile (it runs in
        this thread's loop): call :meth:`resume_reading` when the hold ends. Without
        :attr:`can_hold`, nothing is sent: the holder must let the thread go in time.
        """
        keepalive = self._keepalive
        if not self.can_hold or keepalive == 0 or self._sock is None:
            return
        if self._state != _ConnectionState.MQTT_CS_CONNECTED:
            return
        now = mqtt.time_func()
        with self._msgtime_mutex:
            quiet = now - self._last_msg_out
        if quiet < keepalive / 2:
            return
        if self._send_pingreq() == MQTTErrorCode.MQTT_ERR_SUCCESS:
            with self._msgtime_mutex:
                self._last_msg_out = now
        self.loop_write()

    def resume_reading(self) -> None:
        """A hold (:meth:`keep_alive_unread`) ended: the broker's silence counts from now, since its
        packets (PINGRESPs included) waited unread. A link that died meanwhile is found
        :data:`DEAD_AFTER` × keepalive later."""
        if not self.can_hold:
            return
        now = mqtt.time_func()
        with self._msgtime_mutex:
            if now > self._last_bytes_received:
                self._last_bytes_received = now


class PublishUnconfirmed(Exception):
    """A message of :func:`publish_once` that the broker did not acknowledge (it may have arrived)."""


def publish_once(broker: BrokerSettings, topic: str, payload: bytes, logger: logging.Logger, *,
                 client_id: str, timeout_s: float = 10.0) -> None:
    """Publish one message at QoS 1 through a :class:`SessionClient` (credentials, TLS, cluster nodes
    as every stormwatch client) with a clean session, and wait for the broker's PUBACK.

    Args:
        broker: where to publish (:func:`stormwatch.runtime.mqtt.parse_broker_url`).
        topic, payload: the message.
        logger: the caller's logger (the session's log lines).
        client_id: a client id of its own (e.g. ``stormwatch-manual-<random>``): with one of a
            service, the broker would hand this client that service's session (a takeover).
        timeout_s: real seconds to wait for the connection, then again for the PUBACK.

    Raises:
        OSError: nothing was sent: the broker cannot be reached, refused the connection, or did not
            answer (:meth:`SessionClient.connect_now`).
        PublishUnconfirmed: sent, but the broker did not acknowledge within ``timeout_s`` (it may
            have the message) or the client refused it (paho's error).
    """
    client = SessionClient(broker, SessionOptions(client_id=client_id, clean_session=True), logger)
    client.connect_now(timeout_s)
    try:
        info = client.publish(topic, payload, qos=1)
        info.wait_for_publish(timeout_s)
        if not info.is_published():
            raise PublishUnconfirmed(f"did not acknowledge within {timeout_s:g} s")
    except (RuntimeError, ValueError) as exc:  # paho: not connected any more, or its queue is full
        raise PublishUnconfirmed(f"did not take the message: {exc}") from None
    finally:
        client.stop()


def _loss_text(from_broker: bool, code: int | None, reason_code: Any) -> str:
    """What a lost connection's reason means: paho says "Unspecified error" (0x80) for a connection
    that ended without the broker's DISCONNECT (the broker stopped, the network or a proxy cut it)."""
    if from_broker:
        return f"the broker disconnected this client ({reason_code})"
    if code == _UNSPECIFIED_ERROR:
        return "connection lost (closed without an MQTT DISCONNECT: the broker stopped or the network failed)"
    return f"connection lost ({reason_code})"
