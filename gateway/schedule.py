"""How a polling thread waits for its next due poll instant on the gateway's clock.

On the wall clock and a wall-paced scenario clock a :class:`PollTimer` sleeps in real time
(interruptibly, so :meth:`Gateway.stop` is prompt). On a :class:`~stormwatch.lockstep.LockstepClock`
each link's thread is one of the clock's workers: it tells the clock the instant it waits for, and
the clock moves no further until the thread has polled and waits again -- no poll slot is ever
skipped because the machine is busy.

The design: docs/gateway.md ("The modules", `gateway/schedule.py`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime

from stormwatch.clock import Clock, WallClock
from stormwatch.lockstep import LockstepClock, Worker

#: Longest real-time sleep between looks at the stop flag and the clock.
MAX_NAP_S = 0.25


def _readings(n: int) -> str:
    """``1 reading``, ``3 readings`` (as :func:`stormwatch.display.plural`, which this lean process does not import)."""
    return f"{n} reading{'' if n == 1 else 's'}"


class PollTimer:
    """One polling thread's wait for its next due instant (one per link)."""

    def __init__(self, clock: Clock, stop: threading.Event, worker: Worker | None = None) -> None:
        self.clock = clock
        self.stop = stop
        self.worker = worker

    def attach(self) -> None:
        """Called first in the polling thread: a driver's clock sleeps in it wait as this thread."""
        if self.worker is not None:
            self.worker.attach()

    def close(self) -> None:
        """Called last in the polling thread: the clock no longer waits for it."""
        if self.worker is not None:
            self.worker.leave()

    def wait_until(self, target: datetime) -> bool:
        """Wait in clock time until ``target``; False if stopped first (or a lockstep run ended)."""
        if self.worker is not None:
            return self.worker.wait_until(target, self.stop)
        real: Callable[[float], float] | None = getattr(self.clock, "real_seconds", None)
        while not self.stop.is_set():
            remaining = (target - self.clock.now()).total_seconds()
            if remaining <= 0:
                return True
            if real is not None:
                self.stop.wait(min(real(remaining), MAX_NAP_S))
            elif isinstance(self.clock, WallClock):
                self.stop.wait(min(remaining, MAX_NAP_S))
            else:
                self.clock.sleep(remaining)  # an unknown clock: trust its sleep (not interruptible)
        return False


def poll_timers(clock: Clock, stop: threading.Event, links: Iterable[str]) -> list[PollTimer]:
    """One timer per link; on a lockstep clock all join it at once, before any thread starts, so the
    clock cannot move past an instant a link has not polled yet."""
    names = list(links)
    if isinstance(clock, LockstepClock):
        return [PollTimer(clock, stop, w) for w in clock.join(f"gateway poll {n}" for n in names)]
    return [PollTimer(clock, stop) for _ in names]


class StoredParticipant:
    """The gateway's readings as a participant of a lockstep clock: an instant is done once every
    reading made before the last ``window`` instants has left the outbox -- confirmed stored by
    ingest (the stored-acknowledgement).

    ``window`` 0 waits for every reading at every instant. A window lets the polls run ahead of
    storage by that many instants (the outbox is durable; ingest writes several instants at once):
    what the clock waits for then is the alert engine, which takes the readings from the broker,
    so the events are the same; a store that stops confirming still stops the clock, ``window``
    instants later.

    Args:
        name: who the clock names when it waits for this.
        outbox_depth: readings committed and not yet confirmed.
        made: readings made so far (needed with a window).
        window: instants whose readings may still be unconfirmed.
        polled: called at the clock's first look at each instant -- every poll due then is committed
            (a gateway that publishes each instant's readings as one message: its publisher's wake).
    """

    def __init__(self, name: str, outbox_depth: Callable[[], int], made: Callable[[], int] | None = None,
                 window: int = 0, polled: Callable[[], None] | None = None) -> None:
        if window < 0 or (window and made is None):
            raise ValueError("a window needs window >= 0 and the count of readings made")
        self.name = name
        self.outbox_depth = outbox_depth
        self.made = made
        self.window = window
        self.polled = polled
        self._looked: datetime | None = None
        self._marks: deque[tuple[datetime, int]] = deque(maxlen=window + 1)  # (instant, made after its polls)

    def pending(self, t: datetime) -> str | None:
        if self.polled is not None and self._looked != t:
            self._looked = t
            self.polled()
        depth = self.outbox_depth()
        if not depth:
            return None
        if self.made is None or not self.window:
            return f"{_readings(depth)} not confirmed stored"
        made = self.made()
        if not self._marks or self._marks[-1][0] != t:
            self._marks.append((t, made))  # asked only once the polls of ``t`` are done
        else:
            self._marks[-1] = (t, made)
        since, made_then = self._marks[0]
        owed = depth - (made - made_then)  # readings made at ``since`` or earlier, still unconfirmed
        if len(self._marks) <= self.window or owed <= 0:
            return None
        return f"{_readings(owed)} made by {since.isoformat()} not confirmed stored"

    def next_due(self, t: datetime) -> datetime | None:
        return None

    def at(self, t: datetime) -> None:
        return None
