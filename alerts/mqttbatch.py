"""The alert service's session client: the PUBLISHes of one socket read handed over as a list.

:class:`stormwatch.ingest.mqttclient.ChunkedReadClient` reads the socket in chunks, but paho still
reads each packet from the chunk a byte at a time (its type, each byte of its length, then the rest)
and handles one packet per turn of its loop. Here the complete QoS 0/1 PUBLISH packets at the front
of the chunk are cut out in one loop and handed to ``on_deliveries`` at once, so the service sees the
messages that arrived together -- a gateway's poll cycle sent one reading a message -- and can feed
them to the engine together. Any other packet, a packet cut by the chunk's end, or anything paho would
complain about takes paho's own path. The design: docs/alerts.md ("The modules", `alerts/mqttbatch.py`).
"""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from stormwatch.ingest.mqttclient import CHUNK_BYTES, CHUNKED_INTERNALS, ChunkedReadClient, make_client
from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.runtime.mqttsession import SessionClient, SessionOptions

#: One delivered message: topic, payload, packet id, QoS, retained.
Delivered = tuple[str, bytes, int, int, bool]
#: Messages handed over at most at once (paho's loop checks the keep-alive between two lists).
MAX_BATCH = 256
_PUBLISH = 0x30
#: The paho internals used here and by ChunkedReadClient (paho-mqtt 2.1/2.2).
_INTERNALS = (*CHUNKED_INTERNALS, "_packet_read", "_easy_log")


class BatchReadClient(ChunkedReadClient):
    """:class:`ChunkedReadClient` that hands the complete PUBLISHes at the front of a chunk to
    ``on_deliveries`` as one list (module docstring); ``on_delivery`` and paho take the rest."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Called with the messages cut out of one chunk, in their order (paho's network thread).
        self.on_deliveries: Callable[[list[Delivered]], None] | None = None
        #: Real seconds a list waits, once, for more messages when the socket has no more yet (0: never).
        self.linger_s = 0.0

    def _packet_read(self) -> MQTTErrorCode:
        batch: list[Delivered] = []
        if self.on_deliveries is not None and self._in_packet["command"] == 0:
            if self._chunk_pos >= len(self._chunk):  # a new chunk first: its first message is one of the list
                try:
                    data = super(ChunkedReadClient, self)._sock_recv(CHUNK_BYTES)
                except BlockingIOError:
                    return MQTTErrorCode.MQTT_ERR_AGAIN
                except OSError as err:
                    self._easy_log(mqtt.MQTT_LOG_ERR, "failed to receive on socket: %s", err)
                    return MQTTErrorCode.MQTT_ERR_CONN_LOST
                if not data:
                    return MQTTErrorCode.MQTT_ERR_CONN_LOST
                self._chunk, self._chunk_pos = data, 0
            batch = self._publishes()
        if not batch:
            return super()._packet_read()
        with self._msgtime_mutex:
            self._last_bytes_received = mqtt.time_func()
        deliver = self.on_deliveries
        assert deliver is not None
        with self._in_callback_mutex:
            try:
                deliver(batch)
            except Exception as err:
                self._easy_log(mqtt.MQTT_LOG_ERR, "Caught exception in on_deliveries: %s", err)
                if not self.suppress_exceptions:
                    raise
        if not self._manual_ack:
            for _topic, _payload, mid, qos, _retain in batch:
                if qos == 1:
                    self._send_puback(mid)
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    def _publishes(self) -> list[Delivered]:
        """The complete QoS 0/1 PUBLISH packets at the front of the chunk, taken out of it; when the chunk
        runs out after some, what arrives within ``linger_s`` more (once: the rest of a poll the
        gateway sent one reading a message is usually a moment behind its first)."""
        if self._protocol not in (mqtt.MQTTv31, mqtt.MQTTv311):
            return []
        out: list[Delivered] = []
        ran_out = self._cut(out)
        if ran_out and out and len(out) < MAX_BATCH and self.linger_s > 0 and self._more_within(self.linger_s):
            self._cut(out)
        return out

    def _more_within(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for more bytes and add them to what is left of the chunk; ``True`` if any
        came (a plain TCP socket only: TLS and websockets buffer on their own)."""
        sock = self._sock
        if self._ssl or self._transport != "tcp" or not isinstance(sock, socket.socket):
            return False
        try:
            if not select.select([sock], [], [], seconds)[0]:
                return False
            data = super(ChunkedReadClient, self)._sock_recv(CHUNK_BYTES)
        except (OSError, ValueError):
            return False  # paho's next read meets it and says what it is
        if not data:
            return False  # closed: paho's next read finds it so
        self._chunk, self._chunk_pos = self._chunk[self._chunk_pos:] + data, 0
        return True

    def _cut(self, out: list[Delivered]) -> bool:
        """Append the complete QoS 0/1 PUBLISH packets at the front of the chunk to ``out``, taken out
        of it (MQTT 3.1.1 section 3.3: fixed header, remaining length, topic length and topic, packet
        id if QoS 1, payload); ``True`` when the chunk ran out (at its end, or in a packet)."""
        chunk, pos = self._chunk, self._chunk_pos
        size = len(chunk)
        ran_out = False
        while len(out) < MAX_BATCH:
            if pos >= size:
                ran_out = True
                break
            command = chunk[pos]
            qos = (command & 0x06) >> 1
            if command & 0xF0 != _PUBLISH or qos == 2:
                break
            length = mult = 0
            at = pos + 1
            for at in range(pos + 1, min(pos + 5, size)):
                byte = chunk[at]
                length += (byte & 127) << mult
                mult += 7
                if not byte & 128:
                    break
            else:
                ran_out = size - pos <= 4  # else over 4 bytes of length: paho says so
                break
            start = at + 1
            stop = start + length
            if stop > size:
                ran_out = True
                break
            end = start + 2 + ((chunk[start] << 8) | chunk[start + 1]) if length >= 2 else start
            body = end + 2 if qos else end
            if end <= start + 2 or body > stop:
                break
            try:
                topic = chunk[start + 2:end].decode("utf-8")
            except UnicodeDecodeError:
                break
            mid = (chunk[end] << 8) | chunk[end + 1] if qos else 0
            out.append((topic, chunk[body:stop], mid, qos, bool(command & 0x01)))
            pos = stop
        self._chunk_pos = pos
        return ran_out


def make_batch_client(broker: BrokerSettings, options: SessionOptions, logger: logging.Logger, *,
                      on_session: Callable[[bool], None] | None = None,
                      on_lost: Callable[[], None] | None = None) -> SessionClient:
    """A :class:`BatchReadClient`, or on a paho without the internals it uses what
    :func:`stormwatch.ingest.mqttclient.make_client` gives."""
    if all(hasattr(mqtt.Client, name) for name in _INTERNALS):
        return BatchReadClient(broker, options, logger, on_session=on_session, on_lost=on_lost)
    return make_client(broker, options, logger, on_session=on_session, on_lost=on_lost)
