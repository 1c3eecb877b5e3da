"""MQTT publisher: drains the outbox at QoS 1 and deletes rows only on PUBACK (paho-mqtt 2.x).

* Persistent session: fixed client id ``stormwatch-<site>-<gateway>``, ``clean_session=False``,
  MQTT 3.1.1 (also what the amqtt embedded broker speaks).
* Last will ``{"state":"offline"}`` retained at QoS 1 on ``topics.status(site, gateway)``; on every
  connect a retained ``{"state":"online","boot":...,"outbox_depth":N,"session_takeovers":N,"time":...}``
  (``session_takeovers``: connections this process lost so far to another client with its client id,
  :mod:`stormwatch.mqtttakeover` -- the gateway's counterpart of ingest's
  ``stormwatch_ingest_mqtt_session_takeovers_total``; a takeover ends in a reconnect, so each new
  status carries the count so far).
* One MQTT session set-up for every stormwatch client (:class:`stormwatch.mqttsession.SessionClient`):
  credentials/TLS, will, keep-alive that finds a dead link, automatic reconnect with backoff.
* Flow control: at most ``window`` messages handed to paho and not yet acknowledged, at most
  ``max_rate_per_s`` new publishes per real second (a replay after an outage does not flood the
  broker), and nothing new is handed over while disconnected -- the outbox, not the client's
  memory, holds the backlog (failure-kinds.md #8). Messages already handed to paho when the link
  drops are resent by paho on reconnect (same mid, DUP set) and their rows deleted on PUBACK.
* ``on_publish`` runs in paho's thread holding paho's message lock, so it only queues the mid;
  the pump thread maps mids to outbox rows and deletes them in batches.
* Message form (``batch``): one message per reading (the default), or one message per poll cycle
  -- the readings of one event time, every device's, as ``{"readings": [...]}`` (the contract's
  batch form, docs/asyncapi.yaml; identity per reading kept) -- after gathering the cycle's rows
  for ``batch_gather_s``. A county's broker then carries one message per gateway a minute instead
  of one per reading (docs/scaling.md). The outbox keeps a row per reading either way; a message's
  PUBACK deletes all of its rows.

Real-time waits here (rate, timeouts) are transport pacing, not event time.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from stormwatch import topics
from stormwatch.clock import Clock
from stormwatch.gateway.outbox import Outbox, OutboxRow
from stormwatch.mqtt import BrokerSettings
from stormwatch.mqttsession import SessionClient, SessionOptions, Will
from stormwatch.wire import format_time

log = logging.getLogger(__name__)


def client_id(site: str, gateway: str) -> str:
    """The gateway's fixed MQTT client id, ``stormwatch-<site>-<gateway>`` (one per gateway: two
    processes with one id take the session from each other, :mod:`stormwatch.mqtttakeover`)."""
    return f"stormwatch-{site}-{gateway}"


#: Most readings in one batched message (a poll cycle of a large site; ~115 KB, well under the
#: brokers' 1 MB packet limit, stormwatch.app.servers).
MAX_BATCH_READINGS = 500


def messages(rows: list[OutboxRow], batch: bool) -> list[tuple[tuple[int, ...], bytes]]:
    """The messages of outbox rows in replay order: ``(row ids, payload)`` each.

    One per row; with ``batch``, one per run of rows of one event time (a poll cycle), at most
    :data:`MAX_BATCH_READINGS` readings: ``{"readings":[<row payload>,...]}`` -- the bytes
    :func:`stormwatch.wire.dump_payload` gives for those readings (each row holds one reading's JSON).
    """
    if not batch:
        return [((r.id,), r.payload) for r in rows]
    out: list[tuple[tuple[int, ...], bytes]] = []
    run: list[OutboxRow] = []
    for row in [*rows, None]:
        if run and (row is None or row.event_time != run[0].event_time or len(run) == MAX_BATCH_READINGS):
            payload = run[0].payload if len(run) == 1 else b'{"readings":[' + b",".join(r.payload for r in run) + b"]}"
            out.append((tuple(r.id for r in run), payload))
            run = []
        if row is not None:
            run.append(row)
    return out


class MqttPublisher:
    """Publishes outbox rows of one gateway.

    Args:
        broker: connection settings (:func:`stormwatch.mqtt.parse_broker_url`).
        site, gateway: topic levels.
        boot: this process's boot id (in the online status).
        outbox: the durable outbox to drain.
        clock: stamps the status ``time``.
        window: unacknowledged messages allowed in flight.
        max_rate_per_s: new publishes per real second.
        reconnect_min_s, reconnect_max_s: reconnect backoff (real seconds, rounded to whole seconds).
        keepalive_s: MQTT keep-alive (a dead link is found within 1.25 × keepalive, :mod:`stormwatch.mqttsession`).
        batch: publish one message per poll cycle (see the module docstring).
        batch_gather_s: real seconds to wait after new rows before publishing a batch (the devices
            of one poll cycle are read by separate link threads).
    """

    def __init__(
        self,
        broker: BrokerSettings,
        site: str,
        gateway: str,
        boot: str,
        outbox: Outbox,
        clock: Clock,
        window: int = 200,
        max_rate_per_s: float = 5000.0,
        reconnect_min_s: float = 0.5,
        reconnect_max_s: float = 10.0,
        keepalive_s: int = 30,
        *,
        batch: bool = False,
        batch_gather_s: float = 0.2,
    ) -> None:
        self.broker = broker
        self.site = site
        self.gateway = gateway
        self.boot = boot
        self.outbox = outbox
        self.clock = clock
        self.window = window
        self.max_rate_per_s = max_rate_per_s
        self.readings_topic = topics.readings(site, gateway)
        self.status_topic = topics.status(site, gateway)
        self.client_id = client_id(site, gateway)
        self._acks: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._inflight: dict[int, tuple[int, ...]] = {}  # mid -> its outbox row ids (pump thread only)
        self.batch = batch
        self.batch_gather_s = batch_gather_s
        self._rows_added = 0.0  # monotonic time of the last wake() for new rows
        self._connected = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pump_thread: threading.Thread | None = None
        self.published = 0
        self.acknowledged = 0
        self._client = self._make_client(reconnect_min_s, reconnect_max_s, keepalive_s)

    # -- paho set-up and callbacks -------------------------------------------------------------

    def _make_client(self, reconnect_min_s: float, reconnect_max_s: float, keepalive_s: int) -> SessionClient:
        min_s = max(1, round(reconnect_min_s))
        client = SessionClient(self.broker, SessionOptions(
            client_id=self.client_id, keepalive_s=keepalive_s,
            will=Will(self.status_topic, json.dumps({"state": "offline"})),
            reconnect_min_s=min_s, reconnect_max_s=max(min_s, round(reconnect_max_s)),
            duplicate_hint=(f"Are two gateways configured with site {self.site!r} and gateway id {self.gateway!r}? "
                            "(`stormwatch gateway --check` given every site file finds them.)"),
            lost_note="the outbox keeps the readings",
        ), log, on_session=self._on_session, on_lost=self._connected.clear)
        # paho's own in-flight limit stays OFF (0): our window bounds what is handed over. With a
        # limit, paho 2.2 parks messages as "queued" and, on reconnect, stops resending at the
        # first queued one (client.py _handle_connack), stranding in-flight messages behind it.
        client.max_inflight_messages_set(0)
        client.max_queued_messages_set(0)
        client.on_publish = self._on_publish
        return client

    def _on_session(self, _session_present: bool) -> None:
        status = {
            "state": "online",
            "boot": self.boot,
            "outbox_depth": self.outbox.depth(),
            "session_takeovers": self._client.takeovers,
            "time": format_time(self.clock.now()),
        }
        self._client.publish(self.status_topic, json.dumps(status), qos=1, retain=True)
        self._connected.set()
        self._wake.set()

    def _on_publish(self, _client: mqtt.Client, _userdata: Any, mid: int, _reason: Any, _props: Any) -> None:
        self._acks.put(mid)
        self._wake.set()

    # -- public API ---------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def session(self) -> SessionClient:
        """The MQTT session (counters ``connects``, ``losses``, ``takeovers``, ``dead_links``)."""
        return self._client

    def start(self) -> None:
        """Connect in the background (retrying until the broker answers) and start pumping."""
        log.info("publishing to %s on %s", self.broker.safe_url(), self.readings_topic)
        self._client.start()
        self._pump_thread = threading.Thread(target=self._pump, name=f"mqtt-pump-{self.gateway}", daemon=True)
        self._pump_thread.start()

    def wake(self) -> None:
        """New rows are in the outbox."""
        self._rows_added = time.monotonic()
        self._wake.set()

    def wait_drained(self, timeout_s: float, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait (real time) until the outbox is empty; True if it emptied within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not should_stop():
            if self.outbox.depth() == 0:
                return True
            self._wake.set()
            time.sleep(0.02)
        return self.outbox.depth() == 0

    def close(self, timeout_s: float = 5.0) -> None:
        """Publish a retained ``{"state": "offline", "reason": "stopped"}`` (if connected), disconnect
        cleanly, stop threads. ``reason`` tells consumers this was a deliberate stop, not the last will
        of a gateway that died (the alert engine then waits for silence detection instead of
        announcing an outage)."""
        self._stop.set()
        self._wake.set()
        if self._pump_thread is not None:
            self._pump_thread.join(timeout_s)
        self._apply_acks()
        if self._connected.is_set():
            info = self._client.publish(
                self.status_topic, json.dumps({"state": "offline", "reason": "stopped"}), qos=1, retain=True
            )
            try:
                info.wait_for_publish(timeout_s)
            except (RuntimeError, ValueError) as exc:
                log.warning("offline status not confirmed: %s", exc)
        self._client.stop()
        self._apply_acks()
        session = self._client
        log.info("publisher stopped: %d published, %d acknowledged; MQTT session: %d connects, %d losses, "
                 "%d takeovers, %d dead links", self.published, self.acknowledged, session.connects, session.losses,
                 session.takeovers, session.dead_links)

    # -- pump ---------------------------------------------------------------------------------

    def _apply_acks(self) -> None:
        done: list[int] = []
        while True:
            try:
                mid = self._acks.get_nowait()
            except queue.Empty:
                break
            rows = self._inflight.pop(mid, None)
            if rows is not None:
                done.extend(rows)
        if done:
            self.outbox.delete(done)
            self.acknowledged += len(done)

    def _pump(self) -> None:
        next_slot = time.monotonic()
        interval = 1.0 / self.max_rate_per_s
        while not self._stop.is_set():
            self._wake.wait(0.1)
            self._wake.clear()
            try:
                self._apply_acks()
                if not self._connected.is_set():
                    continue
                room = self.window - len(self._inflight)
                if self.batch:
                    gather = self._rows_added + self.batch_gather_s - time.monotonic()
                    if gather > 0 and self._stop.wait(gather):
                        break
                sending = frozenset(i for ids in self._inflight.values() for i in ids)
                rows = self.outbox.pending(room * (MAX_BATCH_READINGS if self.batch else 1), exclude=sending)
                for ids, payload in messages(rows, self.batch)[:room]:
                    if self._stop.is_set() or not self._connected.is_set():
                        break
                    now = time.monotonic()
                    if now < next_slot:
                        time.sleep(next_slot - now)
                    next_slot = max(now, next_slot) + interval
                    info = self._client.publish(self.readings_topic, payload, qos=1)
                    if info.rc == MQTTErrorCode.MQTT_ERR_QUEUE_SIZE:
                        break
                    # NO_CONN still queues the message inside paho (resent on reconnect).
                    self._inflight[info.mid] = ids
                    self.published += 1
                if rows:
                    self._wake.set()
            except Exception:
                log.exception("publisher pump error (will retry)")
                self._stop.wait(0.5)
