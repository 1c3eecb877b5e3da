"""``stormwatch web`` (the inspector's desk) and ``stormwatch users`` (its accounts)."""

from __future__ import annotations

import logging
import signal
import sys
import urllib.parse
from pathlib import Path

import typer

from stormwatch import resources
from stormwatch.display import plural
from stormwatch.runtime.cliutil import check_site_ids, fail, listen_socket, use_state_dir

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = "./var/alerts"

_STATE_DIR_OPT = typer.Option(Path(DEFAULT_STATE_DIR), "--state-dir", metavar="DIR",
                              help="The alert service's state directory (it must exist; never created here): "
                                   "alerts.db (work orders) is read there, web.db (accounts, sessions, sent "
                                   "notifications) and enforcement.db (the SMO's enforcement cases) are kept "
                                   "beside it.")

#: Whose directory ``--state-dir`` is, for the line that refuses a missing one (never created here).
_STATE_HINT = ("the alert service's state directory, made by `stormwatch alerts --state-dir DIR` or "
               "`stormwatch demo --state-dir DIR`; check the path, or create it first")

users_app = typer.Typer(
    help="Accounts of the web desk: inspectors (act on their sites), the SMO (reads every site, verifies "
         "inspections) and contractors (read their own sites).",
    no_args_is_help=True,
)


def web_cmd(
    site: list[Path] = typer.Option([], "--site", metavar="FILE|DIR",
                                    help="A site file, or a directory of site files (repeatable); default (without "
                                         "--sites): the example site."),
    sites_dir: Path | None = typer.Option(None, "--sites", metavar="DIR", file_okay=False,
                                          help="A directory of site files, watched: a site file added, changed or "
                                               "removed shows within seconds; a broken one is refused with its error."),
    store: str = typer.Option(..., "--store", envvar="STORMWATCH_STORE", metavar="URL",
                              help="The readings store the services write: sqlite:///path/to/stormwatch.db, "
                                   "influx1://[user:password@]host:8086/DATABASE or "
                                   "influx2://host:8086?org=&bucket=&token= (the database must exist)."),
    state_dir: Path = _STATE_DIR_OPT,
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDRESS",
                             help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8080, "--port", min=0, max=65535, metavar="PORT", help="TCP port (0: any free port)."),
    wall_time: bool = typer.Option(False, "--wall-time",
                                   help="Judge due dates against today's wall-clock time instead of the clock of "
                                        "the alert engine that wrote the state (simulated time after a demo)."),
    max_photo_mb: float = typer.Option(10.0, "--max-photo-mb", min=0.1, max=100.0, metavar="MIB",
                                       help="Largest photo an inspector may upload (MiB)."),
    secure_cookies: bool = typer.Option(False, "--secure-cookies",
                                        help="Send cookies only over HTTPS (set this behind a TLS proxy)."),
    metrics: bool = typer.Option(False, "--metrics/--no-metrics",
                                 help="Serve Prometheus metrics (page renders, refusals, notifications) on "
                                      "/metrics, WITHOUT a login (a scraper has no session): turn on only where the "
                                      "port is reachable by your monitoring alone (default: off, /metrics is 404)."),
    session_minutes: float = typer.Option(480.0, "--session-minutes", min=1.0, metavar="MINUTES",
                                          help="Log a browser out after this long without a request."),
    smtp: str | None = typer.Option(None, "--smtp", envvar="STORMWATCH_SMTP", metavar="URL",
                                    help="E-mail the sites' notify.email recipients when an order opens, is due soon "
                                         "and goes overdue: smtp://host[:25], smtp+starttls://[user@]host[:587] or "
                                         "smtps://[user@]host[:465]; the user's password from --smtp-password-file or "
                                         "STORMWATCH_SMTP_PASSWORD, never in the URL."),
    smtp_password_file: Path | None = typer.Option(None, "--smtp-password-file", metavar="FILE",
                                                   envvar="STORMWATCH_SMTP_PASSWORD_FILE", dir_okay=False,
                                                   help="A file holding the SMTP user's password (one line; e.g. a "
                                                        "Docker secret, /run/secrets/smtp_password)."),
    mail_from: str = typer.Option("stormwatch@localhost", "--mail-from", metavar="ADDRESS",
                                  envvar="STORMWATCH_MAIL_FROM",
                                  help="The sender address of the e-mails."),
    smtp_ca_file: Path | None = typer.Option(None, "--smtp-ca-file", metavar="FILE",
                                             help="CA bundle for the mail server's TLS."),
    due_soon_hours: float = typer.Option(6.0, "--due-soon-hours", min=0.0, metavar="HOURS",
                                         help="Send the 'due soon' e-mail this many hours before the deadline."),
    broker: str | None = typer.Option(None, "--broker", envvar="STORMWATCH_BROKER", metavar="URL",
                                      help="Show each gateway's last status (online/offline, outbox depth) from this "
                                           "MQTT broker (mqtt://host:1883); without it the status is unknown. Manual "
                                           "field readings entered on a site page are published there (else stored)."),
    base_url: str = typer.Option("", "--base-url", metavar="URL",
                                 help="The desk's public address, for links in e-mails (e.g. https://desk.example)."),
) -> None:
    """Serve the inspector's desk: portfolio, site pages with charts, work orders (acknowledge, complete
    with photos, verify), over the same store and work-order state as the services.

    Create accounts first with `stormwatch users add`. Example, after `stormwatch demo --state-dir var/demo`:

        stormwatch users add jane --role inspector --site-id riverside-commons --state-dir var/demo
        stormwatch web --store sqlite:///var/demo/stormwatch.db --state-dir var/demo
    """
    from stormwatch.web.server import DeskSettings, DeskSetupError, WebServer, open_desk

    use_state_dir(state_dir, create=False, hint=_STATE_HINT)
    if base_url:
        check_base_url(base_url)
    sock = listen_socket(host, port)  # before anything is printed: a port in use is one line
    broker_settings = None
    if broker:
        from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url

        try:
            broker_settings = parse_broker_url(broker)
        except BrokerUrlError as exc:
            fail(f"--broker: {exc}", 2)
    try:
        if not site and sites_dir is None:
            site = [resources.example_site()]
        desk = open_desk(DeskSettings(sites=site, sites_dir=sites_dir, store_url=store, state_dir=state_dir,
                                      wall_time=wall_time,
                                      max_photo_bytes=int(max_photo_mb * 1048576), secure_cookies=secure_cookies,
                                      idle_minutes=session_minutes, manual_broker=broker_settings,
                                      metrics=metrics))
    except DeskSetupError as exc:
        fail(str(exc), 2)
    notifier = None
    if smtp:
        from stormwatch.web.notify import SmtpUrlError
        from stormwatch.web.server import start_notifier

        try:
            notifier = start_notifier(desk, state_dir, smtp, mail_from, ca_file=smtp_ca_file,
                                      password_file=smtp_password_file,
                                      due_soon_hours=due_soon_hours, base_url=base_url)
        except SmtpUrlError as exc:
            fail(str(exc), 2)
    watch = None
    if broker_settings is not None:
        from stormwatch.web.gateways import GatewayWatch

        try:
            watch = GatewayWatch(broker_settings)
        except OSError as exc:
            fail(f"--broker: {exc}", 2)
        watch.start()
        desk.gateways = watch.statuses
    server = WebServer(desk, host, port, sock)
    if not desk.accounts.list():
        typer.echo(f"no accounts yet: add one with `stormwatch users add NAME --role inspector --site-id SITE_ID "
                   f"--state-dir {state_dir}`", err=True)
    typer.echo(f"stormwatch web: {plural(len(desk.sites), 'site')} on {server.url} (Ctrl-C to stop)", err=True)
    signal.signal(signal.SIGTERM, lambda *_: setattr(server.server, "should_exit", True))
    try:
        server.serve()
    finally:
        if notifier is not None:
            notifier.stop()
        if watch is not None:
            watch.stop()
        desk.store.close()
        desk.book.close()
        desk.accounts.close()


def _password(password_stdin: bool) -> str:
    """The password: one line of standard input (``--password-stdin``), else asked twice, hidden,
    on the terminal -- never asked where there is no terminal to hide it on (a script, a pipe, a
    container without ``-t``): that is one line saying to use ``--password-stdin``."""
    import getpass
    import warnings

    if password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    no_terminal = ("no terminal to ask the password on: give it on standard input with --password-stdin, e.g. "
                   "`printf '%s\\n' \"$PASSWORD\" | stormwatch users ... --password-stdin`")
    if not _terminal():
        fail(no_terminal)
    with warnings.catch_warnings():
        warnings.simplefilter("error", getpass.GetPassWarning)  # getpass found no terminal: it would echo
        try:
            return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))
        except getpass.GetPassWarning:
            fail(no_terminal)
        except typer.Abort:
            fail("no password given (the prompt was closed): give it on standard input with --password-stdin")


def _terminal() -> bool:
    """Whether a hidden prompt has a terminal: standard input is one, or the process has one
    (``/dev/tty``, where getpass asks). Standard input without a file descriptor (a test
    harness's) is left to the prompt itself."""
    import os

    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):
        return True
    if os.isatty(fd):
        return True
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


def _accounts(state_dir: Path):  # type: ignore[no-untyped-def]
    from stormwatch.web.accounts import AccountError, Accounts
    from stormwatch.web.server import WEB_FILE

    use_state_dir(state_dir, create=False, hint=_STATE_HINT)
    try:
        return Accounts(state_dir / WEB_FILE)
    except (AccountError, OSError) as exc:
        fail(str(exc), 2)


def _known_sites(sites_dir: Path | None, state_dir: Path) -> tuple[list[str], str]:
    """The site ids the desk knows, and where they come from (for the refusal line): the site files
    of ``--sites DIR`` when given, else the sites recorded in ``--state-dir``
    (:func:`stormwatch.alerts.workorders.state_dir_sites`). ``([], ...)`` when no source names a site."""
    import sqlite3

    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.alerts.workorders import state_dir_sites
    from stormwatch.runtime.sitedir import ServiceSites

    if sites_dir is not None:
        return list(ServiceSites([], sites_dir, load_site_file).load()), f"--sites {sites_dir}"
    use_state_dir(state_dir, create=False, hint=_STATE_HINT)
    try:
        return state_dir_sites(state_dir), f"--state-dir {state_dir}"
    except sqlite3.Error as exc:
        fail(f"--state-dir {state_dir}: not readable ({exc})")


def _check_site_ids(site_ids: list[str], sites_dir: Path | None, state_dir: Path) -> None:
    """Refuse a ``--site-id`` that is not a site id, or not a site the desk knows
    (:func:`_known_sites`); with no source of sites at all, refuse and ask for ``--sites`` (a
    site id is never taken on trust). Exit 2 with one line naming the option."""
    from stormwatch.contract import check_identifier

    for sid in site_ids:
        try:
            check_identifier(sid)
        except ValueError as exc:
            fail(f"--site-id {exc}")
    if not site_ids:
        return
    known, source = _known_sites(sites_dir, state_dir)
    if not known:
        if sites_dir is not None:
            fail(f"--sites {sites_dir}: no site file there (*.yaml)")
        fail(f"--site-id: no sites recorded in --state-dir {state_dir} to check {', '.join(site_ids)} against "
             f"(no work orders or store yet): pass --sites DIR, the site files the desk serves")
    check_site_ids(site_ids, known, source)


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., metavar="NAME", help="Login name (ASCII letters and digits, . _ @ -)."),
    role: str = typer.Option(..., "--role", metavar="ROLE", help="inspector, smo or contractor."),
    site: list[str] = typer.Option([], "--site-id", metavar="SITE_ID",
                                   help="A site the user works on (repeatable; needed for inspector, contractor)."),
    email: str = typer.Option("", "--email", metavar="ADDRESS", help="Where notifications about their sites may go."),
    full_name: str = typer.Option("", "--name", metavar="TEXT",
                                  help="The name recorded in work-order history (default: NAME)."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    sites_dir: Path | None = typer.Option(None, "--sites", metavar="DIR", file_okay=False,
                                          help="The directory of site files the desk serves (`stormwatch web --sites "
                                               "DIR`): every --site-id must be a site of it (default: the "
                                               "sites recorded in --state-dir)."),
    state_dir: Path = _STATE_DIR_OPT,
) -> None:
    """Add a user (the password is asked twice, hidden).

    Each --site-id must be a site the desk knows: with --sites DIR, one of the site files there;
    without, one of the sites recorded in --state-dir (its work orders and the engine's progress in
    alerts.db, the configured sites of a stormwatch.db store kept there). With neither, the command
    refuses and asks for --sites -- a typo never gives an inspector a site that does not exist.
    """
    from stormwatch.web.accounts import AccountError, check_account

    try:
        check_account(name, role, site, email=email, display_name=full_name)
    except AccountError as exc:
        fail(str(exc), 2)
    _check_site_ids(site, sites_dir, state_dir)
    accounts = _accounts(state_dir)
    try:
        user = accounts.add(name, role, _password(password_stdin), sites=site, email=email, display_name=full_name)
    except AccountError as exc:
        fail(str(exc), 2)
    finally:
        accounts.close()
    typer.echo(f"added {user.name} ({user.role}{': ' + ', '.join(user.sites) if user.sites else ', every site'})")


@users_app.command("list")
def users_list(state_dir: Path = _STATE_DIR_OPT) -> None:
    """List the users: name, role, sites, e-mail; then the login lockouts in force."""
    accounts = _accounts(state_dir)
    try:
        users, locks = accounts.list(), accounts.throttle.locks()
    finally:
        accounts.close()
    if not users:
        typer.echo("no users")
    for u in users:
        sites = "every site" if u.role == "smo" else ", ".join(u.sites)
        typer.echo(f"{u.name:<20} {u.role:<11} {sites:<40} {u.email}")
    for lock in locks:
        typer.echo(f"login refused until {_utc(lock.until)} for {lock.kind} {lock.name} ({lock.failures} failed "
                   f"logins): `stormwatch users unlock {'--ip ' if lock.kind == 'address' else ''}{lock.name}`")


def _utc(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@users_app.command("unlock")
def users_unlock(
    name: str | None = typer.Argument(None, metavar="NAME", help="The account whose logins are refused."),
    address: str | None = typer.Option(None, "--ip", metavar="IP",
                                       help="Unlock this client address instead (as `users list` shows it)."),
    state_dir: Path = _STATE_DIR_OPT,
) -> None:
    """Lift a login lockout: after repeated failed logins an account (or a client address) is refused
    for a while (1 minute, doubling to 15); `users list` shows the lockouts in force."""
    if (name is None) == (address is None):
        fail("give the account NAME or --ip IP (one of them)")
    kind, what = ("address", address) if address is not None else ("account", name)
    assert what is not None
    accounts = _accounts(state_dir)
    try:
        was = accounts.throttle.unlock(kind, what, by="stormwatch users unlock")
    finally:
        accounts.close()
    typer.echo(f"{kind} {what}: " + ("unlocked" if was else "was not locked out (its failed logins are forgotten)"))


@users_app.command("passwd")
def users_passwd(
    name: str = typer.Argument(..., metavar="NAME", help="The user whose password changes."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    state_dir: Path = _STATE_DIR_OPT,
) -> None:
    """Change a user's password (their open sessions end)."""
    from stormwatch.web.accounts import AccountError

    accounts = _accounts(state_dir)
    try:
        accounts.get(name)
        accounts.set_password(name, _password(password_stdin))
    except AccountError as exc:
        fail(str(exc), 2)
    finally:
        accounts.close()
    typer.echo(f"password of {name} changed; their sessions have ended")


def register(app: typer.Typer) -> None:
    """Add ``stormwatch web`` and ``stormwatch users``."""
    app.command("web")(web_cmd)
    app.add_typer(users_app, name="users")


def check_base_url(url: str) -> str:
    """``url`` as the desk's public address for links in mails: ``http(s)://host[:port][/path]``, else
    the command ends with one line (exit 2), as a bad --smtp or --broker does."""
    parts = urllib.parse.urlsplit(url)
    why = ""
    if url != url.strip() or any(c.isspace() for c in url):
        why = "has spaces in it"
    elif parts.scheme not in ("http", "https"):
        why = "is not an http:// or https:// address"
    elif not parts.hostname:
        why = "names no host"
    elif parts.query or parts.fragment:
        why = "has a query or fragment (give the desk's address alone)"
    else:
        try:
            _ = parts.port
        except ValueError:
            why = "has a port that is not a number 0-65535"
    if why:
        fail(f"--base-url {url!r}: {why} (e.g. https://desk.example)", 2)
    return url
