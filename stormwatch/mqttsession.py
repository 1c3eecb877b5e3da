"""One MQTT session for every stormwatch client: the gateway publisher, ingest and the alert service.

:class:`SessionClient` is a paho-mqtt 2.x client (callback API VERSION2) set up once for all three:

* MQTT 3.1.1 (what the amqtt demo broker speaks), a fixed client id and a persistent session
  (``clean_session=False``), QoS 1 in-flight state kept across reconnects;
* credentials and TLS from :class:`stormwatch.mqtt.BrokerSettings` (:func:`stormwatch.mqtt.apply_credentials`);
* an optional last will (:class:`Will`);
* automatic reconnect in paho's network thread with exponential backoff
  (``reconnect_min_s`` doubling to ``reconnect_max_s``);
* a keep-alive that finds a dead connection (below).

Keep-alive (MQTT 3.1.1 section 3.1.2.10). A connection that silently stops passing packets (a NAT
mapping that timed out, a cellular modem that lost its bearer) stays "open" until TCP gives up,
which takes many minutes. paho-mqtt 2.2 (``Client._check_keepalive`` and ``loop_misc``) sends a
PINGREQ after ``keepalive`` seconds without *sending* and closes the connection only when that
PINGREQ has been unanswered for another ``keepalive`` -- and sending the PINGREQ also resets its
"last bytes received" time -- so a dead link is found after 2 × keepalive (60 s with 30 s; worse
while the client keeps publishing into the dead socket, which postpones the PINGREQ). Here the
check is on what the broker *sends*:

* no packet from the broker for ``keepalive`` seconds (or nothing sent for ``keepalive``, as
  the protocol requires) → PINGREQ, unless one is already unanswered;
* no packet from the broker for :data:`DEAD_AFTER` × keepalive (1.25 ×: the PINGREQ went unanswered
  for a quarter of the keep-alive) → the connection is dead: closed, reported through
  ``on_disconnect`` (reason "Keep alive timeout") and reconnected.

The check runs in paho's network thread at least every :data:`TICK_FRACTION` × keepalive (at most
1 s), so a connection that stops passing packets is found within 1.25 × keepalive + one tick of
its last packet, below the 1.5 × keepalive a broker allows itself (MQTT 3.1.1 section 3.1.2.10).
An idle session sends one PINGREQ per keepalive, as before. The check uses paho internals
(``_check_keepalive``, ``_last_bytes_received``, ``_send_pingreq``, ``_ping_t``, ``_loop``); on a paho
without them (:data:`WATCHDOG_SUPPORTED` false) paho's own keep-alive applies.

Real-time waits here are transport pacing, not event time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion, _ConnectionState

from stormwatch.mqtt import BrokerSettings, apply_credentials

#: A connection is dead when the broker has sent nothing for this many keep-alive periods.
DEAD_AFTER = 1.25
#: The keep-alive check runs at least this often (fraction of the keep-alive; at most every second).
TICK_FRACTION = 0.1
#: The paho internals the keep-alive check relies on (paho-mqtt 2.1/2.2).
_INTERNALS = ("_check_keepalive", "_send_pingreq", "_sock_close", "_do_on_disconnect", "_loop")
WATCHDOG_SUPPORTED = all(hasattr(mqtt.Client, name) for name in _INTERNALS)


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

    Raises:
        ValueError: a negative keep-alive, or a reconnect minimum below 1 s or above the maximum.
    """

    client_id: str
    keepalive_s: int = 30
    will: Will | None = None
    manual_ack: bool = False
    reconnect_min_s: int = 1
    reconnect_max_s: int = 30

    def __post_init__(self) -> None:
        if self.keepalive_s < 0:
            raise ValueError(f"keepalive_s must be >= 0, got {self.keepalive_s}")
        if not 1 <= self.reconnect_min_s <= self.reconnect_max_s:
            raise ValueError(f"need 1 <= reconnect_min_s <= reconnect_max_s, got {self.reconnect_min_s}, "
                             f"{self.reconnect_max_s}")


class SessionClient(mqtt.Client):
    """A paho client holding one stormwatch MQTT session (module docstring).

    The application sets its callbacks (``on_connect``, ``on_message``...) and calls
    :meth:`start` once, :meth:`stop` at the end; paho's network thread reconnects in between.

    Args:
        broker: where to connect (:func:`stormwatch.mqtt.parse_broker_url`).
        options: client id, keep-alive, will, acknowledgement mode, reconnect backoff.
        logger: the owning service's logger (dead connections are reported there).

    Raises:
        OSError / ssl.SSLError: a TLS file of ``broker`` cannot be read.
    """

    def __init__(self, broker: BrokerSettings, options: SessionOptions, logger: logging.Logger) -> None:
        super().__init__(CallbackAPIVersion.VERSION2, client_id=options.client_id, clean_session=False,
                         protocol=MQTTProtocolVersion.MQTTv311, manual_ack=options.manual_ack)
        self.broker = broker
        self.options = options
        self.log = logger
        #: Connections found dead by the keep-alive check.
        self.dead_links = 0
        if options.will is not None:
            w = options.will
            self.will_set(w.topic, w.payload, qos=w.qos, retain=w.retain)
        apply_credentials(self, broker)
        self.reconnect_delay_set(min_delay=options.reconnect_min_s, max_delay=options.reconnect_max_s)

    def start(self) -> None:
        """Connect in the background (paho's network thread retries until the broker answers)."""
        self.connect_async(self.broker.host, self.broker.port, keepalive=self.options.keepalive_s)
        self.loop_start()

    def stop(self) -> None:
        """Disconnect cleanly (DISCONNECT: the broker does not publish the will) and end the network thread."""
        self.disconnect()
        self.loop_stop()

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
        if self._state != _ConnectionState.MQTT_CS_CONNECTED or self._ping_t > 0:
            return  # waiting for CONNACK, or a PINGREQ is unanswered: only the dead check applies
        if silent >= keepalive or now - last_out >= keepalive:
            try:
                self._send_pingreq()
            except Exception:  # paho's own handling of a failed PINGREQ
                self._sock_close()
                self._do_on_disconnect(packet_from_broker=False, v1_rc=MQTTErrorCode.MQTT_ERR_CONN_LOST)
                return
            with self._msgtime_mutex:
                self._last_msg_out = now

    def _declare_dead(self, silent: float, keepalive: int) -> None:
        self.dead_links += 1
        self.log.warning("no packet from broker %s for %.1f s (keepalive %d s%s): connection presumed dead; "
                         "reconnecting", self.broker.safe_url(), silent, keepalive,
                         ", PINGREQ unanswered" if self._ping_t > 0 else "")
        self._sock_close()
        if self._state in (_ConnectionState.MQTT_CS_DISCONNECTING, _ConnectionState.MQTT_CS_DISCONNECTED):
            self._state = _ConnectionState.MQTT_CS_DISCONNECTED
            rc = MQTTErrorCode.MQTT_ERR_SUCCESS
        else:
            self._state = _ConnectionState.MQTT_CS_CONNECTION_LOST
            rc = MQTTErrorCode.MQTT_ERR_KEEPALIVE
        self._do_on_disconnect(packet_from_broker=False, v1_rc=rc)
