"""The ``stormwatch`` command line (typer).

Each part registers its own commands from its package's ``cli`` module (``register(app)``); a new
command is one line of :data:`COMMANDS`, which names its module. A module is imported only when one
of its commands runs, so a command starts without importing the others' libraries.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from stormwatch import __version__, resources
from stormwatch.config import SiteConfig
from stormwatch.runtime.cliutil import closed_stdout, fail, provide_site_checks, standardize

app = typer.Typer(
    name="stormwatch",
    help=(
        "Stormwater compliance monitoring for construction sites.\n\n"
        "Sensors -> gateway -> MQTT -> ingest -> store -> ordinance events and work orders.\n"
        "Start with `stormwatch demo` to watch a simulated site live through a storm."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: Every command (in the order ``stormwatch --help`` lists them) and the module whose
#: ``register(app: typer.Typer) -> None`` adds it. A module is imported when one of its commands runs
#: (or the full help is shown), never for another command: ``stormwatch report`` does not import the
#: gateway, the simulators or the web desk (about a second of CPU at every start).
COMMANDS: dict[str, str] = {
    "gateway": "stormwatch.gateway.cli",
    "decode": "stormwatch.gateway.cli",
    "ingest": "stormwatch.ingest.cli",
    "alerts": "stormwatch.alerts.cli",
    "evaluate": "stormwatch.alerts.cli",
    "simulate": "stormwatch.simulators.cli",
    "import": "stormwatch.importers.cli",
    "replay": "stormwatch.importers.cli",
    "demo": "stormwatch.app.demo",
    "example-site": "stormwatch.app.catalog",
    "web": "stormwatch.web.cli",
    "report": "stormwatch.report.cli",
    "archive": "stormwatch.report.cli",
    "import-archive": "stormwatch.report.cli",
    "workorders": "stormwatch.alerts.cli",
    "enforce": "stormwatch.enforcement.cli",
    "dashboards": "stormwatch.dashboards.cli",
    "station": "stormwatch.importers.cli",
    "readings": "stormwatch.importers.cli",
    "profiles": "stormwatch.app.catalog",
    "packs": "stormwatch.app.catalog",
    "users": "stormwatch.web.cli",
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"stormwatch {__version__}")
        raise typer.Exit()


def _check_dirs(where: str, directories: list[Path]) -> None:
    """Every user directory named must be one: a typo is one line naming the option (or the
    environment variable), never a directory silently skipped while the built-ins are used."""
    for d in directories:
        if not d.is_dir():
            fail(f"{where} {d}: {'is not a directory' if d.exists() else 'no such directory'}")


def _prepend_env(option: str, variable: str, directories: list[Path]) -> None:
    """Put ``directories`` first on the search path in ``variable`` (inherited by child processes),
    after checking them and the directories ``variable`` already names."""
    _check_dirs(option, directories)
    _check_dirs(f"{variable} directory", resources.env_dirs(variable))
    rest = os.environ.get(variable)
    if directories:
        os.environ[variable] = os.pathsep.join([*(str(d) for d in directories), *([rest] if rest else [])])


def _check_site_pack(cfg: SiteConfig, path: Path) -> None:
    """Every command checks a site file against its jurisdiction's rule pack, the services below the
    alert engine (gateway, ingest) included: they never import the packs, the composition hands them
    this check (:func:`stormwatch.runtime.cliutil.provide_site_checks`). Imported when a site file is
    loaded, not for ``--help``."""
    from stormwatch.alerts.packs import check_site_pack

    check_site_pack(cfg, path)


@app.callback()
def _root(
    ctx: typer.Context,
    log_level: str | None = typer.Option(
        None, "--log-level", envvar="STORMWATCH_LOG_LEVEL", metavar="LEVEL",
        help="DEBUG, INFO, WARNING or ERROR for every command (default: INFO for the services gateway, ingest, "
             "alerts and simulate; WARNING for the others unless -v).",
    ),
    profiles: list[Path] = typer.Option(
        [], "--profiles", metavar="DIR",
        help="A directory of your own device profiles, searched before the built-ins (repeatable; "
        "also STORMWATCH_PROFILES). `stormwatch profiles list` shows what is found.",
    ),
    packs: list[Path] = typer.Option(
        [], "--packs", metavar="DIR",
        help="A directory of your own rule packs, searched before the built-ins (repeatable; "
        "also STORMWATCH_PACKS). `stormwatch packs list` shows what is found.",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    if log_level is not None and log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise typer.BadParameter(f"{log_level!r} is not one of DEBUG, INFO, WARNING, ERROR", param_hint="--log-level")
    ctx.meta["stormwatch.log_level"] = log_level
    provide_site_checks(ctx, _check_site_pack)
    _prepend_env("--profiles", resources.PROFILES_ENV, profiles)
    _prepend_env("--packs", resources.PACKS_ENV, packs)


standardize(app, lazy=COMMANDS)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:  # stdout closed by its reader outside a command (the shared layer handles inside)
        closed_stdout()
    except KeyboardInterrupt:  # Ctrl-C: said, whatever the log level, so a run cut short is never taken for done
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
