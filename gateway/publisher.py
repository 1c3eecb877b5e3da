"""MQTT publisher: drains the outbox at QoS 1; a row leaves it when ingest confirms it stored (paho-mqtt 2.x).

The design: docs/gateway.md ("The modules", `gateway/publisher.py`).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from stormwatch import storedack, topics
from stormwatch.clock import Clock
from stormwatch.gateway.outbox import Outbox, OutboxRow
from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.runtime.mqttsession import SessionClient, SessionOptions, Will
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: When a row leaves the outbox: ``stored`` (ingest confirmed it durably stored) or ``broker`` (the PUBACK).
CONFIRM_MODES = ("stored", "broker")


def client_id(site: str, gateway: str) -> str:
    """The gateway's fixed MQTT client id, ``stormwatch-<site>-<gateway>`` (one per gateway: two
    processes with one id take the session from each other, :mod:`stormwatch.runtime.mqtttakeover`)."""
    return f"stormwatch-{site}-{gateway}"


#: Most readings in one batched message (a poll cycle of a large site; ~115 KB, well under the
#: brokers' 1 MB packet limit, stormwatch.app.servers).
MAX_BATCH_READINGS = 500

#: Real seconds between checks of the confirmation lag: the pump's longest sleep without a wake-up.
_ALARM_CHECK_S = 1.0
#: Real seconds of publishes at ``max_rate_per_s`` that may go out at once after a quiet spell (a poll
#: cycle's messages without a sleep between each two; the rate holds over any longer span).
_RATE_BURST_S = 0.1
#: A sweep starting less than this many real seconds after the previous one ended is logged at DEBUG.
_SWEEP_EPISODE_S = 300.0


#: Bytes a batch adds around its readings' JSON: ``{"readings":[`` and ``]}``.
_BATCH_WRAP = len(b'{"readings":[]}')
#: A broker that closes the connection while a message larger than this and than any it accepted is
#: on its way is suspected of refusing the message's size, not of a session takeover (MQTT 3.1.1).
_SIZE_SUSPECT_BYTES = 1024


def packet_size(topic: str, payload_bytes: int, protocol: int = 4) -> int:
    """Bytes of a QoS 1 PUBLISH packet carrying ``payload_bytes`` on ``topic`` (MQTT 3.1.1 section 3.3;
    MQTT 5 adds the properties' length, 0 here) -- what a broker's packet limit counts."""
    remaining = 2 + len(topic.encode()) + 2 + payload_bytes + (1 if protocol == 5 else 0)
    length_bytes = 1 if remaining < 128 else 2 if remaining < 16_384 else 3 if remaining < 2_097_152 else 4
    return 1 + length_bytes + remaining


def messages(rows: list[OutboxRow], batch: bool, max_payload: int | None = None
             ) -> list[tuple[tuple[int, ...], bytes]]:
    """The messages of outbox rows in replay order: ``(row ids, payload)`` each.

    One per row; with ``batch``, one per run of rows of one event time (a poll cycle), at most
    :data:`MAX_BATCH_READINGS` readings and ``max_payload`` bytes (a row that alone is larger is the
    caller's: it is never sent): ``{"readings":[<row payload>,...]}`` -- the bytes
    :func:`stormwatch.wire.dump_payload` gives for those readings (each row holds one reading's JSON).
    """
    if not batch:
        return [((r.id,), r.payload) for r in rows]
    room = float("inf") if max_payload is None else max_payload
    out: list[tuple[tuple[int, ...], bytes]] = []
    run: list[OutboxRow] = []
    size = 0  # the run's payload bytes as a batch
    for row in [*rows, None]:
        if run and (row is None or row.event_time != run[0].event_time or len(run) == MAX_BATCH_READINGS
                    or size + 1 + len(row.payload) > room):
            payload = run[0].payload if len(run) == 1 else b'{"readings":[' + b",".join(r.payload for r in run) + b"]}"
            out.append((tuple(r.id for r in run), payload))
            run = []
        if row is not None:
            size = _BATCH_WRAP + len(row.payload) if not run else size + 1 + len(row.payload)
            run.append(row)
    return out


#: What an MQTT 3.1.1 PUBACK carries beside its mid: success, no properties (read-only, shared).
_PUBACK_OK = ReasonCode(PacketTypes.PUBACK)
_NO_PROPERTIES = Properties(PacketTypes.PUBACK)  # type: ignore[no-untyped-call]


class _GatewaySession(SessionClient):
    """The gateway's MQTT session: an MQTT 3.1.1 PUBACK (one per message published) is read as its mid
    alone, without the reason code and properties objects paho builds for each (a third of the network
    thread's CPU at one message per reading); MQTT 5 and malformed packets go to paho."""

    #: Called (paho's thread) as a CONNACK arrives, before paho resends its queue.
    before_connack: Callable[[], None] | None = None
    #: True while paho resends its queue at a CONNACK: the queue must not change under that loop.
    in_connack = False

    def _handle_connack(self) -> MQTTErrorCode:
        if self.before_connack is not None:
            self.before_connack()
        self.in_connack = True
        try:
            return super()._handle_connack()
        finally:
            self.in_connack = False

    def _handle_pubackcomp(self, cmd: Any) -> MQTTErrorCode:
        packet = self._in_packet["packet"]
        if cmd != "PUBACK" or self._protocol == MQTTProtocolVersion.MQTTv5 or len(packet) != 2:
            return super()._handle_pubackcomp(cmd)
        mid = (packet[0] << 8) | packet[1]
        with self._out_message_mutex:
            if mid in self._out_messages:
                return self._do_on_publish(mid, _PUBACK_OK, _NO_PROPERTIES)
        return MQTTErrorCode.MQTT_ERR_SUCCESS


class _Sweep:
    """A pass over the outbox re-sending the rows with ids after ``after`` up to ``upto`` (inclusive)."""

    def __init__(self, upto: int, why: str) -> None:
        self.after: int | None = None
        self.upto = upto
        self.why = why
        self.rows = 0


class MqttPublisher:
    """Publishes outbox rows of one gateway.

    Args:
        broker: connection settings (:func:`stormwatch.runtime.mqtt.parse_broker_url`).
        site, gateway: topic levels.
        boot: this process's boot id (in the online status).
        outbox: the durable outbox to drain.
        clock: stamps the status ``time``.
        window: messages handed to paho and not yet acknowledged by the broker, at most.
        max_rate_per_s: publishes per real second (new and re-sent).
        reconnect_min_s, reconnect_max_s: reconnect backoff (real seconds, rounded to whole seconds).
        keepalive_s: MQTT keep-alive (a dead link is found within 1.25 × keepalive,
            :mod:`stormwatch.runtime.mqttsession`).
        batch: publish one message per poll cycle (see the module docstring).
        batch_gather_s: real seconds to wait after new rows before publishing a batch (the devices
            of one poll cycle are read by separate link threads).
        confirm: ``"stored"`` (a row leaves the outbox when ingest confirms it stored) or ``"broker"``
            (on the PUBACK); see the module docstring.
        resend_grace_s: real seconds a sent row may wait for its confirmation before a later
            confirmation makes it count as lost.
        probe_after_s, probe_max_s: real seconds without any confirmation before the oldest sent row
            is sent again as a probe; the wait doubles up to ``probe_max_s`` while probes go unanswered.
        confirm_alarm_s: real seconds the oldest reading may stay unconfirmed before the ERROR.
        takeover_max_s, takeover_settle_s: while another process takes this gateway's session, the reconnect
            delay doubles for ``takeover_settle_s`` seconds, then is ``takeover_max_s``
            (:mod:`stormwatch.runtime.mqtttakeover`).

    Raises:
        ValueError: an unknown ``confirm`` mode or a non-positive wait.
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
        confirm: str = "stored",
        resend_grace_s: float = 10.0,
        probe_after_s: float = 30.0,
        probe_max_s: float = 600.0,
        confirm_alarm_s: float = 900.0,
        takeover_max_s: float = 300.0,
        takeover_settle_s: float = 60.0,
    ) -> None:
        if confirm not in CONFIRM_MODES:
            raise ValueError(f"confirm must be one of {', '.join(CONFIRM_MODES)}, got {confirm!r}")
        if min(resend_grace_s, probe_after_s, probe_max_s, confirm_alarm_s) <= 0:
            raise ValueError("resend_grace_s, probe_after_s, probe_max_s and confirm_alarm_s must be > 0")
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
        self.stored_topic = topics.stored(site, gateway)
        self.client_id = client_id(site, gateway)
        self.confirm = confirm
        self.resend_grace_s = resend_grace_s
        self.probe_after_s = probe_after_s
        self.probe_max_s = probe_max_s
        self.confirm_alarm_s = confirm_alarm_s
        self._acks: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._confirmations: queue.SimpleQueue[list[storedack.Confirmed]] = queue.SimpleQueue()
        self._inflight: dict[int, tuple[int, ...]] = {}  # mid -> its outbox row ids (pump thread only)
        self._inflight_bytes: dict[int, int] = {}  # mid -> packet size (read by paho's thread at a loss)
        # the size of the message being handed to paho: the broker may close the connection over it before
        # publish() returns its mid (paho writes to the socket in the calling thread)
        self._sending_bytes = 0
        self._largest_accepted = 0  # the largest packet the broker acknowledged
        # a packet limit learned from connections an MQTT 3.1.1 broker closed over a message's size
        self._learned_limit: int | None = None
        self._too_large: queue.SimpleQueue[int] = queue.SimpleQueue()  # mids taken back from paho for splitting
        self._taking_back: list[int] = []  # mids to take back from paho at the next CONNACK (paho's thread)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._other: dict[str, Any] | None = None  # the latest status on our topic from another boot
        self._status_mid: int | None = None
        self._refusals = 0
        self.dead_lettered = 0
        self.batch = batch
        self.batch_gather_s = batch_gather_s
        self._rows_added = 0.0  # monotonic time of the last wake() for new rows
        # Rows after the forward cursor may be waiting (new rows woke the pump, or the last pass was cut
        # short): only then does the pump query the outbox, not on every PUBACK and tick.
        self._unsent = True
        self._connected = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pump_thread: threading.Thread | None = None
        # pump-thread state of the forward pass and of re-sending (module docstring)
        self._cursor: int | None = None  # the last row the forward pass handed over
        self._marks: deque[tuple[float, int]] = deque()  # (monotonic time, cursor then)
        self._sweep: _Sweep | None = None
        self._quiet_until = 0.0  # no hole sweep before this (monotonic)
        self._quiet_s = resend_grace_s
        self._swept_head: int | None = None  # the oldest row when the last hole sweep started
        self._confirmed_top: int | None = None  # the latest row confirmed since the last hole check
        self._last_sweep_end = float("-inf")
        self._probe_wait = probe_after_s
        self._next_probe = float("inf")
        self._probing = False
        self._session_lost = threading.Event()  # set in paho's thread: the broker forgot our session
        self._drain_asked = threading.Event()
        self._next_alarm_check = 0.0
        self._started_wall = time.time()
        self.alarmed = False
        self.published = 0
        self.published_rows = 0
        self.resent_rows = 0
        self.acknowledged = 0
        self.confirmed = 0
        self.confirmations = 0  # stored-acknowledgement messages received
        self._bad_confirmations = 0
        self._client = self._make_client(reconnect_min_s, reconnect_max_s, keepalive_s, takeover_max_s,
                                         takeover_settle_s)

    # -- paho set-up and callbacks -------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        """Who this process is, in every status and the last will (tells two gateways with one id apart)."""
        return {"boot": self.boot, "host": self.host, "pid": self.pid}

    def _sides(self) -> str:
        """Both processes with this client id, as far as the retained statuses tell (the takeover ERROR)."""
        me = f"This gateway: boot {self.boot} on host {self.host}, pid {self.pid}"
        other = self._other
        if other is None:
            return (f"{me}; the other has not announced itself on {self.status_topic} yet (an older stormwatch, "
                    "or another kind of client)")
        return (f"{me}; the other: boot {other.get('boot')} on host {other.get('host', '?')}, pid "
                f"{other.get('pid', '?')} (its {other.get('state')} status on {self.status_topic})")

    def _loss_hint(self) -> str | None:
        """Why the broker closed the connection, when a message's size is the likelier cause (paho's thread).

        Then the limit is presumed below that message: half its size, never below the largest packet the
        broker accepted. The messages on their way above it are taken back from paho (sent again on
        reconnect, they would be refused again, blocking the outbox) and their rows sent again in messages
        that fit; a single reading is still sent alone (a presumed limit never makes a dead letter).
        """
        sizes = dict(self._inflight_bytes)
        biggest = max(self._sending_bytes, max(sizes.values(), default=0))
        floor = _SIZE_SUSPECT_BYTES if self._learned_limit is None else 0
        if biggest <= max(self._largest_accepted, floor):
            return None
        limit = max(self._largest_accepted, biggest // 2)
        self._learned_limit = limit if self._learned_limit is None else min(limit, self._learned_limit)
        self._take_back([mid for mid, size in sizes.items() if size > self._learned_limit])
        return (f"it closed the connection while a message of {biggest} bytes was on its way, larger than any it "
                f"accepted ({self._largest_accepted} bytes at most): most likely over its packet limit (Mosquitto "
                "max_packet_size; an MQTT 3.1.1 broker closes the connection without a reason). Batches are split "
                "smaller from now on; give the limit as max_packet_size=BYTES in the broker URL (or protocol=5 if "
                "the broker announces it) to have them fit from the start")

    def _take_back(self, mids: list[int]) -> None:
        """Remove messages from paho's resend queue (paho's thread, at a lost connection); the pump sends
        their rows again. A connection lost while paho resends that queue at a CONNACK calls this inside
        paho's loop over it: then the removal waits for the next CONNACK (a queue changed under that
        loop kills paho's network thread)."""
        client: Any = self._client
        if client.in_connack:
            self._taking_back.extend(mids)
            return
        self._remove_from_paho(mids)

    def _apply_take_back(self) -> None:
        """Paho's thread, as a CONNACK arrives: the removals a lost resend put off."""
        if self._taking_back:
            mids, self._taking_back = self._taking_back, []
            self._remove_from_paho(mids)

    def _remove_from_paho(self, mids: list[int]) -> None:
        client: Any = self._client
        with client._out_message_mutex:  # paho 2.x internals: the messages it resends on reconnect
            for mid in mids:
                if client._out_messages.pop(mid, None) is not None:
                    self._inflight_bytes.pop(mid, None)
                    self._too_large.put(mid)

    def _make_client(self, reconnect_min_s: float, reconnect_max_s: float, keepalive_s: int,
                     takeover_max_s: float, takeover_settle_s: float) -> SessionClient:
        min_s = max(1, round(reconnect_min_s))
        client = _GatewaySession(self.broker, SessionOptions(
            client_id=self.client_id, keepalive_s=keepalive_s,
            will=Will(self.status_topic, json.dumps({"state": "offline", **self._identity()})),
            reconnect_min_s=min_s, reconnect_max_s=max(min_s, round(reconnect_max_s)),
            takeover_max_s=max(min_s, round(takeover_max_s)), takeover_settle_s=takeover_settle_s,
            duplicate_hint=(f"Are two gateways configured with site {self.site!r} and gateway id {self.gateway!r}? "
                            "(`stormwatch gateway --check` given every site file finds them.)"),
            lost_note="the outbox keeps the readings", sides=self._sides, loss_hint=self._loss_hint,
        ), log, on_session=self._on_session, on_lost=self._connected.clear)
        # paho's own in-flight limit stays OFF (0): our window bounds what is handed over. With a
        # limit, paho 2.2 parks messages as "queued" and, on reconnect, stops resending at the
        # first queued one (client.py _handle_connack), stranding in-flight messages behind it.
        client.max_inflight_messages_set(0)
        client.before_connack = self._apply_take_back
        client.max_queued_messages_set(0)
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        return client

    def _status(self) -> dict[str, Any]:
        return {
            "state": "online",
            **self._identity(),
            "outbox_depth": self.outbox.depth(),
            "confirm_lag_s": round(self.confirm_lag_s()),
            "session_takeovers": self._client.takeovers,
            "time": format_time(self.clock.now()),
        }

    def _on_session(self, session_present: bool) -> None:
        # another process's status (or last will) names it in a takeover ERROR
        self._status_mid = self._client.subscribe(self.status_topic, qos=1)[1]
        if self.confirm == "stored":
            self._client.subscribe(self.stored_topic, qos=1)
            if not session_present and self.published:
                self._session_lost.set()
        self._client.publish(self.status_topic, json.dumps(self._status()), qos=1, retain=True)
        self._connected.set()
        self._wake.set()

    def _on_subscribe(self, _client: mqtt.Client, _userdata: Any, mid: int, reason_codes: list[Any],
                      _props: Any) -> None:
        if any(rc.is_failure for rc in reason_codes) and mid != self._status_mid:
            self._refusals += 1  # asked again with every probe: repeats at DEBUG
            log.log(logging.ERROR if self._refusals == 1 else logging.DEBUG,
                    "the broker refused the subscription to %s: ingest's confirmations cannot reach this gateway, "
                    "so its outbox keeps every reading and re-sends them; grant this gateway `topic read %s` "
                    "(deploy/mosquitto/acl, docs/deployment.md)", self.stored_topic, self.stored_topic)

    def _on_publish(self, _client: mqtt.Client, _userdata: Any, mid: int, _reason: Any, _props: Any) -> None:
        size = self._inflight_bytes.pop(mid, 0)
        if size > self._largest_accepted:
            self._largest_accepted = size
        self._acks.put(mid)
        # Waiting on ingest's confirmation, a PUBACK matters only to a filling window: the pump's
        # next turn takes it otherwise (a wake-up per message costs more than the message).
        if self.confirm == "broker" or 2 * len(self._inflight) >= self.window:
            self._wake.set()

    def _on_status(self, payload: bytes) -> None:
        try:
            doc = json.loads(payload)
        except ValueError:
            return
        if isinstance(doc, dict) and doc.get("boot") not in (None, self.boot):
            self._other = doc

    def _on_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        if msg.topic == self.status_topic:
            self._on_status(bytes(msg.payload))
            return
        if msg.topic != self.stored_topic:  # amqtt may deliver retained messages nobody subscribed to
            return
        try:
            confirmed = storedack.decode(bytes(msg.payload))
        except storedack.StoredAckError as exc:
            self._bad_confirmations += 1
            log.log(logging.WARNING if self._bad_confirmations == 1 else logging.DEBUG,
                    "ignoring a malformed stored-acknowledgement on %s (%s)%s", msg.topic, exc,
                    "; further ones logged at DEBUG" if self._bad_confirmations == 1 else "")
            return
        self.confirmations += 1
        self._confirmations.put(confirmed)
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
        log.info("publishing to %s on %s (a reading leaves the outbox when %s)", self.broker.safe_url(),
                 self.readings_topic, "ingest confirms it stored" if self.confirm == "stored"
                 else "the broker acknowledges it")
        self._client.start()
        self._pump_thread = threading.Thread(target=self._pump, name=f"mqtt-pump-{self.gateway}", daemon=True)
        self._pump_thread.start()

    def wake(self) -> None:
        """New rows are in the outbox."""
        self._rows_added = time.monotonic()
        self._unsent = True
        self._wake.set()

    def confirm_lag_s(self) -> float:
        """Real seconds since the oldest reading still in the outbox was committed (0 when it is empty)."""
        head = self.outbox.head()
        if head is None:
            return 0.0
        added = head[1] or self._started_wall
        return max(0.0, time.time() - added)

    def wait_drained(self, timeout_s: float, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait (real time) until the outbox is empty; True if it emptied within ``timeout_s``.

        With ``confirm="stored"``, the oldest row unconfirmed for longer than the grace is sent again
        at once as a probe (its confirmation brings the rest, module docstring).
        """
        self._drain_asked.set()
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
        self._apply_confirmations(time.monotonic())
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
        self._apply_confirmations(time.monotonic())
        session = self._client
        by = " stored by ingest" if self.confirm == "stored" else " (on the broker's acknowledgement)"
        log.info("publisher stopped: %d messages published (%d readings, %d of them re-sent), %d readings "
                 "acknowledged by the broker, %d confirmed%s; MQTT session: %d connects, %d losses, %d takeovers, "
                 "%d dead links", self.published, self.published_rows, self.resent_rows, self.acknowledged,
                 self.confirmed, by, session.connects, session.losses, session.takeovers, session.dead_links)

    # -- pump ---------------------------------------------------------------------------------

    def _resend_taken_back(self, now: float) -> None:
        """Rows of the messages taken back over their size go out again, in messages that fit."""
        upto: int | None = None
        while True:
            try:
                ids = self._inflight.pop(self._too_large.get_nowait(), None)
            except queue.Empty:
                break
            if ids:
                upto = max(ids) if upto is None else max(upto, *ids)
        self._want_sweep(now, upto, "the broker closed the connection over a message's size", force=True)

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
            self.acknowledged += len(done)
            if self.confirm == "broker":
                self.outbox.delete(done)
                self.confirmed += len(done)

    def _apply_confirmations(self, now: float) -> None:
        """Delete what ingest confirmed; a confirmation may show rows lost (module docstring)."""
        runs: list[storedack.Confirmed] = []
        while True:
            try:
                runs += self._confirmations.get_nowait()
            except queue.Empty:
                break
        if not runs:
            return
        deleted, top = self.outbox.confirm(self.gateway, runs)
        self.confirmed += deleted
        self._probe_wait = self.probe_after_s
        self._next_probe = now + self.probe_after_s
        if self._probing:
            self._probing = False
            if deleted:
                self._want_sweep(now, self._stale_cursor(now), "ingest answered after a silence", force=True)
            return
        if top is not None and (self._confirmed_top is None or top > self._confirmed_top):
            self._confirmed_top = top

    def _holes(self, now: float) -> None:
        """Rows sent a grace ago or more stay unconfirmed while later ones were confirmed: re-send them."""
        top = self._confirmed_top
        if top is None or self._sweep is not None or now < self._quiet_until:
            return
        head = self.outbox.head()
        if head is None or head[0] >= top:  # nothing older than what was confirmed is missing
            self._confirmed_top = None
            return
        stale = self._stale_cursor(now)
        if stale is None or head[0] > stale:  # still within its grace: looked at again later
            return
        self._confirmed_top = None
        self._want_sweep(now, stale, "ingest confirmed later readings but not these (lost on the way?)")

    def _stale_cursor(self, now: float) -> int | None:
        """The forward cursor as it was ``resend_grace_s`` ago (rows up to it had time to be confirmed)."""
        limit = now - self.resend_grace_s
        found: int | None = None
        for at, key in self._marks:
            if at > limit:
                break
            found = key
        return found

    def _mark(self, now: float) -> None:
        assert self._cursor is not None
        marks = self._marks
        if marks and now - marks[-1][0] < 0.5:
            marks[-1] = (marks[-1][0], self._cursor)
        else:
            marks.append((now, self._cursor))
        limit = now - self.resend_grace_s
        while len(marks) > 1 and marks[1][0] <= limit:
            marks.popleft()

    def _want_sweep(self, now: float, upto: int | None, why: str, *, force: bool = False) -> None:
        """Re-send every unconfirmed row up to ``upto`` (a sweep in progress is extended)."""
        if upto is None:
            return
        if self._sweep is not None:
            self._sweep.upto = max(self._sweep.upto, upto)
            return
        if not force and now < self._quiet_until:
            return
        head = self.outbox.head()
        if head is None or head[0] > upto:
            return
        self._quiet_s = min(self.probe_max_s, self._quiet_s * 2) if head[0] == self._swept_head else self.resend_grace_s
        self._swept_head = head[0]
        self._sweep = _Sweep(upto, why)
        level = logging.DEBUG if now - self._last_sweep_end < _SWEEP_EPISODE_S else logging.INFO
        log.log(level, "re-sending the readings not yet confirmed stored (%s); %d in the outbox", why,
                self.outbox.depth())

    def _plan_resend(self, now: float) -> None:
        if self._session_lost.is_set():
            self._session_lost.clear()
            self._want_sweep(now, self._cursor, "the broker had lost this gateway's session", force=True)
        if self._drain_asked.is_set():  # stopping: a probe now rather than in up to probe_max_s
            self._drain_asked.clear()
            self._next_probe = now
        self._holes(now)
        if self._sweep is not None or self._cursor is None:
            return
        if self._next_probe == float("inf"):
            self._next_probe = now + self._probe_wait
        if now < self._next_probe:
            return
        head = self.outbox.head()
        stale = self._stale_cursor(now)
        if head is None or stale is None or head[0] > stale:
            self._next_probe = now + self._probe_wait
            return
        log.debug("no stored-acknowledgement for %.0f s: re-sending the oldest unconfirmed reading as a probe",
                  self._probe_wait)
        self._probing = True
        self._sweep = _Sweep(head[0], "probe")
        # and the subscription again: a cluster node may have failed to restore it without telling us
        # (nats-server 2.9: "Unable to add JetStream consumer for subscription")
        self._client.subscribe(self.stored_topic, qos=1)
        self._probe_wait = min(self.probe_max_s, self._probe_wait * 2)
        self._next_probe = now + self._probe_wait

    def _check_alarm(self, now: float) -> None:
        if now < self._next_alarm_check:
            return
        self._next_alarm_check = now + _ALARM_CHECK_S
        lag = self.confirm_lag_s()
        by = "ingest" if self.confirm == "stored" else "the broker"
        if not self.alarmed and lag >= self.confirm_alarm_s:
            self.alarmed = True
            log.error("readings not confirmed %s for %.0f s: %d in the outbox (kept, re-sent when unconfirmed); "
                      "is the broker reachable and ingest running and storing?", "stored by ingest"
                      if self.confirm == "stored" else "by the broker", lag, self.outbox.depth())
            self._publish_status()
        elif self.alarmed and lag < self.confirm_alarm_s:
            self.alarmed = False
            log.info("readings are confirmed by %s again: %d in the outbox, the oldest unconfirmed for %.0f s", by,
                     self.outbox.depth(), lag)
            self._publish_status()

    def _publish_status(self) -> None:
        if self._connected.is_set():
            self._client.publish(self.status_topic, json.dumps(self._status()), qos=1, retain=True)

    def _send(self, rows: list[OutboxRow], room: int, next_slot: float, *, resend: bool
              ) -> tuple[int, int | None, bool, float]:
        """Publish the messages of ``rows`` (at most ``room``); returns (messages sent, id of the last row
        sent, whether every message of ``rows`` went out, the next rate slot)."""
        limit = self._client.packet_limit
        overhead = packet_size(self.readings_topic, 0, self.broker.protocol)
        if limit is not None:
            rows = self._dead_letter_oversize(rows, limit - overhead, limit)
        learned = self._learned_limit
        split = learned if limit is None else limit if learned is None else min(limit, learned)
        msgs = messages(rows, self.batch, None if split is None else split - overhead)
        interval = 1.0 / self.max_rate_per_s
        sent, last = 0, None  # rows come in id order: a message's last id is its highest
        for ids, payload in msgs[:room]:
            if self._stop.is_set() or not self._connected.is_set():
                return sent, last, False, next_slot
            now = time.monotonic()
            if now < next_slot:
                time.sleep(next_slot - now)
                now = next_slot
            next_slot = max(now - _RATE_BURST_S, next_slot) + interval
            size = self._sending_bytes = packet_size(self.readings_topic, len(payload), self.broker.protocol)
            info = self._client.publish(self.readings_topic, payload, qos=1)
            if info.rc == MQTTErrorCode.MQTT_ERR_QUEUE_SIZE:
                self._sending_bytes = 0
                return sent, last, False, next_slot
            # NO_CONN still queues the message inside paho (resent on reconnect).
            self._inflight[info.mid] = ids
            self._inflight_bytes[info.mid] = size
            self._sending_bytes = 0
            self.published += 1
            self.published_rows += len(ids)
            if resend:
                self.resent_rows += len(ids)
            sent += 1
            last = ids[-1]
        return sent, last, sent == len(msgs), next_slot

    def _dead_letter_oversize(self, rows: list[OutboxRow], room: int, limit: int | None) -> list[OutboxRow]:
        """Rows whose one reading can never fit the broker's packet limit become local dead letters
        (one ERROR each, naming the sizes); the others, to send."""
        keep = []
        for row in rows:
            if len(row.payload) <= room:
                keep.append(row)
                continue
            size = packet_size(self.readings_topic, len(row.payload), self.broker.protocol)
            announced = self._client.announced_packet_size
            source = "announced by the broker" if announced == limit else "configured in the broker URL"
            reason = f"a {size}-byte packet over the broker's limit of {limit} bytes ({source})"
            self.dead_lettered += self.outbox.dead_letter([row.id], reason)
            log.error("reading seq %d (event time %s) needs %s: it can never be sent, so it is kept as a local dead "
                      "letter in the outbox and the readings behind it go on", row.seq, row.event_time, reason)
        return keep

    def _pump(self) -> None:
        next_slot = time.monotonic()
        per_message = MAX_BATCH_READINGS if self.batch else 1
        # Everything that needs the pump wakes it; the timeout only paces the timed checks (alarm,
        # probes, holes), each at a fraction of its own period.
        tick = max(0.05, min(_ALARM_CHECK_S, self.resend_grace_s / 4, self.probe_after_s / 4))
        while not self._stop.is_set():
            self._wake.wait(tick)
            self._wake.clear()
            try:
                now = time.monotonic()
                self._apply_acks()
                self._resend_taken_back(now)
                if self.confirm == "stored":
                    self._apply_confirmations(now)
                    self._plan_resend(now)
                self._check_alarm(now)
                if not self._connected.is_set():
                    continue
                room = self.window - len(self._inflight)
                if self.batch:
                    gather = self._rows_added + self.batch_gather_s - time.monotonic()
                    if gather > 0 and self._stop.wait(gather):
                        break
                more = False
                sweep = self._sweep
                if sweep is not None and room > 0:
                    sending = frozenset(i for ids in self._inflight.values() for i in ids)
                    asked = room * per_message
                    rows = self.outbox.pending(asked, exclude=sending, after=sweep.after, upto=sweep.upto)
                    n, last, complete, next_slot = self._send(rows, room, next_slot, resend=True)
                    room -= n
                    sweep.rows += n
                    if last is not None:
                        sweep.after = last
                    if complete and len(rows) < asked:  # nothing more in its range
                        self._end_sweep(time.monotonic())
                    else:
                        more = True
                if room > 0 and self._unsent:
                    self._unsent = False  # before the query: a wake() during it is seen on the next turn
                    sending = frozenset(i for ids in self._inflight.values() for i in ids)
                    asked = room * per_message
                    rows = self.outbox.pending(asked, exclude=sending, after=self._cursor)
                    n, last, complete, next_slot = self._send(rows, room, next_slot, resend=False)
                    if last is not None:
                        self._cursor = last
                        self._mark(time.monotonic())
                    if not complete or len(rows) >= asked:
                        self._unsent = True
                    more = more or bool(rows)
                if more:
                    self._wake.set()
            except Exception:
                log.exception("publisher pump error (will retry)")
                self._stop.wait(0.5)

    def _end_sweep(self, now: float) -> None:
        sweep = self._sweep
        assert sweep is not None
        self._sweep = None
        self._last_sweep_end = now
        if sweep.why != "probe":
            self._quiet_until = now + self._quiet_s
            log.debug("re-sent %d message%s (%s)", sweep.rows, "" if sweep.rows == 1 else "s", sweep.why)
