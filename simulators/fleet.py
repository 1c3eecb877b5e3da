"""``stormwatch simulate --fleet N``: N sites' gateways at the MQTT level, for scale tests and benchmarks.

The MQTT-level stand-in for N field gateways (docs/scaling.md): each simulated gateway publishes
what the real gateway would publish for its site -- the same payloads with the same identity
(``boot``, ``seq``), QoS 1, its own persistent session with the gateway's client id and last will,
retained online/offline statuses -- without a Modbus server per device or a gateway process per
site (:mod:`stormwatch.simulators.fleetgateway`, :mod:`stormwatch.simulators.mqttfleet`). Each site
follows its own story (:mod:`stormwatch.simulators.fleetsites`: storms of different depths and
timing, turbidity plumes, silent gauges, basins near full) on one simulated clock at a chosen speed.
The per-site protocol-level simulation (``stormwatch simulate --site``) stays the way to test the
gateway itself.

The design: docs/simulators.md ("The modules", `simulators/fleet.py`).
"""

from __future__ import annotations

import csv
import heapq
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, TextIO

from stormwatch.clock import ClockFileError, ScenarioClock, check_clock_file_path, write_clock_file
from stormwatch.config import load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.simulators.fleetgateway import FleetGateway
from stormwatch.simulators.fleetsites import site_story, write_fleet_sites
from stormwatch.simulators.mqttfleet import MqttFleet, raise_fd_limit
from stormwatch.wire import WireReading, dump_payload, format_time

log = logging.getLogger(__name__)

MessageForm = Literal["single", "batch"]
#: Gateways polled between two network pumps while a poll cycle is being published.
_PUMP_EVERY = 50
#: Real seconds the fleet waits at the end for ingest's last stored-acknowledgements (``confirm="stored"``).
_CONFIRM_WAIT_S = 180.0


@dataclass(frozen=True)
class FleetOptions:
    """How to run a fleet.

    Attributes:
        sites_dir: the directory of the fleet's site files (missing ones are written).
        n: number of sites.
        broker: where the gateways connect.
        start: simulated start (UTC); duration_h: simulated hours.
        speed: simulated seconds per real second.
        seed: the stories' seed.
        form: ``single`` or ``batch`` (module docstring).
        clock_file: write the simulated clock here for ingest and alerts (``None``: do not).
        start_delay_s: real seconds from writing the clock to the simulated start.
        start_wall: the real time (POSIX s) of the simulated start instead (services that started earlier,
            on a clock file of this start, speed and real start, are ready when it comes).
        progress_s: real seconds between progress lines.
        keepalive_s: MQTT keep-alive of each gateway session.
        publish_log: CSV of publish times (module docstring), or ``None``.
        confirm: ``stored`` (as the gateway: every message kept until ingest confirms it stored, and
            sent again when needed; :mod:`stormwatch.simulators.mqttfleet`) or ``broker`` (the PUBACK).
    """

    sites_dir: Path
    n: int
    broker: BrokerSettings
    start: datetime
    duration_h: float
    speed: float = 60.0
    seed: int = 1
    form: MessageForm = "single"
    clock_file: Path | None = None
    start_delay_s: float = 5.0
    progress_s: float = 10.0
    keepalive_s: int = 30
    publish_log: Path | None = None
    confirm: str = "broker"
    start_wall: float | None = None

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.duration_h)


@dataclass
class FleetResult:
    """What a fleet run did.

    Attributes:
        sites: number of gateways; readings: readings published; messages: readings messages;
        acknowledged: of them, acknowledged by the broker (``messages`` when nothing is waiting);
        readings_acknowledged: the readings in the acknowledged messages (what the broker took over);
        readings_by_site: site id → readings published; stories: story kind → sites;
        readings_confirmed: readings ingest confirmed stored (``confirm="stored"``);
        resent_readings: readings sent again (``confirm="stored"``), and of them the distinct ones
        ``resent_after_ack`` (the broker had acknowledged them, ingest had not confirmed them:
        what the broker lost or held back, at most);
        reconnects: sessions re-established after a lost connection;
        max_behind_s: most real seconds a poll cycle was published after its simulated time;
        real_s: real seconds from the simulated start to the last poll cycle; stopped_early: interrupted.
    """

    sites: int = 0
    readings: int = 0
    messages: int = 0
    acknowledged: int = 0
    readings_acknowledged: int = 0
    readings_confirmed: int = 0
    resent_readings: int = 0
    resent_after_ack: int = 0
    readings_by_site: dict[str, int] = field(default_factory=dict)
    stories: dict[str, int] = field(default_factory=dict)
    reconnects: int = 0
    max_behind_s: float = 0.0
    real_s: float = 0.0
    stopped_early: bool = False

    def to_json(self) -> dict[str, object]:
        """JSON-ready summary (without the per-site counts)."""
        return {"sites": self.sites, "readings": self.readings, "messages": self.messages,
                "acknowledged": self.acknowledged, "readings_acknowledged": self.readings_acknowledged,
                "readings_confirmed": self.readings_confirmed, "resent_readings": self.resent_readings,
                "resent_after_ack": self.resent_after_ack,
                "stories": self.stories, "reconnects": self.reconnects,
                "max_behind_s": round(self.max_behind_s, 3), "real_s": round(self.real_s, 1),
                "stopped_early": self.stopped_early}


def build_gateways(options: FleetOptions, profiles: ProfileLibrary) -> list[FleetGateway]:
    """One :class:`FleetGateway` per fleet site (writing missing site files first).

    Raises:
        stormwatch.config.ConfigError: a site file that is not valid.
        ValueError: a site whose devices the fleet does not model; ``n`` < 1.
        OSError: the site directory cannot be written.
    """
    paths = write_fleet_sites(options.sites_dir, options.n)
    gateways = []
    for index, path in enumerate(paths, start=1):
        cfg = load_site(path, profiles)
        story = site_story(index, options.start, options.duration_h, options.seed)
        try:
            gateways.append(FleetGateway(cfg, profiles, story, options.start))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc
    return gateways


def messages_of(readings: list[WireReading], form: MessageForm) -> list[tuple[datetime, tuple[int, ...], bytes]]:
    """The messages of one gateway's readings: ``(slot time, the readings' seqs, payload)`` each.

    ``single``: one message per reading; ``batch``: one per poll cycle (readings of one slot time).
    """
    if form == "single":
        return [(r.time, (r.seq,), dump_payload([r.to_wire()])) for r in readings]
    by_slot: dict[datetime, list[WireReading]] = {}
    for r in readings:
        by_slot.setdefault(r.time, []).append(r)
    return [(t, tuple(r.seq for r in rs), dump_payload([r.to_wire() for r in rs])) for t, rs in by_slot.items()]


def run_fleet(options: FleetOptions, gateways: list[FleetGateway],
              should_stop: Callable[[], bool] = lambda: False) -> FleetResult:
    """Connect every gateway, run the stories to the end (or until ``should_stop()``), disconnect.

    Raises:
        TimeoutError: the broker did not accept every gateway's session within a minute.
        OSError: the clock file or publish log cannot be written.
    """
    result = FleetResult(sites=len(gateways))
    result.stories = dict(Counter(g.story.kind for g in gateways))
    raise_fd_limit(len(gateways) + 256)
    clock_box: list[ScenarioClock] = []
    fleet = MqttFleet(options.broker, options.keepalive_s,
                      lambda: format_time(clock_box[0].now() if clock_box else options.start), confirm=options.confirm)
    sessions = [fleet.add(g.site, g.gateway_id, g.boot) for g in gateways]
    log.info("fleet: connecting %d gateways to %s", len(gateways), options.broker.safe_url())
    fleet.connect_all()
    clock = ScenarioClock.starting_now(options.start, options.speed, delay_s=options.start_delay_s,
                                       sim_end=options.end) if options.start_wall is None else \
        ScenarioClock(options.start.astimezone(UTC), options.speed, options.start_wall, sim_end=options.end)
    clock_box.append(clock)
    if options.clock_file is not None:
        write_clock_file(options.clock_file, clock)
        log.info("clock written to %s", options.clock_file)
    log.info("fleet: %d gateways connected; simulated %s .. %s (%.1f h) at %gx from %s: about %.0f real seconds; "
             "stories %s; %s messages", len(gateways), options.start.isoformat(), options.end.isoformat(),
             options.duration_h, options.speed, time.strftime("%H:%M:%S", time.localtime(clock.wall_start)),
             options.duration_h * 3600 / options.speed, result.stories, options.form)
    log_file: TextIO | None = open(options.publish_log, "w", newline="", encoding="utf-8") \
        if options.publish_log is not None else None
    writer = csv.writer(log_file) if log_file is not None else None
    if writer is not None:
        writer.writerow(("site", "time", "wall", "readings"))
    due = [(g.next_poll(), i) for i, g in enumerate(gateways)]
    heapq.heapify(due)
    next_progress = time.monotonic() + options.progress_s
    try:
        while due and due[0][0] < options.end:
            if should_stop():
                result.stopped_early = True
                break
            now = clock.now()
            polled = 0
            while due and due[0][0] <= now and due[0][0] < options.end:
                slot, i = heapq.heappop(due)
                gateway, session = gateways[i], sessions[i]
                # one poll cycle at a time, in slot order across the fleet: a simulator that falls behind
                # catches up evenly, every gateway keeps publishing (and its session alive)
                readings = gateway.poll(slot)
                for t, seqs, payload in messages_of(readings, options.form):
                    count = len(seqs)
                    fleet.publish(session, payload, count, seqs)
                    result.messages += 1
                    result.readings += count
                    result.readings_by_site[gateway.site] = result.readings_by_site.get(gateway.site, 0) + count
                    if writer is not None:
                        writer.writerow((gateway.site, format_time(t), f"{time.time():.4f}", count))
                behind = time.time() - (clock.wall_start + (slot - options.start).total_seconds() / options.speed)
                result.max_behind_s = max(result.max_behind_s, behind)
                heapq.heappush(due, (gateway.next_poll(), i))
                polled += 1
                if polled % _PUMP_EVERY == 0:
                    fleet.pump(0)
                    if should_stop() or time.monotonic() >= next_progress:
                        break  # a fleet far behind still stops and reports promptly (the outer loop)
            wait = 0.05 if not due else (due[0][0] - clock.now()).total_seconds() / options.speed
            fleet.pump(min(0.05, max(0.0, wait)))
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + options.progress_s
                log.info("fleet sim %s: %d readings in %d messages (polls up to %s), %d waiting for PUBACK, "
                         "%d reconnects, at most %.2f s behind schedule", clock.now().isoformat(timespec="seconds"),
                         result.readings, result.messages, due[0][0].isoformat(timespec="seconds") if due else "end",
                         fleet.waiting, fleet.reconnects, result.max_behind_s)
        result.real_s = time.time() - clock.wall_start
    except KeyboardInterrupt:
        result.stopped_early = True
    finally:
        if result.stopped_early and options.clock_file is not None:
            stopped = clock.now()
            if stopped < options.end:  # services started later wait for a new simulation
                write_clock_file(options.clock_file, ScenarioClock(clock.sim_start, clock.speed, clock.wall_start,
                                                                   sim_end=stopped))
        drained = fleet.close(_CONFIRM_WAIT_S if options.confirm == "stored" else 30.0)
        if log_file is not None:
            log_file.close()
    result.acknowledged = sum(s.acknowledged for s in sessions)
    result.readings_acknowledged = sum(s.readings_acknowledged for s in sessions)
    result.readings_confirmed = sum(s.readings_confirmed for s in sessions)
    result.resent_readings = sum(s.resent_readings for s in sessions)
    result.resent_after_ack = sum(len(s.resent_after_ack) for s in sessions)
    result.reconnects = fleet.reconnects
    log.info("fleet %s: %d readings in %d messages from %d gateways, %d acknowledged%s; %d reconnects%s",
             "stopped" if result.stopped_early else "done", result.readings, result.messages, result.sites,
             result.acknowledged, "" if drained else " (some still waiting at the end)", result.reconnects,
             f"; {result.readings_confirmed} readings confirmed stored, {result.resent_readings} re-sent"
             if options.confirm == "stored" else "")
    return result


def fleet_command(n: int, sites_dir: Path | None, broker_url: str, speed: float, start: datetime | None,
                  duration_h: float, seed: int, batch: bool, clock_file: Path | None, start_delay_s: float,
                  progress_s: float, publish_log: Path | None, confirm: str = "broker",
                  start_wall: float | None = None) -> None:
    """``stormwatch simulate --fleet N``: the command-line run of :func:`run_fleet` (errors: one line, exit 2)."""
    import json
    import signal

    from stormwatch.config import ConfigError
    from stormwatch.runtime.cliutil import fail
    from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url
    from stormwatch.simulators.scenario import load_scenario

    if n < 1:
        fail(f"--fleet {n}: a fleet needs at least one site")
    if sites_dir is None:
        fail("--fleet needs --sites DIR: the directory of the fleet's site files (written when missing), the "
             "one ingest and alerts are given")
    if duration_h <= 0:
        fail(f"--duration-h {duration_h}: must be > 0")
    if confirm not in ("stored", "broker"):
        fail(f"--confirm: expected stored or broker, got {confirm!r}")
    if clock_file is not None:
        try:
            check_clock_file_path(clock_file)
        except ClockFileError as exc:
            fail(str(exc))
    try:
        broker = parse_broker_url(broker_url)
    except BrokerUrlError as exc:
        fail(f"--broker: {exc}")
    options = FleetOptions(sites_dir=sites_dir, n=n, broker=broker,
                           start=(start or load_scenario("default").start).astimezone(UTC), duration_h=duration_h,
                           speed=speed, seed=seed, form="batch" if batch else "single", clock_file=clock_file,
                           start_delay_s=start_delay_s, progress_s=progress_s, publish_log=publish_log,
                           confirm=confirm, start_wall=start_wall)
    # A fleet's gateways report their devices' counter baselines and failures as a gateway would, once
    # per site: thousands of lines. The stories say what happens (the silent gauges among them).
    logging.getLogger("stormwatch.gateway").setLevel(logging.WARNING)
    logging.getLogger("stormwatch.gateway.health").setLevel(logging.CRITICAL)
    try:
        gateways = build_gateways(options, ProfileLibrary())
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"--sites {sites_dir}: {exc.strerror or exc}", 1)
    for g in gateways[:3]:
        log.info("%s: %s", g.site, g.story.describe())
    stop = False

    def _on_signal(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        result = run_fleet(options, gateways, lambda: stop)
    except TimeoutError as exc:
        fail(str(exc), 1)
    except OSError as exc:
        fail(f"{exc.filename or 'fleet'}: {exc.strerror or exc}", 1)
    print(json.dumps(result.to_json()))  # the summary on stdout: one JSON line for scripts
