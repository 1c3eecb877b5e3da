"""The ``stormwatch`` command line (typer).

Each part registers its own commands from its package's ``cli`` module, so a new service adds a
module, not edits here: ``gateway``, ``ingest``, ``alerts``/``workorders``/``evaluate``,
``simulate``, ``decode``, ``import``/``replay`` and ``demo``.
"""

from __future__ import annotations

import importlib
import logging

import typer

from stormwatch.logs import setup_logging

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

#: Modules that define ``register(app: typer.Typer) -> None``.
COMMAND_MODULES = (
    "gateway.cli",
    "ingest.cli",
    "alerts.cli",
    "simulators.cli",
    "dashboards.cli",
    "importers.cli",
    "stormwatch.demo",
)


@app.callback()
def _root(
    log_level: str = typer.Option(
        "INFO", "--log-level", envvar="STORMWATCH_LOG_LEVEL", help="DEBUG, INFO, WARNING or ERROR (logs go to stderr)."
    ),
) -> None:
    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise typer.BadParameter(f"{log_level!r} is not one of DEBUG, INFO, WARNING, ERROR", param_hint="--log-level")
    setup_logging(log_level)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(app)


_register_all()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        logging.getLogger("stormwatch").info("interrupted")
        raise SystemExit(130) from None
