"""``stormwatch gateway`` and ``stormwatch decode``.

::

    stormwatch gateway --site SITE.yaml --broker mqtt://127.0.0.1:1883 --state-dir ./var/gateway
                       [--clock-file PATH] [--until ISO] [--clock-floor DATE] [--confirm stored|broker]
                       [--check] [--no-exec]
    stormwatch decode --type float32 --order CDAB 0x0000 0x3FC0        # → 1.5

``--clock-file`` (or ``$STORMWATCH_CLOCK_FILE``): the simulated clock written by ``stormwatch simulate``
(:mod:`stormwatch.clock`; the gateway waits for it); without it the ``STORMWATCH_SIM_*`` environment
(``ScenarioClock.to_env``) is used if set, else the wall clock.

The design: docs/gateway.md ("The modules", `gateway/cli.py`).
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import NoReturn

import typer

from stormwatch.clock import CLOCK_FILE_ENV, Clock, WallClock, service_clock
from stormwatch.config import SiteConfig, check_addresses
from stormwatch.display import plural
from stormwatch.errors import InputError, problems_message, yaml_line
from stormwatch.gateway.clockfloor import parse_floor
from stormwatch.gateway.drivers.build import UnsupportedDevice, build_driver
from stormwatch.gateway.fieldtool import FieldToolError, decode_text
from stormwatch.gateway.fleet import fleet_conflicts, site_files
from stormwatch.gateway.plan import GatewayPlan, PlanError, compile_plan
from stormwatch.gateway.ports import port_problems
from stormwatch.gateway.publisher import CONFIRM_MODES
from stormwatch.gateway.run import run_plan, write_plan
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.cliutil import child_log_env, fail, site_loader, use_state_dir
from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url

log = logging.getLogger(__name__)

#: The compiled plan's file name inside the state directory.
PLAN_FILE = "plan.json"


def gateway_command(
    site: list[Path] = typer.Option(
        ..., "--site", metavar="FILE",
        help="The site's YAML file (its devices and how to reach them). With --check, repeat --site or give a "
             "directory: the sites are checked together and two gateways sharing an id are refused.",
    ),
    broker: str = typer.Option("mqtt://127.0.0.1:1883", "--broker", envvar="STORMWATCH_BROKER", metavar="URL",
                               help="The MQTT broker: mqtt://[USER:PASS@]HOST:PORT (mqtts:// for TLS)."),
    state_dir: Path = typer.Option(Path("./var/gateway"), "--state-dir", metavar="DIR",
                                   help="Keep the outbox (readings the broker has not acknowledged yet) and the "
                                        "counter baselines here (created if missing, in a directory that exists)."),
    clock_file: Path | None = typer.Option(
        None, "--clock-file", envvar=CLOCK_FILE_ENV, metavar="FILE",
        help="Run on the simulated clock `stormwatch simulate` writes (waits for it).",
    ),
    lockstep: bool = typer.Option(False, "--lockstep",
                                  help="Run on the lockstep clock `stormwatch simulate --lockstep` conducts over "
                                       "MQTT (waits for it; polls in this process)."),
    until: str | None = typer.Option(None, "--until", metavar="TIME",
                                     help="Stop at this clock time (ISO 8601 with an offset)."),
    clock_floor: str | None = typer.Option(
        None, "--clock-floor", envvar="STORMWATCH_CLOCK_FLOOR", metavar="DATE",
        help="Stamp no reading while the clock reads before this ISO date (a box without a real-time clock "
             "before NTP). Default: the build date, for the wall clock.",
    ),
    profiles_dir: Path | None = typer.Option(None, "--profiles", metavar="DIR",
                                             help="A directory of your own device profiles, searched first."),
    batch: bool = typer.Option(False, "--batch/--single",
                               help="Publish one message per poll cycle holding all its readings (the contract's "
                                    "batch form; for a county's broker, docs/scaling.md), or one per reading."),
    confirm: str = typer.Option("stored", "--confirm", metavar="stored|broker",
                                help="When a reading leaves the outbox: stored = when ingest confirms the store "
                                     "holds it (survives a broker crash), broker = on the broker's acknowledgement "
                                     "(a consumer other than stormwatch ingest)."),
    stats_interval_s: float = typer.Option(60.0, "--stats-interval-s", min=1, metavar="SECONDS",
                                           help="Seconds between the counter log lines (readings made, published, "
                                                "confirmed)."),
    check: bool = typer.Option(False, "--check", help="Check the site file, its profiles and rule pack and the "
                                                      "broker URL, print what would be polled (and whether each "
                                                      "serial port is there), and exit."),
    ports: bool = typer.Option(False, "--ports",
                               help="With --check, on the gateway box before deployment: refuse the site unless "
                                    "every serial port is there (a character device this user can open), naming "
                                    "each device and path that is not."),
    no_exec: bool = typer.Option(
        False, "--no-exec", help="Poll in this process (debugging) instead of the lean gateway process.",
    ),
) -> None:
    """Poll the site's devices and publish their readings to MQTT; nothing is lost while the uplink is down.

    Each reading is published at QoS 1 and kept in the outbox under --state-dir until ingest confirms
    it stored (re-sent while it is not), across restarts. Rain-gauge counters become tips (resets and wraps handled);
    values get quality flags. The polling process is lean (a few MB): the site is checked and
    compiled first, then that process takes over (same process id).
    """
    if confirm not in CONFIRM_MODES:
        fail(f"--confirm: expected stored or broker, got {confirm!r}")
    if ports and not check:
        fail("--ports needs --check (a running gateway polls the devices whose ports are there, and logs the others)")
    if lockstep and clock_floor is not None:
        # the floor is waited out in real time, before the gateway joins the clock: the clock would
        # wait for it and it for the clock
        fail("--clock-floor cannot be used with --lockstep (the simulation chooses its time; start its "
             "scenario at the floor instead)")
    checked = _checked_sites(site, broker, ProfileLibrary(profiles_dir), check)
    until_dt, floor_dt = _until(until), _floor(clock_floor)
    if check:
        _check_ports(checked, refuse=ports)
        for _, cfg, _ in checked:
            typer.echo(_ok_line(cfg))
        return
    _, _, plan = checked[0]
    use_state_dir(state_dir, create=True)
    try:
        if lockstep:
            from stormwatch.runtime.mqttclock import FollowerClock

            clock: Clock = FollowerClock(broker, plan.site, "gateway", workers=True)
        else:
            clock = service_clock(clock_file)
        plan_path = write_plan(plan, state_dir / PLAN_FILE)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    for i, why in port_problems(checked[0][1]):  # polled as the others are: a transport error until it is there
        log.warning("devices.%d.transport.port: %s: polling it fails until it is there", i, why)
    if no_exec or lockstep:  # the lockstep clock's connection lives in this process
        run_plan(plan, clock, broker, state_dir, until_dt, floor_dt, batch, confirm=confirm,
                 stats_interval_s=stats_interval_s)
        return
    argv = [sys.executable, "-m", "stormwatch.gateway", "--plan", str(plan_path), "--broker", broker,
            "--state-dir", str(state_dir)]
    for option, value in (("--clock-file", clock_file), ("--until", until), ("--clock-floor", clock_floor)):
        if value is not None:
            argv += [option, str(value)]
    if batch:
        argv.append("--batch")
    argv += ["--confirm", confirm, "--stats-interval-s", repr(stats_interval_s)]
    _exec_lean(argv, plan_path)


def _checked_sites(site: list[Path], broker: str, profiles: ProfileLibrary,
                   check: bool) -> list[tuple[Path, SiteConfig, GatewayPlan]]:
    """Each ``--site`` file (one, or several for ``--check``) loaded, checked against its profiles and
    rule pack, compiled into a plan whose drivers can be built, and the fleet's ids free of conflicts;
    the broker URL parsed. Exits 2 with the reason otherwise."""
    try:
        files = site_files(site)
    except ValueError as exc:
        fail(str(exc))
    if len(files) > 1 and not check:
        fail(f"--site: a gateway runs one site, got {len(files)} site files (several are for --check)")
    checked: list[tuple[Path, SiteConfig, GatewayPlan]] = []
    try:
        parse_broker_url(broker, os.environ)
        load_site_file = site_loader(profiles)  # the file, its profiles, its rule pack (stormwatch.app.cli)
        for path in files:
            cfg = load_site_file(path)
            check_addresses(cfg, profiles, path)
            plan = compile_plan(cfg, profiles)
            for device in plan.devices:
                build_driver(device, plan.profile(device), WallClock(), {})
            checked.append((path, cfg, plan))
    except (InputError, PlanError, UnsupportedDevice, BrokerUrlError) as exc:  # InputError: site, profile, pack
        fail(str(exc))
    conflicts = fleet_conflicts([(path, cfg) for path, cfg, _ in checked])
    if conflicts:
        fail("; ".join(conflicts))
    return checked


def _check_ports(checked: list[tuple[Path, SiteConfig, GatewayPlan]], *, refuse: bool) -> None:
    """With ``refuse`` (``--ports``), exit 2 naming every device, path and line whose serial port is
    not usable here, in every site file checked."""
    if not refuse:
        return
    problems = [problems_message(str(path), [f"devices.{i}.transport.port: {why}" + _at(path, i)
                                             for i, why in port_problems(cfg)])
                for path, cfg, _ in checked if port_problems(cfg)]
    if problems:
        fail("; ".join(problems) + " (plug the adapter in, or correct the path)")


def _at(path: Path, i: int) -> str:
    line = yaml_line(path, ("devices", i, "transport", "port"))
    return "" if line is None else f" (line {line})"


def _ok_line(cfg: SiteConfig) -> str:
    """``ok: site S, gateway G, N devices: id (profile via kind), ...``; a serial port that is not
    usable here is named at its device, then how to refuse it (a desk has no adapters)."""
    missing = dict(port_problems(cfg))
    devices = ", ".join(
        f"{d.id} ({d.profile} via {d.transport.kind}"
        + (f"; {missing[i].split(': ', 1)[1]} here" if i in missing else "") + ")"
        for i, d in enumerate(cfg.devices))
    hint = (f" -- {plural(len(missing), 'serial port')} not usable here (on the gateway box, add --ports to "
            "refuse the site for that)" if missing else "")
    return f"ok: site {cfg.site.id}, gateway {cfg.gateway_id}, {plural(len(cfg.devices), 'device')}: {devices}{hint}"


def _until(until: str | None) -> datetime | None:
    """``--until`` as an aware time (exits 2 on a bad or naive one)."""
    if until is None:
        return None
    try:
        until_dt = datetime.fromisoformat(until)
    except ValueError:
        fail(f"--until {until!r} is not an ISO 8601 time")
    if until_dt.tzinfo is None:
        fail("--until needs a UTC offset (e.g. 2026-06-01T12:00:00Z)")
    return until_dt


def _floor(clock_floor: str | None) -> datetime | None:
    """``--clock-floor`` as a time (exits 2 on a bad one)."""
    if clock_floor is None:
        return None
    try:
        return parse_floor(clock_floor)
    except ValueError as exc:
        fail(str(exc))


def _exec_lean(argv: list[str], plan_path: Path) -> NoReturn:
    """Replace this process (same pid) with the lean gateway process ``argv``."""
    # glibc gives every thread its own malloc arena; the gateway's threads (one per link, paho's
    # loop, the outbox pump) are I/O-bound and the GIL serialises their allocations, so one arena
    # suffices and saves ~1 MB of RSS.
    env = {"MALLOC_ARENA_MAX": "1", **os.environ, **child_log_env()}
    log.info("plan %s written; exec'ing the lean gateway process", plan_path)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def decode_command(
    words: list[str] = typer.Argument(..., metavar="WORD",
                                      help="Register words, decimal or 0x-hex, as read from the wire."),
    dtype: str = typer.Option("uint16", "--type", metavar="TYPE",
                              help="int16, uint16, int32, uint32, float32, int64, uint64 or float64."),
    order: str = typer.Option("ABCD", "--order", metavar="ORDER",
                              help="Word/byte order: ABCD, CDAB, BADC, DCBA, or all to print each."),
    scale: float = typer.Option(1.0, "--scale", metavar="FACTOR", help="engineering = raw × scale + offset."),
    offset: float = typer.Option(0.0, "--offset", metavar="NUMBER", help="engineering = raw × scale + offset."),
) -> None:
    """Which value do these Modbus register words hold? A field tool for a new sensor's register map.

    `stormwatch decode --type float32 --order CDAB 0x0000 0x3FC0` prints 1.5; --order all prints
    the value in every word order, to find the one that reads right.
    """
    try:
        typer.echo(decode_text(words, dtype, order.upper() if order.lower() != "all" else "all", scale, offset))
    except FieldToolError as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    """Add ``gateway`` and ``decode`` to the ``stormwatch`` command line."""
    app.command("gateway")(gateway_command)
    app.command("decode")(decode_command)
