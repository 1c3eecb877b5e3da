"""The alert service: MQTT readings in, ordinance events out (``stormwatch alerts``).

A paho-mqtt 2.x (callback API VERSION2) client with a persistent session (``clean_session=False``,
MQTT 3.1.1 -- amqtt speaks nothing newer) subscribes at QoS 1 to each site's readings and status
topics, acknowledging a message only after it has been processed (``manual_ack``). Messages a
broker delivers outside the subscriptions (amqtt does, for retained messages) are dropped with
:func:`stormwatch.topics.matches`. Invalid payloads are logged and dropped (ingest dead-letters
them); each reading of a batch is judged on its own (:func:`stormwatch.contract.parse_parts`), so one
bad reading does not cost the others. Retained readings are data, never live triggers (failure-kinds.md #10).

The design: docs/alerts.md ("The modules", `alerts/service.py`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from stormwatch import topics
from stormwatch.alerts.engine import DEFAULT_LATENESS_S, RECENT_WITH_STORE_S, Engine, EngineError
from stormwatch.alerts.grafana import GrafanaAnnotations
from stormwatch.alerts.mqttbatch import BatchReadClient, Delivered, make_batch_client
from stormwatch.alerts.packs import PackError
from stormwatch.alerts.presence import GatewayPresence, read_status
from stormwatch.alerts.seqholes import DEFAULT_HOLD_S, SequenceHoles
from stormwatch.alerts.servicestate import ServiceState
from stormwatch.alerts.webhook import BackgroundSender, Webhook
from stormwatch.alerts.workorders import LIVE_LAG_REAL_S, WorkOrder, WorkOrders
from stormwatch.clock import Clock, ScenarioClock, WallClock
from stormwatch.config import SiteConfig
from stormwatch.contract import Event, PayloadError, Reading, parse_parts
from stormwatch.display import local_time
from stormwatch.fastwire import Cycle, Wire, fast_cycle, fast_readings, fast_wire, poll_cycle
from stormwatch.ingest.mqttclient import ChunkedReadClient
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.runtime.mqttsession import SessionClient, SessionOptions
from stormwatch.stores.base import ReadingStore, StoreError
from stormwatch.stores.rows import unreadable_of
from stormwatch.timebounds import TimeBounds
from stormwatch.wire import format_time

log = logging.getLogger(__name__)


def _identity(body: bytes, gateway: str) -> tuple[str, int] | None:
    """``(boot, seq)`` of an invalid reading's JSON text when it names ``gateway`` and both are well
    formed (a NaN value, a bad unit... still say which reading it was), else ``None``."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("gateway") != gateway:
        return None
    boot, seq = doc.get("boot"), doc.get("seq")
    if not isinstance(boot, str) or not boot or isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        return None
    return boot, seq


def _continues(before: Wire, wire: Wire) -> bool:
    """``wire`` is the next reading of ``before``'s poll: same site, gateway, boot and time text, the next seq."""
    return (wire.seq == before.seq + 1 and wire.time == before.time and wire.boot == before.boot
            and wire.gateway == before.gateway and wire.site == before.site)


def _filters(site: str) -> list[str]:
    """A site's subscriptions: its gateways' readings and status topics."""
    return [f"{topics.ROOT}/{site}/+/{leaf}" for leaf in ("readings", "status")]

#: Real seconds between records of the engines' progress (their watermarks) in the state file.
PROGRESS_RECORD_REAL_S = 1.0
#: Real seconds between records of a wall or scenario clock: a reader takes a scenario clock as running
#: while its record is at most LIVE_LAG_REAL_S behind, and reads a wall clock's for its kind alone
#: (a commit, with its disk sync, each time). Other clocks (lockstep, manual) are read at the time
#: last recorded: every PROGRESS_RECORD_REAL_S.
CLOCK_RECORD_REAL_S = LIVE_LAG_REAL_S / 2
#: Real seconds after a connection to the broker at which the store is read for readings the broker
#: may not have delivered (the last read about seven minutes on: what a gateway re-sends after a
#: broker crash reaches the store within its grace and probe times, stormwatch.gateway.publisher).
CATCH_UP_AFTER_S = (0.0, 5.0, 15.0, 45.0, 135.0, 405.0)
#: Real seconds a socket read's messages wait, once, for more when there are none yet: the rest of a poll
#: sent one reading a message follows its first within a moment, and is then fed with it as one cycle.
POLL_LINGER_S = 0.002
#: Real seconds between reads of the store for the readings of an open sequence hole (seqholes.py).
HOLE_READ_S = 5.0
#: Real seconds after a read of the store that skipped unreadable rows at which the store is read
#: again from them (stormwatch.stores.rows.UnreadableRows: a point answered half-written).
REREAD_AFTER_S = (2.0, 10.0)
#: Real seconds between the ERRORs that remind of a stopped site while its readings arrive.
STOPPED_REMINDER_S = 300.0
#: Kept events written per store call, and the real seconds between attempts while the store is away.
KEPT_CHUNK = 500
RETRY_MIN_S, RETRY_MAX_S = 1.0, 5.0
_US = timedelta(microseconds=1)
#: The longest real wait of the service loop (overdue checks, kept events, catch-ups, clock records).
_TICK_S = 1.0


class _StoreOutage:
    """One ERROR when the store becomes unavailable, one INFO when it answers again (per service)."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.failures = 0

    def failed(self, what: str, exc: Exception) -> None:
        self.failures += 1
        if self.since is None:
            self.since = time.monotonic()
            log.error("store unavailable (%s: %s); retrying, logged at DEBUG (events are kept in the state file "
                      "meanwhile and written when it returns)", what, exc)
        else:
            log.debug("store still unavailable (%s: %s)", what, exc)

    def answered(self, note: str = "") -> None:
        if self.since is not None:
            log.info("store is available again after %.0f s (%d failed attempts)%s", time.monotonic() - self.since,
                     self.failures, note)
            self.since = None
            self.failures = 0


def overdue_event(order: WorkOrder, now: datetime) -> Event:
    """The ``inspection_overdue`` event of ``order``, announced once at ``now`` (event time). Its
    message gives the deadline site-local with the year (the order's zone), as an SMO reads it; the
    event's ``due_at`` stays UTC."""
    return Event(kind="inspection_overdue", site=order.site, event_time=now, rule=order.rule,
                 citation=order.citation, occurrence=order.occurrence, work_order=order.id, due_at=order.due_at,
                 message=f"work order {order.id} ({order.kind.replace('_', ' ')}) is overdue: it was due "
                         f"{local_time(order.due_at, order.timezone or 'UTC')}")


class AlertService:
    """Watch sites live over MQTT.

    Args:
        sites: the sites to watch (their jurisdictions name the rule packs).
        profiles: device profiles.
        broker_url: ``mqtt://host:port``.
        store: where events are recorded and warm-up readings come from (optional).
        state_path: SQLite file of the work orders.
        clock: stamps work orders and checks overdue (``ScenarioClock`` in simulation).
        client_id: persistent-session client id (one per running service).
        lateness_s: the engines' allowed lateness.
        on_event: called with every published event (the demo prints a timeline).
        warmup_days: how far back to replay stored readings on start.
        overdue_check_s: clock seconds between overdue checks.
        retained_is_late: treat messages flagged retained as stale (never live triggers). True for
            Mosquitto; False behind amqtt, which flags messages queued for a persistent session as
            retained when it delivers them (stormwatch/app/broker.py).
        webhook_url: POST every event there too (optional; retried with backoff).
        grafana: push every event as a Grafana annotation too (optional; :mod:`stormwatch.alerts.grafana`).
        reevaluate_late: re-evaluate late readings from the store (see :mod:`stormwatch.alerts.engine`).
        keepalive_s: MQTT keep-alive (a dead link is found within 1.25 × keepalive,
            :mod:`stormwatch.runtime.mqttsession`).
        bounds: the plausible event times around ``clock`` -- ingest's ``--max-future-s``/``--max-age-s``
            (:class:`stormwatch.timebounds.TimeBounds`; the same defaults): a reading outside them is
            ignored (ingest dead-letters it) and no engine's watermark passes the clock.
        hole_hold_s: real seconds the rules wait for readings a gateway made that have not arrived
            (a jump in its ``seq``: :mod:`stormwatch.alerts.seqholes`) before deciding without them.

    Raises:
        stormwatch.alerts.packs.PackError, stormwatch.alerts.engine.EngineError: a site cannot be watched.
        ValueError: a bad broker URL.
    """

    def __init__(self, sites: list[SiteConfig], profiles: ProfileLibrary, broker_url: str,
                 store: ReadingStore | None, state_path: str | Path, clock: Clock,
                 client_id: str = "stormwatch-alerts", *, lateness_s: float = DEFAULT_LATENESS_S,
                 on_event: Callable[[Event], None] | None = None, warmup_days: float = 8.0,
                 overdue_check_s: float = 60.0, retained_is_late: bool = True,
                 webhook_url: str | None = None, reevaluate_late: bool = True,
                 grafana: GrafanaAnnotations | None = None, keepalive_s: int = 30,
                 bounds: TimeBounds | None = None, hole_hold_s: float = DEFAULT_HOLD_S) -> None:
        self.broker = parse_broker_url(broker_url)
        self.host, self.port = self.broker.host, self.broker.port
        self.store = store
        self.clock = clock
        self.client_id = client_id
        self.on_event = on_event
        self.retained_is_late = retained_is_late
        self._received = 0
        self._handled = 0
        self.warmup = timedelta(days=warmup_days)
        self.overdue_check_s = overdue_check_s
        #: Overdue checks completed so far (each looked at every open order at the clock's time).
        self.overdue_checks = 0
        self.workorders = WorkOrders(state_path, clock)
        self.state = ServiceState(state_path)  # after the work-order book: it creates and checks the file
        self._outage = _StoreOutage()
        self._next_retry = 0.0
        self._retry_s = RETRY_MIN_S
        self._emitting = 0  # threads between making events (under the lock) and emitting them
        #: Called after each message's events are emitted (a lockstep clock looks again at once).
        self.after_message: Callable[[], None] | None = None
        self._lost_at: dict[str, datetime | None] | None = None  # watermarks when the connection was lost
        self._catch_up_from: dict[str, datetime | None] = {}
        self._catch_up_at: list[float] = []
        #: The clock's time once the session's subscription was granted: a reading published after it
        #: was delivered, so the store holds nothing missed past it (plus a gateway clock's allowed
        #: lead); ``None`` while not known, and the catch-up reads have no end.
        self._catch_up_until: datetime | None = None
        #: sites whose work raised an unexpected error: not evaluated any more (why, and when it was said)
        self.stopped_sites: dict[str, str] = {}
        self._stopped_said: dict[str, tuple[float, int]] = {}
        self.profiles = profiles
        self.lateness_s = lateness_s
        self.reevaluate_late = reevaluate_late
        self.bounds = bounds or TimeBounds()
        self._configs = {cfg.site.id: cfg for cfg in sites}
        self.engines = {sid: self._engine(cfg) for sid, cfg in self._configs.items()}
        self.hole_hold_s = hole_hold_s
        #: per site, the readings its gateways made that have not arrived (the engine is held below them)
        self.holes: dict[str, SequenceHoles] = {}
        for sid in self.engines:
            self._holes_of(sid)
        self._next_hole_read = 0.0
        self.outputs: list[BackgroundSender] = []
        if webhook_url:
            self.outputs.append(BackgroundSender(Webhook(webhook_url, clock).deliver, "webhook"))
        if grafana is not None:
            self.outputs.append(BackgroundSender(grafana.write_event, "grafana-annotations"))
        self._lock = threading.Lock()
        self._presence = GatewayPresence()
        self._unreadable_status: set[tuple[str, str]] = set()  # gateways whose bad status was logged once
        self._wills: set[tuple[str, str]] = set()  # (site, gateway) gone by its last will, not back yet
        self._stop = threading.Event()
        self.connected = threading.Event()
        self._client = make_batch_client(self.broker, SessionOptions(
            client_id=client_id, keepalive_s=keepalive_s, manual_ack=True, reconnect_min_s=1, reconnect_max_s=10,
            duplicate_hint="Are two alert services running with one --client-id? Give each its own."), log,
            on_session=self._on_session, on_lost=self._on_lost)
        self._client.on_message = self._on_message
        self._chunked: ChunkedReadClient | None = None
        if isinstance(self._client, ChunkedReadClient):  # a message's parts, and a wake-up's PUBACKs at once
            self._chunked = self._client
            self._chunked.on_delivery = self._on_delivery
        if isinstance(self._client, BatchReadClient):  # the messages that arrived together, at once
            self._client.on_deliveries = self._on_deliveries
            self._client.linger_s = POLL_LINGER_S
        #: readings topic -> (site, gateway), or None for any other topic (parsed once each)
        self._topics: dict[str, tuple[str, str] | None] = {}
        self._client.on_subscribe = self._on_subscribe
        self._subscribe_mid: int | None = None
        # No client-side limit on outgoing events (paho 2.2 strands in-flight messages behind a queued
        # one on reconnect, client.py _handle_connack).
        self._client.max_inflight_messages_set(0)

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> None:
        """Warm up, connect and process messages until :meth:`stop`; then flush and disconnect.

        An unreachable broker is retried forever (1 s doubling to 10 s) and logged at ERROR once per
        outage, then at DEBUG (:class:`stormwatch.runtime.mqtt.ConnectFailureLog`); INFO "connected" when it answers.
        """
        self.workorders.record_clock(self.clock)
        self._warm_up()
        shown = ", ".join(self.filters[:4]) + (f" ... ({len(self.engines)} sites)" if len(self.engines) > 2 else "")
        log.info("watching %s on %s as %s", shown, self.broker.safe_url(), self.client_id)
        self._client.start()
        recorded = clock_recorded = time.monotonic()
        formula = isinstance(self.clock, ScenarioClock | WallClock)
        clock_every = CLOCK_RECORD_REAL_S if formula else PROGRESS_RECORD_REAL_S
        overdue_every = max(0.05, self.clock_real(self.overdue_check_s))
        next_overdue = time.monotonic() + overdue_every
        try:
            while not self._stop.wait(timeout=min(_TICK_S, overdue_every)):
                now = time.monotonic()
                if now >= next_overdue:
                    self._check_overdue()
                    self.overdue_checks += 1
                    next_overdue = now + overdue_every
                self._check_wills()
                self._reread_unreadable(now)
                self._remind_stopped(now)
                self._catch_up(now)
                self._check_holes(now)
                self._write_kept(now)
                if now - recorded >= PROGRESS_RECORD_REAL_S:
                    self._record_progress()
                    recorded = now
                if now - clock_recorded >= clock_every:
                    self.workorders.record_clock(self.clock)
                    clock_recorded = now
        finally:
            events = []
            for site, eng in list(self.engines.items()):
                with self._site_work(site, "evaluating its readings at stop"), self._lock:
                    events += eng.flush()
            with self._lock:
                done = {site: eng.watermark for site, eng in self.engines.items()}
            for info in self._emit(events, done):
                try:
                    info.wait_for_publish(timeout=5.0)
                except (RuntimeError, ValueError) as exc:
                    log.error("event not confirmed by the broker before stop: %s", exc)
            self._write_kept(time.monotonic(), final=True)
            for eng in self.engines.values():
                for storm in eng.in_progress():
                    log.info("%s: storm in progress at stop: %d tips (%.2f in) since %s, qualified=%s",
                             eng.site, storm.tips, storm.depth_in, storm.start.isoformat(), storm.qualified)
            self._client.stop()
            for output in self.outputs:
                output.close()
            self.workorders.record_clock(self.clock, stopped=True)
            self.workorders.close()
            self.state.close()
            log.info("alert service stopped after %d readings", self.readings_seen)

    def stop(self) -> None:
        """Ask :meth:`run` to flush and return (thread-safe)."""
        self._stop.set()

    @property
    def messages_handled(self) -> int:
        """MQTT messages taken from the broker and handled (readings, statuses, refused ones alike)."""
        with self._lock:
            return self._handled

    @property
    def session(self) -> SessionClient:
        """The MQTT session (counters ``connects``, ``losses``, ``takeovers``, ``dead_links``)."""
        return self._client

    @property
    def readings_seen(self) -> int:
        """Readings received on readings topics and handed to an engine so far, all sites."""
        with self._lock:
            return self._received

    def readings_taken(self) -> dict[str, int]:
        """Per gateway boot, the readings its engines took, live or from the store at warm-up
        (:meth:`SequenceHoles.taken`): what a restarted engine has, where :attr:`readings_seen`
        counts this process's deliveries only."""
        out: dict[str, int] = {}
        with self._lock:
            for holes in self.holes.values():
                for boot, n in holes.taken().items():
                    out[boot] = out.get(boot, 0) + n
        return out

    @property
    def emitting(self) -> bool:
        """Events made from a message and not emitted yet (a lockstep clock waits for them)."""
        with self._lock:
            return self._emitting > 0

    def check_overdue(self) -> None:
        """Announce the work orders whose due time has passed, now (what :meth:`run` does every
        ``overdue_check_s``; a lockstep clock calls it at fixed instants instead)."""
        self._check_overdue()
        self.overdue_checks += 1

    def clock_real(self, seconds: float) -> float:
        """Real seconds of ``seconds`` clock seconds (scenario clocks run faster)."""
        real = getattr(self.clock, "real_seconds", None)
        return float(real(seconds)) if callable(real) else seconds

    def _engine(self, cfg: SiteConfig) -> Engine:
        """A site's engine; with a store it keeps only a short tail of readings (the store has the rest).

        Raises:
            stormwatch.alerts.packs.PackError, stormwatch.alerts.engine.EngineError: the site cannot be watched.
        """
        recent = {"recent_s": RECENT_WITH_STORE_S} if self.store is not None else {}
        return Engine.for_site(cfg, self.profiles, self.workorders, self.lateness_s, store=self.store,
                               reevaluate_late=self.reevaluate_late, clock=self.clock, bounds=self.bounds, **recent)

    @property
    def filters(self) -> list[str]:
        """The subscriptions: each watched site's readings and status topics."""
        return [f for site in self.engines for f in _filters(site)]

    def _warm_up(self) -> None:
        for site, engine in list(self.engines.items()):
            with self._site_work(site, "warming up from the store"):
                with self._lock:
                    events = self._warm_up_engine(site, engine)
                    done = {site: engine.watermark}
                self._emit(events, done)

    def _warm_up_engine(self, site: str, engine: Engine) -> list[Event]:
        """Feed ``engine`` the store's readings of the last ``warmup_days``; returns the events of the
        readings after the recorded progress (the engine was away then: they were never emitted).

        Without a recorded progress (a first start) every stored reading counts as known.
        """
        if self.store is None:
            return []
        start = self.clock.now() - self.warmup
        try:
            readings = self.store.query_readings(site, start=start)
        except StoreError as exc:
            log.error("%s: warm-up from the store failed (%s): starting from live data only", site, exc)
            return []
        self._holes_of(site).saw_stored(readings)
        known_until = self.state.progress(site)
        known = [r for r in readings if known_until is None or r.time <= known_until]
        later = [] if known_until is None else [r for r in readings if r.time > known_until]
        n = 0
        for r in known:
            n += len(engine.feed(r))
        if known_until is not None:
            n += len(engine.advance_to(known_until))
        new: list[Event] = []
        for r in later:
            new += engine.feed(r)
        if known_until is None:
            n += len(engine.flush())
        else:
            new += engine.flush()
        log.info("%s: warmed up from %d stored readings since %s (%d events already known, not re-published)",
                 site, len(readings), start.isoformat(), n)
        if new or later:
            log.info("%s: %d stored readings after %s, when the engine was away: %d events from them", site,
                     len(later), format_time(known_until) if known_until else "-", len(new))
        return new

    def apply_sites(self, sites: Mapping[str, SiteConfig]) -> None:
        """Watch exactly ``sites`` from now on (``--sites DIR``: site files added, changed, removed).

        * added -- an engine warmed up from the store, then the site's topics are subscribed;
        * changed -- a new engine for the new configuration, warmed up from the store and given the
          readings the old one held (so nothing in flight is lost), as a restart of that site would;
        * removed -- its buffered readings are evaluated (flushed) and published, then its topics are
          unsubscribed and its engine dropped (its work orders stay in the book).

        A site that cannot be watched (an unknown rule pack, a rule its devices cannot serve) is
        logged at ERROR and left as it was. Thread-safe.
        """
        with self._lock:
            current = dict(self._configs)
        removed = [sid for sid in current if sid not in sites]
        built: dict[str, Engine] = {}
        for sid, cfg in sites.items():
            if current.get(sid) == cfg:
                continue
            try:
                engine = self._engine(cfg)
            except (PackError, EngineError) as exc:
                log.error("%s: cannot be watched: %s (%s)", sid, exc,
                          "keeping the configuration watched so far" if sid in current else "not watched")
                continue
            with self._site_work(sid, "warming up from the store"):
                flushed_new = self._warm_up_engine(sid, engine)
                built[sid] = engine
                self._emit(flushed_new, {sid: engine.watermark})
        flushed: list[Event] = []
        with self._lock:
            for sid in removed:
                gone = self.engines.pop(sid, None)  # None: a stopped site
                flushed += gone.flush() if gone is not None else []
                del self._configs[sid]
                self.holes.pop(sid, None)
                self.stopped_sites.pop(sid, None)
                self._stopped_said.pop(sid, None)
            for sid, engine in built.items():
                flushed += engine.hold(self._holes_of(sid).hold())
                old = self.engines.get(sid)
                if old is not None:  # what it held may not be in the store yet: the new engine takes it over
                    for r in old.held_readings():
                        engine.feed(r)
                self.engines[sid] = engine
                self._configs[sid] = sites[sid]
                self._stopped_said.pop(sid, None)
                if self.stopped_sites.pop(sid, None) is not None:  # its site file changed: watched again
                    log.warning("%s: watched again (its site file changed) after it was stopped", sid)
        self._emit(flushed)
        new = [sid for sid in built if sid not in current]
        if new:
            self._client.subscribe([(f, 1) for sid in new for f in _filters(sid)])
        if removed:
            self._client.unsubscribe([f for sid in removed for f in _filters(sid)])
        log.info("now watching %d sites (%d added, %d changed, %d removed)", len(self.engines), len(new),
                 len(built) - len(new), len(removed))

    # -- MQTT --------------------------------------------------------------------------------

    def _on_session(self, session_present: bool) -> None:
        filters = self.filters
        if not filters:
            self.connected.set()  # no site (yet): nothing to subscribe to
        else:
            _rc, self._subscribe_mid = self._client.subscribe([(f, 1) for f in filters])
        with self._lock:
            lost, self._lost_at = self._lost_at, None
            if lost is None and session_present:
                return  # the first connection, to the session the broker kept: it delivers what it queued
            for site, engine in self.engines.items():
                since = lost.get(site, engine.watermark) if lost is not None else engine.watermark
                if site in self._catch_up_from:
                    before = self._catch_up_from[site]
                    since = None if before is None or since is None else min(before, since)
                self._catch_up_from[site] = since
            now = time.monotonic()
            self._catch_up_at = [now + d for d in CATCH_UP_AFTER_S]
            self._catch_up_until = None  # until the subscription is granted (_on_subscribe)
        log.info("%s: reading the store for what the broker may not have delivered meanwhile",
                 "session came back empty" if not session_present else "reconnected")

    def _on_subscribe(self, _client: mqtt.Client, _userdata: Any, mid: int, reason_codes: list[Any],
                      _props: Any) -> None:
        """``connected`` means subscribed: set on the SUBACK of the session's subscription (a reading
        published before the broker has the subscription would not be queued for us)."""
        failed = [rc for rc in reason_codes if rc.is_failure]
        if failed:
            log.error("broker refused the subscription to %d topic filter(s): %s", len(failed), failed)
            return
        if mid == self._subscribe_mid:
            with self._lock:
                if self._catch_up_at:
                    self._catch_up_until = self.clock.now()
            self.connected.set()

    def _on_lost(self) -> None:
        self.connected.clear()
        with self._lock:
            if self._lost_at is None:
                self._lost_at = {site: engine.watermark for site, engine in self.engines.items()}

    def _on_message(self, client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        try:
            self._handle(msg.topic, msg.payload, msg.retain)
        except Exception:  # a bug must not kill the network thread; the message is still acknowledged
            log.exception("unexpected error handling a message on %s", msg.topic)
        finally:
            client.ack(msg.mid, msg.qos)
            with self._lock:
                self._handled += 1

    def _on_delivery(self, topic: str, payload: bytes, mid: int, qos: int, retain: bool) -> None:
        """:meth:`_on_message` for a QoS 0/1 PUBLISH as :class:`ChunkedReadClient` hands it over."""
        try:
            self._handle(topic, payload, retain)
        except Exception:  # a bug must not kill the network thread; the message is still acknowledged
            log.exception("unexpected error handling a message on %s", topic)
        finally:
            if qos == 1 and self._chunked is not None:
                self._chunked.ack_later(mid)
            with self._lock:
                self._handled += 1

    def _on_deliveries(self, batch: list[Delivered]) -> None:
        """:meth:`_on_delivery` of the messages of one socket read (:mod:`stormwatch.alerts.mqttbatch`): a
        site's one-reading messages of one poll that follow one another among its messages -- a poll
        sent one reading a message; the broker interleaves the gateways' -- are fed to its engine as one
        poll cycle (:meth:`_feed_run`), every other message on its own. Each site's messages are fed in
        the order they came, and every message after what came before it of any site but plain polls
        (the engines are the sites' own: what one site's messages make does not depend on another's)."""
        runs: dict[str, list[tuple[Wire, str, bytes, int, int]]] = {}
        # with no allowed lateness the watermark reaches a message's time, and the next of its poll is late
        joinable = self.lateness_s > 0
        for topic, payload, mid, qos, retain in batch:
            where = None if retain or not joinable else self._readings_of(topic)
            wire = None if where is None else fast_wire(payload)
            if wire is None or where is None or wire.site != where[0] or wire.gateway != where[1]:
                for run in runs.values():  # what came before it first
                    self._feed_run(run)
                runs.clear()
                self._on_delivery(topic, payload, mid, qos, retain)
                continue
            before = runs.get(wire.site)
            if before is not None and _continues(before[-1][0], wire):
                before.append((wire, topic, payload, mid, qos))
                continue
            if before is not None:
                self._feed_run(before)
            runs[wire.site] = [(wire, topic, payload, mid, qos)]
        for run in runs.values():
            self._feed_run(run)

    def _readings_of(self, topic: str) -> tuple[str, str] | None:
        """``(site, gateway)`` of a readings topic of a watched site that is not stopped, else ``None``."""
        try:
            where = self._topics[topic]
        except KeyError:
            if len(self._topics) >= 65536:
                self._topics.clear()
            where = self._topics[topic] = topics.parse_readings_topic(topic)
        if where is None or where[0] not in self.engines or where[0] in self.stopped_sites:
            return None
        return where

    def _feed_run(self, run: list[tuple[Wire, str, bytes, int, int]]) -> None:
        """Feed the one-reading messages ``run`` of one poll to its engine as one cycle when their readings
        are plainly valid (:func:`stormwatch.fastwire.poll_cycle`) and open or fill no sequence hole -- the
        events of feeding them one by one, since each is after the watermark the one before moves
        (lateness > 0) -- and acknowledge them; else each message the way :meth:`_on_delivery` takes it."""
        w0, topic = run[0][0], run[0][1]
        done = False
        try:
            with self._site_work(w0.site, f"handling a message on {topic}"):
                cycle = poll_cycle([r[0] for r in run])
                done = cycle is not None and self._cycle(w0.site, w0.gateway, cycle, False)
        except Exception:  # a bug must not kill the network thread; the messages are still acknowledged
            log.exception("unexpected error handling a message on %s", topic)
            done = True
        if done:
            for _c, _topic, _payload, mid, qos in run:
                if qos == 1 and self._chunked is not None:
                    self._chunked.ack_later(mid)
            with self._lock:
                self._handled += len(run)
            return
        for _c, each, payload, mid, qos in run:  # a sequence hole opens or fills: the full path
            self._on_delivery(each, payload, mid, qos, False)

    def _handle(self, topic: str, payload: bytes | bytearray, retain: bool) -> None:
        # our subscriptions are exactly each site's readings and status topics: a dict lookup, not a
        # match against every filter (2 per site: a county's thousands per message)
        status = topics.parse_status_topic(topic)
        where = status or topics.parse_readings_topic(topic)
        if where is not None and where[0] in self.stopped_sites:
            with self._lock:  # not evaluated: counted for the reminder (_remind_stopped)
                said_at, missed = self._stopped_said.get(where[0], (time.monotonic(), 0))
                self._stopped_said[where[0]] = (said_at, missed + 1)
            return
        if where is None or where[0] not in self.engines:
            log.debug("message on %s outside our subscriptions: dropped", topic)
            return
        with self._site_work(where[0], f"handling a message on {topic}"):
            if status is not None:
                self._status(status[0], status[1], bytes(payload), retain)
            else:
                self._readings(where[0], where[1], topic, payload, retain)

    def _readings(self, site: str, gateway: str, topic: str, payload: bytes | bytearray, retain: bool) -> None:
        """Feed a readings message of ``site``'s ``gateway`` to its engine and emit the events."""
        cycle = fast_cycle(payload)  # a poll cycle of plainly valid readings (nearly every message): columns
        if cycle is not None and self._cycle(site, gateway, cycle, bool(retain) and self.retained_is_late):
            return
        refused: list[tuple[str, int]] = []
        fast = (cycle.readings(), True) if cycle is not None else fast_readings(payload)  # no model work
        readings = fast[0] if fast is not None else []
        try:
            parts = [] if fast is not None else parse_parts(payload)
        except PayloadError as exc:
            log.warning("invalid readings on %s (%s): dropped here, ingest dead-letters it", topic, exc)
            ident = _identity(bytes(payload), gateway)  # a single reading still says which it was
            if ident is None or retain:
                return
            refused.append(ident)
            parts = []
        for part in parts:  # each reading of a batch on its own, as ingest judges them
            if part.reading is None:
                log.warning("invalid reading %d of a message on %s (%s): dropped here, ingest dead-letters it",
                            part.index, topic, part.error)
                ident = _identity(part.body, gateway)
                if ident is not None and not retain:
                    refused.append(ident)
            else:
                readings.append(part.reading)
        events: list[Event] = []
        done: dict[str, datetime | None] | None = None
        retained = bool(retain) and self.retained_is_late
        with self._lock:
            engine, holes = self.engines.get(site), self.holes.get(site)
            if engine is None or holes is None:
                return  # removed or stopped since the message was looked at
            self._received += len(readings)
            for boot, seq in refused:  # it arrived: not a reading on its way
                if holes.refused(gateway, boot, seq):
                    events += engine.hold(holes.hold())
            ours = [r for r in readings if r.site == site and r.gateway == gateway]
            if len(ours) == len(readings) and (retained or holes.saw_run(readings)):
                # the common message: no hole opens or fills, so its readings go to the engine at once
                events += engine.feed_many(readings, retained=retained)
                readings = []
            for r in readings:
                if r.site != site or r.gateway != gateway:
                    log.warning("reading of %s/%s on topic %s: dropped", r.site, r.gateway, topic)
                    continue
                if retained or not holes.saw(r):
                    events += engine.feed(r, retained=retained)
                    continue
                # a hole opened (hold the engine below it before this reading moves the watermark) or
                # filled (lift the hold once this reading is in)
                hold = holes.hold()
                if hold is not None and (engine.held_at is None or hold < engine.held_at):
                    events += engine.hold(hold)
                events += engine.feed(r)
                events += engine.hold(hold)
            if events:
                done = {site: engine.watermark}
                self._emitting += 1
        self._after_feed(events, done)

    def _cycle(self, site: str, gateway: str, cycle: Cycle, retained: bool) -> bool:
        """Feed a poll cycle (:func:`stormwatch.fastwire.fast_cycle`) of ``site``'s ``gateway`` to its engine
        whole (:meth:`Engine.feed_cycle`) and emit the events, when it opens or fills no sequence hole
        (``True``); else nothing is done (``False``: :meth:`_readings` takes its readings one by one)."""
        events: list[Event] = []
        done: dict[str, datetime | None] | None = None
        with self._lock:
            engine, holes = self.engines.get(site), self.holes.get(site)
            if engine is None or holes is None:
                return True  # removed or stopped since the message was looked at
            if cycle.site != site or cycle.gateway != gateway or not (retained or holes.saw_cycle(
                    gateway, cycle.boot, cycle.seq, cycle.seq + len(cycle) - 1, cycle.time)):
                return False
            self._received += len(cycle)
            events += engine.feed_cycle(cycle, retained=retained)
            if events:
                done = {site: engine.watermark}
                self._emitting += 1
        self._after_feed(events, done)
        return True

    def _status(self, site: str, gateway: str, payload: bytes, retained: bool) -> None:
        if not payload:  # a retained status cleared by hand (a zero-length publish): says nothing
            log.info("%s: gateway %s: its retained status was cleared; nothing changes", site, gateway)
            return
        status = read_status(payload)
        with self._lock:
            first = (site, gateway) not in self._unreadable_status
            if isinstance(status, str):
                self._unreadable_status.add((site, gateway))
            else:
                self._unreadable_status.discard((site, gateway))
        if isinstance(status, str):
            # Bad input changes nothing: taken as "not offline" it cancelled the gateway's last will.
            log.log(logging.WARNING if first else logging.DEBUG, "%s: gateway %s: unreadable status message ignored: "
                    "%s (%r)%s", site, gateway, status, payload[:80], "; further ones at DEBUG" if first else "")
            return
        state, reason, boot = status.state, status.reason, status.boot
        # A retained status is the last one the broker kept, not a sign of life: a hung gateway
        # whose connection stays up never gets its last will (failure-kinds.md #11). A flapping
        # gateway (or two with one id) is reported once, not at every connect (alerts/presence.py).
        with self._lock:
            level, message = self._presence.observe(site, gateway, state, boot, retained)
        log.log(level, "%s", message)
        with self._lock:
            if state == "offline" and reason != "stopped":
                self._wills.add((site, gateway))
            else:
                self._wills.discard((site, gateway))
        if state == "offline" and reason == "stopped":
            # A deliberate stop, not a last will: no outage is announced. If the gauge then stays
            # silent while event time moves on (other devices, or its own readings resuming), the
            # storm rule's silence detection still records the data gap with both of its ends.
            log.info("%s: gateway %s was stopped by its operator; a silent rain gauge is still a data gap",
                     site, gateway)
        elif state == "offline":
            self._check_wills()

    def _check_wills(self) -> None:
        """A gateway gone (its last will, not back online) opens its rain gauge's data gap once the
        gauge is silent past its allowance on the clock (StormRuleState.source_offline): asked at the
        will and at each tick of :meth:`run`, as the clock moves."""
        with self._lock:
            wills = sorted(self._wills)
        for site, gateway in wills:
            events: list[Event] = []
            with self._site_work(site, "judging its gateway's last will"), self._lock:
                engine = self.engines.get(site)
                if engine is not None:  # else removed or stopped since
                    events = engine.source_offline(gateway, self.clock.now())
                if events:
                    self._emitting += 1
            if events:
                self._emit_made(events)

    # -- output ------------------------------------------------------------------------------

    def _emit(self, events: list[Event], done: Mapping[str, datetime | None] | None = None,
              ) -> list[mqtt.MQTTMessageInfo]:
        """Publish, record (or keep for the store) and hand out ``events``; then record ``done``, the
        watermarks up to which every event of those sites has now been emitted."""
        infos: list[mqtt.MQTTMessageInfo] = []
        for e in events:
            payload = json.dumps(e.to_wire(), separators=(",", ":"), ensure_ascii=False)
            infos.append(self._client.publish(topics.events(e.site), payload, qos=1))
            log.info("%s %s %s: %s", e.site, e.kind, e.citation, e.message)
        if events and self.store is not None:
            if self.state.kept_count:  # behind the ones kept before: the store gets them in order
                self.state.keep(events, self.clock.now())
            else:
                try:
                    self.store.write_events(events)
                except StoreError as exc:
                    self.state.keep(events, self.clock.now())
                    self._outage.failed(f"could not record {len(events)} events", exc)
                    self._next_retry = time.monotonic() + self._retry_s
        for output in self.outputs:
            for e in events:
                output.send(e)
        if self.on_event is not None:
            for e in events:
                self.on_event(e)
        if done:
            self.state.record_progress(done)
        return infos

    def _write_kept(self, now: float, *, final: bool = False) -> None:
        """Write the events kept for the store, oldest first, while it takes them (never dropped)."""
        if self.store is None or not self.state.kept_count or (now < self._next_retry and not final):
            return
        written = 0
        first_kept: str | None = None
        while self.state.kept_count:
            events, upto, kept_at = self.state.kept(KEPT_CHUNK)
            first_kept = first_kept or kept_at
            try:
                self.store.write_events(events)
            except StoreError as exc:
                self._outage.failed(f"{self.state.kept_count} events kept", exc)
                self._next_retry = now + self._retry_s
                self._retry_s = min(RETRY_MAX_S, self._retry_s * 2)
                if final:
                    log.warning("store unavailable at stop: %d events stay kept in %s and are written after the "
                                "next start", self.state.kept_count, self.state.path)
                return
            self.state.drop_kept(upto)
            written += len(events)
        self._retry_s = RETRY_MIN_S
        if self._outage.since is not None:
            self._outage.answered(f"; recorded the {written} events kept since {first_kept}")
        elif written:
            log.info("recorded the %d events kept in the state file since %s", written, first_kept)

    def _record_progress(self) -> None:
        """Record every engine's watermark, unless a thread holds events it has not emitted yet."""
        with self._lock:
            if self._emitting:
                return
            done = {site: engine.watermark for site, engine in self.engines.items()}
        self.state.record_progress(done)

    def _catch_up(self, now: float) -> None:
        """Read the store again for readings the broker may not have delivered (after a connection)."""
        if self.store is None:
            return
        with self._lock:
            schedule = self._catch_up_at
            if not schedule or now < schedule[0]:
                return
            sites = dict(self._catch_up_from)
            until = self._catch_up_until
        lateness = timedelta(seconds=self.lateness_s)
        end = None if until is None else self.bounds.latest(until) + _US
        found = read = 0
        for site, since in sites.items():
            if site not in self.engines:
                continue  # removed or stopped meanwhile
            start = (since - lateness) if since is not None else self.clock.now() - self.warmup
            try:
                readings = self.store.query_readings(site, start=start, end=end)
            except StoreError as exc:
                self._outage.failed(f"{site}: reading the store to catch up", exc)
                with self._lock:
                    if self._catch_up_at is schedule:
                        schedule[0] = now + RETRY_MAX_S  # retried; the later reads follow it
                return
            read += len(readings)
            with self._site_work(site, "catching up from the store"):
                found += self._feed_stored(site, readings)
        self._outage.answered()
        if found or read:
            log.info("caught up from the store: %d readings of %d sites read, %d events from readings the broker "
                     "had not delivered", read, len(sites), found)
        with self._lock:
            if self._catch_up_at is schedule:
                schedule.pop(0)
                if not schedule:
                    self._catch_up_from = {}

    def _holes_of(self, site: str) -> SequenceHoles:
        """``site``'s sequence holes (made on first use: a site added, or warmed up, keeps its own)."""
        holes = self.holes.get(site)
        if holes is None:
            holes = self.holes[site] = SequenceHoles(site, self.hole_hold_s)
        return holes

    def _check_holes(self, now: float) -> None:
        """Read the store for the readings of open sequence holes (every :data:`HOLE_READ_S`; ingest
        may have them from a re-send the broker gave this service no copy of), give up the holes
        open for ``hole_hold_s``, and move each engine's hold (:mod:`stormwatch.alerts.seqholes`)."""
        with self._lock:
            waiting = {site: h.windows() for site, h in self.holes.items() if h.open}
        if not waiting:
            return
        found: dict[str, list[Reading]] = {}
        if self.store is not None and now >= self._next_hole_read:
            self._next_hole_read = now + HOLE_READ_S
            for site, windows in waiting.items():
                try:
                    found[site] = [r for start, end in windows for r in self.store.query_readings(
                        site, start=start, end=None if end is None else end + _US)]
                except StoreError as exc:
                    self._outage.failed(f"{site}: reading the store for readings not received", exc)
                    continue
                self._outage.answered()
        for site in waiting:
            with self._site_work(site, "reading the store for readings not received"):
                self._feed_stored(site, found.get(site, []), expire=True)

    def _feed_stored(self, site: str, readings: list[Reading], *, expire: bool = False) -> int:
        """Give ``readings`` read back from the store to ``site``'s engine (:meth:`Engine.catch_up`)
        and its sequence holes, give up the holes open too long (``expire``), move the engine's hold,
        and emit the events; returns how many."""
        with self._lock:
            engine, holes = self.engines.get(site), self.holes.get(site)
            if engine is None or holes is None:
                return 0  # the site was removed meanwhile
            events: list[Event] = []
            if readings:
                holes.saw_stored(readings)
                events += engine.catch_up(readings)
            if expire:
                holes.expire()
            hold = holes.hold()
            if engine.held_at != hold:
                events += engine.hold(hold)
            done = {site: engine.watermark}
            self._emitting += 1
        self._emit_made(events, done if events else None)
        return len(events)

    def _after_feed(self, events: list[Event], done: Mapping[str, datetime | None] | None) -> None:
        """After a message's readings were fed: emit what they made (counted in ``_emitting`` under the
        lock), or tell ``after_message`` that nothing came of it."""
        if events:
            self._emit_made(events, done)
        elif self.after_message is not None:
            self.after_message()

    def _emit_made(self, events: list[Event], done: Mapping[str, datetime | None] | None = None) -> None:
        """Emit ``events`` made under the lock by a thread that counted itself in ``_emitting`` there
        (so no progress is recorded past events not yet emitted), and count it out, whatever happens."""
        try:
            self._emit(events, done)
        finally:
            with self._lock:
                self._emitting -= 1
            if self.after_message is not None:
                self.after_message()

    def _check_overdue(self) -> None:
        now = self.clock.now()
        with self._lock:
            watched = set(self._configs)  # a stopped site's open orders still fall due
        events = [overdue_event(o, now) for o in self.workorders.mark_overdue(now, sites=watched)]
        self._emit(events)

    # -- a site's work that fails ------------------------------------------------------------

    @contextmanager
    def _site_work(self, site: str, what: str) -> Iterator[None]:
        """Do one site's work; an unexpected error in it stops that site (:meth:`_stop_site`), never
        the service: the other sites go on. The store's being away is expected, and handled where
        it is read."""
        try:
            yield
        except Exception as exc:  # a bug, or a case nobody foresaw: this site only
            self._stop_site(site, what, exc)

    def _stop_site(self, site: str, what: str, exc: Exception) -> None:
        """Stop evaluating ``site``, loudly: CRITICAL with the traceback now, an ERROR every
        :data:`STOPPED_REMINDER_S` after (:meth:`_remind_stopped`). Its readings stay in the store
        (ingest writes them): a restart of the service, or a change of its site file, watches it
        again and evaluates them."""
        with self._lock:
            if site in self.stopped_sites or site not in self._configs:  # said already, or no longer watched
                log.debug("%s: another error while %s after it stopped", site, what, exc_info=exc)
                return
            self.engines.pop(site, None)
            self.holes.pop(site, None)
            self.stopped_sites[site] = f"{what}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            self._stopped_said[site] = (time.monotonic(), 0)
            left = len(self.engines)
        log.critical("%s: STOPPED -- an unexpected error while %s (%s: %s); this site's readings are no longer "
                     "evaluated and its ordinance events stop until the alert service is restarted or its site "
                     "file changes; the other %d sites go on. A bug in stormwatch: please report it with this "
                     "log", site, what, type(exc).__name__, exc, left, exc_info=exc)

    def _remind_stopped(self, now: float) -> None:
        """Say again, every :data:`STOPPED_REMINDER_S`, which sites are stopped and how many of their
        messages went unevaluated meanwhile."""
        due: list[tuple[str, str, int]] = []
        with self._lock:
            for site, (said_at, missed) in self._stopped_said.items():
                if now - said_at >= STOPPED_REMINDER_S:
                    due.append((site, self.stopped_sites.get(site, ""), missed))
                    self._stopped_said[site] = (now, 0)
        for site, why, missed in due:
            log.error("%s: still STOPPED (%s): its ordinance events are not evaluated; %d of its messages went "
                      "unevaluated in the last %.0f min (restart the alert service)", site, why, missed,
                      STOPPED_REMINDER_S / 60)

    def _reread_unreadable(self, now: float) -> None:
        """Read the store again from the rows it answered unreadable (a point InfluxDB answered
        half-written: whole on a later read), with the catch-up's reads."""
        unreadable = unreadable_of(self.store)
        again = unreadable.take() if unreadable is not None else {}
        if not again:
            return
        with self._lock:
            for site, since in again.items():
                if site not in self.engines:
                    continue
                before = self._catch_up_from.get(site, since)
                self._catch_up_from[site] = None if before is None else min(before, since)
            if not self._catch_up_at:
                self._catch_up_at = [now + d for d in REREAD_AFTER_S]
                self._catch_up_until = self.clock.now()
            elif self._catch_up_until is not None:
                self._catch_up_until = max(self._catch_up_until, self.clock.now())
        log.info("reading the store again from the rows it answered unreadable: %s",
                 ", ".join(f"{site} from {format_time(since)}" for site, since in sorted(again.items())))
