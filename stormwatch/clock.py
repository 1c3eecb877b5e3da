"""Clocks. Every component that stamps or waits takes a :class:`Clock`; logic never reads the
wall clock itself (design-notes.md, "Time").

:class:`ScenarioClock` runs simulated time faster than real time. It is a pure function of the
wall clock, ``sim = sim_start + (wall - wall_start) * speed``, so separate processes given the same
three numbers agree on the simulated time without talking to each other. ``stormwatch simulate``
shares it through a clock file (:func:`write_clock_file`), which ``stormwatch gateway`` reads
(:func:`read_clock_file`)::

    {"sim_start": "2026-06-01T04:00:00+00:00", "speed": 1500.0, "wall_start": 1767225600.0,
     "env": {"STORMWATCH_SIM_START": ..., "STORMWATCH_SIM_SPEED": ..., "STORMWATCH_SIM_WALL_START": ...}}
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol


class Clock(Protocol):
    """Now and sleep, in one time base (UTC event time)."""

    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` of this clock's time."""
        ...

    async def asleep(self, seconds: float) -> None:
        """Await ``seconds`` of this clock's time."""
        ...


class WallClock:
    """The real UTC clock (production)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


@dataclass(frozen=True)
class ScenarioClock:
    """Simulated time: ``sim_start + (wall - wall_start) * speed``.

    Attributes:
        sim_start: simulated UTC instant at ``wall_start``.
        speed: simulated seconds per real second (e.g. 1000 runs a day in 86.4 s).
        wall_start: POSIX seconds (``time.time()``) at which simulated time was ``sim_start``.
    """

    sim_start: datetime
    speed: float
    wall_start: float

    def __post_init__(self) -> None:
        if self.sim_start.tzinfo is None:
            raise ValueError("sim_start must be timezone-aware")
        if not self.speed > 0:
            raise ValueError(f"speed must be > 0, got {self.speed}")

    @classmethod
    def starting_now(cls, sim_start: datetime, speed: float) -> ScenarioClock:
        return cls(sim_start=sim_start.astimezone(UTC), speed=speed, wall_start=time.time())

    def now(self) -> datetime:
        return self.sim_start + timedelta(seconds=(time.time() - self.wall_start) * self.speed)

    def real_seconds(self, sim_seconds: float) -> float:
        """Real seconds that ``sim_seconds`` of simulated time take."""
        return sim_seconds / self.speed

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.speed)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds / self.speed))

    def to_env(self) -> dict[str, str]:
        """Environment variables that let a child process rebuild this clock."""
        return {
            "STORMWATCH_SIM_START": self.sim_start.isoformat(),
            "STORMWATCH_SIM_SPEED": repr(self.speed),
            "STORMWATCH_SIM_WALL_START": repr(self.wall_start),
        }

    @classmethod
    def from_env(cls, env: dict[str, str]) -> ScenarioClock | None:
        """The clock described by :meth:`to_env`, or ``None`` when the variables are absent."""
        if "STORMWATCH_SIM_START" not in env:
            return None
        return cls(
            sim_start=datetime.fromisoformat(env["STORMWATCH_SIM_START"]),
            speed=float(env["STORMWATCH_SIM_SPEED"]),
            wall_start=float(env["STORMWATCH_SIM_WALL_START"]),
        )


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
