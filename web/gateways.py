"""The gateways' last status, for the portfolio: ``stormwatch web --broker URL`` subscribes to every
gateway's retained ``stormwatch/v1/<site>/<gateway>/status`` (``{"state": "online"|"offline",
"outbox_depth": N, "session_takeovers": N, ...}``; offline is the gateway's last will, stormwatch/topics.py).

A retained status is the last one the broker kept, not proof the gateway is alive now: the
portfolio shows it beside the time of the site's last reading. Without ``--broker`` the gateway
column says the status is unknown.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from typing import Any

import paho.mqtt.client as mqtt

from stormwatch import topics
from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.runtime.mqttsession import SessionClient, SessionOptions
from stormwatch.web.overview import GatewayStatus

log = logging.getLogger(__name__)


class GatewayWatch:
    """Keeps the last status of every gateway (thread-safe).

    Args:
        broker: the MQTT broker (:func:`stormwatch.runtime.mqtt.parse_broker_url`).
        client_id: the session's client id (one per web process).
    """

    def __init__(self, broker: BrokerSettings, client_id: str = "stormwatch-web") -> None:
        self._lock = threading.Lock()
        self._status: dict[tuple[str, str], GatewayStatus] = {}
        self.connected = threading.Event()
        self.client = SessionClient(broker, SessionOptions(client_id=client_id, duplicate_hint=(
            "Are two `stormwatch web` processes using the same --client-id?")), log, on_session=self._subscribe)
        self.client.on_message = self._message

    def _subscribe(self, session_present: bool) -> None:
        self.client.subscribe(topics.STATUS_FILTER, qos=1)
        self.connected.set()

    def _message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        key = topics.parse_status_topic(msg.topic)
        if key is None:
            return
        try:
            doc = json.loads(msg.payload)
            state = str(doc["state"])
            depth = doc.get("outbox_depth")
            stamp = doc.get("time")
            taken = doc.get("session_takeovers")
            status = GatewayStatus(state=state, outbox_depth=int(depth) if isinstance(depth, int) else None,
                                   time=datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None,
                                   session_takeovers=taken if isinstance(taken, int) else None)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("gateway status on %s not understood (%s): %r", msg.topic, exc, bytes(msg.payload)[:200])
            return
        with self._lock:
            self._status[key] = status

    def statuses(self) -> dict[tuple[str, str], GatewayStatus]:
        """``(site, gateway)`` → its last status."""
        with self._lock:
            return dict(self._status)

    def start(self) -> None:
        self.client.start()

    def stop(self) -> None:
        self.client.stop()
