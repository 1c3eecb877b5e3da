"""``stormwatch simulate``: run a simulated site (real Modbus TCP/RTU and serial devices) through a scenario."""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from datetime import datetime
from pathlib import Path

import typer

from stormwatch.clock import CLOCK_FILE_ENV, ScenarioClock, write_clock_file
from stormwatch.config import ConfigError, device_profiles, load_site
from stormwatch.profiles import ProfileError, ProfileLibrary
from stormwatch.simulators.rain_record import RainRecordError
from stormwatch.simulators.scenario import RainRecordSpec, Scenario, ScenarioError, SiteScenario, load_scenario
from stormwatch.simulators.site import SimulatedSite

log = logging.getLogger(__name__)

#: The dry gap (h) that closes a rain event (hydrology.md "Rain events"); the scenario keeps it in view.
DRY_GAP_H = 6.0
#: Real seconds the devices keep answering after the scenario's end (simulated time stands still
#: there), so a gateway's polls of the last slots, late on a busy machine, still get an answer.
END_GRACE_S = 3.0


def build_scenario(
    scenario: str,
    storm_depth_in: str | None = None,
    rain_file: Path | None = None,
    rain_tip_mm: str | None = None,
    rain_tip_in: str | None = None,
    rain_time_format: str = "%Y-%m-%dT%H:%M:%S",
    rain_delimiter: str = ",",
    rain_tz: str = "UTC",
    rain_time_column: str = "0",
    rain_value_column: str = "1",
    rain_from: datetime | None = None,
    rain_until: datetime | None = None,
) -> Scenario:
    """A scenario with the command-line overrides applied.

    A rain file replaces the design storm; it is windowed to ``[rain_from, rain_until)`` and
    shifted so its first tip falls one hour after the scenario start.

    Raises:
        ScenarioError: bad scenario file or conflicting/invalid overrides.
    """
    sc = load_scenario(scenario)
    if storm_depth_in is not None and rain_file is not None:
        raise ScenarioError("give either --storm-depth-in or --rain-file, not both")
    if storm_depth_in is not None:
        try:
            sc = sc.with_storm_depth(storm_depth_in)
        except ValueError as exc:
            raise ScenarioError(f"--storm-depth-in {storm_depth_in!r}: {exc}") from exc
    if rain_file is not None:
        if (rain_tip_mm is None) == (rain_tip_in is None):
            raise ScenarioError("--rain-file needs exactly one of --rain-tip-mm or --rain-tip-in")
        spec = RainRecordSpec(
            path=rain_file,
            tip_size=rain_tip_mm or rain_tip_in or "",
            unit="mm" if rain_tip_mm else "in",
            time_column=rain_time_column,
            value_column=rain_value_column,
            time_format=rain_time_format,
            tz=rain_tz,
            delimiter=rain_delimiter,
            start=rain_from,
            end=rain_until,
            shift_to_offset_h=1.0,
        )
        sc = sc.with_rain_record(spec)
    return sc


def simulate(
    site: Path = typer.Option(..., "--site", help="Site YAML (devices, transports, roles, basin geometry)."),
    scenario: str = typer.Option(
        "default", "--scenario", help="Bundled scenario name (default) or a scenario YAML file."
    ),
    speed: float = typer.Option(1000.0, "--speed", help="Simulated seconds per real second (1000: a day in 86 s)."),
    storm_depth_in: str = typer.Option(
        None, "--storm-depth-in", help="Override the design-storm depth in inches (exact decimal, e.g. 1.2)."
    ),
    rain_file: Path = typer.Option(
        None, "--rain-file", help="Replay a real tip record (delimited file: time and depth per row) instead."
    ),
    rain_time_format: str = typer.Option(
        "%Y-%m-%dT%H:%M:%S", "--rain-time-format", help="strptime format of the record's time column."
    ),
    rain_delimiter: str = typer.Option(",", "--rain-delimiter", help="Field separator of the rain file."),
    rain_tz: str = typer.Option("UTC", "--rain-tz", help="IANA zone of naive record times."),
    rain_time_column: str = typer.Option("0", "--rain-time-column", help="Time column: header name or index."),
    rain_value_column: str = typer.Option("1", "--rain-value-column", help="Depth column: header name or index."),
    rain_tip_mm: str = typer.Option(None, "--rain-tip-mm", help="Record tip size in mm (values in mm), e.g. 0.2."),
    rain_tip_in: str = typer.Option(None, "--rain-tip-in", help="Record tip size in inches (values in in)."),
    rain_from: datetime = typer.Option(None, "--rain-from", help="Replay only record rows from this instant."),
    rain_until: datetime = typer.Option(None, "--rain-until", help="Replay only record rows before this instant."),
    clock_file: Path = typer.Option(
        None, "--clock-file", envvar=CLOCK_FILE_ENV,
        help="Write the simulated clock here (JSON): gateway, ingest and alerts given the same file run on it.",
    ),
    start_delay_s: float = typer.Option(
        5.0, "--start-delay-s", min=0,
        help="Real seconds from writing the clock to the scenario start (services waiting on it connect first).",
    ),
    progress_s: float = typer.Option(5.0, "--progress-every", help="Real seconds between progress lines."),
    hrxl_rate: float = typer.Option(10.0, "--hrxl-lines-per-s", help="Real-time line rate of simulated HRXLs."),
) -> None:
    """Run simulated field devices for a site through a scenario until it ends (or Ctrl-C).

    Every Modbus TCP address of the site becomes a real Modbus TCP server, every RTU port a Modbus RTU line on a pseudo-terminal and every serial device a MaxBotix HRXL on a pty; configured port paths become symlinks to the ptys. Values follow the scenario at the simulated time of each request. Progress (simulated time, tips so far) is logged every few real seconds.

    With --clock-file, every service given the same file (--clock-file or $STORMWATCH_CLOCK_FILE) runs on this simulated clock: start them first (they wait for the file), then simulate; simulated time reaches the scenario start --start-delay-s later.

    Replay a real record (0.2 mm tips, Tharandt's biggest day):

    stormwatch simulate --site examples/site.yaml --rain-file tharandt_davis_tips_Sensor1.csv --rain-delimiter ';' --rain-time-format '%d.%m.%Y %H:%M' --rain-tip-mm 0.2 --rain-from 2018-09-23T00:00:00 --rain-until 2018-09-24T00:00:00
    """  # noqa: E501
    try:
        library = ProfileLibrary()
        cfg = load_site(site, library)
        sc = build_scenario(
            scenario, storm_depth_in, rain_file, rain_tip_mm, rain_tip_in, rain_time_format, rain_delimiter,
            rain_tz, rain_time_column, rain_value_column, rain_from, rain_until,
        )
        if speed <= 0:
            raise ScenarioError(f"--speed must be > 0, got {speed}")
        tips = SiteScenario(sc, cfg, device_profiles(cfg, library)).tips  # bad rain input fails here
        if len(tips):
            needed = (tips.times[-1] - sc.start).total_seconds() / 3600 + DRY_GAP_H + 0.5
            if needed > sc.duration_h:
                log.info("extending the scenario to %.1f h so the last tip and a %g-h dry gap fit", needed, DRY_GAP_H)
                sc = sc.model_copy(update={"duration_h": needed})
        # simulated time stops at the scenario's end for every process on this clock
        clock = ScenarioClock.starting_now(sc.start, speed, delay_s=start_delay_s, sim_end=sc.end)
        sim = SimulatedSite(cfg, library, sc, clock, hrxl_lines_per_s=hrxl_rate)
    except (ConfigError, ProfileError, ScenarioError, RainRecordError, ValueError) as exc:
        log.error("%s", exc)
        raise typer.Exit(2) from exc
    log.info(
        "scenario %s: %s .. %s (%.1f h) at %gx: %d tips of %s; about %.0f real seconds",
        sc.name, sc.start.isoformat(), sc.end.isoformat(), sc.duration_h, speed, len(tips),
        tips.resolution, sc.duration_h * 3600 / speed,
    )
    try:
        sim.start()
    except Exception as exc:
        log.error("cannot start the simulated site: %s", exc)
        raise typer.Exit(1) from exc
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


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run_until(sim: SimulatedSite, clock: ScenarioClock, end: datetime, progress_s: float) -> None:
    state = sim.state
    while True:
        now = clock.now()
        extra = ""
        if state.cfg.turbidity_pair is not None:
            extra += f", turbidity up {state.upstream_ntu(now):.1f} / down {state.downstream_ntu(now):.1f} NTU"
        if state.cfg.basin is not None:
            extra += f", basin {100 * state.sediment_fraction(now):.1f} % full"
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

