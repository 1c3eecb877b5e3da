"""The demo's working directory: every ``stormwatch demo --state-dir DIR`` run starts clean.

A demo run replays its scenario at the same simulated times every time, so a rerun that kept the
previous run's store, gateway outbox and counter baselines and work orders would store the storm
twice (240 tips for a 120-tip scenario), repeat its events and open a second basin order (issue
11 §8). A rerun therefore removes what the previous run made -- only that -- and starts again:

* a directory the demo made carries :data:`MARKER`; a rerun deletes the entries a run makes
  (:data:`RUN_ENTRIES`: the SQLite store, the work-order state, the gateway's state directory,
  the pty links) and keeps everything else;
* a new or empty directory is marked and used;
* a non-empty directory without the marker is refused, so ``--state-dir var`` can never wipe the
  state of services that run there (their ``stormwatch.db`` and ``alerts.db`` share the names).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from stormwatch.errors import InputError

#: File the demo writes into a working directory it owns.
MARKER = ".stormwatch-demo"

#: What a demo run creates in its working directory (stormwatch.app.pipeline.Pipeline), SQLite side files included.
RUN_ENTRIES = (
    *(f"{db}{suffix}" for db in ("stormwatch.db", "alerts.db") for suffix in ("", "-wal", "-shm", "-journal")),
    "gateway",
    "links",
    "demo.log",
)


class WorkdirError(InputError):
    """A path the demo must not use as its working directory; the message names it."""


def prepare_workdir(path: Path) -> list[str]:
    """Make ``path`` ready for a fresh demo run (created and marked if needed).

    Returns:
        The names of the previous run's entries that were removed (empty for a new directory).

    Raises:
        WorkdirError: ``path`` is not a directory, its parent does not exist, or it is a non-empty
            directory the demo did not make.
        OSError: the directory cannot be created or cleaned.
    """
    if path.exists() and not path.is_dir():
        raise WorkdirError(f"--state-dir {path}: not a directory")
    if not path.parent.is_dir():  # the one rule of every command (stormwatch.runtime.cliutil.use_state_dir)
        raise WorkdirError(f"--state-dir {path}: directory {path.parent} does not exist (create it first: a typo "
                           "never creates directories)")
    path.mkdir(exist_ok=True)
    marker = path / MARKER
    if not marker.is_file():
        if any(path.iterdir()):
            raise WorkdirError(
                f"--state-dir {path}: not empty and not made by `stormwatch demo` (no {MARKER} file); "
                "give a new or empty directory -- a demo rerun starts clean and must not delete other data"
            )
        marker.write_text("a `stormwatch demo` working directory: each run removes the previous run's state\n",
                          encoding="utf-8")
        return []
    removed: list[str] = []
    for name in RUN_ENTRIES:
        entry = path / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry.exists() or entry.is_symlink():
            entry.unlink()
        else:
            continue
        removed.append(name)
    return removed
