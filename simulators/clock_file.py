"""The simulated clock shared through a JSON file, so a gateway process joins the same simulated time.

Format (one JSON object)::

    {"sim_start": "2026-06-01T04:00:00+00:00", "speed": 1500.0, "wall_start": 1767225600.0,
     "env": {"STORMWATCH_SIM_START": ..., "STORMWATCH_SIM_SPEED": ..., "STORMWATCH_SIM_WALL_START": ...}}

``env`` holds the same three numbers as :meth:`ScenarioClock.to_env` (for child processes).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from stormwatch.clock import ScenarioClock


class ClockFileError(ValueError):
    """A clock file that cannot be read; the message names the file."""


def write_clock_file(path: str | Path, clock: ScenarioClock) -> Path:
    """Write ``clock`` atomically (temp file + rename) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "sim_start": clock.sim_start.isoformat(),
        "speed": clock.speed,
        "wall_start": clock.wall_start,
        "env": clock.to_env(),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_clock_file(path: str | Path) -> ScenarioClock:
    """The clock written by :func:`write_clock_file`.

    Raises:
        ClockFileError: unreadable file, bad JSON or missing/invalid fields.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return ScenarioClock(
            sim_start=datetime.fromisoformat(doc["sim_start"]),
            speed=float(doc["speed"]),
            wall_start=float(doc["wall_start"]),
        )
    except OSError as exc:
        raise ClockFileError(f"{path}: cannot read: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ClockFileError(f"{path}: not a stormwatch clock file: {exc!r}") from exc
