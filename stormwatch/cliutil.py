"""Small helpers shared by the typer command lines (never imported by the lean gateway process)."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` on stderr and end the command with exit status ``code``.

    Exit statuses used by the commands: 2 for bad arguments or configuration, 1 for a failure
    while running (store or broker unavailable, a file that cannot be written).

    Raises:
        typer.Exit: always, with ``code``.
    """
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
