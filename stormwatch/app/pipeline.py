"""The whole pipeline in one process: simulated site → gateway → MQTT → ingest → store → alerts.

:class:`Pipeline` composes the real services (nothing here re-implements a hop): the simulators
serve real Modbus TCP/RTU and serial pseudo-terminals on one simulated clock -- by default a
:class:`~stormwatch.lockstep.LockstepClock` (as fast as the machine allows, the same events on any
machine), with a ``speed`` a wall-paced :class:`~stormwatch.clock.ScenarioClock` -- the gateway
polls them and publishes QoS 1 readings, ingest writes them to the store, and the alert
engine turns them into ordinance events and work orders. ``stormwatch demo`` and the end-to-end
tests both run it.

Shutdown order matters for "nothing lost": the gateway stops first (its outbox drains to the
broker), then the pipeline waits until ingest has written and the alert engine has seen every
reading the gateway made, then ingest and alerts flush and stop, then the simulators and broker.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Literal

from stormwatch.alerts.engine import lateness_for
from stormwatch.alerts.lockstep import EngineParticipant
from stormwatch.alerts.service import AlertService
from stormwatch.alerts.workorders import WorkOrder, WorkOrders
from stormwatch.app.broker import start_embedded_broker
from stormwatch.clock import Clock, ScenarioClock
from stormwatch.config import SiteConfig
from stormwatch.contract import Event
from stormwatch.display import plural
from stormwatch.gateway.schedule import StoredParticipant
from stormwatch.gateway.service import Gateway
from stormwatch.ingest.consumer import Ingest
from stormwatch.ingest.validate import Validator
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import TipResolution
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.simulators.scenario import Scenario, SiteScenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from stormwatch.stores.base import StoreError
from stormwatch.stores.urls import open_store, redact

log = logging.getLogger(__name__)

#: Real seconds the services get to connect before simulated time reaches the scenario start.
STARTUP_LEAD_S = 3.0

#: Real seconds a lockstep run's gateway waits for a simulated device's reply (:func:`patient`).
LOCKSTEP_REPLY_TIMEOUT_S = 30.0

#: Baud rate of a lockstep run's simulated Modbus RTU lines (:func:`patient`).
LOCKSTEP_RTU_BAUD = 115200

#: Clock seconds between the alert engine's overdue checks of the work orders.
OVERDUE_CHECK_S = 60.0

#: Lockstep instants the gateway's polls may run ahead of the stored-acknowledgements (the engine
#: still takes every reading at its instant): ingest writes several instants in one transaction
#: and its round trip leaves each instant's critical path.
STORE_WINDOW = 16
#: Real ms ingest gathers messages for one write on a lockstep run (a few instants' worth).
LOCKSTEP_INGEST_BATCH_MS = 50

#: Line rate of simulated serial level sensors (real lines/s): fast enough that a poll waiting
#: for a fresh line costs little simulated time.
SIM_SERIAL_LINES_PER_S = 50.0
#: The same on a lockstep clock, where simulated time waits for the poll and only the wall clock
#: pays for the line it waits for (on average one and a half lines: the first one read may be cut).
LOCKSTEP_SERIAL_LINES_PER_S = 400.0


@dataclass(frozen=True)
class Progress:
    """A progress sample for long runs (printed by the demo every few real seconds)."""

    sim_time: datetime
    fraction: float
    readings_made: int
    readings_stored: int
    events: int


def patient(cfg: SiteConfig) -> SiteConfig:
    """``cfg`` with every transport's reply timeout at least :data:`LOCKSTEP_REPLY_TIMEOUT_S` (and its
    simulated RTU lines at :data:`LOCKSTEP_RTU_BAUD`): on a
    lockstep clock a simulated device on loopback always answers, and only a loaded machine makes
    the answer late -- a poll timed out would be a gap that another run does not have."""
    data = cfg.model_dump(mode="json")
    for dev in data["devices"]:
        tr = dev["transport"]
        if "timeout_s" in tr:
            tr["timeout_s"] = max(float(tr["timeout_s"]), LOCKSTEP_REPLY_TIMEOUT_S)
        if tr.get("kind") == "modbus-rtu":
            # a pseudo-terminal has no baud rate; the client only paces itself by it (it looks for
            # a reply every 4 character times, and ends it after one look with nothing new: at
            # 9,600 baud 8 ms per reply, most of a lockstep instant)
            tr["baud"] = max(int(tr["baud"]), LOCKSTEP_RTU_BAUD)
    return SiteConfig.model_validate(data)


def earlier_readings(cfg: SiteConfig, scenario: Scenario, store_url: str) -> str | None:
    """Why ``store_url`` cannot take a run of ``scenario`` -- it already holds readings of the
    site in the scenario's window (an earlier run: this run would count that rain twice) -- or
    ``None``. ``stormwatch demo`` asks before it prints anything (bad input, exit 2).

    Raises:
        PipelineError: the store refuses the query.
    """
    store = open_store(store_url)
    try:
        earlier = store.query_readings(cfg.site.id, scenario.start, scenario.end)
    except StoreError as exc:
        raise PipelineError(f"cannot use the store {redact(store_url)}: {exc}") from None
    finally:
        store.close()
    if not earlier:
        return None
    return (f"--store {redact(store_url)}: already holds {plural(len(earlier), 'reading')} of site {cfg.site.id} "
            f"between {scenario.start.isoformat()} and {scenario.end.isoformat()} (an earlier run?): this run would "
            f"count that rain twice; use a new database or remove {'it' if len(earlier) == 1 else 'them'}")


@dataclass
class PipelineResult:
    """What a run produced.

    Attributes:
        events: every ordinance event, in the order the engine emitted them.
        workorders: the work orders in the alert engine's state at the end.
        readings_made: readings the gateway produced.
        missed_slots: poll slots the gateway skipped because it was behind schedule (a loaded
            machine at high speed): gaps, never readings made up.
        failed_polls: polls that failed, by device (a device error: no reading, a gap).
        readings_stored: readings ingest reported written (new) to the store.
        dead_lettered: dead letters by reason.
        scenario_tips: tips the scenario's gauge produced within the run.
        stored_tips: tips stored (sum of ``rain_tips`` readings in the store).
        resolution: the gauge's depth per tip.
        store_url: where the readings are (password redacted).
        ended_at: the simulated time the alert engine had reached when it stopped (work orders are
            overdue or not as of then, as ``stormwatch workorders list`` shows them).
    """

    events: list[Event]
    workorders: list[WorkOrder]
    readings_made: int
    readings_stored: int
    dead_lettered: dict[str, int]
    scenario_tips: int
    stored_tips: int
    resolution: TipResolution
    store_url: str
    ended_at: datetime
    wall_seconds: float = 0.0
    sim_hours: float = 0.0
    missed_slots: int = 0
    failed_polls: dict[str, int] = field(default_factory=dict)


class PipelineError(RuntimeError):
    """A service failed to start or died during the run."""


class _ServiceThread:
    """Runs a blocking ``run()`` in a thread and keeps its exception."""

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        self.name = name
        self.error: BaseException | None = None

        def body() -> None:
            try:
                target()
            except BaseException as exc:  # reported by the pipeline, never swallowed
                self.error = exc
                log.exception("%s died", name)

        self.thread = threading.Thread(target=body, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()


class Pipeline:
    """Run one site through a scenario on real protocol stacks.

    Args:
        cfg: the site (its transports are rewritten to free ports and private pty links).
        profiles: device profiles.
        scenario: the physics (storm, plume, sediment) and the run's start and end.
        workdir: private directory for pty links, gateway state, alert state and the SQLite store.
        speed: simulated seconds per real second (wall-paced, for a person watching); ``None``: lockstep.
        broker_url: an MQTT broker to use; ``None`` starts the embedded broker ``embedded_broker``.
        store_url: a store URL (``stormwatch.stores.urls.open_store``); ``None`` = SQLite in ``workdir``.
        on_event: called (from the alert engine's thread) with each event as it is emitted.
        on_progress: called from :meth:`run`'s thread every ``progress_every_s`` real seconds.
        embedded_broker: ``amqtt`` in-process, or ``mosquitto`` as a child process when installed (less
            CPU per message: a lockstep run is much faster on it), else amqtt; ``None``: mosquitto for
            lockstep, amqtt for a wall-paced run.
    """

    def __init__(
        self,
        cfg: SiteConfig,
        profiles: ProfileLibrary,
        scenario: Scenario,
        workdir: Path,
        *,
        speed: float | None = None,
        broker_url: str | None = None,
        store_url: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        progress_every_s: float = 5.0,
        embedded_broker: Literal["amqtt", "mosquitto"] | None = None,
    ) -> None:
        if cfg.rain_gauge is None:
            raise PipelineError("the site has no rain_gauge: nothing to run a storm through")
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cfg = isolate_site(cfg, workdir / "links")
        if speed is None:
            self.cfg = patient(self.cfg)
        self.profiles = profiles
        self.scenario = scenario
        self.speed = speed
        self.broker_url = broker_url
        self.store_url = store_url or f"sqlite:///{(workdir / 'stormwatch.db').resolve()}"
        self.on_event = on_event
        self.on_progress = on_progress
        self.progress_every_s = progress_every_s
        self.embedded_broker = embedded_broker
        self._events: list[Event] = []
        self._events_lock = threading.Lock()
        gauge = profiles.get(self.cfg.device(cfg.rain_gauge).profile)
        if gauge.counter is None:
            raise PipelineError(f"rain gauge profile {gauge.model!r} has no counter section")
        self.resolution = gauge.counter.tip_resolution

    def _collect(self, event: Event) -> None:
        with self._events_lock:
            self._events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def run(self) -> PipelineResult:
        """Run the scenario from its start to its end and return what happened.

        Raises:
            PipelineError: a service failed to start or died.
        """
        wall0 = time.monotonic()
        self._preflight()
        if self.broker_url is not None:
            return self._run_on(self.broker_url, wall0, embedded=False)
        broker = start_embedded_broker(self.embedded_broker or ("mosquitto" if self.speed is None else "amqtt"))
        try:  # whatever ends the run -- its end, an error, a second Ctrl-C while it stops -- stops the broker
            return self._run_on(broker.url, wall0, embedded=True)
        finally:
            broker.stop()

    def _run_on(self, broker_url: str, wall0: float, *, embedded: bool) -> PipelineResult:
        """:meth:`run` on the broker at ``broker_url`` (``embedded``: one this run started)."""
        clock = self._clock()
        lockstep = clock if isinstance(clock, LockstepClock) else None
        site = SimulatedSite(
            self.cfg, self.profiles, self.scenario, clock,
            hrxl_lines_per_s=LOCKSTEP_SERIAL_LINES_PER_S if lockstep else SIM_SERIAL_LINES_PER_S,
        )
        ingest_store = open_store(self.store_url, clock=clock)
        alerts_store = open_store(self.store_url, clock=clock)
        threads: list[_ServiceThread] = []
        ingest: Ingest | None = None
        alerts: AlertService | None = None
        gateway: Gateway | None = None
        try:
            site.start()
            log.info("simulated devices: %s", site.describe())
            validator = Validator.for_sites([self.cfg], self.profiles, clock)
            # amqtt delivers messages queued for a persistent session flagged "retained"; behind it a
            # retained flag does not mean stale (stormwatch/app/broker.py).
            # One run, one pair of sessions: ids unique to the run, and ingest subscribed to this
            # site alone. On a shared broker, a session under a fixed id would stay behind after the
            # run, queue every site's readings for it, and hand them to the next run.
            run = uuid.uuid4().hex[:8]
            ingest = Ingest(
                validator, ingest_store, broker_url, client_id=f"stormwatch-ingest-{self.cfg.site.id}-{run}",
                clock=clock, retained_is_late=not embedded, sites=[self.cfg.site.id],
                # lockstep: the polls run ahead of the stored-acknowledgements (STORE_WINDOW), so ingest
                # can gather a few instants into one write
                batch_ms=LOCKSTEP_INGEST_BATCH_MS if lockstep else 200,
            )
            alerts = AlertService(
                [self.cfg], self.profiles, broker_url, alerts_store, self.workdir / "alerts.db", clock,
                client_id=f"stormwatch-alerts-{self.cfg.site.id}-{run}", on_event=self._collect,
                retained_is_late=not embedded, lateness_s=lateness_for(clock),
                overdue_check_s=math.inf if lockstep else OVERDUE_CHECK_S,
            )
            for name, svc in (("ingest", ingest), ("alerts", alerts)):
                t = _ServiceThread(name, svc.run)
                t.start()
                threads.append(t)
            if not ingest.wait_connected(15):
                raise PipelineError(f"ingest could not subscribe on {broker_url}")
            if not alerts.connected.wait(15):
                raise PipelineError(f"alert engine could not subscribe on {broker_url}")
            # lockstep: the clock wakes the publisher once an instant's polls are all committed: one message
            batching = {"batch": True, "batch_gather_s": 0.0, "wake_on_commit": False} if lockstep else {}
            gateway = Gateway(self.cfg, self.profiles, clock, broker_url, self.workdir / "gateway", **batching)
            gw_thread = _ServiceThread("gateway", partial(gateway.run, until=self.scenario.end))
            gw_thread.start()
            threads.append(gw_thread)
            if lockstep is not None:
                threads.append(self._conduct(lockstep, gateway, alerts))
            self._watch(gw_thread, threads, clock, gateway, ingest)
            self._drain(gateway, ingest, alerts, threads)
            if lockstep is not None:
                lockstep.finish()  # the run ends at the scenario's end, however long the drain took
        finally:
            if lockstep is not None:
                lockstep.stop()  # an early end (a death, Ctrl-C) releases every waiter where it stands
            for service in (gateway, ingest, alerts):
                if service is not None:
                    try:
                        service.stop()
                    except Exception as exc:  # shutting down; keep stopping the others
                        log.warning("stopping %s: %s", type(service).__name__, exc)
            for t in threads:
                t.join(30)
            site.stop()
        for t in threads:
            if t.error is not None:
                raise PipelineError(f"{t.name} died: {t.error}") from t.error
        assert gateway is not None and ingest is not None and alerts is not None
        state = SiteScenario(self.scenario, self.cfg, {d.id: self.profiles.get(d.profile) for d in self.cfg.devices})
        scenario_tips = state.tips.tips_until(self.scenario.end)
        stored = alerts_store.query_readings(self.cfg.site.id, quantity="rain_tips")
        stored_tips = sum(int(r.value) for r in stored)
        orders, ended_at = self._workorders(clock)
        result = PipelineResult(
            events=list(self._events),
            workorders=orders,
            readings_made=gateway.readings_made,
            missed_slots=gateway.missed_slots,
            failed_polls={d.id: n for d in self.cfg.devices if (n := gateway.health(d.id).total_failures)},
            readings_stored=ingest.written,
            dead_lettered=dict(ingest.dead_lettered),
            scenario_tips=scenario_tips,
            stored_tips=stored_tips,
            resolution=self.resolution,
            store_url=redact(self.store_url),
            wall_seconds=time.monotonic() - wall0,
            sim_hours=(self.scenario.end - self.scenario.start) / timedelta(hours=1),
            ended_at=ended_at,
        )
        ingest_store.close()
        alerts_store.close()
        return result

    def _clock(self) -> Clock:
        """The run's clock: lockstep, or wall-paced at ``speed`` (simulated time then reaches the scenario
        start STARTUP_LEAD_S real seconds from now, so every service is connected before the first slot)."""
        if self.speed is None:
            return LockstepClock(self.scenario.start, self.scenario.end)
        return ScenarioClock(sim_start=self.scenario.start, speed=self.speed, wall_start=time.time() + STARTUP_LEAD_S)

    def _conduct(self, clock: LockstepClock, gateway: Gateway, alerts: AlertService) -> _ServiceThread:
        """Start the thread that moves the lockstep clock: an instant is done when the gateway has polled
        every device due, ingest has confirmed each reading stored and the engine has taken them all."""
        clock.add(StoredParticipant(f"gateway {gateway.gateway_id} (stored-acknowledgements)", gateway.outbox_depth,
                                    lambda: gateway.readings_made, STORE_WINDOW, polled=gateway.publisher.wake))
        engine = EngineParticipant(alerts, lambda: gateway.readings_made, self.scenario.start, OVERDUE_CHECK_S)
        engine.notify(clock.poke)
        clock.add(engine)
        t = _ServiceThread("the simulated clock", clock.run)
        t.start()
        return t

    def _preflight(self) -> None:
        """Fail fast, with one clear line, when a given broker or store cannot be reached, or when the
        store already holds readings of this site in the scenario's window.

        A run replays its scenario at the same simulated times every time: readings of an earlier
        run in the store would be counted with this run's (the same storm twice), so that store
        is refused instead (``stormwatch demo --state-dir`` starts its own SQLite store clean,
        :mod:`stormwatch.app.workdir`).

        Raises:
            PipelineError: the broker refuses TCP connections, the store refuses a query, or the
                store already holds readings of the site between the scenario's start and end.
        """
        if self.broker_url is not None:
            broker = parse_broker_url(self.broker_url)
            try:
                socket.create_connection((broker.host, broker.port), timeout=5).close()
            except OSError as exc:
                raise PipelineError(f"cannot reach the MQTT broker at {broker.safe_url()}: {exc}") from None
        earlier = earlier_readings(self.cfg, self.scenario, self.store_url)
        if earlier:
            raise PipelineError(earlier)

    def _workorders(self, clock: Clock) -> tuple[list[WorkOrder], datetime]:
        """The site's work orders and the simulated time the alert engine recorded at its stop."""
        orders = WorkOrders(self.workdir / "alerts.db", clock)
        try:
            engine = orders.engine_clock()
            return orders.list(site=self.cfg.site.id), engine.last_now if engine else self.scenario.end
        finally:
            orders.close()

    def _watch(
        self, gw_thread: _ServiceThread, threads: list[_ServiceThread], clock: Clock,
        gateway: Gateway, ingest: Ingest,
    ) -> None:
        """Wait for the gateway to reach the scenario end, reporting progress; fail fast on a death."""
        span = (self.scenario.end - self.scenario.start).total_seconds()
        next_report = time.monotonic() + self.progress_every_s
        while gw_thread.alive:
            gw_thread.join(0.2)
            for t in threads:
                if t.error is not None:
                    raise PipelineError(f"{t.name} died: {t.error}") from t.error
            if self.on_progress is not None and time.monotonic() >= next_report:
                next_report += self.progress_every_s
                now = clock.now()
                with self._events_lock:
                    n_events = len(self._events)
                self.on_progress(
                    Progress(
                        sim_time=now,
                        fraction=min(1.0, max(0.0, (now - self.scenario.start).total_seconds() / span)),
                        readings_made=gateway.readings_made,
                        readings_stored=ingest.written,
                        events=n_events,
                    )
                )

    def _drain(self, gateway: Gateway, ingest: Ingest, alerts: AlertService, threads: list[_ServiceThread]) -> None:
        """Wait until ingest and the alert engine have handled every reading the gateway made."""
        deadline = time.monotonic() + 30.0
        made = gateway.readings_made
        while time.monotonic() < deadline:
            handled = ingest.written + ingest.duplicates + sum(ingest.dead_lettered.values())
            seen = alerts.readings_seen
            if handled >= made and seen >= made:
                return
            if any(t.error is not None for t in threads):
                return
            time.sleep(0.1)
        log.warning(
            "drain timed out: gateway made %d readings, ingest handled %d, alerts saw %d",
            made, ingest.written + ingest.duplicates + sum(ingest.dead_lettered.values()), alerts.readings_seen,
        )

