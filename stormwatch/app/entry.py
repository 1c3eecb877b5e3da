"""The ``stormwatch`` command's entry point, kept free of imports: a Ctrl-C while the command line's
libraries load says "interrupted" and exits 130, as one later does -- never an import traceback
(docs/runtime.md, exit statuses)."""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point: load the command line, then run it."""
    try:
        from stormwatch.app.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    run()
