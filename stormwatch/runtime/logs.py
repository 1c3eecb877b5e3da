"""Logging set-up for the command line (one place; modules only call ``logging.getLogger``).

The lean gateway process calls it too: it inherits the level and the log file through
``STORMWATCH_LOG_LEVEL`` and ``STORMWATCH_LOG_FILE`` (set by the ``stormwatch`` command).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TextIO

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
#: Marks the handlers this module installed (replaced on the next call; others are left alone).
_OURS = "_stormwatch_handler"


class _Stderr(logging.StreamHandler[TextIO]):
    """A handler that writes to whatever ``sys.stderr`` is when a record is logged (a test runner
    swaps it; a handler bound at set-up would write to a closed stream later)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def setup_logging(level: str | None = None, *, log_file: str | Path | None = None,
                  stderr_level: str | None = None) -> None:
    """Configure root logging: ``HH:MM:SS LEVEL name: message`` on stderr, and in ``log_file``.

    Args:
        level: the level (default ``$STORMWATCH_LOG_LEVEL`` or ``INFO``); the file's level.
        log_file: also append the log to this file (default ``$STORMWATCH_LOG_FILE``, if set).
        stderr_level: a higher level for stderr (e.g. ``WARNING`` when the details go to the file).
    """
    name = (level or os.environ.get("STORMWATCH_LOG_LEVEL") or "INFO").upper()
    file_level = getattr(logging, name, logging.INFO)
    err_level = max(file_level, getattr(logging, (stderr_level or name).upper(), file_level))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:  # only ours: keep e.g. pytest's
        root.removeHandler(old)
        old.close()
    stderr = _Stderr()
    stderr.setLevel(err_level)
    stderr.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    handlers: list[logging.Handler] = [stderr]
    target = log_file or os.environ.get("STORMWATCH_LOG_FILE")
    if target:
        to_file = logging.FileHandler(target, encoding="utf-8")
        to_file.setLevel(file_level)
        to_file.setFormatter(logging.Formatter(_FORMAT, datefmt="%Y-%m-%d %H:%M:%S"))
        handlers.append(to_file)
    for h in handlers:
        setattr(h, _OURS, True)
        root.addHandler(h)
    root.setLevel(min(file_level, err_level))
    for noisy in ("pymodbus", "amqtt", "transitions", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, file_level))


class _Below(logging.Filter):
    """Passes records of ``level`` and above only (a handler's filter: what goes elsewhere)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level
        self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.level:
            return True
        self.held += 1
        return False


def divert_warnings(path: Path) -> _Below | None:
    """Send this process's WARNING records to ``path`` instead of stderr (ERROR and above stay):
    a command whose stdout is a timeline in simulated time (``stormwatch demo``) keeps the
    services' wall-clock log lines out of it. ``None`` (nothing changed) when the user chose where
    the log goes (a ``--log-file``) or asked for more of it (``-v``, ``--log-level``). The filter
    returned counts the records held back from stderr (``.held``)."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, _OURS, False)]
    if any(isinstance(h, logging.FileHandler) for h in ours) or any(h.level < logging.WARNING for h in ours):
        return None
    below = _Below(logging.ERROR)
    for h in ours:
        h.addFilter(below)
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setLevel(logging.WARNING)
    to_file.setFormatter(logging.Formatter(_FORMAT, datefmt="%Y-%m-%d %H:%M:%S"))
    setattr(to_file, _OURS, True)
    root.addHandler(to_file)
    return below
