"""The command-line layer shared by every ``stormwatch`` command (never imported by the lean gateway).

:func:`standardize` (called once by :mod:`stormwatch.app.cli`) applies its mechanisms -- one-line
errors and exit 2, the one table of option names, logging options -- to every command, so a new
command gets them without code of its own.

The design: docs/runtime.md ("The modules", `stormwatch/runtime/cliutil.py`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import inspect
import logging
import os
import socket
import sys
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import DefaultPlaceholder

from stormwatch.errors import InputError
from stormwatch.numbers import NumberError, parse_float, parse_int
from stormwatch.runtime.logs import setup_logging
from stormwatch.timebounds import DEFAULT_MAX_AGE_S, DEFAULT_MAX_FUTURE_S

if TYPE_CHECKING:
    from stormwatch.config import SiteConfig
    from stormwatch.profiles import ProfileLibrary

log = logging.getLogger("stormwatch.app.cli")

#: Commands that are long-running services: they log at INFO by default.
SERVICES = frozenset({"gateway", "ingest", "alerts", "simulate"})


@dataclass(frozen=True)
class OptionName:
    """One entry of the vocabulary: what the option means and the metavar(s) it shows."""

    meaning: str
    metavars: tuple[str, ...] = ()  # empty: a flag


#: The one table of option names. The same thing has the same name in every command; a name
#: means one thing. (Metavars read as words: FILE, DIR, URL, ZONE, TIME ...)
OPTIONS: dict[str, OptionName] = {
    # what to watch and where things are
    "--site": OptionName("the site's YAML file (devices, transports, jurisdiction); web: or a directory of them",
                         ("FILE", "FILE|DIR")),
    "-s": OptionName("short for --site", ("FILE",)),
    "--site-id": OptionName("a site by its id (filters)", ("SITE_ID",)),
    "--ip": OptionName("a client's network address (the desk's login lockouts)", ("IP",)),
    "--partition": OptionName("part K of N of the sites (K/N): each site watched by exactly one of N services",
                              ("PART",)),
    "--sites": OptionName("a directory of site files, watched: a file added, changed or removed is picked up",
                          ("DIR",)),
    "--device": OptionName("a device by its id in the site file", ("DEVICE_ID",)),
    "--broker": OptionName("the MQTT broker URL", ("URL",)),
    "-b": OptionName("short for --broker", ("URL",)),
    "--store": OptionName("the store URL (sqlite:///FILE, influx1://..., influx2://...)", ("URL",)),
    "--state-dir": OptionName("the directory where a service (or the demo) keeps its state", ("DIR",)),
    "--clock-file": OptionName("the simulated clock shared by simulate, gateway and the other services", ("FILE",)),
    "--client-id": OptionName("the MQTT client id (fixed, so the broker keeps the session)", ("ID",)),
    "--profiles": OptionName("a directory of your own device profiles", ("DIR",)),
    "--packs": OptionName("a directory of your own rule packs", ("DIR",)),
    "--jurisdiction": OptionName("a rule pack by name (ch133, ch196, ...)", ("PACK",)),
    # time
    "--from": OptionName("start of a time window (ISO 8601; no offset = local time)", ("TIME",)),
    "--until": OptionName("end of a time window, exclusive (ISO 8601)", ("TIME",)),
    "--tz": OptionName("an IANA time zone (of times without an offset, or to show times in)", ("ZONE",)),
    "--speed": OptionName("simulated seconds per real second", ("FACTOR",)),
    "--wall-time": OptionName("judge times against today's wall clock instead of the engine's clock"),
    # rain files and logger files
    "--rain-file": OptionName("a real tip record that drives the simulated rain gauge", ("FILE",)),
    "--tip-mm": OptionName("the rain file's tip size in millimetres", ("MM",)),
    "--tip-in": OptionName("the rain file's tip size in inches", ("IN",)),
    "--tips-column": OptionName("the rain file's column of depths or tip counts", ("COLUMN",)),
    "--tips-per-row": OptionName("how a rain cell counts: depth, count or row", ("HOW",)),
    "--delimiter": OptionName("the field delimiter of a delimited file", ("CHAR",)),
    "--time-format": OptionName("the strptime format of a file's times", ("FORMAT",)),
    "--time-column": OptionName("a file's time column (name or 0-based index)", ("COLUMN",)),
    "--value-column": OptionName("a file's column of a quantity: NAME=QUANTITY[:UNIT]", ("NAME=QUANTITY[:UNIT]",)),
    "--evidence": OptionName("how much of a work order's evidence to show: summary, full or csv", ("HOW",)),
    "--format": OptionName("a logger file's format", ("FORMAT",)),
    "--skip-rows": OptionName("lines before a file's header", ("N",)),
    "--gap-value": OptionName("a number that means 'no value' in a file", ("NUMBER",)),
    "--counter-bits": OptionName("a running total (counter) column wraps at 2^N", ("N",)),
    "--select": OptionName("JSON Lines: only messages with KEY=VALUE", ("KEY=VALUE",)),
    # scenarios
    "--scenario": OptionName("a bundled scenario name or a scenario YAML file", ("NAME|FILE",)),
    "--storm-depth-in": OptionName("the design storm's depth in inches", ("IN",)),
    "--start-delay-s": OptionName("real seconds from writing the clock to the scenario start", ("SECONDS",)),
    "--progress-every": OptionName("real seconds between progress lines", ("SECONDS",)),
    "--lockstep": OptionName("run on the lockstep clock over MQTT (simulate conducts it)"),
    "--lockstep-participants": OptionName("who the lockstep clock waits for at each instant", ("NAMES",)),
    "--lockstep-wait-s": OptionName("real seconds a lockstep participant may stay silent before it is named",
                                    ("SECONDS",)),
    "--hrxl-lines-per-s": OptionName("line rate of simulated serial level sensors", ("RATE",)),
    "--fleet": OptionName("simulate N sites' gateways at the MQTT level", ("N",)),
    "--start": OptionName("the simulated start (UTC)", ("TIME",)),
    "--duration-h": OptionName("simulated hours to run", ("HOURS",)),
    "--seed": OptionName("the seed of a simulation's random choices (the same seed, the same run)", ("N",)),
    "--batch": OptionName("one message per gateway and poll cycle (all its readings)"),
    "--single": OptionName("one message per reading"),
    "--publish-log": OptionName("a CSV of when each poll cycle was published", ("FILE",)),
    "--start-wall": OptionName("the real time (POSIX seconds) of the simulated start", ("POSIX_S",)),
    # rules
    "--dry-gap-hours": OptionName("the storm rule's dry gap in hours", ("HOURS",)),
    "--option": OptionName("a choice among a rule pack's site options", ("NAME=CHOICE",)),
    "--silence": OptionName("what a stretch without rows means: dry or gap", ("dry|gap",)),
    "--day-ends": OptionName("a daily station record's observation time, which ends its day", ("HH:MM",)),
    "--time-marks": OptionName("whether a row's time ends or starts the interval of its value", ("end|start",)),
    "--all-events": OptionName("print every event, not only those that require action"),
    "--lateness-s": OptionName("allowed lateness of readings in seconds", ("SECONDS",)),
    "--webhook": OptionName("an http(s) URL that receives every event", ("URL",)),
    # work orders and reports
    "--storm": OptionName("one storm: its inspection's work-order id or a time within it", ("ID",)),
    "--by": OptionName("who does it", ("NAME",)),
    "--point": OptionName("a discharge point's id (or a device's) where a sample was taken", ("POINT",)),
    "--sampled-at": OptionName("when a field sample was taken", ("TIME",)),
    "--transparency-cm": OptionName("a transparency tube's reading, cm", ("CM",)),
    "--turbidity-ntu": OptionName("a grab sample's turbidity, NTU", ("NTU",)),
    "--ph": OptionName("a grab sample's pH", ("PH",)),
    "--correct": OptionName("replace a recorded manual value (the replaced reading is kept as a dead letter)"),
    "--notes": OptionName("a note kept with the change", ("TEXT",)),
    "--status": OptionName("a work-order status: open, acknowledged or completed", ("STATUS",)),
    "--overdue": OptionName("only what is past its due time and not completed"),
    "--no-work-orders": OptionName("a report or archive without work-order state (the readings alone)"),
    # enforcement cases
    "--from-order": OptionName("a work order whose event an enforcement case is opened from", ("ORDER_ID",)),
    "--found-on": OptionName("the day a violation was found", ("DATE",)),
    "--on": OptionName("the day something happened (site-local, YYYY-MM-DD)", ("DATE",)),
    "--party": OptionName("the person responsible for a violation", ("TEXT",)),
    "--address": OptionName("the address of the person responsible", ("TEXT",)),
    "--location": OptionName("the address or description of the land of a violation", ("TEXT",)),
    "--nature": OptionName("the statement of a violation", ("TEXT",)),
    "--violated": OptionName("the sections a violation violates", ("TEXT",)),
    "--remedy": OptionName("the remedial measures a notice requires", ("TEXT",)),
    "--correct-by": OptionName("the day to complete the remedial measures", ("DATE",)),
    "--method": OptionName("how a notice or order was served", ("METHOD",)),
    "--certified": OptionName("a certified-mail number", ("NUMBER",)),
    "--outcome": OptionName("the outcome of a decision on an appeal", ("OUTCOME",)),
    "--appellant": OptionName("who filed an appeal", ("NAME",)),
    "--referred-to": OptionName("the agency a case is referred to", ("AGENCY",)),
    "--amount-usd": OptionName("an amount in dollars", ("USD",)),
    "--written-confirmation": OptionName("the written confirmation that lifts a stop-work order", ("REF",)),
    "--kind": OptionName("which letter: nov or stop-work", ("KIND",)),
    "--title": OptionName("a signer's title", ("TEXT",)),
    "--year": OptionName("a calendar year", ("YEAR",)),
    # web and its accounts
    "--web": OptionName("serve the web desk too"),
    "--web-port": OptionName("the port of --web", ("PORT",)),
    "--smtp": OptionName("the mail server that sends notifications", ("URL",)),
    "--mail-from": OptionName("the sender address of notification e-mails", ("ADDRESS",)),
    "--smtp-ca-file": OptionName("a CA bundle for the mail server's TLS", ("FILE",)),
    "--smtp-password-file": OptionName("a file holding the mail server user's password (a Docker secret)", ("FILE",)),
    "--due-soon-hours": OptionName("hours before a deadline that 'due soon' is sent", ("HOURS",)),
    "--base-url": OptionName("the public address of the web desk", ("URL",)),
    "--host": OptionName("the address a server listens on", ("ADDRESS",)),
    "--port": OptionName("a TCP port", ("PORT",)),
    "--max-photo-mb": OptionName("the largest photo upload, MiB", ("MIB",)),
    "--secure-cookies": OptionName("send cookies only over HTTPS"),
    "--metrics": OptionName("serve the desk's Prometheus metrics on /metrics (without a login)"),
    "--no-metrics": OptionName("serve no /metrics (the default)"),
    "--session-minutes": OptionName("minutes without a request before a browser is logged out", ("MINUTES",)),
    "--role": OptionName("a user's role: inspector, smo or contractor", ("ROLE",)),
    "--email": OptionName("an e-mail address", ("ADDRESS",)),
    "--name": OptionName("a person's name as history records it", ("TEXT",)),
    "--password-stdin": OptionName("read the password from standard input"),
    # ingest
    "--share-group": OptionName("an MQTT shared-subscription group", ("GROUP",)),
    "--batch-size": OptionName("messages per store write", ("N",)),
    "--batch-ms": OptionName("longest wait to fill a batch, milliseconds", ("MS",)),
    "--max-inflight": OptionName("messages delivered and not yet acknowledged, at most", ("N",)),
    "--retained-late": OptionName("store retained readings as late"),
    "--no-retained-late": OptionName("do not store retained readings as late"),
    "--max-future-s": OptionName("how far ahead of the clock a reading may be stamped, seconds", ("SECONDS",)),
    "--max-age-s": OptionName("how far behind the clock a reading may be stamped, seconds", ("SECONDS",)),
    "--late-after-s": OptionName("readings older than this on arrival are late, seconds", ("SECONDS",)),
    "--metrics-port": OptionName("the HTTP port of the Prometheus metrics", ("PORT",)),
    "--metrics-addr": OptionName("the address of the Prometheus metrics", ("ADDRESS",)),
    "--stats-interval-s": OptionName("seconds between counter log lines", ("SECONDS",)),
    # gateway and field tools
    "--check": OptionName("validate the input, then exit"),
    "--ports": OptionName("with --check: refuse a site whose serial ports are not there (on the gateway box)"),
    "--clock-floor": OptionName("stamp no reading while the clock reads before this date", ("DATE",)),
    "--no-exec": OptionName("run the gateway in this process (debugging)"),
    "--confirm": OptionName("when a reading leaves the gateway's outbox: stored (ingest confirms it) or broker",
                            ("stored|broker",)),
    "--type": OptionName("a register data type", ("TYPE",)),
    "--order": OptionName("a register word order", ("ORDER",)),
    "--scale": OptionName("engineering = raw × scale + offset: the scale", ("FACTOR",)),
    "--offset": OptionName("engineering = raw × scale + offset: the offset", ("NUMBER",)),
    # output
    "--output": OptionName("where to write the output (a file, or a directory of files)", ("FILE", "DIR")),
    "-o": OptionName("short for --output", ("FILE", "DIR")),
    "--json": OptionName("print JSON instead of text"),
    # every command (added by standardize)
    "--verbose": OptionName("log INFO (-vv: DEBUG) to stderr"),
    "-v": OptionName("short for --verbose"),
    "--log-file": OptionName("write the log to this file", ("FILE",)),
    "--help": OptionName("show the help"),
    "-h": OptionName("short for --help"),
    # the stormwatch command itself
    "--log-level": OptionName("the log level of every command", ("LEVEL",)),
    "--version": OptionName("print the version"),
    "--install-completion": OptionName("install shell completion"),
    "--show-completion": OptionName("show shell completion"),
}

#: Older option names, still accepted (hidden): command path → {old name: current name}.
ALIASES: dict[str, dict[str, str]] = {
    "demo": {"--rain-tip-mm": "--tip-mm", "--rain-tip-in": "--tip-in", "--rain-tz": "--tz",
             "--rain-delimiter": "--delimiter", "--rain-time-format": "--time-format", "--rain-from": "--from",
             "--rain-until": "--until", "--workdir": "--state-dir"},
    "simulate": {"--rain-tip-mm": "--tip-mm", "--rain-tip-in": "--tip-in", "--rain-tz": "--tz",
                 "--rain-delimiter": "--delimiter", "--rain-time-format": "--time-format", "--rain-from": "--from",
                 "--rain-until": "--until", "--rain-time-column": "--time-column",
                 "--rain-value-column": "--tips-column"},
    "import": {"--tips": "--tip-mm", "--tips-in": "--tip-in"},
    "replay": {"--tips": "--tip-mm", "--tips-in": "--tip-in"},
    "evaluate": {"--to": "--until"},
    "report": {"--to": "--until"},
    "archive": {"--to": "--until"},
    "dashboards build": {"--out": "--output"},
    "workorders list": {"--site": "--site-id"},
    "workorders ical": {"--site": "--site-id"},
    "users add": {"--site": "--site-id"},
}


def max_future_option() -> Any:
    """``--max-future-s``, the same option in ``ingest`` and ``alerts`` (one bound: :mod:`stormwatch.timebounds`)."""
    return typer.Option(DEFAULT_MAX_FUTURE_S, "--max-future-s", min=0, metavar="SECONDS",
                        help="Refuse readings stamped further than this ahead of the clock (future_time; default "
                             "300). Give ingest and the alert service the same value.")


def max_age_option() -> Any:
    """``--max-age-s``, the same option in ``ingest`` and ``alerts`` (:mod:`stormwatch.timebounds`)."""
    return typer.Option(DEFAULT_MAX_AGE_S, "--max-age-s", min=0, metavar="SECONDS",
                        help="Refuse readings stamped further than this behind the clock as implausible_time (a "
                             "gateway clock that lies; default 90 days, 3 x the gateway outbox's age limit, so "
                             "outage replays pass). Give ingest and the alert service the same value.")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` on stderr as ONE line (the lines of a message that has several
    joined with ``; ``: one error, one line, for a person and for a script's ``grep``) and end
    the command with exit status ``code`` (2: bad input; 1: a failure while running).

    Raises:
        typer.Exit: always, with ``code``.
    """
    lines = [line.strip() for line in str(message).splitlines()]
    typer.echo(f"error: {'; '.join(line for line in lines if line)}", err=True)
    raise typer.Exit(code)


def check_site_ids(site_ids: Iterable[str | None], known: Iterable[str], source: str) -> None:
    """Refuse every ``--site-id`` that is not one of the ``known`` sites of ``source`` (the place
    the command read them from, as the user named it): a typo never gives an empty answer, exit 0.
    The one check of every command taking ``--site-id`` as a filter.

    Raises:
        InputError: ``--site-id ID: no such site in SOURCE (its sites: A, B)``.
    """
    names = sorted(set(known))
    unknown = [sid for sid in site_ids if sid is not None and sid not in names]
    if unknown:
        its = ", ".join(names) if names else "none recorded yet"
        raise InputError(f"--site-id {', '.join(unknown)}: no such site in {source} (its sites: {its})")


def output_path(path: Path, option: str = "--output", *, directory: bool = False) -> Path:
    """``path``, checked before any work as a place the command may write: its parent directory
    exists (a typo never creates directories, and a long job never ends in "no such directory"),
    and it is not a directory (a file) / not a file (``directory``: the directory itself may be
    created in that parent).

    Raises:
        InputError: ``<option> <path>: directory <parent> does not exist`` (or is a directory / a file).
    """
    if directory:
        if path.exists() and not path.is_dir():
            raise InputError(f"{option} {path}: is a file, not a directory")
        if path.is_dir():
            return path
    elif path.is_dir():
        raise InputError(f"{option} {path}: is a directory, not a file")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise InputError(f"{option} {path}: directory {parent} {what} (create it first)")
    return path


class Report(typing.Protocol):
    """The callback :func:`progress` yields: ``report(fraction)``, or ``report(fraction, text)`` to
    say more than the percentage (``simulated Mon 01 Jun 2026 03:00 EDT ( 12 %): 340 readings made``)."""

    def __call__(self, fraction: float, text: str | None = None) -> None: ...


class _ClearLine(logging.Filter):
    """Clears the progress line on the terminal before a log line is written over it."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__()
        self.state = state

    def filter(self, record: logging.LogRecord) -> bool:
        if self.state["shown"]:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.state["shown"] = False
        return True


@contextlib.contextmanager
def progress(label: str, after_s: float = 1.0, every_s: float = 10.0) -> Iterator[Report]:
    """A progress callback for long work (``report(fraction)``, 0 to 1, or ``report(fraction, text)``),
    quiet for short work: after ``after_s`` of wall time one line on stderr, rewritten in place on a
    terminal (``evaluate: 42 %``, or ``text``), cleared before a log line and at the end; to a file
    or a pipe, an INFO log line every ``every_s`` instead (a log stays readable)."""
    started = time.monotonic()
    tty = sys.stderr.isatty()
    state: dict[str, Any] = {"shown": False, "logged": started}
    clear = _ClearLine(state)
    handlers = list(logging.getLogger().handlers) if tty else []
    for handler in handlers:
        handler.addFilter(clear)

    def report(fraction: float, text: str | None = None) -> None:
        now = time.monotonic()
        if now - started < after_s:
            return
        line = text if text is not None else f"{label}: {fraction * 100:3.0f} %"
        if tty:
            sys.stderr.write(f"\r\033[K{line}")
            sys.stderr.flush()
            state["shown"] = True
        elif now - state["logged"] >= every_s:
            log.info("%s", line)
            state["logged"] = now

    try:
        yield report
    finally:
        for handler in handlers:
            handler.removeFilter(clear)
        if state["shown"]:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def use_state_dir(path: Path, option: str = "--state-dir", *, create: bool, hint: str = "") -> Path:
    """``path`` as a command's state directory, checked before any work (README, "Running the parts
    as services"; one rule for every command):

    * a command that **starts** a state there (``gateway``, ``alerts``, ``demo``,
      ``import-archive``: ``create``) makes the directory when its parent exists, and says so
      on stderr in one line -- it never makes the parents, so a typo in a path
      (``var/alretrs/x``) is refused, and a typo in its last part is visible;
    * a command that **reads** a state another one keeps (``web``, ``users``, ``workorders``,
      ``report``) never creates it: a directory that is not there is refused (``hint``: whose
      directory it should be).

    Raises:
        InputError: ``<option> <path>: ...`` a file, a missing directory (reading), or a missing parent (starting).
    """
    if path.is_dir():
        return path
    if path.exists():
        raise InputError(f"{option} {path}: is a file, not a directory")
    if not create:
        raise InputError(f"{option} {path}: no such directory" + (f" ({hint})" if hint else ""))
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise InputError(f"{option} {path}: directory {parent} {what} (create it first: a typo never creates "
                         "directories)")
    path.mkdir(exist_ok=True)
    typer.echo(f"{option} {path}: created (a new state directory)", err=True)
    return path


def listen_socket(host: str, port: int, host_option: str = "--host", port_option: str = "--port") -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, made before anything is printed or served
    (a server that cannot listen says so in one line, not after its "serving on ..." line and
    uvicorn's ``ERROR:``). ``port`` 0: a free port (``sock.getsockname()`` tells which).

    Raises:
        InputError: ``--host ADDRESS: ...`` for a name or address this machine cannot listen on,
            ``--port PORT: ...`` for a port in use or one that needs privileges.
    """
    import errno

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise InputError(f"{host_option} {host}: not an address or host name to listen on ({why})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart reuses its port
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(f"{port_option} {port}: address already in use on {host} (another server listens "
                             f"there: choose another {port_option}, or 0 for any free port)") from None
        if exc.errno == errno.EACCES:
            raise InputError(f"{port_option} {port}: permission denied (ports below 1024 need privileges)") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise InputError(f"{host_option} {host}: not an address of this machine") from None
        raise InputError(f"{host_option} {host} {port_option} {port}: cannot listen: {exc.strerror or exc}") from None
    return sock


#: A check of a loaded site file beyond the file and its profiles, made by a layer above the services
#: (the rule packs: :func:`stormwatch.alerts.packs.check_site_pack`): ``check(cfg, path)`` raises an
#: :class:`~stormwatch.errors.InputError` naming the site file and key. The service runtime and the
#: services below the alert engine never import those layers: the composition root
#: (:mod:`stormwatch.app.cli`) hands the checks to every command (:func:`provide_site_checks`).
SiteCheck = Callable[["SiteConfig", Path], None]

#: The key of the site checks in the ``stormwatch`` command's context (click's ``meta``, shared by
#: the root and every sub-command's context).
SITE_CHECKS_META = "stormwatch.site_checks"

#: The site checks of the command running in this thread/task, set by the common-options wrapper of
#: every command (:func:`_with_common_options`) from :data:`SITE_CHECKS_META` for the length of the
#: command (typer has no public ``get_current_context``; a context variable, as click's own stack is).
_RUNNING_SITE_CHECKS: contextvars.ContextVar[tuple[SiteCheck, ...]] = contextvars.ContextVar(
    "stormwatch_site_checks", default=())


def provide_site_checks(ctx: typer.Context, *checks: SiteCheck) -> None:
    """Make ``checks`` part of loading a site file in the command ``ctx`` runs (:func:`site_loader`);
    called by the composition root, once per invocation."""
    ctx.meta[SITE_CHECKS_META] = (*ctx.meta.get(SITE_CHECKS_META, ()), *checks)


def site_checks() -> tuple[SiteCheck, ...]:
    """The site checks the composition root gave the running ``stormwatch`` command; none outside one
    (a command function called directly checks only the file and its profiles)."""
    return _RUNNING_SITE_CHECKS.get()


def load_site_file(path: Path, profiles: ProfileLibrary | None = None,
                   checks: Sequence[SiteCheck] = ()) -> SiteConfig:
    """The site file at ``path`` validated: the file, its devices' profiles and roles
    (:func:`stormwatch.config.load_site`), then each of ``checks`` (in order).

    Every command validates a site file the same way: the services below the alert engine (gateway,
    ingest) with :func:`site_loader` (the checks of the composition root), the alert engine and the
    layers above with :func:`stormwatch.alerts.sitefile.load_site_file` (the rule-pack check, named).

    Raises:
        stormwatch.config.ConfigError: an invalid site file.
        stormwatch.errors.InputError: from a check (an unknown rule pack, an override naming an unknown
            rule or parameter: :class:`stormwatch.alerts.packs.PackError`).
    """
    from stormwatch.config import load_site
    from stormwatch.profiles import ProfileLibrary

    cfg = load_site(path, profiles or ProfileLibrary())
    for check in checks:
        check(cfg, path)
    return cfg


def site_loader(profiles: ProfileLibrary | None = None) -> Callable[[Path], SiteConfig]:
    """Load a site file as the running command does (:func:`load_site_file` with :func:`site_checks`).

    The checks are taken now, in the command, so the loader keeps them in another thread (a
    ``--sites`` directory watched, :mod:`stormwatch.runtime.sitedir`).
    """
    checks = site_checks()

    def load(path: Path) -> SiteConfig:
        return load_site_file(path, profiles, checks)

    return load


def rewrite_aliases(command: str, args: list[str]) -> list[str]:
    """``args`` with the older option names of ``command`` (:data:`ALIASES`) replaced by the current ones."""
    table = ALIASES.get(command)
    if not table:
        return args
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, eq, value = arg.partition("=")
        out.append(table[name] + eq + value if name in table else arg)
    return out


def _command_name(ctx: typer.Context) -> str:
    """``workorders list`` for ``stormwatch workorders list`` (the path without the program, however
    it was started: ``stormwatch``, ``python -m stormwatch``)."""
    names: list[str] = []
    at: Any = ctx
    while at.parent is not None:
        names.append(at.info_name or "")
        at = at.parent
    return " ".join(reversed(names))


class _Option(TyperOption):
    """An option whose help shows its metavar (a word) or, for a flag, nothing -- never typer's
    type labels (``<bool>``, ``<int>``, ``<list[Path]>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return self.metavar

    def process_value(self, ctx: Any, value: Any) -> Any:
        strict_numbers(self, value, ctx)
        return super().process_value(ctx, value)


class _Argument(TyperArgument):
    """An argument shown by its metavar: ``FILE`` (required), ``[FILE]`` (optional), ``WORD...``
    (several) -- not typer's ``{FILE}`` and ``<list[str]>``."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def process_value(self, ctx: Any, value: Any) -> Any:
        strict_numbers(self, value, ctx)
        return super().process_value(ctx, value)

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return f"{name}..." if self.nargs != 1 else name


def _number_parser(annotation: Any) -> Callable[[str], object] | None:
    """The strict parser of a parameter annotated ``float``/``int`` (or a list or optional of one), else ``None``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (list, tuple) or len(args) == 1:
        if len(args) != 1:
            return None
        annotation = args[0]
    if annotation is float:
        return parse_float
    if annotation is int:
        return parse_int
    return None


def strict_numbers(param: Any, value: Any, ctx: Any) -> None:
    """Hold the text given to a numeric parameter to the grammar of :mod:`stormwatch.numbers`.

    Raises:
        typer.BadParameter: naming the parameter and quoting the text.
    """
    descriptor = getattr(param, "type_descriptor", None)
    parser = _number_parser(getattr(descriptor, "annotation", None))
    if parser is None:
        return
    for text in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(text, str):
            try:
                parser(text.strip())
            except NumberError as exc:
                raise typer.BadParameter(str(exc), ctx=ctx, param=param) from None


def _by_metavar(params: list[Any]) -> None:
    """Show ``params`` by their metavars (:class:`_Option`, :class:`_Argument`), which also hold
    numbers to the one grammar (:func:`strict_numbers`)."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _Option
        elif type(param) is TyperArgument:
            param.__class__ = _Argument


def flowed(text: str | None) -> str | None:
    """A docstring as help that fills the terminal's width (``COLUMNS``): the lines of a paragraph
    joined (the help renderer keeps a docstring's line breaks, which wrap raggedly on a narrower
    terminal), paragraphs kept; a list item (``* ``, ``- ``) and an indented line start a line."""
    if text is None:
        return None
    out = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            out.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not line.startswith(("* ", "- ", "  ")):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.rstrip())
        out.append("\n".join(lines))
    return "\n\n".join(out)


#: What every ``--store`` option's help ends with: where an SQLite URL's file is (the rule of
#: :func:`stormwatch.stores.urls.sqlite_path`), which a reader of ``sqlite:///var/x.db`` may take for /var.
SQLITE_PATHS = ("SQLite: sqlite:///var/x.db is var/x.db under the current directory, sqlite:////var/x.db "
                "(four slashes) is /var/x.db, and a bare path is a path.")


def _store_help(params: list[Any]) -> None:
    """End the help of a ``--store`` option with :data:`SQLITE_PATHS` (one sentence, every command)."""
    for param in params:
        if "--store" in getattr(param, "opts", ()) and param.help and SQLITE_PATHS not in param.help:
            param.help = f"{param.help} {SQLITE_PATHS}"


class Command(TyperCommand):
    """A command that accepts its older option names (:data:`ALIASES`) and shows its parameters by
    their metavars; its help flows to the terminal's width (:func:`flowed`), and a ``--store``
    option's says where an SQLite URL's file is (:data:`SQLITE_PATHS`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = flowed(self.help)
        _store_help(self.params)

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        _by_metavar(params)
        return params

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, rewrite_aliases(_command_name(ctx), args))


class Group(TyperGroup):
    """The ``stormwatch`` command and its groups: every error that reaches them becomes one line
    (module docstring); parameters are shown by their metavars; help flows (:func:`flowed`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = flowed(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        _by_metavar(params)
        return params

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except Exception as exc:
            _one_line(exc, None)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # Ctrl-C: said at any log level, so a run cut short is not taken for done
            sys.stderr.write("interrupted\n")
            raise typer.Exit(130) from None
        except Exception as exc:
            _one_line(exc, ctx)


#: Exit status of a command whose standard output was closed by its reader (``| head``), as
#: click gives it when the pipe breaks outside a command.
EXIT_BROKEN_PIPE = 1


def closed_stdout() -> NoReturn:
    """End quietly because the reader of standard output went away (``stormwatch --help | head``):
    no error line, no traceback; what is still buffered goes nowhere (stdout is pointed at the
    null device, so the interpreter's last flush does not fail again).

    Raises:
        typer.Exit: always, with :data:`EXIT_BROKEN_PIPE`.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test runner's capture): nothing to redirect
        pass
    raise typer.Exit(EXIT_BROKEN_PIPE)


def _one_line(exc: Exception, ctx: typer.Context | None) -> NoReturn:
    """Turn ``exc`` into one ``error:`` line and an exit status (module docstring); re-raise exits."""
    if isinstance(exc, (typer.Exit, typer.Abort)) or type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    if isinstance(exc, BrokenPipeError):
        closed_stdout()
    usage = _usage_error(exc)
    if usage is not None:
        sub = getattr(exc, "ctx", None)
        where = f" (see: {sub.command_path} --help)" if sub is not None else ""
        fail(f"{usage}{where}", int(getattr(exc, "exit_code", 2)))
    if isinstance(exc, InputError):
        fail(str(exc), 2)
    if isinstance(exc, OSError) and exc.filename is not None:
        fail(f"{exc.filename}: {exc.strerror or exc}", 2)
    command = ctx.invoked_subcommand if ctx is not None else None
    if command in SERVICES:
        log.critical("%s stopped by an unexpected error", command, exc_info=exc)
    else:
        log.debug("unexpected error", exc_info=exc)
    fail(f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())} (a bug in stormwatch; -vv shows where)", 1)


def _usage_error(exc: Exception) -> str | None:
    """The message of a click usage error (bad or missing option, unknown command), else ``None``."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "ClickException" and cls.__module__.endswith("exceptions"):
            message: str = exc.format_message()  # type: ignore[attr-defined]
            return " ".join(message.split())
    return None


def child_log_env() -> dict[str, str]:
    """The environment that gives a child process (the lean gateway) this process's log set-up."""
    root = logging.getLogger()
    env = {"STORMWATCH_LOG_LEVEL": logging.getLevelName(root.getEffectiveLevel())}
    for h in root.handlers:
        if isinstance(h, logging.FileHandler):
            env["STORMWATCH_LOG_FILE"] = h.baseFilename
    return env


def _logging_for(command: str, verbose: int, log_file: Path | None, explicit: str | None) -> None:
    """Configure logging for ``command`` (module docstring)."""
    if explicit:
        level = explicit.upper()
    elif verbose:
        level = "DEBUG" if verbose > 1 else "INFO"
    elif log_file is not None or command.split(" ")[0] in SERVICES:
        level = "INFO"
    else:
        level = "WARNING"
    setup_logging(level, log_file=log_file, stderr_level=None if (explicit or verbose or log_file is None)
                  else "WARNING")


def _directory_options(params: list[inspect.Parameter]) -> dict[str, str]:
    """Parameter name → option name of every option shown as ``DIR`` (:func:`_no_file` checks them)."""
    out: dict[str, str] = {}
    for p in params:
        info = p.default
        if getattr(info, "metavar", None) == "DIR" and getattr(info, "param_decls", None):
            out[p.name] = next((d for d in info.param_decls if d.startswith("--")), info.param_decls[0])
    return out


def _no_file(option: str, value: Any) -> None:
    """A directory option (``--state-dir DIR``) that names an existing file: one line naming the
    option, exit 2 (not ``[Errno 17] File exists`` from a ``mkdir`` deep inside the command)."""
    for path in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(path, Path) and path.exists() and not path.is_dir():
            fail(f"{option} {path}: is a file, not a directory")


def _with_common_options(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` with ``-v/--verbose`` and ``--log-file`` added, logging set up before it runs."""
    signature = inspect.signature(callback)
    extra = [
        inspect.Parameter("sw_verbose", inspect.Parameter.KEYWORD_ONLY, annotation=int, default=typer.Option(
            0, "-v", "--verbose", count=True, show_default=False,
            help="Log INFO to stderr (-vv: DEBUG, with tracebacks).")),
        inspect.Parameter("sw_log_file", inspect.Parameter.KEYWORD_ONLY, annotation=Path | None,
                          default=typer.Option(None, "--log-file", metavar="FILE", dir_okay=False,
                                               help="Also write the log (INFO and up) to this file.")),
        inspect.Parameter("sw_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
    ]
    params = list(signature.parameters.values())
    if any(p.name.startswith("sw_") for p in params):
        return callback  # already standardized
    directories = _directory_options(params)

    @functools.wraps(callback)
    def wrapper(*args: Any, sw_verbose: int = 0, sw_log_file: Path | None = None, sw_ctx: typer.Context,
                **kwargs: Any) -> Any:
        if sw_log_file is not None:
            try:
                output_path(sw_log_file, "--log-file")
            except InputError as exc:
                fail(str(exc))
        for name, option in directories.items():
            _no_file(option, kwargs.get(name))
        root = sw_ctx.find_root()
        _logging_for(_command_name(sw_ctx), sw_verbose, sw_log_file, root.meta.get("stormwatch.log_level"))
        running = _RUNNING_SITE_CHECKS.set(tuple(root.meta.get(SITE_CHECKS_META, ())))
        try:
            return callback(*args, **kwargs)
        except InputError as exc:
            fail(str(exc), 2)
        finally:
            _RUNNING_SITE_CHECKS.reset(running)

    wrapper.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**callback.__annotations__, "sw_verbose": int, "sw_log_file": Path | None,
                               "sw_ctx": typer.Context}
    return wrapper


class _LazyCommands(MutableMapping[str, Any]):
    """The commands of a :class:`LazyGroup`: every name is known from the start (help order), a
    command's module is imported, and its ``register(app)`` run, when one of its commands is first
    looked up (``stormwatch report`` imports the report's module, not the gateway's or the web desk's).

    ``name in commands``, ``len`` and iteration never import; ``commands[name]`` and ``.get`` import
    that name's module; ``.items()``/``.values()`` import them all (the full help, the vocabulary test).
    A module that is not installed is no command (``KeyError``), as before registration was lazy.
    """

    def __init__(self, loaded: Mapping[str, Any], modules: Mapping[str, str], group: TyperGroup) -> None:
        self._loaded: dict[str, Any] = dict(loaded)
        self._modules = dict(modules)
        self._group = group

    def _load(self, module_name: str) -> None:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            for name in [n for n, m in self._modules.items() if m == module_name]:
                del self._modules[name]
            return
        sub = typer.Typer(rich_markup_mode=self._group.rich_markup_mode,
                          suggest_commands=self._group.suggest_commands)
        module.register(sub)
        _standardize_commands(sub)
        registered = typer.main.get_group(sub).commands
        declared = {n for n, m in self._modules.items() if m == module_name}
        if set(registered) != declared:
            raise RuntimeError(f"{module_name} registers {sorted(registered)}, declared as {sorted(declared)}")
        for name in declared:
            del self._modules[name]
        for name, command in registered.items():
            self._loaded.setdefault(name, command)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded and name in self._modules:
            self._load(self._modules[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._modules.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if self._modules.pop(name, None) is None:
            del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter([*self._loaded, *(n for n in self._modules if n not in self._loaded)])

    def __len__(self) -> int:
        return len(self._loaded) + sum(1 for n in self._modules if n not in self._loaded)


class LazyGroup(Group):
    """A :class:`Group` with commands registered on first use (:class:`_LazyCommands`) from
    :attr:`modules`, command name → the module whose ``register(app: typer.Typer) -> None`` adds it
    (every name the module adds, in the order help lists them). Subclassed by :func:`standardize`."""

    modules: ClassVar[Mapping[str, str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(self.commands, self.modules, self)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names, without importing (typer's own lists .items())


def standardize(app: typer.Typer, lazy: Mapping[str, str] | None = None) -> None:
    """Apply the module's mechanisms to every command of ``app`` and its sub-commands (once, after
    registration): the one-line error handling of :class:`Group` on ``app``, the aliases of
    :class:`Command` and the common options on every command.

    ``lazy`` (command name → module, in help order) adds the commands that a module's
    ``register(app)`` adds when one of them is first looked up (:class:`LazyGroup`), standardized
    the same way: running one command imports its module only.
    """
    app.info.cls = type("StormwatchGroup", (LazyGroup,), {"modules": dict(lazy)}) if lazy else Group
    _standardize_commands(app)


def _plain(cls: Any, default: type) -> bool:
    """``cls`` is typer's own choice (unset, a default placeholder, or ``default`` itself)."""
    return cls is None or isinstance(cls, DefaultPlaceholder) or cls is default


def _standardize_commands(app: typer.Typer) -> None:
    if _plain(app.info.cls, TyperGroup):
        app.info.cls = Group
    for info in app.registered_commands:
        if _plain(info.cls, TyperCommand):
            info.cls = Command
        if info.callback is not None:
            info.callback = _with_common_options(info.callback)
    for group in app.registered_groups:
        if _plain(group.cls, TyperGroup):  # what add_typer() sets wins over the sub-app's own class
            group.cls = Group
        if group.typer_instance is not None:
            _standardize_commands(group.typer_instance)
