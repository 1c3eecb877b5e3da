"""The alert engine as a participant of a lockstep clock (in one process with the gateway).

At each instant the clock waits until the engine has taken every reading made so far and emitted
what they released; then the engine's clock-driven work -- the overdue check of the work orders --
runs at that instant, on a grid of ``overdue_check_s`` from the run's start, so an
``inspection_overdue`` event has the same time on every run.

The design: docs/alerts.md ("The lockstep clock").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

from stormwatch.alerts.service import AlertService


class EngineParticipant:
    """The alert service's share of each instant.

    Args:
        service: the alert service (started with ``overdue_check_s=math.inf``: this checks instead).
        made: readings made so far (the gateway's count): the engine owes the ones it has not taken.
        start: the grid origin of the overdue checks.
        overdue_check_s: clock seconds between overdue checks.
    """

    name = "alert engine"

    def __init__(self, service: AlertService, made: Callable[[], int], start: datetime,
                 overdue_check_s: float = 60.0) -> None:
        self.service = service
        self.made = made
        self.start = start
        self.every = timedelta(seconds=overdue_check_s)
        self.checks = 0

    def notify(self, poke: Callable[[], None]) -> None:
        """Have the service call ``poke`` (the clock's) after each message it has handled, so the
        clock sees the engine done at once instead of at its next look."""
        self.service.after_message = poke

    def pending(self, t: datetime) -> str | None:
        seen, made = self.service.readings_seen, self.made()
        if seen < made:
            return f"{made - seen} readings not taken yet"
        if self.service.emitting:
            return "emitting events"
        return None

    def next_due(self, t: datetime) -> datetime | None:
        k = math.floor((t - self.start) / self.every) + 1
        return self.start + k * self.every

    def at(self, t: datetime) -> None:
        if (t - self.start) % self.every == timedelta(0):
            self.service.check_overdue()
            self.checks += 1
