"""The ingest session client: reads the socket in chunks (the ingest receive hot path).

paho's reader asks the socket for one byte (packet type), one byte per remaining-length byte, then
the rest of the packet, and handles one packet per ``select()`` wake-up when nothing of its own is
in flight -- four system calls and a loop turn per incoming message. At thousands of QoS 1
messages per second that is most of the consumer's receive cost. A QoS 0/1 PUBLISH is handed to
``on_delivery`` as its parts (paho builds an ``MQTTMessage`` and decodes the topic twice).

The design: docs/ingest.md ("The modules", `ingest/mqttclient.py`).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.runtime.mqttsession import SessionClient, SessionOptions

#: Bytes asked of the socket at once.
CHUNK_BYTES = 65536
#: Packets handled per socket wake-up before paho's loop gets back to writes and keep-alive.
MAX_PACKETS_PER_WAKE = 256
#: PUBACK fixed header + packet id (MQTT 3.1.1 section 3.4).
_PUBACK = struct.Struct("!BBH")

def send_pubacks(client: mqtt.Client, mids: list[int]) -> None:
    """Acknowledge QoS 1 messages ``mids`` -- the same bytes on the wire as ``client.ack(mid, 1)`` each.

    An MQTT 3.1.1 PUBACK is 4 bytes (``0x40 0x02`` + packet id, MQTT 3.1.1 section 3.4). paho sends
    each ``ack()`` as its own packet, waking its network thread and making one ``send()`` system
    call per message; for a batch of hundreds that is most of the acknowledging cost. Here the
    PUBACKs of a batch are queued as one buffer (one wake-up, one ``send()``) through paho's
    packet queue -- the path ``ack()`` itself takes. Falls back to ``ack()`` per message when
    that internal is missing (another paho version) or the session is not MQTT 3.1.x.
    """
    queue_packet = getattr(client, "_packet_queue", None)
    if queue_packet is None or getattr(client, "_protocol", None) not in (mqtt.MQTTv31, mqtt.MQTTv311):
        for mid in mids:
            client.ack(mid, 1)
        return
    blob = b"".join(_PUBACK.pack(0x40, 2, mid) for mid in mids)
    queue_packet(0x40, blob, mids[-1], 1)


#: A delivered message as :attr:`ChunkedReadClient.on_delivery` gets it: topic, payload, packet id, QoS, retained.
Delivery = Callable[[str, bytes, int, int, bool], None]


class ChunkedReadClient(SessionClient):
    """:class:`~stormwatch.runtime.mqttsession.SessionClient` with chunked socket reads (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._chunk = b""
        self._chunk_pos = 0
        #: Called instead of ``on_message`` for a QoS 0 or 1 PUBLISH of MQTT 3.1.x, with its parts as
        #: they are on the wire -- no ``MQTTMessage``, no second decode of the topic (module docstring).
        self.on_delivery: Delivery | None = None
        self._acks: list[int] = []

    def ack_later(self, mid: int) -> None:
        """Acknowledge QoS 1 message ``mid`` once this socket wake-up's packets are handled: the
        PUBACKs of one wake-up leave as one buffer (:func:`send_pubacks`), not a ``send()`` each.
        Call it from ``on_delivery`` (paho's network thread) after the message is processed."""
        self._acks.append(mid)

    def _send_acks(self) -> None:
        if self._acks:
            mids, self._acks = self._acks, []
            if self._sock is not None:
                send_pubacks(self, mids)

    def _sock_recv(self, bufsize: int) -> bytes:
        if self._chunk_pos >= len(self._chunk):
            data = super()._sock_recv(CHUNK_BYTES)  # BlockingIOError / OSError propagate to paho
            if len(data) <= bufsize:
                return data  # also b"" (connection closed)
            self._chunk, self._chunk_pos = data, 0
        start = self._chunk_pos
        self._chunk_pos = start + bufsize
        return self._chunk[start:self._chunk_pos]

    def _sock_close(self) -> None:
        self._chunk, self._chunk_pos = b"", 0
        self._acks = []  # the packet ids of a closed connection: the broker sends those messages again
        super()._sock_close()

    def reconnect(self) -> MQTTErrorCode:
        self._chunk, self._chunk_pos = b"", 0
        self._acks = []
        return super().reconnect()

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        try:
            return self._read_packets(max_packets)
        finally:
            self._send_acks()

    def _read_packets(self, max_packets: int) -> MQTTErrorCode:
        for _ in range(MAX_PACKETS_PER_WAKE):
            if self._ping_due() or (self._ping_t > 0 and self.want_write()):
                # The consumer may hold this thread in on_message (at its in-flight limit during a
                # store outage): a PINGREQ that is due, or queued and not yet written, goes out
                # before the next packet, or the broker drops the session after 1.5 x keepalive.
                return mqtt.MQTT_ERR_SUCCESS
            rc = super().loop_read(max_packets)
            if rc != mqtt.MQTT_ERR_SUCCESS or self._sock is None or not self._buffered():
                return rc
        return mqtt.MQTT_ERR_SUCCESS

    def _loop(self, timeout: float = 1.0) -> MQTTErrorCode:
        # Bytes left in the chunk (MAX_PACKETS_PER_WAKE reached) are invisible to select(): handle
        # them first, then let paho's loop write and keep alive without waiting.
        if self._buffered() and self._sock is not None:
            rc = self.loop_read()
            if rc != mqtt.MQTT_ERR_SUCCESS or self._sock is None:
                return rc
            timeout = 0.0
        return super()._loop(timeout)

    def _buffered(self) -> bool:
        return self._chunk_pos < len(self._chunk)

    def _handle_publish(self) -> MQTTErrorCode:
        # MQTT 3.1.1 section 3.3: topic length (2 bytes), topic, packet id (QoS > 0), payload.
        deliver = self.on_delivery
        command = self._in_packet["command"]
        qos = (command & 0x06) >> 1
        if deliver is None or qos == 2 or self._protocol not in (mqtt.MQTTv31, mqtt.MQTTv311):
            return super()._handle_publish()
        packet = self._in_packet["packet"]
        end = 2 + ((packet[0] << 8) | packet[1]) if len(packet) >= 2 else 0
        start = end + 2 if qos else end
        if end <= 2 or len(packet) < start:  # empty topic or short packet: paho says what is wrong
            return super()._handle_publish()
        try:
            topic = bytes(packet[2:end]).decode("utf-8")
        except UnicodeDecodeError:
            return super()._handle_publish()
        mid = (packet[end] << 8) | packet[end + 1] if qos else 0
        with self._in_callback_mutex:
            try:
                deliver(topic, bytes(packet[start:]), mid, qos, bool(command & 0x01))
            except Exception as err:
                self._easy_log(mqtt.MQTT_LOG_ERR, "Caught exception in on_delivery: %s", err)
                if not self.suppress_exceptions:
                    raise
        if qos == 1 and not self._manual_ack:
            return self._send_puback(mid)
        return mqtt.MQTT_ERR_SUCCESS

    def _handle_on_message(self, message: mqtt.MQTTMessage) -> None:
        # paho matches every message against its per-topic callbacks (a trie walk, and the topic
        # decoded twice) before it calls on_message; ingest registers none, so that walk is skipped
        # while the trie is empty.
        root = getattr(getattr(self, "_on_message_filtered", None), "_root", None)
        on_message = self.on_message
        if on_message is None or root is None or root._children:
            super()._handle_on_message(message)
            return
        with self._in_callback_mutex:
            try:
                on_message(self, self._userdata, message)
            except Exception as err:
                self._easy_log(mqtt.MQTT_LOG_ERR, "Caught exception in on_message: %s", err)
                if not self.suppress_exceptions:
                    raise


#: The paho internals ChunkedReadClient uses (paho-mqtt 2.1/2.2).
CHUNKED_INTERNALS = ("_sock_recv", "_sock_close", "_loop", "loop_read", "reconnect", "_handle_publish", "_send_puback")


def make_client(broker: BrokerSettings, options: SessionOptions, logger: logging.Logger, *,
                on_session: Callable[[bool], None] | None = None,
                on_lost: Callable[[], None] | None = None) -> SessionClient:
    """A :class:`ChunkedReadClient` (or a plain :class:`~stormwatch.runtime.mqttsession.SessionClient` on a paho
    without the internals it uses); arguments (``on_session``, ``on_lost``) as for ``SessionClient``."""
    if all(hasattr(mqtt.Client, name) for name in CHUNKED_INTERNALS):
        return ChunkedReadClient(broker, options, logger, on_session=on_session, on_lost=on_lost)
    return SessionClient(broker, options, logger, on_session=on_session, on_lost=on_lost)
