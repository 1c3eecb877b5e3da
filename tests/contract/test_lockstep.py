"""The lockstep clock: time moves to the earliest instant anyone waits for, only when all are done."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from stormwatch.lockstep import LockstepClock, LockstepStalled
from tests.waits import wait_until

START = datetime(2026, 6, 1, 4, 0, tzinfo=UTC)
END = START + timedelta(minutes=10)


class Owes:
    """A participant owing ``n`` things until told they are done."""

    name = "ingest"

    def __init__(self) -> None:
        self.owed = 0
        self.seen: list[datetime] = []

    def pending(self, t: datetime) -> str | None:
        return f"{self.owed} readings not stored" if self.owed else None

    def next_due(self, t: datetime) -> datetime | None:
        return None

    def at(self, t: datetime) -> None:
        self.seen.append(t)


def _poller(clock: LockstepClock, every_s: int, log: list[tuple[str, datetime]], name: str,
            owes: Owes | None = None) -> threading.Thread:
    [worker] = clock.join([name])

    def body() -> None:
        worker.attach()
        t = START
        try:
            while t < END:
                if not worker.wait_until(t):
                    return
                log.append((name, clock.now()))
                if owes is not None:
                    owes.owed += 1
                t += timedelta(seconds=every_s)
        finally:
            worker.leave()

    return threading.Thread(target=body, daemon=True)


def test_every_due_instant_is_visited_in_order_and_the_run_ends_at_its_end() -> None:
    clock = LockstepClock(START, END)
    log: list[tuple[str, datetime]] = []
    threads = [_poller(clock, 60, log, "a"), _poller(clock, 150, log, "b")]
    for t in threads:
        t.start()
    clock.run(stall_s=30)
    expected_a = [START + timedelta(seconds=60 * k) for k in range(10)]
    expected_b = [START + timedelta(seconds=150 * k) for k in range(4)]
    assert [t for n, t in log if n == "a"] == expected_a
    assert [t for n, t in log if n == "b"] == expected_b
    assert [t for _, t in log] == sorted(t for _, t in log)  # nobody ran ahead of the clock
    assert clock.now() == END and clock.finished


def test_time_waits_for_a_participant_and_runs_its_work_once_per_instant() -> None:
    clock = LockstepClock(START, END)
    owes = Owes()
    clock.add(owes)
    log: list[tuple[str, datetime]] = []
    poller = _poller(clock, 60, log, "gateway", owes)
    poller.start()
    conductor = threading.Thread(target=clock.run, kwargs={"stall_s": 30}, daemon=True)
    conductor.start()
    for k in range(10):  # the "store": confirms each reading; the clock moves only after that
        at = START + timedelta(seconds=60 * k)
        with clock._cond:
            assert clock._cond.wait_for(lambda: owes.owed == 1, 10)
            assert clock.now() == at
        owes.owed = 0
        clock.poke()
    conductor.join(10)
    assert not conductor.is_alive()
    assert owes.seen[:10] == [START + timedelta(seconds=60 * k) for k in range(10)]


def test_a_participant_that_never_answers_stops_the_clock_naming_whom_it_waits_for() -> None:
    clock = LockstepClock(START, END)
    owes = Owes()
    owes.owed = 3
    clock.add(owes)
    [worker] = clock.join(["gateway poll 127.0.0.1:5020"])
    waiter = threading.Thread(target=worker.wait_until, args=(START + timedelta(minutes=1),), daemon=True)
    waiter.start()
    with pytest.raises(LockstepStalled, match=r"stopped at 2026-06-01T04:00:00\+00:00: waited 0.3 s for "
                                              r"ingest \(3 readings not stored\)"):
        clock.run(stall_s=0.3)
    clock.finish()
    waiter.join(5)
    assert not waiter.is_alive()


def test_a_busy_worker_is_named_and_a_sleep_in_its_thread_lets_time_move() -> None:
    clock = LockstepClock(START, END)
    [worker] = clock.join(["gateway poll rs485"])
    with pytest.raises(LockstepStalled, match=r"gateway poll rs485 \(busy\)"):
        clock.run(stall_s=0.2)

    clock = LockstepClock(START, END)
    [worker] = clock.join(["gateway poll rs485"])
    woke: list[datetime] = []

    def warm_up_then_leave() -> None:
        worker.attach()
        clock.sleep(2.5)  # a driver's warm-up inside a poll: this worker idles until then
        woke.append(clock.now())
        worker.leave()

    threading.Thread(target=warm_up_then_leave, daemon=True).start()
    clock.run(stall_s=30)
    assert woke == [START + timedelta(seconds=2.5)]


def test_nobody_joining_is_an_error_not_a_run() -> None:
    with pytest.raises(LockstepStalled, match="nobody joined"):
        LockstepClock(START, END).run(joined_timeout_s=0.05)


def test_workers_due_at_one_instant_take_turns_in_joining_order() -> None:
    clock = LockstepClock(START, END)
    order: list[str] = []
    workers = clock.join(["slow link", "fast link"])

    def body(worker, pause: float) -> None:
        t = START
        while worker.wait_until(t):
            order.append(f"{worker.name} starts {clock.now():%H:%M}")
            threading.Event().wait(pause)  # real work of different lengths: the first is slower
            order.append(f"{worker.name} ends")
            t += timedelta(minutes=5)
            if t >= END:
                break
        worker.leave()

    pauses = (0.05, 0.0)
    threads = [threading.Thread(target=body, args=(w, p), daemon=True)
               for w, p in zip(workers, pauses, strict=True)]
    for t in reversed(threads):  # the later joiner asks first: its turn is still second
        t.start()
    clock.run(stall_s=30)
    for t in threads:
        t.join(5)
    assert order == [line for at in ("04:00", "04:05") for line in (
        f"slow link starts {at}", "slow link ends", f"fast link starts {at}", "fast link ends")]


def test_a_run_stopped_early_stays_where_it_stood_and_nobody_polls_after() -> None:
    """Ctrl-C or a death mid-run: time does not jump to the end (a poll there would read the rest
    of the scenario as one catch-up), and a waiter whose instant comes is not let on."""
    clock = LockstepClock(START, END)
    owes = Owes()
    clock.add(owes)
    log: list[tuple[str, datetime]] = []
    poller = _poller(clock, 60, log, "a", owes)
    poller.start()
    conductor = threading.Thread(target=clock.run, kwargs={"stall_s": 30}, daemon=True)
    conductor.start()
    wait_until(lambda: log, 10, "the first poll")  # its reading is owed: time holds at START
    clock.stop()
    conductor.join(10)
    poller.join(10)
    assert not conductor.is_alive() and not poller.is_alive()
    assert clock.finished and clock.now() == START
    assert log == [("a", START)]
