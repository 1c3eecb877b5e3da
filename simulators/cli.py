"""``stormwatch simulate``: run a simulated site (real Modbus TCP/RTU and serial devices) through a scenario."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import typer

from stormwatch.alerts.sitefile import load_site_file
from stormwatch.clock import CLOCK_FILE_ENV, ClockFileError, ScenarioClock, check_clock_file_path, write_clock_file
from stormwatch.config import SiteConfig, device_profiles
from stormwatch.display import local_time, plural
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import parse_tip_size
from stormwatch.runtime.cliutil import Report, fail, progress
from stormwatch.simulators.scenario import RainRecordSpec, Scenario, ScenarioError, SiteScenario, load_scenario
from stormwatch.simulators.site import SimulatedSite

log = logging.getLogger(__name__)

#: The dry gap (h) that closes a rain event (hydrology.md "Rain events"); the scenario keeps it in view.
DRY_GAP_H = 6.0
#: Real seconds the devices keep answering after the scenario's end (simulated time stands still
#: there), so a gateway's polls of the last slots, late on a busy machine, still get an answer.
END_GRACE_S = 3.0
#: Real seconds between two progress lines of a lockstep run (rewritten in place on a terminal).
PROGRESS_EVERY_S = 0.5


#: The --rain-file options of `simulate` and `demo` (one definition: the same names, help and checks).
RAIN_FILE = typer.Option(None, "--rain-file", metavar="FILE", exists=True, dir_okay=False,
                         help="Rain from a real tip record instead of the design storm (a file `stormwatch replay` "
                              "reads: time and depth per row).")
TIP_MM = typer.Option(None, "--tip-mm", metavar="MM", help="--rain-file's tip size in mm (e.g. 0.2).")
TIP_IN = typer.Option(None, "--tip-in", metavar="IN", help="--rain-file's tip size in inches.")
TIME_FORMAT = typer.Option(None, "--time-format", metavar="FORMAT",
                           help="strptime format of --rain-file's times (default: ISO 8601 and year-first forms).")
DELIMITER = typer.Option(None, "--delimiter", metavar="CHAR", help="Field delimiter of --rain-file (default: sniffed).")
TZ = typer.Option(None, "--tz", metavar="ZONE",
                  help="IANA time zone of --rain-file's times without an offset, and of --from/--until (default: "
                       "the site's timezone; the zone used is printed).")
FROM = typer.Option(None, "--from", metavar="TIME", help="Use --rain-file rows from this time (its zone: --tz).")
UNTIL = typer.Option(None, "--until", metavar="TIME", help="Use --rain-file rows before this time.")


def build_scenario(
    scenario: str,
    storm_depth_in: str | None = None,
    rain_file: Path | None = None,
    rain_tip_mm: str | None = None,
    rain_tip_in: str | None = None,
    rain_time_format: str | None = None,
    rain_delimiter: str | None = None,
    rain_tz: str | None = None,
    rain_time_column: str = "0",
    rain_value_column: str = "1",
    rain_from: datetime | None = None,
    rain_until: datetime | None = None,
) -> Scenario:
    """A scenario with the command-line overrides applied (``--storm-depth-in``, or ``--rain-file``
    with ``--tip-mm``/``--tip-in``, ``--time-format``, ``--delimiter``, ``--tz``, ``--time-column``,
    ``--tips-column``, ``--from``, ``--until``).

    A rain file replaces the design storm; it is windowed to ``[rain_from, rain_until)`` and
    shifted so its first tip falls one hour after the scenario start.

    Raises:
        ScenarioError: bad scenario file or conflicting/invalid overrides (the option is named).
    """
    sc = load_scenario(scenario)
    if storm_depth_in is not None and rain_file is not None:
        raise ScenarioError("give either --storm-depth-in or --rain-file, not both")
    if storm_depth_in is not None:
        try:
            sc = sc.with_storm_depth(storm_depth_in)
        except ValueError as exc:
            raise ScenarioError(f"--storm-depth-in {storm_depth_in!r}: {exc}") from exc
    if rain_file is None:
        given = [name for name, value in (("--tip-mm", rain_tip_mm), ("--tip-in", rain_tip_in),
                                          ("--from", rain_from), ("--until", rain_until)) if value is not None]
        if given:
            verb = "describe" if len(given) > 1 else "describes"
            raise ScenarioError(f"{' and '.join(given)} {verb} a --rain-file: give one (or leave them out)")
        return sc
    if (rain_tip_mm is None) == (rain_tip_in is None):
        raise ScenarioError("--rain-file needs exactly one of --tip-mm or --tip-in (the record's tip size)")
    option, text, unit = ("--tip-mm", rain_tip_mm, "mm") if rain_tip_mm is not None else ("--tip-in", rain_tip_in, "in")
    assert text is not None
    try:
        size = parse_tip_size(text, unit)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ScenarioError(f"{option} {exc}") from None
    if rain_from is not None and rain_until is not None and rain_from >= rain_until:
        raise ScenarioError(f"--from {rain_from.isoformat()} is not before --until {rain_until.isoformat()}: "
                            "no rain would be used")
    spec = RainRecordSpec(
        path=rain_file,
        tip_size=str(size),
        unit=unit,  # type: ignore[arg-type]
        time_column=rain_time_column,
        value_column=rain_value_column,
        time_format=rain_time_format,
        tz=rain_tz,
        delimiter=rain_delimiter,
        start=rain_from,
        end=rain_until,
        shift_to_offset_h=1.0,
    )
    return sc.with_rain_record(spec)


#: The options of ``simulate --fleet`` alone (parameter -> option; their defaults are ``None``, so given
#: is told from not given): without --fleet they are refused, never silently ignored.
FLEET_ONLY = {"sites_dir": "--sites", "duration_h": "--duration-h", "start": "--start", "seed": "--seed",
              "batch": "--batch/--single", "publish_log": "--publish-log", "start_wall": "--start-wall"}


def _refuse_fleet_options(given: dict[str, object]) -> None:
    """``<option> needs --fleet`` for the first fleet-only option given without --fleet."""
    for name, option in FLEET_ONLY.items():
        if given[name] is not None:
            fail(f"{option} needs --fleet (a site's run lasts as long as its scenario: --scenario, or "
                 "--rain-file with --from/--until)")


def simulate(
    site: Path | None = typer.Option(None, "--site", metavar="FILE",
                                     help="The site's YAML file (devices, transports, roles, basin geometry); "
                                          "default: the one the scenario is written for, if it names one."),
    scenario: str = typer.Option("default", "--scenario", metavar="NAME|FILE",
                                 help="A bundled scenario (default) or a scenario YAML file."),
    speed: float = typer.Option(1000.0, "--speed", min=0.001, metavar="FACTOR",
                                help="Simulated seconds per real second (1000: a day in 86 s)."),
    storm_depth_in: str | None = typer.Option(
        None, "--storm-depth-in", metavar="IN", help="The design storm's depth in inches (exact decimal, e.g. 1.2)."
    ),
    rain_file: Path | None = RAIN_FILE, tip_mm: str | None = TIP_MM, tip_in: str | None = TIP_IN,
    time_format: str | None = TIME_FORMAT, delimiter: str | None = DELIMITER, tz: str | None = TZ,
    time_column: str = typer.Option("0", "--time-column", metavar="COLUMN",
                                    help="--rain-file's time column: header name or 0-based index."),
    tips_column: str = typer.Option("1", "--tips-column", metavar="COLUMN",
                                    help="--rain-file's depth column: header name or 0-based index."),
    rain_from: datetime | None = FROM, rain_until: datetime | None = UNTIL,
    clock_file: Path | None = typer.Option(
        None, "--clock-file", envvar=CLOCK_FILE_ENV, metavar="FILE", dir_okay=False,
        help="Write the simulated clock here: gateway, ingest and alerts given the same file run on it.",
    ),
    start_delay_s: float = typer.Option(
        5.0, "--start-delay-s", min=0, metavar="SECONDS",
        help="Real seconds from writing the clock to the scenario start (services waiting on it connect first).",
    ),
    progress_s: float = typer.Option(5.0, "--progress-every", min=0.1, metavar="SECONDS",
                                     help="Real seconds between progress lines."),
    hrxl_rate: float = typer.Option(10.0, "--hrxl-lines-per-s", min=0.1, metavar="RATE",
                                    help="Lines per real second of the simulated serial level sensors."),
    fleet: int | None = typer.Option(
        None, "--fleet", min=1, metavar="N",
        help="Instead of one site's devices: N sites' gateways at the MQTT level (gateway-identical payloads, QoS 1, "
             "last wills), each site with its own story; needs --sites. Default --speed here: 60.",
    ),
    sites_dir: Path | None = typer.Option(
        None, "--sites", metavar="DIR", file_okay=False,
        help="--fleet: the directory of the fleet's site files (missing ones are written), the one ingest and "
             "alerts are given with --sites.",
    ),
    broker: str = typer.Option("mqtt://127.0.0.1:1883", "--broker", "-b", envvar="STORMWATCH_BROKER", metavar="URL",
                               help="--fleet: MQTT broker URL (the nodes of a cluster separated by commas)."),
    duration_h: float | None = typer.Option(None, "--duration-h", min=0.001, metavar="HOURS",
                                            help="--fleet: simulated hours to run (default: 6)."),
    start: datetime | None = typer.Option(None, "--start", metavar="TIME",
                                          help="--fleet: simulated start, UTC (default: the default scenario's)."),
    seed: int | None = typer.Option(None, "--seed", metavar="N",
                                    help="--fleet: seed of the sites' stories (the same seed, the same run; "
                                         "default: 1)."),
    batch: bool | None = typer.Option(None, "--batch/--single",
                                      help="--fleet: one message per gateway and poll cycle, or one per reading "
                                           "(default: --single)."),
    publish_log: Path | None = typer.Option(None, "--publish-log", metavar="FILE", dir_okay=False,
                                            help="--fleet: write when each poll cycle was published (CSV)."),
    start_wall: float | None = typer.Option(
        None, "--start-wall", metavar="POSIX_S",
        help="--fleet: the real time (POSIX seconds) at which the simulated start is reached, instead of "
             "--start-delay-s after the gateways connect: services started earlier on a clock file of the same "
             "start, speed and real start run on this clock."),
    confirm: str = typer.Option("broker", "--confirm", metavar="stored|broker",
                                help="--fleet: when a gateway is done with a message: stored = when ingest "
                                     "confirms its readings stored (the gateway's contract: kept and sent again "
                                     "until then; needs ingest running), broker = on the broker's PUBACK."),
    lockstep: bool = typer.Option(
        False, "--lockstep", help="Be the lockstep clock over MQTT (--broker): time moves when every participant "
                                  "(gateway, ingest, alerts run with --lockstep) is done, as fast as they allow."),
    participants: str = typer.Option("gateway,ingest,alerts", "--lockstep-participants", metavar="NAMES",
                                     help="--lockstep: who must be done with each instant (comma-separated)."),
    wait_s: float = typer.Option(30.0, "--lockstep-wait-s", min=0.1, metavar="SECONDS",
                                 help="--lockstep: real seconds a participant may stay silent before the clock "
                                      "says, in one line, whom it waits for and what it owes."),
) -> None:
    """Run simulated field devices for a site through a storm scenario, on the real protocols.

    Each Modbus TCP address of the site becomes a Modbus TCP server, each RTU port a Modbus RTU line
    on a pseudo-terminal and each serial device a MaxBotix HRXL on a pseudo-terminal (configured
    port paths become links to them). They answer with the scenario's values at the simulated time
    until it ends (or Ctrl-C); progress is logged every few seconds.

    With --clock-file (or $STORMWATCH_CLOCK_FILE), every service given the same file runs on this
    simulated clock: start them first (they wait for the file), then simulate; simulated time
    reaches the scenario start --start-delay-s later.

    Replay a real record (0.2 mm tips, Tharandt's biggest day):

    stormwatch simulate --site examples/site.yaml --rain-file tharandt_davis_tips_Sensor1.csv --delimiter ';' --time-format '%d.%m.%Y %H:%M' --tip-mm 0.2 --from 2018-09-23T00:00:00 --until 2018-09-24T00:00:00

    A county at the MQTT level (docs/scaling.md): stormwatch simulate --fleet 1000 --sites var/sites

    The options marked --fleet are the fleet's alone: without --fleet they are refused (a site's run
    lasts as long as its scenario, which says its start and hours).
    """  # noqa: E501
    if fleet is not None:
        from stormwatch.simulators.fleet import fleet_command

        fleet_command(fleet, sites_dir, broker, 60.0 if speed == 1000.0 else speed, start,
                      6.0 if duration_h is None else duration_h, 1 if seed is None else seed, bool(batch),
                      clock_file, start_delay_s, progress_s, publish_log, confirm, start_wall)
        return
    _refuse_fleet_options({"sites_dir": sites_dir, "duration_h": duration_h, "start": start, "seed": seed,
                           "batch": batch, "publish_log": publish_log, "start_wall": start_wall})
    if lockstep and not participants.replace(",", "").strip():
        fail(f"--lockstep-participants {participants!r}: name at least one (gateway, ingest, alerts): with none "
             "the clock would jump to the scenario's end at once, polled by no one")
    sc = build_scenario(
        scenario, storm_depth_in, rain_file, tip_mm, tip_in, time_format, delimiter,
        tz, time_column, tips_column, rain_from, rain_until,
    )
    site = site or sc.site
    if site is None:
        fail("give --site FILE (one site's devices on their protocols) or --fleet N --sites DIR")
    if clock_file is not None:
        try:
            check_clock_file_path(clock_file)
        except ClockFileError as exc:
            fail(str(exc))
    library = ProfileLibrary()
    cfg = load_site_file(site, library)
    try:
        story = SiteScenario(sc, cfg, device_profiles(cfg, library))  # the rain file is read here
    except ValueError as exc:  # InputErrors (the rain file) and devices that do not fit the scenario
        fail(str(exc))
    tips = story.tips
    for note in (story.rain_times, story.rain_rounding):
        if note:
            typer.echo(note, err=True)
    if story.rain_skip_summary:
        log.warning("%s", story.rain_skip_summary)  # once: the simulator reads the file again, quietly
    if lockstep:  # the scenario as written, like `stormwatch demo`: the same span, the same events
        _lockstep_run(cfg, library, sc, broker, participants, wait_s, hrxl_rate)
        return
    if len(tips):
        needed = (tips.times[-1] - sc.start).total_seconds() / 3600 + DRY_GAP_H + 0.5
        if needed > sc.duration_h:
            log.info("extending the scenario to %.1f h so the last tip and a %g-h dry gap fit", needed, DRY_GAP_H)
            sc = sc.model_copy(update={"duration_h": needed})
    # simulated time stops at the scenario's end for every process on this clock
    clock = ScenarioClock.starting_now(sc.start, speed, delay_s=start_delay_s, sim_end=sc.end)
    try:
        sim = SimulatedSite(cfg, library, sc, clock, hrxl_lines_per_s=hrxl_rate)
    except ValueError as exc:
        fail(f"{site}: {exc}")
    log.info(
        "scenario %s: %s .. %s (%.1f h) at %gx: %d tips of %s; about %.0f real seconds",
        sc.name, sc.start.isoformat(), sc.end.isoformat(), sc.duration_h, speed, len(tips),
        tips.resolution, sc.duration_h * 3600 / speed,
    )
    try:
        sim.start()
    except OSError as exc:
        fail(f"cannot start the simulated site: {exc}", 1)
    if clock_file is not None:
        write_clock_file(clock_file, clock)
        log.info("clock written to %s", clock_file)
    signal.signal(signal.SIGTERM, _interrupt)  # a stop (docker, systemd) ends the run like Ctrl-C
    try:
        _run_until(sim, clock, sc.end, progress_s)
    except KeyboardInterrupt:
        stopped = clock.now()
        log.info("interrupted at simulated %s", stopped.isoformat(timespec="seconds"))
        if clock_file is not None and stopped < sc.end:
            # the file says the simulation is over, so a service started later waits for a new one
            write_clock_file(clock_file, dataclasses.replace(clock, sim_end=stopped))
    finally:
        sim.stop()


def _lockstep_run(cfg: SiteConfig, library: ProfileLibrary, sc: Scenario, broker: str, participants: str,
                  wait_s: float, hrxl_rate: float) -> None:
    """The simulated devices on a lockstep clock this process conducts over MQTT (stormwatch.runtime.mqttclock)."""
    from stormwatch.lockstep import LockstepClock
    from stormwatch.runtime.mqttclock import MqttConductor

    names = [n.strip() for n in participants.split(",") if n.strip()]
    clock = LockstepClock(sc.start, sc.end)
    try:
        sim = SimulatedSite(cfg, library, sc, clock, hrxl_lines_per_s=hrxl_rate)
        sim.start()
    except (ValueError, OSError) as exc:
        fail(f"cannot start the simulated site: {exc}", 1)
    conductor = MqttConductor(clock, broker, cfg.site.id, names, wait_s)
    log.info("scenario %s: %s .. %s (%.1f h), lockstep over %s for %s", sc.name, sc.start.isoformat(),
             sc.end.isoformat(), sc.duration_h, broker, ", ".join(names))
    signal.signal(signal.SIGTERM, _interrupt)
    wall0 = time.monotonic()
    stop = threading.Event()
    try:
        with progress("simulate") as report:
            threading.Thread(target=_tick, name="progress", daemon=True,
                             args=(report, stop, lambda: lockstep_line(clock.now(), clock.sim_start, clock.sim_end,
                                                                       conductor.made(), cfg.site.tz))).start()
            try:
                conductor.run()
            finally:
                stop.set()
        log.info("scenario end reached: %s in %.1f real s", plural(conductor.instants, "instant"),
                 time.monotonic() - wall0)
    except KeyboardInterrupt:
        log.info("interrupted at simulated %s", clock.now().isoformat(timespec="seconds"))
    except RuntimeError as exc:
        fail(str(exc), 1)
    finally:
        sim.stop()


def lockstep_line(now: datetime, start: datetime, end: datetime, made: int, zone: ZoneInfo) -> tuple[float, str]:
    """``(fraction, line)`` of a lockstep run's progress, as the demo words it: ``simulated Mon 01 Jun
    2026 03:00 EDT ( 12 %): 340 readings made`` (the gateways' readings, as they report them to the clock)."""
    span = (end - start).total_seconds()
    fraction = min(1.0, max(0.0, (now - start).total_seconds() / span)) if span > 0 else 1.0
    return fraction, f"simulated {local_time(now, zone)} ({fraction * 100:3.0f} %): {plural(made, 'reading')} made"


def _tick(report: Report, stop: threading.Event, line: Callable[[], tuple[float, str]]) -> None:
    """Report ``line()`` every half second of real time until ``stop``."""
    while not stop.wait(PROGRESS_EVERY_S):
        report(*line())


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run_until(sim: SimulatedSite, clock: ScenarioClock, end: datetime, progress_s: float) -> None:
    state = sim.state
    while True:
        now = clock.now()
        extra = ""
        for point in state.cfg.points:
            if point.downstream is not None:
                extra += (f", {point.id} turbidity up {state.upstream_ntu(now, point.id):.1f} / down "
                          f"{state.downstream_ntu(now, point.id):.1f} NTU")
            if point.ph_probe is not None:
                extra += f", {point.id} pH {state.ph(now, point.id):.2f}"
        for basin in state.cfg.all_basins:
            extra += f", {basin.id} {100 * state.sediment_fraction(now, basin.id):.1f} % full"
        log.info(
            "sim %s: %d tips (%s in)%s; %d Modbus requests",
            now.isoformat(timespec="seconds"), state.tips.tips_until(now), float(state.rain_depth_in(now)), extra,
            sum(sim.modbus_requests().values()),
        )
        if now >= end:
            log.info("scenario ended at simulated %s; devices answer %g s more for the last polls",
                     end.isoformat(), END_GRACE_S)
            time.sleep(END_GRACE_S)
            return
        remaining_real = clock.real_seconds((end - now).total_seconds())
        time.sleep(min(progress_s, max(0.05, remaining_real)))


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to the stormwatch command line."""
    app.command("simulate")(simulate)

