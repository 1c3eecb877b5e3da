"""Clocks. Every component that stamps or waits takes a :class:`Clock`; logic never reads the
wall clock itself (design-notes.md, "Time").

:class:`ScenarioClock` runs simulated time faster than real time. It is a pure function of the
wall clock, ``sim = sim_start + (wall - wall_start) * speed``, so separate processes given the same
three numbers agree on the simulated time without talking to each other. ``stormwatch simulate``
shares it through a clock file (:func:`write_clock_file`), which every service reads
(:func:`service_clock`: ``stormwatch gateway``, ``ingest`` and ``alerts`` take ``--clock-file`` or
``$STORMWATCH_CLOCK_FILE``).

The design: docs/contract.md ("The modules", `stormwatch/clock.py`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from stormwatch.errors import InputError, read_text

log = logging.getLogger(__name__)

#: Environment variable naming the clock file; the same as ``--clock-file`` for every command.
CLOCK_FILE_ENV = "STORMWATCH_CLOCK_FILE"
#: Real seconds between a waiting service's "still waiting for the clock file" log lines.
CLOCK_WAIT_LOG_EVERY_S = 60.0


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


class ManualClock:
    """A clock that moves only when told: logic tests, and anything that must not race real time.

    ``now()`` is the instant the clock was set to; :meth:`advance` and :meth:`set` move it.
    ``sleep(seconds)`` either advances the clock by ``seconds`` (``on_sleep="advance"``, the default:
    the caller is the only one moving time, so sleeping *is* time passing) or leaves it standing
    and blocks ``seconds`` of real time (``on_sleep="wait"``: a service thread's backoff while the
    test holds time still). Thread-safe.

    Args:
        t: the starting instant (timezone-aware; normalised to UTC).
        on_sleep: ``advance`` or ``wait`` (above).

    Raises:
        ValueError: a naive ``t``, or an unknown ``on_sleep``.
    """

    def __init__(self, t: datetime, *, on_sleep: str = "advance") -> None:
        if t.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware time")
        if on_sleep not in ("advance", "wait"):
            raise ValueError(f"on_sleep must be 'advance' or 'wait', got {on_sleep!r}")
        self._t = t.astimezone(UTC)
        self.on_sleep = on_sleep
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._t

    def set(self, t: datetime) -> None:
        """Put the clock at ``t`` (aware; may move backwards, like a wall clock stepped by NTP)."""
        if t.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware time")
        with self._lock:
            self._t = t.astimezone(UTC)

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move the clock forward by ``seconds``; returns the new time."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        with self._lock:
            self._t += step
            return self._t

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if self.on_sleep == "advance":
            self.advance(seconds)
        else:
            time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if self.on_sleep == "advance":
            self.advance(seconds)
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(seconds)


@dataclass(frozen=True)
class ScenarioClock:
    """Simulated time: ``sim_start + (wall - wall_start) * speed``.

    Attributes:
        sim_start: simulated UTC instant at ``wall_start``.
        speed: simulated seconds per real second (e.g. 1000 runs a day in 86.4 s).
        wall_start: POSIX seconds (``time.time()``) at which simulated time was ``sim_start``.
        sim_end: simulated UTC instant at which the simulation ends (``None``: never). Simulated
            time stops there: services still running on the clock see the site as the simulation
            left it (no deadline passes after it, as in ``stormwatch demo``, which stops there),
            and a service finding a clock file whose simulation has ended waits for a new one.
    """

    sim_start: datetime
    speed: float
    wall_start: float
    sim_end: datetime | None = None

    def __post_init__(self) -> None:
        if self.sim_start.tzinfo is None:
            raise ValueError("sim_start must be timezone-aware")
        if not self.speed > 0:
            raise ValueError(f"speed must be > 0, got {self.speed}")

    @classmethod
    def starting_now(cls, sim_start: datetime, speed: float, *, delay_s: float = 0.0,
                     sim_end: datetime | None = None) -> ScenarioClock:
        """A clock that reaches ``sim_start`` ``delay_s`` real seconds from now."""
        return cls(sim_start=sim_start.astimezone(UTC), speed=speed, wall_start=time.time() + delay_s,
                   sim_end=sim_end.astimezone(UTC) if sim_end is not None else None)

    def ended(self) -> bool:
        """The simulation's end (``sim_end``) has passed."""
        return self.sim_end is not None and self.now() >= self.sim_end

    def now(self) -> datetime:
        t = self.sim_start + timedelta(seconds=(time.time() - self.wall_start) * self.speed)
        return t if self.sim_end is None or t < self.sim_end else self.sim_end

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


class ClockFileError(InputError):
    """A clock file that cannot be read; the message names the file."""


def check_clock_file_path(path: str | Path, option: str = "--clock-file") -> Path:
    """``path`` as a clock file to write or wait for, checked before any work (one rule for
    ``simulate`` and every service): its directory exists -- a typo must not leave a service
    waiting for ever for a file no simulation can write.

    Raises:
        ClockFileError: ``<option> <path>: directory <parent> does not exist``.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise ClockFileError(f"{option} {path}: directory {path.parent} does not exist")
    return path


def write_clock_file(path: str | Path, clock: ScenarioClock) -> Path:
    """Write ``clock`` atomically (temp file + rename) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, object] = {
        "sim_start": clock.sim_start.isoformat(),
        "speed": clock.speed,
        "wall_start": clock.wall_start,
    }
    if clock.sim_end is not None:
        doc["sim_end"] = clock.sim_end.isoformat()
    doc["env"] = clock.to_env()
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
    text = read_text(path, ClockFileError, what="clock file")
    try:
        doc = json.loads(text)
        end = doc.get("sim_end")
        return ScenarioClock(
            sim_start=datetime.fromisoformat(doc["sim_start"]),
            speed=float(doc["speed"]),
            wall_start=float(doc["wall_start"]),
            sim_end=datetime.fromisoformat(end) if end is not None else None,
        )
    except KeyError as exc:
        raise ClockFileError(f"{path}: not a stormwatch clock file: no {exc.args[0]!r}") from exc
    except (ValueError, TypeError, AttributeError) as exc:
        raise ClockFileError(f"{path}: not a stormwatch clock file: {exc}") from exc


def wait_for_clock_file(path: str | Path, *, timeout_s: float | None = None,
                        log_every_s: float = CLOCK_WAIT_LOG_EVERY_S) -> ScenarioClock:
    """The clock of the simulation now running, from the clock file at ``path``, waiting for it.

    A service may start before ``stormwatch simulate`` (the services recipe starts it last, so
    everything is connected when simulated time begins): while the file is missing, or names a
    simulation that has already ended (a file left by an earlier run), this waits, logging at
    INFO once and then every ``log_every_s`` real seconds.

    Raises:
        ClockFileError: the file exists but is not a clock file, or ``timeout_s`` passed.
    """
    path = Path(path)
    t0 = time.monotonic()
    next_log = t0
    while True:
        why = None
        if not path.exists():
            why = "no clock file yet"
        else:
            try:
                clock = read_clock_file(path)
            except ClockFileError:
                if not path.exists():  # replaced under us (temp file + rename): read again
                    continue
                raise
            if not clock.ended():
                return clock
            assert clock.sim_end is not None
            why = f"its simulation ended at {clock.sim_end.isoformat()}"
        now = time.monotonic()
        if timeout_s is not None and now - t0 >= timeout_s:
            raise ClockFileError(
                f"{path}: {why} after {timeout_s:g} s (start `stormwatch simulate --clock-file {path}`)")
        if now >= next_log:
            log.info("waiting for the simulated clock in %s (%s): start `stormwatch simulate --clock-file %s`",
                     path, why, path)
            next_log = now + log_every_s
        time.sleep(0.2)


def service_clock(clock_file: str | Path | None, env: Mapping[str, str] | None = None, *,
                  wait: bool = True) -> Clock:
    """The clock a command runs on: one simulated clock for every service, else the wall clock.

    In order: the clock file ``clock_file`` (``--clock-file``), else the one named by
    ``$STORMWATCH_CLOCK_FILE``, else ``STORMWATCH_SIM_*`` variables (:meth:`ScenarioClock.to_env`),
    else :class:`WallClock`. Services (``wait=True``) wait for the clock file of a running
    simulation (:func:`wait_for_clock_file`); a one-shot command (``wait=False``, e.g.
    ``stormwatch workorders list``) reads the file as it is, ended simulation or not.

    Raises:
        ClockFileError: an unreadable clock file, one in a directory that does not exist
            (:func:`check_clock_file_path`; ``wait=False``: also a missing one).
    """
    env = os.environ if env is None else env
    path = clock_file if clock_file is not None else (env.get(CLOCK_FILE_ENV) or None)
    if path is not None:
        check_clock_file_path(path, "--clock-file" if clock_file is not None else f"${CLOCK_FILE_ENV}")
        return wait_for_clock_file(path) if wait else read_clock_file(path)
    return ScenarioClock.from_env(dict(env)) or WallClock()
