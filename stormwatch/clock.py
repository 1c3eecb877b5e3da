"""Clocks. Every component that stamps or waits takes a :class:`Clock`; logic never reads the
wall clock itself (design-notes.md, "Time").

:class:`ScenarioClock` runs simulated time faster than real time. It is a pure function of the
wall clock, ``sim = sim_start + (wall - wall_start) * speed``, so separate processes given the same
three numbers agree on the simulated time without talking to each other.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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
