"""A Ctrl-C while the command line's libraries load says "interrupted" and exits 130, like one
later -- never an import traceback."""

from __future__ import annotations

import subprocess
import sys

# the interrupt arrives during the command line's import, as a Ctrl-C in the first half second does
INTERRUPTED_IMPORT = """
import builtins
real = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name == "stormwatch.app.cli":
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
from stormwatch.app.entry import main
main()
"""


def test_ctrl_c_while_the_libraries_load_says_interrupted() -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def test_the_entry_point_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "stormwatch", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("0.1.0")
