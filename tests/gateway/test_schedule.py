"""The gateway on a lockstep clock: what its stored-acknowledgements owe the clock at each instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from stormwatch.gateway.schedule import StoredParticipant

T0 = datetime(2026, 6, 1, 4, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


class Counts:
    """The gateway's two counts: readings made, readings still in the outbox."""

    def __init__(self) -> None:
        self.made = 0
        self.depth = 0

    def poll(self, n: int) -> None:
        self.made += n
        self.depth += n


def test_without_a_window_every_reading_is_owed_at_its_instant() -> None:
    c = Counts()
    p = StoredParticipant("gw", lambda: c.depth)
    c.poll(3)
    assert p.pending(T0) == "3 readings not confirmed stored"
    c.depth = 0
    assert p.pending(T0) is None


def test_a_window_lets_the_readings_of_its_instants_wait_and_owes_the_older_ones() -> None:
    c = Counts()
    p = StoredParticipant("gw", lambda: c.depth, lambda: c.made, window=2)
    for k in range(3):  # three instants of 3 readings each, none confirmed
        c.poll(3)
        owed = p.pending(T0 + k * MINUTE)
        assert owed is None if k < 2 else owed == f"3 readings made by {T0.isoformat()} not confirmed stored"
    c.depth -= 3  # the first instant's readings confirmed
    assert p.pending(T0 + 2 * MINUTE) is None
    c.poll(4)  # the next instant: the second one's 3 are now the oldest allowed to wait no longer
    assert p.pending(T0 + 3 * MINUTE) == f"3 readings made by {(T0 + MINUTE).isoformat()} not confirmed stored"
    c.depth = 4
    assert p.pending(T0 + 3 * MINUTE) is None


def test_a_window_needs_the_count_of_readings_made() -> None:
    with pytest.raises(ValueError, match="window"):
        StoredParticipant("gw", lambda: 0, window=3)
