"""``stormwatch demo``: a construction site living through a storm, end to end, in about a minute.

Composes the real services with :class:`stormwatch.app.pipeline.Pipeline` on embedded defaults
(amqtt broker in-process, SQLite store in a temporary directory) or on real servers
(``--broker``, ``--store``), prints a timeline of ordinance events as they happen, then a summary
of the events and the open work orders. ``--json`` prints one JSON object per event instead.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

import typer

from stormwatch import resources
from stormwatch.alerts.sitefile import load_site_file
from stormwatch.app.workdir import prepare_workdir
from stormwatch.config import SiteConfig
from stormwatch.contract import Event
from stormwatch.display import counts, describe_event, local_time, plural
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.cliutil import fail, listen_socket
from stormwatch.runtime.logs import divert_warnings
from stormwatch.simulators import cli as simcli

if TYPE_CHECKING:  # the pipeline imports every service; load it only when the demo runs
    from stormwatch.app.pipeline import PipelineResult
    from stormwatch.simulators.scenario import Scenario, SiteScenario
    from stormwatch.web.demo_desk import DemoDesk

log = logging.getLogger(__name__)

DEFAULT_SITE = resources.example_site()

#: Above this the gateway cannot keep a 60 s poll grid (60 s simulated = 6 ms real).
MAX_SPEED = 10_000.0
#: The pace of ``--web`` without ``--speed``: 32 simulated hours in about 80 s, to watch.
WEB_SPEED = 1500.0
#: The memory file system a temporary demo directory goes on, and the room it needs there (bytes;
#: the default demo's store is ~5 MB).
MEMORY_DIR = "/dev/shm"
MEMORY_DIR_MIN_FREE = 256 * 2**20


def influx_store_url(url: str, database: str = "stormwatch") -> str:
    """The store URL of the older ``--influx http://HOST:PORT`` (with ``--database``): InfluxDB 1.x's
    HTTP address becomes ``influx1://HOST:PORT/DATABASE`` (``https`` → ``influx1s``). A store URL is
    passed through. ``--store`` itself takes store URLs only, the same as every command
    (:func:`stormwatch.stores.urls.open_store`).
    """
    for scheme, store in (("http://", "influx1://"), ("https://", "influx1s://")):
        if url.startswith(scheme):
            return f"{store}{url[len(scheme):].rstrip('/')}/{database}"
    return url


def _local(t: datetime | None, tz: ZoneInfo) -> str:
    return local_time(t, tz)


class _Progress:
    """One progress line on stderr, rewritten in place, when stderr is a terminal (else silent)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def show(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K{text}")
            sys.stderr.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False


def demo(
    site: Path | None = typer.Option(None, "--site", metavar="FILE",
                                     help="The site's YAML file (default: the one the scenario is written for, "
                                          "else the example site); its devices are simulated on free local ports."),
    scenario: str = typer.Option("default", "--scenario", metavar="NAME|FILE",
                                 help=f"A bundled scenario ({', '.join(resources.builtin_scenarios())}) or a "
                                      "scenario YAML file."),
    speed: float | None = typer.Option(
        None, "--speed", min=1.0, max=MAX_SPEED, metavar="FACTOR",
        help="Pace simulated time at FACTOR simulated seconds per real second (1 = real time). Default: "
             "lockstep -- as fast as this machine allows, every poll made and stored before time moves on, "
             f"so every run gives the same events; --web paces at {WEB_SPEED:g}x for a person watching.",
    ),
    storm_depth_in: str | None = typer.Option(
        None, "--storm-depth-in", metavar="IN",
        help="The design storm's depth in inches (default: the scenario's, 1.2).",
    ),
    rain_file: Path | None = simcli.RAIN_FILE, tip_mm: str | None = simcli.TIP_MM, tip_in: str | None = simcli.TIP_IN,
    time_format: str | None = simcli.TIME_FORMAT, delimiter: str | None = simcli.DELIMITER,
    tz: str | None = simcli.TZ,
    rain_from: datetime | None = simcli.FROM, rain_until: datetime | None = simcli.UNTIL,
    broker: str | None = typer.Option(
        None, "--broker", envvar="STORMWATCH_BROKER", metavar="URL",
        help="Use this MQTT broker (mqtt://HOST:PORT) instead of the embedded one.",
    ),
    store: str | None = typer.Option(
        None, "--store", envvar="STORMWATCH_STORE", metavar="URL",
        help="Store the readings here instead of SQLite in --state-dir: sqlite:///FILE, "
             "influx1://HOST:8086/DATABASE (InfluxDB 1.x) or influx2://HOST:8086?org=&bucket=&token= -- the store "
             "URLs of every command.",
    ),
    influx: str | None = typer.Option(None, "--influx", envvar="STORMWATCH_INFLUX", hidden=True, metavar="URL",
                                      help="Older name of --store; also takes http://HOST:PORT (InfluxDB 1.x, "
                                           "database --database)."),
    database: str = typer.Option("stormwatch", "--database", hidden=True, metavar="NAME",
                                 help="InfluxDB 1.x database of --influx http://..."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", metavar="DIR",
        help="Keep the run's state here (store, outbox, work orders) to look at afterwards, e.g. with "
             "`stormwatch workorders list --state-dir DIR`. Default: a temporary directory.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per event (and nothing else) on stdout."),
    web: bool = typer.Option(
        False, "--web", help="Serve the web desk (portfolio, charts, work orders) on 127.0.0.1 during the run and "
        "after it, until Ctrl-C; the login passwords are printed."),
    web_port: int = typer.Option(8080, "--web-port", min=0, max=65535, metavar="PORT",
                                 help="Port of --web (0: any free port)."),
) -> None:
    """Watch a simulated construction site live through a storm, end to end, in about a minute.

    Simulated rain gauge, turbidity probes and basin level sensor speak their real protocols; the
    gateway polls them, ingest stores the readings and the alert engine applies the site's village
    code. You get a timeline of the ordinance events as they happen -- the storm that requires an
    inspection, the turbidity plume downstream, the basin to clean out -- each citing its section,
    then a summary with the open work orders. The default scenario: a 1.2-inch NRCS Type II storm,
    a basin already 45 % full, a plume downstream. Logs: warnings only (-v for more, --log-file).

    Other bundled scenarios bring their own site: --scenario two-outfalls (two discharge points and
    two basins, each with its own events and work orders), --scenario concrete-washout (a washout
    pit leaking pH-12 water to a California CGP outfall: the pH numeric action level).

    Every run starts clean: a rerun with the same --state-dir deletes the previous run's state
    first, and a --store that already holds readings of the run's site and time window is refused
    (the same storm would be counted twice).
    """
    from stormwatch.simulators.cli import build_scenario

    # Everything a user can get wrong is checked here, before any service starts (InputErrors
    # become one line and exit 2: stormwatch.runtime.cliutil).
    profiles = ProfileLibrary()
    sc = build_scenario(
        scenario, storm_depth_in=storm_depth_in, rain_file=rain_file, rain_tip_mm=tip_mm,
        rain_tip_in=tip_in, rain_time_format=time_format, rain_delimiter=delimiter,
        rain_tz=tz, rain_from=rain_from, rain_until=rain_until,
    )
    site = site or sc.site or DEFAULT_SITE
    cfg: SiteConfig = load_site_file(site, profiles)
    rain = _site_scenario(sc, cfg, profiles)
    store_url = _store_url(cfg, sc, store, influx, database, web=web)
    if broker is not None:
        from stormwatch.runtime.mqtt import parse_broker_url

        given = parse_broker_url(broker)
        try:  # before the banner: a broker that does not answer is one line, not a start then an error
            socket.create_connection((given.host, given.port), timeout=5).close()
        except OSError as exc:
            fail(f"cannot reach the MQTT broker at {given.safe_url()}: {exc}", 1)
    if web and speed is None:
        speed = WEB_SPEED  # a person watches: wall-paced
    sock = listen_socket("127.0.0.1", web_port, port_option="--web-port") if web else None
    try:
        removed = prepare_workdir(state_dir) if state_dir is not None else []
    except OSError as exc:
        fail(f"--state-dir {state_dir}: {exc.strerror or exc}")

    # SIGTERM (e.g. from `timeout`) ends the run like Ctrl-C: services stop, the temp dir goes.
    _INTERRUPTED.clear()  # a flag of this run, not of an earlier one in the same process
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    tmp = None if state_dir else tempfile.TemporaryDirectory(prefix="stormwatch-demo-", dir=memory_dir())
    work = state_dir or Path(tmp.name)  # type: ignore[union-attr]
    if as_json:
        for note in (rain.rain_times, rain.rain_rounding):
            if note:
                typer.echo(note, err=True)  # stdout holds only the events
        if rain.rain_skip_summary:
            log.warning("%s", rain.rain_skip_summary)  # stdout holds only the events: skipped rows go to stderr, once
    else:
        typer.echo(_header(cfg, sc, rain, speed, broker, store_url or f"embedded SQLite in {work}",
                           work if removed else None))
    try:
        _run(_DemoRun(cfg, profiles, sc, work, speed, broker, store_url, as_json),
             site if web else None, web_port, sock, state_dir, temporary=tmp is not None and store_url is None)
    finally:
        if tmp is not None:
            tmp.cleanup()


def memory_dir(min_free: int = MEMORY_DIR_MIN_FREE) -> str | None:
    """Where the demo's temporary directory goes: a memory file system (``/dev/shm``) when there is one
    with room, else the system's temporary directory (``None``). What a temporary run keeps is deleted
    when it ends, so nothing is gained from waiting for a disk at each commit (a lockstep run commits
    several times per simulated minute; on a virtual disk that was a fifth of its CPU)."""
    try:
        if os.path.isdir(MEMORY_DIR) and os.access(MEMORY_DIR, os.W_OK | os.X_OK) and \
                shutil.disk_usage(MEMORY_DIR).free >= min_free:
            return MEMORY_DIR
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class _DemoRun:
    """What one demo run runs (the pipeline's arguments) and how it prints."""

    cfg: SiteConfig
    profiles: ProfileLibrary
    scenario: Scenario
    work: Path
    speed: float | None
    broker: str | None
    store_url: str | None
    as_json: bool


def _site_scenario(sc: Scenario, cfg: SiteConfig, profiles: ProfileLibrary) -> SiteScenario:
    """The scenario on the site's devices (builds the tip series: a rain file is read here)."""
    from stormwatch.config import device_profiles
    from stormwatch.simulators.scenario import SiteScenario

    try:
        return SiteScenario(sc, cfg, device_profiles(cfg, profiles))
    except ValueError as exc:  # InputErrors (the rain file) and a site whose devices do not fit
        fail(str(exc))


def _store_url(cfg: SiteConfig, sc: Scenario, store: str | None, influx: str | None, database: str, *,
               web: bool) -> str | None:
    """The store URL of ``--store``/``--influx`` (``None``: SQLite in the state directory), checked:
    reachable, well-formed, and without readings of this site and window (an earlier run)."""
    from stormwatch.app.pipeline import PipelineError, earlier_readings

    if store is not None and influx is not None:
        fail("give --store (or its older name --influx), not both")
    given_store = store or influx
    if not given_store:
        return None
    if web:
        fail("--web reads the embedded SQLite store: leave out --store")
    store_url = influx_store_url(influx, database) if influx else given_store
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    try:
        open_store(store_url).close()  # a malformed URL or a missing directory, before anything starts
    except (StoreUrlError, StoreError) as exc:
        fail(f"--{'influx' if influx else 'store'} {redact(given_store)}: {exc}")
    try:
        earlier = earlier_readings(cfg, sc, store_url)
    except PipelineError as exc:
        fail(str(exc), 1)
    if earlier:
        fail(earlier)
    return store_url


def _header(cfg: SiteConfig, sc: Scenario, rain: SiteScenario, speed: float | None, broker: str | None,
            store: str, cleaned: Path | None) -> str:
    """What the run will be (the first lines of the text output)."""
    zone = cfg.site.tz
    hours = (sc.end - sc.start).total_seconds() / 3600
    pace = (f"at {speed:g}x (about {hours * 3600 / speed:.0f} s)" if speed is not None
            else "in lockstep (as fast as this machine allows; every run the same)")
    skipped = rain.rain_skipped
    return (
        f"stormwatch demo: site {cfg.site.id} ({cfg.site.jurisdiction}), {hours:.0f} simulated hours from "
        f"{_local(sc.start, zone)} {pace}\n"
        f"broker: {broker or 'embedded ' + _embedded_broker(speed)}; store: {store}"
        + (f"\n{cleaned}: the previous run's state was removed (every run starts clean)" if cleaned else "")
        + "".join(f"\n{note}" for note in (rain.rain_times, rain.rain_rounding) if note)
        + (f"\nrain file: {plural(len(skipped), 'row')} skipped; first: {skipped[0]}"
           if skipped else "")
        + "\n"
    )


def _run(run: _DemoRun, web_site: Path | None, web_port: int, sock: socket.socket | None, state_dir: Path | None,
         *, temporary: bool) -> None:
    """Run the pipeline, printing each event as it comes, then the summary; ``web_site``: serve --web."""
    from stormwatch.app.pipeline import Pipeline, PipelineError, Progress

    zone = run.cfg.site.tz
    out = sys.stdout
    progress = _Progress(enabled=not run.as_json and sys.stderr.isatty())

    def on_event(e: Event) -> None:
        progress.clear()
        out.write((json.dumps(e.to_wire(), ensure_ascii=False) if run.as_json else describe_event(e, zone)) + "\n")
        out.flush()

    def on_progress(p: Progress) -> None:
        text = (f"simulated {_local(p.sim_time, zone)} ({p.fraction * 100:3.0f} %): "
                f"{plural(p.readings_made, 'reading')} made, {p.readings_stored} stored, {plural(p.events, 'event')}")
        log.info("%s", text)
        progress.show(text)

    # the timeline is in simulated time: the services' wall-clock WARNING lines go to a file
    log_path = (run.work / "demo.log" if state_dir
                else Path(tempfile.mkstemp(prefix="stormwatch-demo-", suffix=".log")[1]))
    diverted = None if run.as_json else divert_warnings(log_path)
    desk = None
    try:
        if web_site is not None:
            desk = _start_desk(web_site, run.cfg.site.id, run.work, web_port, sock, run.scenario.start)
        result = Pipeline(
            run.cfg, run.profiles, run.scenario, run.work, speed=run.speed, broker_url=run.broker,
            store_url=run.store_url, on_event=on_event, on_progress=on_progress,
            embedded_broker=_embedded_broker(run.speed),
        ).run()
        progress.clear()
        if _INTERRUPTED.is_set():  # a Ctrl-C the run's shutdown absorbed: still a run cut short
            raise KeyboardInterrupt
        if not run.as_json:
            typer.echo("")
            typer.echo(_summary(result, zone, state_dir, temporary=temporary, speed=run.speed))
        if desk is not None:
            typer.echo(f"the run is over; {desk.server.url} still serves it (Ctrl-C to stop)", err=run.as_json)
            desk.wait()
    except PipelineError as exc:
        fail(str(exc), 1)
    finally:
        progress.clear()
        if diverted is not None and diverted.held:
            typer.echo(warnings_note(diverted.held, log_path), err=True)
        elif state_dir is None:
            log_path.unlink(missing_ok=True)
        if desk is not None:
            desk.close()


def _embedded_broker(speed: float | None) -> Literal["amqtt", "mosquitto"]:
    """The embedded broker of a run: Mosquitto when installed for lockstep (a lockstep run waits on
    each round trip; amqtt costs several times the CPU per message), else amqtt in-process."""
    from stormwatch.app.servers import find_binary

    return "mosquitto" if speed is None and find_binary("mosquitto") else "amqtt"


def _start_desk(site: Path, site_id: str, work: Path, port: int, sock: socket.socket | None,
                starting: datetime) -> DemoDesk:
    """Start ``--web``; prints where and how to log in (stderr, so ``--json`` stays clean)."""
    from stormwatch.web.demo_desk import DemoDesk
    from stormwatch.web.server import DeskSetupError

    try:
        desk = DemoDesk(site, site_id, work, port, sock, starting)
        typer.echo(desk.start() + "\n", err=True)
    except (DeskSetupError, RuntimeError, OSError) as exc:
        fail(f"--web: {exc}", 1)
    return desk


#: set by Ctrl-C or SIGTERM: the run was cut short, whatever its threads' shutdown made of the signal
_INTERRUPTED = threading.Event()


def warnings_note(held: int, log_path: Path) -> str:
    """Where the services' WARNING lines of the run went (the timeline is in simulated time, they
    in wall-clock time): ``1 warning ... is in FILE``, ``3 warnings ... are in FILE``."""
    return (f"{plural(held, 'warning')} of the services (gateway polls, ingest, alerts; wall-clock times) "
            f"{'is' if held == 1 else 'are'} in {log_path}")


def _raise_interrupt(signum: int, frame: object) -> None:
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def _summary(result: PipelineResult, tz: ZoneInfo, state_dir: Path | None, temporary: bool = False,
             speed: float | None = None) -> str:
    lines = ["Summary"]
    depth = result.resolution.depth_in(result.stored_tips)
    lines.append(
        f"  rain: {plural(result.stored_tips, 'tip')} = {float(depth):.2f} in stored "
        f"(scenario produced {plural(result.scenario_tips, 'tip')})"
    )
    lines.append(
        f"  readings: {result.readings_made} made by the gateway, {result.readings_stored} stored; "
        f"dead-lettered: {sum(result.dead_lettered.values())}"
        + (f" ({counts(result.dead_lettered)})" if result.dead_lettered else "")
    )
    kinds: dict[str, int] = {}
    for e in result.events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    lines.append("  events: " + ", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items())))
    if result.missed_slots:
        lines.append(f"  gaps: the gateway skipped {plural(result.missed_slots, 'poll slot')} because this machine "
                     f"fell behind at {speed or 0:g}x -- real gaps in the data, never made up (the data_gap events); "
                     "lockstep (no --speed) avoids them")
    open_orders = [w for w in result.workorders if w.status != "completed"]
    ended = result.ended_at
    overdue = sum(1 for w in open_orders if w.is_overdue(ended))
    lines.append(f"  work orders: {len(open_orders)} not completed" + (f" ({overdue} overdue)" if overdue else ""))
    for w in open_orders:
        late = "  overdue" if w.is_overdue(ended) else ""
        lines.append(f"    {w.id}  {w.kind:<20} due {_local(w.due_at, tz):<26} [{w.citation}]  {w.status}{late}")
    where = (f"store: {result.store_url}" if not temporary else
             "store and work orders: in a temporary directory, deleted when the demo ends (--state-dir DIR keeps "
             "them)")
    lines.append(f"  ran {result.sim_hours:.0f} simulated hours in {result.wall_seconds:.0f} s; {where}")
    if state_dir is not None:
        lines.append(f"  the work orders, at the simulated time the run reached: "
                     f"stormwatch workorders list --state-dir {state_dir}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add ``stormwatch demo``."""
    app.command("demo")(demo)
