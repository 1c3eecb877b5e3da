"""The MQTT topic tree (version 1). Site first, so ACLs and shared subscriptions stay simple.

* ``stormwatch/v1/<site>/<gateway>/readings`` -- a reading or ``{"readings": [...]}``; QoS 1.
* ``stormwatch/v1/<site>/<gateway>/status`` -- ``{"state": "online"|"offline", ...}``; QoS 1,
  retained; the gateway's last will is ``offline``.
* ``stormwatch/v1/<site>/<gateway>/stored`` -- ingest's stored-acknowledgements of that gateway's readings
  (``{"stored": [{"boot", "seqs": [[first, last], ...]}], "by"}``, :mod:`stormwatch.storedack`); QoS 1.
* ``stormwatch/v1/<site>/events`` -- ordinance events from the alert engine; QoS 1.
* ``stormwatch/v1/deadletter`` -- ``{"reason", "detail", "topic", "payload"}``; QoS 1.
"""

from __future__ import annotations

ROOT = "stormwatch/v1"
READINGS_FILTER = f"{ROOT}/+/+/readings"
STATUS_FILTER = f"{ROOT}/+/+/status"
STORED_FILTER = f"{ROOT}/+/+/stored"
EVENTS_FILTER = f"{ROOT}/+/events"
DEADLETTER = f"{ROOT}/deadletter"


def readings(site: str, gateway: str) -> str:
    """Topic a gateway publishes its readings on."""
    return f"{ROOT}/{site}/{gateway}/readings"


def status(site: str, gateway: str) -> str:
    """Retained gateway status topic (also its last will)."""
    return f"{ROOT}/{site}/{gateway}/status"


def stored(site: str, gateway: str) -> str:
    """Topic ingest confirms a gateway's durably stored readings on (the gateway subscribes to it)."""
    return f"{ROOT}/{site}/{gateway}/stored"


def stored_for(readings_topic: str) -> str | None:
    """The stored-acknowledgement topic that answers a readings topic, or ``None`` if it is not one."""
    if not readings_topic.endswith("/readings") or parse_readings_topic(readings_topic) is None:
        return None
    return readings_topic[: -len("readings")] + "stored"


def events(site: str) -> str:
    """Topic the alert engine publishes a site's ordinance events on."""
    return f"{ROOT}/{site}/events"


def matches(topic_filter: str, topic: str) -> bool:
    """MQTT topic-filter match (``+`` one level, ``#`` the rest).

    Used by consumers to drop messages a broker delivered outside their subscriptions (amqtt may
    deliver retained messages to clients that never subscribed to them).
    """
    f_parts = topic_filter.split("/")
    t_parts = topic.split("/")
    if f_parts and f_parts[0].startswith("$share"):
        f_parts = f_parts[2:]
    for i, part in enumerate(f_parts):
        if part == "#":
            return True
        if i >= len(t_parts):
            return False
        if part != "+" and part != t_parts[i]:
            return False
    return len(f_parts) == len(t_parts)


def parse_readings_topic(topic: str) -> tuple[str, str] | None:
    """``(site, gateway)`` of a readings topic, or ``None`` if ``topic`` is not one."""
    parts = topic.split("/")
    if len(parts) == 5 and f"{parts[0]}/{parts[1]}" == ROOT and parts[4] == "readings":
        return parts[2], parts[3]
    return None


def parse_status_topic(topic: str) -> tuple[str, str] | None:
    """``(site, gateway)`` of a status topic, or ``None``."""
    parts = topic.split("/")
    if len(parts) == 5 and f"{parts[0]}/{parts[1]}" == ROOT and parts[4] == "status":
        return parts[2], parts[3]
    return None
