"""A poll sent one reading a message and fed as one cycle (the alert service joins the messages of one
socket read that continue one another, fastwire.poll_cycle) gives the events, in the same order,
and the counts of feeding each message on its own: storms, plumes, a data gap, messages out of
order, cycles physics refuses, of another site, behind the watermark, delivered twice -- with and
without the late re-evaluation's state, and with the service's clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import Event, Reading
from stormwatch.fastwire import Cycle
from stormwatch.profiles import ProfileLibrary
from tests.alerts.test_feed_cycle import as_cycle, odd_cycles
from tests.alerts.test_feed_many import REPO, START, cycles, shuffled


def one_reading_a_message(polls: list[list[Reading]]) -> list[Cycle | list[Reading]]:
    """Each poll's readings as their own messages, decoded as the service decodes them."""
    return [as_cycle([r]) for poll in polls for r in poll]


def joined(messages: list[Cycle | list[Reading]], wake: int) -> list[Cycle | list[Reading]]:
    """The messages as the service feeds them when every ``wake`` of them arrive in one socket read."""
    out: list[Cycle | list[Reading]] = []
    for k in range(0, len(messages), wake):
        run: list[Reading] = []
        for m in [*messages[k:k + wake], None]:
            if isinstance(m, Cycle) and run and isinstance(as_cycle([*run, m[0]]), Cycle):
                run.append(m[0])
                continue
            if run:
                out.append(as_cycle(run))
            run = [m[0]] if isinstance(m, Cycle) else []
            if m is not None and not isinstance(m, Cycle):
                out.append(m)
    return out


def fed(messages: list[Cycle | list[Reading]], reevaluate_late: bool, clock: ManualClock | None,
        ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    profiles = ProfileLibrary()
    engine = Engine.for_site(load_site(REPO / "examples" / "site.yaml", profiles), profiles, None,
                             reevaluate_late=reevaluate_late, clock=clock)
    assert engine.lateness > timedelta(0)  # what the service joins messages on
    events: list[Event] = []
    for m in messages:
        if clock is not None:
            clock.set(max(r.time for r in m) + timedelta(seconds=30))
        events += engine.feed_cycle(m) if isinstance(m, Cycle) else engine.feed_many(m)
    events += engine.flush()
    return [e.model_dump(mode="json") for e in events], engine.counts


@pytest.mark.slow  # the matrix: several engines over days each
@pytest.mark.parametrize("scenario", [cycles, shuffled, odd_cycles])
@pytest.mark.parametrize("keep", [False, True])
def test_a_poll_fed_whole_gives_the_events_of_its_messages(scenario: Any, keep: bool) -> None:
    messages = one_reading_a_message(scenario())
    one, counts_one = fed(messages, keep, None)
    for wake in (7, 64):
        whole, counts_whole = fed(joined(messages, wake), keep, None)
        assert whole == one
        assert counts_whole == counts_one
    assert sum(e["kind"] == "storm_inspection_due" for e in one) == 3  # the scenario reaches the rules


def test_with_the_clock_and_the_odd_messages() -> None:
    messages = one_reading_a_message(odd_cycles(1))
    runs = joined(messages, 64)
    assert len(runs) < len(messages) / 3  # most of a poll's messages are joined
    one, counts_one = fed(messages, True, ManualClock(START))
    whole, counts = fed(runs, True, ManualClock(START))
    assert whole == one and counts == counts_one
    assert counts["impossible"] >= 2 and counts["foreign"] >= 3 and counts["late"] >= 3 and counts["duplicate"] >= 3
