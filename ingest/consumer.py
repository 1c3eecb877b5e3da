"""The ingest consumer: MQTT readings -> validate -> durable store write -> THEN acknowledge and confirm.

A message is acknowledged, and confirmed to its gateway, only after the store holds it durably; a
bad one is dead-lettered with its reason (design-notes.md, "Delivery"; failure-kinds.md #8-#10, #15-#17).

The design: docs/ingest.md ("The modules", `ingest/consumer.py`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Container
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

import paho.mqtt.client as mqtt

from stormwatch import storedack, topics
from stormwatch.clock import Clock, WallClock
from stormwatch.contract import Reading, dump_readings
from stormwatch.fastwire import Wire, wire_reading
from stormwatch.ingest.mqttclient import ChunkedReadClient, make_client, send_pubacks
from stormwatch.ingest.validate import ValidationResult, Validator
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.runtime.mqttsession import SessionClient, SessionOptions
from stormwatch.stores.base import (
    Conflict,
    DeadLetter,
    ReadingStore,
    Refused,
    SiteInfo,
    StoreError,
    WriteOutcome,
    refusal_letters,
)
from stormwatch.stores.influxwrite import LineProtocolWrites
from stormwatch.stores.lineprotocol import from_ns, payload_text, time_ns
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: Real seconds between records of the configured sites in the store (a retention policy as short
#: as InfluxDB allows, 1 h, still always holds one); a failed record is retried after a minute.
SITES_EVERY_S = 3600.0
#: Payload bytes that end a batch before ``batch_size`` messages: about 5,000 readings in poll-cycle
#: messages of 10 (2 kB each; a few thousand points a write is InfluxDB's cheapest per point, more
#: only lengthen each write), 1,000 messages of one reading each.
BATCH_BYTES = 1 << 20

class _Message(NamedTuple):
    """A delivered message, as paho handed it over."""

    topic: str
    payload: bytes
    mid: int
    qos: int
    retain: bool
    generation: int


def _settled(info: mqtt.MQTTMessageInfo) -> bool:
    """The broker acknowledged the message -- or its handle will never tell: paho leaves the handle of a
    message published while disconnected at ``NO_CONN`` (it still sends the message on reconnect)."""
    try:
        return info.is_published()
    except (RuntimeError, ValueError):
        return True


def _duplicate_letter(reading: Reading, topic: str, received_at: datetime, why: str) -> DeadLetter:
    """Dead letter ``duplicate`` for a reading whose identity ``(gateway, boot, seq)`` was seen (#9)."""
    gateway, boot, seq = reading.identity
    return DeadLetter("duplicate", f"identity (gateway {gateway!r}, boot {boot!r}, seq {seq}) {why}", topic,
                      dump_readings([reading]), received_at)


_time_of = attrgetter("time")
_boot_of, _seq_of = itemgetter(1), itemgetter(2)  # of an identity
#: identity -> the first reading of it in a batch (a reading, or a wire reading and its time in ns;
#: -1 for a reading) and its message's topic
_InBatch = dict[tuple[str, str, int], tuple[Reading | Wire, str, int]]


class _WiresWritten(NamedTuple):
    """What became of :class:`_Wires`: the outcome (its conflicts and refusals as readings), the
    readings the store holds and their times, or -- written as readings after a store failure --
    the readings it holds."""

    outcome: WriteOutcome
    wires: list[Reading | Wire]
    stamps: list[int]
    readings: list[Reading]


class _Wires(NamedTuple):
    """A batch's live readings for a store that writes the wire form, in message order: the plain
    messages' readings as decoded (:meth:`stormwatch.ingest.validate.Validator.plain`), the others'
    as ``Reading`` objects, and their times in ns."""

    wires: list[Reading | Wire]
    stamps: list[int]


class _Prepared(NamedTuple):
    """A validated batch waiting for its write (:meth:`Ingest._prepare`)."""

    batch: list[_Message]
    accepted: list[Reading]
    late: list[Reading]
    plain: _Wires
    dead: list[DeadLetter]
    in_batch: _InBatch
    handled: dict[str, dict[str, list[int]]]  # stored-ack topic -> boot -> seqs handled
    received_at: datetime


#: No identity in flight.
_NOTHING: frozenset[tuple[str, str, int]] = frozenset()


def _as_reading(item: Reading | Wire, ns: int) -> Reading:
    return item if isinstance(item, Reading) else wire_reading(item, ns)


def _said(item: Reading | Wire, ns: int) -> tuple[str, str, str, str, int, int | float]:
    """What a reading says (:func:`stormwatch.stores.base.measurement`, its time in ns), either form."""
    if isinstance(item, Reading):
        ns = time_ns(item.time)
    return (item.site, item.device, item.quantity, item.unit, ns, item.value)


def _gathered_at_once(wires: list[Wire], stamps: list[int], target: _Wires, topic: str,
                      seqs: dict[str, list[int]] | None, in_batch: _InBatch) -> bool:
    """:func:`_gather_wires` of readings whose identities are new to the batch and of one boot (a poll
    cycle's, as a rule) in a few C-level steps; ``False`` (nothing done) for any others."""
    identities = [(w.gateway, w.boot, w.seq) for w in wires]
    firsts = dict(zip(identities, zip(wires, [topic] * len(wires), stamps, strict=True), strict=True))
    boot = identities[0][1]
    if (len(firsts) != len(identities) or not in_batch.keys().isdisjoint(firsts)
            or len(set(map(_boot_of, identities))) != 1):
        return False
    in_batch.update(firsts)
    if seqs is not None:
        seqs.setdefault(boot, []).extend(map(_seq_of, identities))
    target.wires.extend(wires)
    target.stamps.extend(stamps)
    return True


def _gather_wires(wires: list[Wire], stamps: list[int], target: _Wires, topic: str,
                  seqs: dict[str, list[int]] | None, in_batch: _InBatch, dead: list[DeadLetter],
                  received_at: datetime) -> None:
    """:func:`_gather` of a plain message's wire readings (several at once when they can be)."""
    if len(wires) > 1 and _gathered_at_once(wires, stamps, target, topic, seqs, in_batch):
        return
    first_of = in_batch.get
    add, add_ns = target.wires.append, target.stamps.append
    last_boot: str | None = None
    boot_seqs: list[int] = []
    for w, ns in zip(wires, stamps, strict=True):
        boot, seq = w.boot, w.seq
        identity = (w.gateway, boot, seq)
        if seqs is not None:
            if boot != last_boot:
                boot_seqs = seqs.setdefault(boot, [])
                last_boot = boot
            boot_seqs.append(seq)
        first = first_of(identity)
        if first is None:
            in_batch[identity] = (w, topic, ns)
        elif _said(first[0], first[2]) == _said(w, ns):
            dead.append(_duplicate_letter(wire_reading(w, ns), topic, received_at, "twice in one batch"))
            continue
        add(w)
        add_ns(ns)


def _gather(readings: list[Reading], target: list[Reading], topic: str, seqs: dict[str, list[int]] | None,
            in_batch: _InBatch, dead: list[DeadLetter], received_at: datetime) -> None:
    """Add a message's valid ``readings`` to ``target`` for the write: each identity's seq to ``seqs``
    (its gateway's stored acknowledgement), a second of one identity and measurement in the batch (a
    QoS 1 redelivery inside it) dead-lettered instead. One identity with two measurements in one
    batch: both go to the store, which takes the first it does not hold another measurement for and
    refuses the other."""
    first_of = in_batch.get
    add = target.append
    last_boot: str | None = None
    boot_seqs: list[int] = []
    for reading in readings:
        f = reading.__dict__  # a model's fields: one lookup each, not the model's attribute protocol
        boot, seq = f["boot"], f["seq"]
        identity = (f["gateway"], boot, seq)
        if seqs is not None:
            if boot != last_boot:  # a message's readings share their boot
                boot_seqs = seqs.setdefault(boot, [])
                last_boot = boot
            boot_seqs.append(seq)
        first = first_of(identity)
        if first is None:
            in_batch[identity] = (reading, topic, -1)
        elif _said(first[0], first[2]) == _said(reading, -1):
            dead.append(_duplicate_letter(reading, topic, received_at, "twice in one batch"))
            continue
        add(reading)


def deadletter_json(letter: DeadLetter) -> bytes:
    """The JSON published on :data:`stormwatch.topics.DEADLETTER` for a dead letter."""
    text, encoding = payload_text(letter.payload)
    return json.dumps({
        "reason": letter.reason, "detail": letter.detail, "topic": letter.topic, "payload": text,
        "payload_encoding": encoding, "received_at": format_time(letter.received_at),
    }, separators=(",", ":")).encode()


class Ingest:
    """MQTT -> store consumer. See the module docstring for the delivery guarantees.

    Args:
        validator: checks each message (:class:`stormwatch.ingest.validate.Validator`).
        store: where readings, dead letters go (any ``ReadingStore``).
        broker_url: ``mqtt://host:port`` (``mqtts://`` for TLS, ``user:pass@`` allowed).
        client_id: MQTT client id; fixed so the broker keeps the persistent session.
        clock: receive-time stamps.
        batch_size: maximum messages per store write.
        batch_ms: how long to wait for more messages after the first of a batch (real ms).
        share_group: subscribe as ``$share/<group>/...`` so several ingests split the load
            (Mosquitto supports it over MQTT 3.1.1; amqtt does not).
        sites: subscribe to these sites' readings topics only, instead of every site's (a partition
            of the sites, on brokers without shared subscriptions; :meth:`set_sites` changes it).
        stats_interval_s: seconds between INFO counter lines.
        retry_backoff_s, max_backoff_s: store-outage backoff (real seconds, doubling; the store's own HTTP
            retries come on top of each attempt).
        stop_flush_timeout_s: how long :meth:`stop` keeps retrying the final flush.
        retained_is_late: store retained messages as late (``False`` behind amqtt, see above).
        max_inflight: most messages delivered and not yet acknowledged; at the limit paho's network
            thread stops reading (TCP back-pressure). Match the broker's ``max_inflight_messages``
            (4,000 in the project's configurations) and keep it above ``batch_size``.

    Attributes (counters, read from any thread):
        received: messages delivered by the broker (counted on arrival; a redelivery counts again).
        written: readings newly stored (live and late).
        late: readings stored as late (retained).
        duplicates: readings the *store* found already present (SQLite unique key; after a restart
            the in-memory identity memory is empty). Duplicates recognised before the write are
            dead-lettered with reason ``duplicate`` instead.
        ignored: messages outside the subscription.
        dead_lettered: reason -> count.
        acked: messages acknowledged.
        confirmations: stored-acknowledgements published (one per gateway and batch).
        store_errors: failed store write attempts (each retried; nothing acked meanwhile).
        last_event_time: newest event time among the live readings written (``None`` before any).
        peak_unacked: most messages ever delivered but not yet acknowledged (at most
            ``max_inflight``; see ``max_inflight`` above).

    Raises:
        BrokerUrlError: ``broker_url`` is unusable.
    """

    def __init__(
        self,
        validator: Validator,
        store: ReadingStore,
        broker_url: str,
        client_id: str = "stormwatch-ingest",
        clock: Clock | None = None,
        batch_size: int = 1000,
        batch_ms: int = 200,
        share_group: str | None = None,
        *,
        stats_interval_s: float = 60.0,
        retry_backoff_s: float = 0.5,
        max_backoff_s: float = 2.0,
        stop_flush_timeout_s: float = 10.0,
        keepalive_s: int = 30,
        retained_is_late: bool = True,
        max_inflight: int = 4000,
        sites: Collection[str] | None = None,
    ) -> None:
        if batch_size < 1 or batch_ms < 0 or max_inflight < 1:
            raise ValueError("batch_size and max_inflight must be >= 1 and batch_ms >= 0")
        self.validator = validator
        self.store = store
        self.broker = parse_broker_url(broker_url)
        self.client_id = client_id
        self.clock: Clock = clock or WallClock()
        self.batch_size = batch_size
        self.batch_s = batch_ms / 1000.0
        self.share_group = share_group
        if share_group and sites is not None:
            raise ValueError("a shared subscription group and a partition of the sites are two ways to split "
                             "the load: use one")
        self.subscription = (f"$share/{share_group}/{topics.READINGS_FILTER}" if share_group
                             else topics.READINGS_FILTER)
        self._sites: frozenset[str] | None = None if sites is None else frozenset(sites)
        if self._sites is not None:
            self.subscription = f"{topics.ROOT}/<{len(self._sites)} sites>/+/readings"
        self.stats_interval_s = stats_interval_s
        self.retry_backoff_s = retry_backoff_s
        self.max_backoff_s = max_backoff_s
        self.stop_flush_timeout_s = stop_flush_timeout_s
        self.keepalive_s = keepalive_s
        self.retained_is_late = retained_is_late
        self.max_inflight = max_inflight

        self.received = 0
        self.written = 0
        self.late = 0
        self.duplicates = 0
        self.ignored = 0
        self.acked = 0
        self.confirmations = 0
        self.store_errors = 0
        self.dead_lettered: Counter[str] = Counter()
        self.last_event_time: datetime | None = None
        self.peak_unacked = 0
        self._settled = 0

        # paho's network thread appends, the run() thread pops (deque operations are atomic);
        # _arrived wakes run(). Bounded by the broker's in-flight window (nothing is acked yet).
        self._inbox: deque[_Message] = deque()
        self._arrived = threading.Event()
        self._room = threading.Event()  # set by run() whenever it settles messages
        self._stop = threading.Event()
        self._done = threading.Event()
        self._connected = threading.Event()
        self._subscribed_once = False
        self._generation = 0
        self._gen_lock = threading.Lock()
        self._run_ident: int | None = None
        self._stop_deadline = float("inf")
        self._pending_publishes: list[mqtt.MQTTMessageInfo] = []
        self._stored_topics: dict[str, str | None] = {}  # readings topic -> its stored-acknowledgement topic
        self._topics_in: dict[str, bool] = {}  # topic -> inside the subscription
        self._sites_failing = False
        # the batch being written in the store thread (run()) and the identities of its readings
        self._writer: ThreadPoolExecutor | None = None
        self._next_sites = 0.0  # when run() next records the site list in the store (time.monotonic)
        self._writing: Future[None] | None = None
        self._writing_ids: Container[tuple[str, str, int]] = _NOTHING
        self._client = self._make_client()
        # the store writes readings in their wire form (stormwatch.stores.influxwrite)
        self._wire_store = isinstance(store, LineProtocolWrites)

    # -- MQTT ------------------------------------------------------------------------------

    def _make_client(self) -> SessionClient:
        client = make_client(self.broker, SessionOptions(
            client_id=self.client_id, keepalive_s=self.keepalive_s, manual_ack=True, reconnect_min_s=1,
            reconnect_max_s=10, duplicate_hint="Are two ingest processes running with one --client-id? Give each "
            "its own (a shared subscription group splits the load)."), log,
            on_session=self._on_session, on_lost=self._connected.clear)
        client.on_message = self._on_message
        if isinstance(client, ChunkedReadClient):
            client.on_delivery = self._arrive
        client.on_subscribe = self._on_subscribe
        # No client-side limit on outgoing QoS 1 messages (confirmations, dead letters): with one,
        # paho 2.2 parks messages as "queued" and on reconnect stops resending at the first queued one
        # (client.py _handle_connack), stranding those in flight behind it for good.
        client.max_inflight_messages_set(0)
        return client

    def _on_session(self, _session_present: bool) -> None:
        with self._gen_lock:
            self._generation += 1
        log.debug("subscribing to %s (QoS 1)", self.subscription)
        if self._sites is None:
            self._client.subscribe(self.subscription, qos=1)
        elif self._sites:
            self._client.subscribe([(topics.readings(site, "+"), 1) for site in sorted(self._sites)])
        else:
            self._connected.set()  # no site (yet): nothing to subscribe to

    def _on_subscribe(self, _client: mqtt.Client, _userdata: Any, _mid: int, reason_codes: list[Any],
                      _props: Any) -> None:
        failed = [rc for rc in reason_codes if rc.is_failure]
        if failed:
            log.error("broker refused the subscription to %s: %s", self.subscription, failed)
            return
        # INFO once; every reconnect already logs "connected" (stormwatch.runtime.mqttsession).
        log.log(logging.DEBUG if self._subscribed_once else logging.INFO, "subscribed to %s (QoS 1)",
                self.subscription)
        self._subscribed_once = True
        self._connected.set()

    def _on_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        self._arrive(msg.topic, bytes(msg.payload), msg.mid, msg.qos, msg.retain)

    def _arrive(self, topic: str, payload: bytes, mid: int, qos: int, retain: bool) -> None:
        # Runs in paho's network thread, the only writer of _generation: no lock needed to read it.
        self._inbox.append(_Message(topic, payload, mid, qos, retain, self._generation))
        if not self._arrived.is_set():
            self._arrived.set()
        self.received += 1
        unacked = self.received - self._settled
        if unacked > self.peak_unacked:
            self.peak_unacked = unacked
        if unacked >= self.max_inflight:
            self._hold_reading()

    def _validate(self, topic: str, payload: bytes, retain: bool, received_at: datetime) -> ValidationResult | None:
        """Validate one message; ``None`` for a message outside the subscription. Never raises."""
        if not self._subscribed_to(topic):
            self.ignored += 1
            log.debug("ignoring %s: outside subscription %s", topic, self.subscription)
            return None
        try:
            return self.validator.validate(topic, payload, retained=retain and self.retained_is_late,
                                           received_at=received_at)
        except Exception as exc:  # a validator bug must not stop ingest: dead-letter, keep going
            log.exception("validator failed on a message from %s", topic)
            return ValidationResult(dead=[DeadLetter("internal_error", f"{type(exc).__name__}: {exc}", topic,
                                                     payload, received_at)])

    def _subscribed_to(self, topic: str) -> bool:
        known = self._topics_in.get(topic)
        if known is None:
            if self._sites is None:
                known = topics.matches(self.subscription, topic)
            else:
                where = topics.parse_readings_topic(topic)
                known = where is not None and where[0] in self._sites
            if len(self._topics_in) > 100_000:  # topics of unknown gateways must not grow it forever
                self._topics_in.clear()
            self._topics_in[topic] = known
        return known

    def set_sites(self, sites: Collection[str]) -> None:
        """Subscribe to exactly these sites' readings (a partitioned ingest whose ``--sites`` changed).

        Raises:
            ValueError: this ingest subscribes to every site (or a shared group), not a partition.
        """
        if self._sites is None:
            raise ValueError("this ingest subscribes to every site's readings; set_sites needs a partition")
        new, old = frozenset(sites), self._sites
        self._sites = new
        self._topics_in = {}
        self.subscription = f"{topics.ROOT}/<{len(new)} sites>/+/readings"
        added, removed = sorted(new - old), sorted(old - new)
        if added:
            self._client.subscribe([(topics.readings(site, "+"), 1) for site in added])
        if removed:
            self._client.unsubscribe([topics.readings(site, "+") for site in removed])

    def _hold_reading(self) -> None:
        """Block paho's network thread while ``max_inflight`` messages are unacknowledged.

        Not reading the socket is MQTT 3.1.1's only flow control (TCP back-pressure): the broker
        stops sending. Mosquitto's own window (``max_inflight_messages``) is not enough: 2.0.11
        releases a whole backlog queued for the session at once after an outage, and on a loaded
        machine sent a 1,001st message while 1,000 were unacknowledged (both seen in
        tests/ingest/test_delivery.py). So nothing more is read until a message is settled, however
        long the store is away; meanwhile the session writes a PINGREQ every half keep-alive from
        this thread (:meth:`~stormwatch.runtime.mqttsession.SessionClient.keep_alive_unread`), so the broker
        keeps it (tests/runtime/test_mqtt_session.py). Only a paho without the internals that needs
        (``can_hold`` false) lets one more message in per quarter keep-alive, so its own loop pings.
        """
        client = self._client
        tick = min(0.5, self.keepalive_s / 8) if self.keepalive_s else 0.5
        deadline = float("inf") if client.can_hold else time.monotonic() + self.keepalive_s / 4
        try:
            while not self._stop.is_set():
                self._room.clear()
                if self.received - self._settled < self.max_inflight:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                client.keep_alive_unread()
                self._room.wait(min(remaining, tick))
        finally:
            client.resume_reading()

    # -- lifecycle -------------------------------------------------------------------------

    def run(self) -> None:
        """Consume until :meth:`stop`; then flush, acknowledge and disconnect.

        Connection failures are retried forever (paho reconnects with backoff, 1 s doubling to
        10 s); an unreachable broker is logged at ERROR once per outage, then at DEBUG
        (:class:`stormwatch.runtime.mqtt.ConnectFailureLog`), and INFO "connected" when it answers.
        """
        self._run_ident = threading.get_ident()
        log.info("ingest starting: broker %s, client id %r, subscription %s (QoS 1), store %r", self.broker.safe_url(),
                 self.client_id, self.subscription, self.store)
        writer = self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-store")
        self._client.start()
        next_stats = time.monotonic() + self.stats_interval_s
        self._next_sites = time.monotonic()
        try:
            while not self._stop.is_set():
                if self.acked and time.monotonic() >= self._next_sites:  # once the store has taken a batch
                    # in the store thread, between two batches' writes: this thread checks the next
                    # batch meanwhile instead of waiting behind the write in flight for the record's answer
                    self._next_sites = float("inf")  # until the record's outcome says when next
                    writer.submit(self._record_sites_in_turn)
                batch = self._collect()
                if batch:
                    self._write_next(batch)
                if time.monotonic() >= next_stats:
                    self.log_stats()
                    next_stats = time.monotonic() + self.stats_interval_s
            # Final flush of whatever arrived before stop() (retried until _stop_deadline).
            self._settle_writing()
            batch = self._drain()
            if batch:
                self._process(batch)
            for info in self._pending_publishes:
                if not _settled(info):
                    info.wait_for_publish(timeout=1.0)
        finally:
            try:
                self._settle_writing()
            finally:
                writer.shutdown(wait=True)
                self._writer = None
            self._client.stop()
            self.log_stats()
            log.info("ingest stopped")
            self._done.set()

    def _record_sites_in_turn(self) -> None:
        """:meth:`_record_sites` in the store thread; the next record in an hour, or in a minute after a
        failure (any failure: a store bug must not end the records)."""
        recorded = False
        try:
            recorded = self._record_sites()
        except Exception:
            log.exception("recording the site list in the store failed; retrying in 60 s")
        finally:
            self._next_sites = time.monotonic() + (SITES_EVERY_S if recorded else 60.0)

    def _record_sites(self) -> bool:
        """Record the configured sites in the store, stamped with the clock's hour (a second record
        within the hour is the same point); ``False`` when the store is unavailable."""
        sites = [SiteInfo(cfg.site.id, cfg.site.timezone, cfg.site.jurisdiction)
                 for cfg in self.validator.sites.values()]
        try:
            self.store.write_sites(sites, self.clock.now().replace(minute=0, second=0, microsecond=0))
        except StoreError as exc:
            log.log(logging.DEBUG if self._sites_failing else logging.WARNING,
                    "cannot record the site list in the store (%s); retrying every 60 s", exc)
            self._sites_failing = True
            return False
        self._sites_failing = False
        return True

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask :meth:`run` to flush the pending batch and disconnect (thread-safe, signal-safe).

        Called from another thread, waits up to ``timeout_s`` for ``run`` to finish; called from
        the thread running ``run`` (e.g. a signal handler), only asks.
        """
        if not self._stop.is_set():
            self._stop_deadline = time.monotonic() + self.stop_flush_timeout_s
            self._stop.set()
            self._arrived.set()  # a batch waiting for its next message flushes now, not at its deadline
        if self._run_ident is not None and self._run_ident != threading.get_ident():
            self._done.wait(timeout_s)

    def wait_connected(self, timeout_s: float = 10.0) -> bool:
        """Block until connected and the subscription is granted; ``False`` on timeout."""
        return self._connected.wait(timeout_s)

    @property
    def session(self) -> SessionClient:
        """The MQTT session (counters ``connects``, ``losses``, ``takeovers``, ``dead_links``)."""
        return self._client

    @property
    def unacked(self) -> int:
        """Messages delivered and not yet settled (acknowledged or left for redelivery)."""
        return self.received - self._settled

    @property
    def store_retries(self) -> int:
        """Retries so far: failed batch writes here plus HTTP retries inside the store (``retries_total``)."""
        return self.store_errors + int(getattr(self.store, "retries_total", 0))

    def lag_s(self) -> float | None:
        """Seconds from the event time of the newest live reading written to ``clock.now()``; ``None`` before any."""
        if self.last_event_time is None:
            return None
        return (self.clock.now() - self.last_event_time).total_seconds()

    def log_stats(self) -> None:
        """One INFO line with the counters (also exported as Prometheus metrics, :mod:`stormwatch.ingest.metrics`)."""
        lag = self.lag_s()
        log.info("ingest: received=%d written=%d late=%d duplicates=%d ignored=%d acked=%d unacked=%d "
                 "confirmations=%d store_retries=%d lag_s=%s dead_lettered=%s", self.received, self.written,
                 self.late, self.duplicates, self.ignored, self.acked, self.unacked, self.confirmations,
                 self.store_retries,
                 "-" if lag is None else f"{lag:.1f}", dict(self.dead_lettered) or "{}")

    # -- batching --------------------------------------------------------------------------

    def _take(self, batch: list[_Message], size: int) -> int:
        """Move messages from the inbox to ``batch`` (``size`` bytes of payload so far) while it has room;
        returns its payload bytes."""
        inbox = self._inbox
        limit = self.batch_size
        while inbox and len(batch) < limit and size < BATCH_BYTES:
            msg = inbox.popleft()
            batch.append(msg)
            size += len(msg.payload)
        return size

    def _collect(self) -> list[_Message]:
        """Up to ``batch_size`` messages (or :data:`BATCH_BYTES` of payload): wait up to 0.2 s for the first,
        then up to ``batch_ms`` for more.

        While messages keep coming, filling is polled every 5 ms rather than woken per message (one
        wake-up per arrival would cost more than the message); after a poll that found nothing it
        waits for the next arrival (a trickle would pay 40 polls a batch). It ends early when the
        in-flight limit is reached, since then nothing more arrives until this batch is acknowledged.
        """
        batch: list[_Message] = []
        self._arrived.clear()
        size = self._take(batch, 0)  # after clear(): a message appended from here on sets the event again
        if not batch:
            if not self._arrived.wait(0.2):
                return batch
            size = self._take(batch, 0)
        deadline = time.monotonic() + self.batch_s
        flowing = True
        while len(batch) < self.batch_size and size < BATCH_BYTES and not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.received - self._settled >= self.max_inflight:
                break
            if flowing:
                time.sleep(min(remaining, 0.005))
            else:  # a trickle: woken by the next message, not 40 polls a batch
                self._arrived.clear()
                if not self._inbox and not self._stop.is_set():  # stop() sets _stop, then _arrived
                    self._arrived.wait(remaining)
            had = len(batch)
            size = self._take(batch, size)
            flowing = len(batch) > had
        return batch

    def _drain(self) -> list[_Message]:
        batch: list[_Message] = []
        while self._inbox:
            batch.append(self._inbox.popleft())
        return batch

    def _stored_topic(self, readings_topic: str) -> str | None:
        topic = self._stored_topics.get(readings_topic, "")
        if topic == "":
            if len(self._stored_topics) > 100_000:  # topics of unknown gateways must not grow it forever
                self._stored_topics.clear()
            topic = self._stored_topics[readings_topic] = topics.stored_for(readings_topic)
        return topic

    def _plain(self, msg: _Message, received_at: datetime,
               pending: Container[tuple[str, str, int]]) -> tuple[list[Wire], list[int]] | None:
        """The wire readings of a message the validator accepts whole as they are
        (:meth:`~stormwatch.ingest.validate.Validator.plain`), when the store writes that form; else
        ``None`` (the message then takes :meth:`_validate`)."""
        if not self._wire_store or not self._subscribed_to(msg.topic):
            return None
        try:
            return self.validator.plain(msg.topic, msg.payload, retained=msg.retain and self.retained_is_late,
                                        received_at=received_at, pending=pending)
        except Exception:  # a bug of the fast path: the full path gives the verdict
            log.exception("the validator's fast path failed on a message from %s", msg.topic)
            return None

    def _process(self, batch: list[_Message]) -> None:
        """Validate, write durably, then acknowledge ``batch`` (with no other batch in flight)."""
        self._finish(self._prepare(batch, self._settle_writing))

    def _prepare(self, batch: list[_Message], settle: Callable[[], None]) -> _Prepared:
        """Validate ``batch`` and gather its readings for the write; the store is not touched. May run
        while the batch before is being written: a message the fast path does not take whole (one
        that needs the full validator, or holds an identity of the batch in flight) first calls
        ``settle``, which waits until that batch is written and remembered, so every verdict is the
        one a batch written alone before it would give."""
        prepared = _Prepared(batch, [], [], _Wires([], []), [], {}, {}, self.clock.now())
        accepted, late, plain, dead, in_batch, handled, received_at = prepared[1:]
        pending: Container[tuple[str, str, int]] = self._writing_ids
        for msg in batch:
            wires = self._plain(msg, received_at, pending)
            if wires is None and pending:
                settle()
                pending = _NOTHING
            result = None if wires is not None else self._validate(msg.topic, msg.payload, msg.retain, received_at)
            if wires is None and result is None:
                continue
            ack_topic = self._stored_topic(msg.topic)
            seqs = handled.setdefault(ack_topic, {}) if ack_topic is not None else None
            if wires is not None:
                _gather_wires(*wires, plain, msg.topic, seqs, in_batch, dead, received_at)
                continue
            assert result is not None
            self._gather_result(result, msg.topic, seqs, accepted, late, in_batch, dead, received_at)
            if self._wire_store and accepted:  # one write in message order: the first of an identity wins
                plain.wires.extend(accepted)
                plain.stamps.extend(time_ns(r.time) for r in accepted)
                accepted.clear()
        return prepared

    def _finish(self, prepared: _Prepared) -> None:
        """Write a prepared batch until durable, remember what the store holds, publish its dead letters
        and stored-acknowledgements, then acknowledge its messages."""
        batch, accepted, late, plain, dead, in_batch, handled, received_at = prepared
        stored = self._write_until_durable(accepted, late, dead, lambda r: in_batch.get(r.identity, (r, ""))[1],
                                           received_at, plain)
        if stored is None:
            log.error("store still unavailable at shutdown: %d message(s) left unacknowledged; the broker will "
                      "redeliver them to this session", len(batch))
            return
        live, stale, fast = stored
        held = live.held(accepted)
        self.validator.committed(held + stale.held(late) + fast.readings)
        self.validator.committed_wires(fast.wires, fast.stamps)
        self.written += live.new + stale.new + fast.outcome.new
        self.late += stale.new
        self.duplicates += live.already + stale.already + fast.outcome.already
        if live.new or fast.outcome.new:
            newest = max((*map(_time_of, held), *map(_time_of, fast.readings),
                          *((from_ns(max(fast.stamps)),) if fast.stamps else ())))
            if self.last_event_time is None or newest > self.last_event_time:
                self.last_event_time = newest
        self._dead_lettered(dead)
        self._confirm(handled)
        self._pending_publishes = [i for i in self._pending_publishes if not _settled(i)][-1000:]
        self._ack(batch)

    def _write_next(self, batch: list[_Message]) -> None:
        """Prepare ``batch`` while the batch before is written (in the store thread), then hand it to
        that thread once the one before is acknowledged: the store's answer and the next batch's
        checks overlap, and batches are written, remembered and acknowledged in their order."""
        prepared = self._prepare(batch, self._settle_writing)
        self._settle_writing()
        self._writing_ids = prepared.in_batch
        assert self._writer is not None
        self._writing = self._writer.submit(self._finish, prepared)

    def _settle_writing(self) -> None:
        """Wait until the batch in flight (if any) is written, remembered and acknowledged."""
        writing = self._writing
        if writing is not None:
            try:
                writing.result()
            finally:
                self._writing = None
                self._writing_ids = _NOTHING

    @staticmethod
    def _gather_result(result: ValidationResult, topic: str, seqs: dict[str, list[int]] | None,
                       accepted: list[Reading], late: list[Reading], in_batch: _InBatch, dead: list[DeadLetter],
                       received_at: datetime) -> None:
        """A validated message's readings to the write's lists, its refusals to ``dead``."""
        for reading in result.duplicates:
            dead.append(_duplicate_letter(reading, topic, received_at, "already stored"))
        for target, readings in ((accepted, result.accepted), (late, result.late)):
            if readings:
                _gather(readings, target, topic, seqs, in_batch, dead, received_at)
        if result.dead:
            dead += result.dead
        if seqs is not None:
            for reading in result.duplicates:
                seqs.setdefault(reading.boot, []).append(reading.seq)
            for _gateway, boot, seq in result.refused:
                seqs.setdefault(boot, []).append(seq)

    def _dead_lettered(self, letters: list[DeadLetter]) -> None:
        """The one place every dead letter passes once the store holds it, whichever stage refused it
        (validation, a duplicate, a conflict, the store's server): counted by reason, logged at
        WARNING (duplicates in one INFO line), published on :data:`stormwatch.topics.DEADLETTER`."""
        duplicates = 0
        for letter in letters:
            self.dead_lettered[letter.reason] += 1
            if letter.reason == "duplicate":
                duplicates += 1
            else:
                log.warning("dead letter (%s): %s [topic %s]", letter.reason, letter.detail, letter.topic)
            info = self._client.publish(topics.DEADLETTER, deadletter_json(letter), qos=1)
            self._pending_publishes.append(info)
        if duplicates:
            log.info("%d duplicate reading(s) dead-lettered: already stored (a redelivery, or a gateway re-sending "
                     "what it had not seen confirmed)", duplicates)

    def _confirm(self, handled: dict[str, dict[str, list[int]]]) -> None:
        """Publish one stored-acknowledgement per gateway for what the batch durably handled."""
        for topic, seqs in handled.items():
            if seqs:
                self._pending_publishes.append(
                    self._client.publish(topic, storedack.encode(self.client_id, seqs), qos=1))
                self.confirmations += 1

    def _ack(self, batch: list[_Message]) -> None:
        with self._gen_lock:
            generation = self._generation
        mids: list[int] = []
        exactly_once: list[int] = []
        for msg in batch:
            if msg.qos == 0:
                continue
            if msg.generation != generation:
                # Received on an earlier connection: the broker redelivers it on this one (stored
                # already, so the redelivery is a duplicate); its old packet id is not ours to ack.
                continue
            (mids if msg.qos == 1 else exactly_once).append(msg.mid)
        # Settled before the acknowledgements leave: a message the broker sends once it has them
        # must find the count already down (paho's thread may read it before this thread runs on).
        self._settled += len(batch)
        for mid in exactly_once:
            self._client.ack(mid, 2)
        if mids:
            send_pubacks(self._client, mids)
        self.acked += len(mids) + len(exactly_once)
        self._room.set()

    def _write_checked(self, readings: list[Reading], *, late: bool = False) -> WriteOutcome:
        """The store's ``write_checked``; after a failure that is not a :class:`StoreError` (not the store
        away but, as a rule, something in one reading it cannot hold), the readings one at a time, each
        that fails again refused (``store_rejected``) so that one reading cannot hold up the rest for
        ever. Every one of several failing is the store's own fault: raised (no ack, retried)."""
        try:
            return self.store.write_checked(readings, late=late)
        except StoreError:
            raise
        except Exception as exc:  # any store bug: find the reading, if it is one
            failure = exc
        log.warning("store failed on a batch of %d reading(s) (%s: %s); writing them one at a time",
                    len(readings), type(failure).__name__, failure)
        new = already = 0
        conflicts: list[Conflict] = []
        refused: list[Refused] = []
        for reading in readings:
            try:
                out = self.store.write_checked([reading], late=late)
            except StoreError:
                raise
            except Exception as exc:  # this reading is what the store cannot hold
                refused.append(Refused(reading, f"the store could not hold it ({type(exc).__name__}: {exc})"))
                continue
            new, already = new + out.new, already + out.already
            conflicts += out.conflicts
            refused += out.refused
        if len(readings) > 1 and len(refused) == len(readings):
            raise failure
        return WriteOutcome(new, already, tuple(conflicts), tuple(refused))

    def _write_wires(self, plain: _Wires) -> _WiresWritten:
        """The store's ``write_wires`` of the plain readings; after a failure that is not a
        :class:`StoreError`, the same readings as ``Reading`` objects through :meth:`_write_checked` (which
        finds the one the store cannot hold)."""
        store = self.store
        assert isinstance(store, LineProtocolWrites)
        try:
            out = store.write_wires(plain.wires, plain.stamps)
        except StoreError:
            raise
        except Exception as exc:  # any store bug: the path that finds the reading, if it is one
            log.warning("store failed on %d wire reading(s) (%s: %s); writing them as readings",
                        len(plain.wires), type(exc).__name__, exc)
            readings = [_as_reading(w, ns) for w, ns in zip(*plain, strict=True)]
            outcome = self._write_checked(readings)
            return _WiresWritten(outcome, [], [], outcome.held(readings))
        wires, stamps = out.held(plain.wires, plain.stamps)
        outcome = WriteOutcome(out.new, out.already,
                               tuple(Conflict(_as_reading(w, c[0]), *c[1:]) for w, c in out.conflicts),
                               tuple(Refused(_as_reading(w, plain.stamps[plain.wires.index(w)]), message)
                                     for w, message in out.refused))
        return _WiresWritten(outcome, wires, stamps, [])

    def _write_until_durable(self, accepted: list[Reading], late: list[Reading], dead: list[DeadLetter],
                             topic_of: Callable[[Reading], str], received_at: datetime, plain: _Wires,
                             ) -> tuple[WriteOutcome, WriteOutcome, _WiresWritten] | None:
        """Write the three parts, retrying each until it succeeds; ``None`` if stopped while failing.

        One ERROR when the store fails, the retries at DEBUG, one INFO when it is writable again.
        The readings the store refuses (a conflict, a line its server refuses) become dead letters
        appended to ``dead`` (on their message's topic) and are written with the others.
        """
        live: WriteOutcome | None = None if accepted else WriteOutcome()
        stale: WriteOutcome | None = None if late else WriteOutcome()
        fast: _WiresWritten | None = None if plain.wires else _WiresWritten(WriteOutcome(), [], [], [])
        dead_done = False
        delay = self.retry_backoff_s
        outage_since: datetime | None = None
        outage_t0 = 0.0
        attempts = 0
        while True:
            try:
                if fast is None:
                    fast = self._write_wires(plain)
                    dead += refusal_letters(fast.outcome, received_at, topic_of)
                if live is None:
                    live = self._write_checked(accepted)
                    dead += refusal_letters(live, received_at, topic_of)
                if stale is None:
                    stale = self._write_checked(late, late=True)
                    dead += refusal_letters(stale, received_at, topic_of)
                if not dead_done:
                    if dead:
                        self.store.write_deadletters(dead)
                    dead_done = True
                if outage_since is not None:
                    log.info("store is writable again after %.0f s (unavailable since %s, %d failed attempts); "
                             "acknowledging", time.monotonic() - outage_t0, format_time(outage_since), attempts)
                return live, stale, fast
            except Exception as exc:  # StoreError, or a store bug: either way not durable -> no ack, retry
                if not isinstance(exc, StoreError):
                    log.exception("unexpected store failure (treated as not written)")
                self.store_errors += 1
                attempts += 1
                if outage_since is None:
                    outage_since = self.clock.now()
                    outage_t0 = time.monotonic()
                    log.error("store unavailable, not acknowledging until a write succeeds (retrying every %.0f s "
                              "at most; retries logged at DEBUG): %s", self.max_backoff_s, exc)
                else:
                    log.debug("store still failing (retry in %.1fs): %s", delay, exc)
                if self._stop.is_set():
                    remaining = self._stop_deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    time.sleep(min(delay, remaining))
                else:
                    self._stop.wait(delay)
                delay = min(self.max_backoff_s, delay * 2)
