"""The lockstep simulated clock: simulated time moves only when everything due at the current instant is done.

:class:`LockstepClock` holds one instant; the threads that act on it (the gateway's polling threads)
join it as :class:`Worker` s and wait on it for their next due instant; those due at one instant
take turns, in joining order, so every run does the same things in the same order. :meth:`LockstepClock.run`
(the conductor) moves the clock to the earliest instant anyone waits for once every worker waits
and every :class:`Participant` (readings stored, engine past the instant) says it is done. A loaded
machine makes a run slower, never different. When nothing moves for ``stall_s`` real seconds the
conductor raises :class:`LockstepStalled` naming whom it waits for -- never a silent skip.

The design: docs/simulators.md ("The lockstep clock").
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Protocol

#: Real seconds the conductor waits, with nothing moving, before it stops the run.
DEFAULT_STALL_S = 120.0
#: Real seconds between the conductor's looks at participants that do not notify it: from the first
#: to the longest (doubling), so a quick instant is seen at once and a slow one costs few wake-ups.
POLL_S = 0.0002
MAX_POLL_S = 0.002


class _Broadcast(threading.Condition):
    """The clock's condition: :meth:`notify_all` wakes every waiter, the workers' own conditions too;
    :meth:`notify_others` only the threads waiting on this one (the conductor, non-worker sleeps)."""

    def __init__(self, workers: list[Worker]) -> None:
        self.lock = threading.RLock()
        super().__init__(self.lock)
        self.workers = workers  # the clock's own list (joining order), not a copy kept in step

    def notify_others(self) -> None:
        super().notify_all()

    def notify_all(self) -> None:
        super().notify_all()
        for w in self.workers:
            w.cond.notify_all()


class LockstepStalled(RuntimeError):
    """The clock could not move for ``stall_s`` real seconds; the message names whom it waits for."""


class Participant(Protocol):
    """Something the clock waits for at each instant besides its workers (e.g. the alert engine)."""

    name: str

    def pending(self, t: datetime) -> str | None:
        """What is still owed for instant ``t`` (a short phrase), or ``None`` when done up to ``t``."""
        ...

    def next_due(self, t: datetime) -> datetime | None:
        """The next instant after ``t`` this participant needs the clock to stop at (``None``: none)."""
        ...

    def at(self, t: datetime) -> None:
        """Work due at ``t``, done once everything else at ``t`` is (the conductor's thread)."""
        ...


class Worker:
    """One thread's membership of the clock: busy until it waits (:meth:`wait_until`), then idle."""

    def __init__(self, clock: LockstepClock, name: str) -> None:
        self.clock = clock
        self.name = name
        self.target: datetime | None = None  # None: busy
        self.left = False
        # woken alone when its turn comes: one wake-up per poll, not one per waiter and change
        self.cond = threading.Condition(clock._cond.lock)

    def attach(self) -> None:
        """Make the calling thread this worker (its ``clock.sleep`` waits as this worker)."""
        self.clock._local.worker = self

    def wait_until(self, t: datetime, stop: threading.Event | None = None) -> bool:
        """Idle until the clock reaches ``t``; False when ``stop`` is set or the run ended before ``t``."""
        clock = self.clock
        with clock._cond:
            self.target = t
            clock._wake()
            try:
                # an ended run lets nobody on, even one whose instant has come: nothing polls after the end
                while clock._finished or clock._t < t or not clock._my_turn(self):
                    if clock._finished or (stop is not None and stop.is_set()):
                        return False
                    self.cond.wait(0.1)
            finally:
                self.target = None
        return True

    def leave(self) -> None:
        """This worker is done for the run (its thread ends)."""
        with self.clock._cond:
            self.left = True
            self.clock._workers.remove(self)
            self.clock._wake()


class LockstepClock:
    """Simulated time held at one instant until the conductor (:meth:`run`) moves it.

    Args:
        sim_start: the first instant (aware).
        sim_end: the run's end: the clock never passes it, and stops there when nobody waits.
    """

    def __init__(self, sim_start: datetime, sim_end: datetime) -> None:
        if sim_start.tzinfo is None or sim_end.tzinfo is None:
            raise ValueError("LockstepClock needs timezone-aware times")
        self.sim_start = sim_start.astimezone(UTC)
        self.sim_end = sim_end.astimezone(UTC)
        self._t = self.sim_start
        self._workers: list[Worker] = []  # in joining order: the order of their turns
        self._cond = _Broadcast(self._workers)
        self._timers: list[datetime] = []
        self._participants: list[Participant] = []
        self._finished = False
        self._joined = threading.Event()
        self._local = threading.local()
        self.instants = 0

    # -- the Clock protocol ----------------------------------------------------------------------

    def now(self) -> datetime:
        return self._t

    def sleep(self, seconds: float) -> None:
        """A worker's thread idles as that worker; any other thread waits without holding the clock."""
        if seconds <= 0:
            return
        target = self._t + timedelta(seconds=seconds)
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is not None:
            worker.wait_until(target)
            return
        with self._cond:
            self._timers.append(target)
            self._cond.notify_others()
            try:
                while self._t < target and not self._finished:
                    self._cond.wait(0.1)
            finally:
                self._timers.remove(target)

    async def asleep(self, seconds: float) -> None:
        if seconds > 0:
            await asyncio.to_thread(self.sleep, seconds)

    # -- membership --------------------------------------------------------------------------------

    def join(self, names: Iterable[str]) -> list[Worker]:
        """Workers for ``names``, all joined at once (busy until each first waits)."""
        with self._cond:
            workers = [Worker(self, name) for name in names]
            self._workers.extend(workers)
            self._joined.set()
            self._cond.notify_all()
        return workers

    def add(self, participant: Participant) -> None:
        with self._cond:
            self._participants.append(participant)

    def poke(self) -> None:
        """Something a participant owes may be done: look again now."""
        with self._cond:
            self._cond.notify_others()

    @property
    def finished(self) -> bool:
        return self._finished

    def _ended(self) -> bool:
        return self._finished

    def finish(self) -> None:
        """End the run at ``sim_end`` (every waiter returns)."""
        with self._cond:
            self._t = max(self._t, self.sim_end)
            self._finished = True
            self._cond.notify_all()

    def stop(self) -> None:
        """End the run early (a death, Ctrl-C) where it stands: every waiter returns, and time does
        not jump to ``sim_end`` -- a poll there would read the whole rest of the scenario as one
        catch-up and its storm as events that never happened."""
        with self._cond:
            self._finished = True
            self._cond.notify_all()

    # -- the conductor -----------------------------------------------------------------------------

    def waiting_for(self) -> list[str]:
        """Who the clock waits for at the current instant (names and what they owe)."""
        t = self._t
        out = [f"{w.name} (busy)" for w in self._workers if w.target is None or w.target <= t]
        for p in self._participants:
            owed = p.pending(t)
            if owed is not None:
                out.append(f"{p.name} ({owed})")
        return out

    def _wake(self) -> None:
        """After a change (the clock moved, a worker waits or left): wake the worker whose turn it is,
        if any, and the threads on the clock's condition (the conductor, sleeps). Holding ``_cond``."""
        t = self._t
        for w in self._workers:
            if w.target is None:
                break  # one is running: the next turn comes when it waits
            if w.target <= t:
                w.cond.notify()
                break
        self._cond.notify_others()

    def _my_turn(self, worker: Worker) -> bool:
        """Workers due at one instant run one after the other, in joining order: what they do (a
        gateway's sequence numbers, the order its readings reach the broker) is the same on every run."""
        for earlier in self._workers:
            if earlier is worker:
                return True
            if earlier.target is None or earlier.target <= self._t:  # running, or due and not yet run
                return False
        return True

    def _next(self) -> datetime:
        t = self._t
        wanted = [w.target for w in self._workers if w.target is not None]
        wanted += [x for x in self._timers if x > t]
        for p in self._participants:
            due = p.next_due(t)
            if due is not None and self._workers:
                wanted.append(due)
        return min([*wanted, self.sim_end])

    def run(self, *, stall_s: float = DEFAULT_STALL_S, joined_timeout_s: float = 30.0) -> None:
        """Move the clock, instant by instant, until the run ends (:meth:`finish` ends it early).

        Raises:
            LockstepStalled: nothing could move for ``stall_s`` real seconds, or no worker joined
                within ``joined_timeout_s``.
        """
        if not self._joined.wait(joined_timeout_s):
            raise LockstepStalled(f"nobody joined the clock within {joined_timeout_s:g} s")
        while not self._ended():
            self._settle(stall_s)
            for p in self._participants:
                p.at(self._t)
            self._settle(stall_s)
            with self._cond:
                if self._ended():  # finish() from another thread
                    break
                if self._t >= self.sim_end or not (self._workers or any(x > self._t for x in self._timers)):
                    self._t = max(self._t, self.sim_end)  # nobody waits for anything before the end
                    self._finished = True
                    self._cond.notify_all()
                else:
                    self._t = self._next()
                    self.instants += 1
                    self._wake()

    def _settle(self, stall_s: float) -> None:
        """Return once every worker waits for a later instant and no participant owes anything."""
        deadline = time.monotonic() + stall_s
        nap = POLL_S
        with self._cond:
            while not self._finished:
                t = self._t
                if all(w.target is not None and w.target > t for w in self._workers) and \
                        all(p.pending(t) is None for p in self._participants):
                    return
                if time.monotonic() >= deadline:
                    who = ", ".join(self.waiting_for()) or "nobody"
                    raise LockstepStalled(
                        f"the simulated clock stopped at {t.isoformat()}: waited {stall_s:g} s for {who}")
                self._cond.wait(nap)
                nap = min(2 * nap, MAX_POLL_S)

