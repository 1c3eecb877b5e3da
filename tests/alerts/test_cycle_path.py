"""The common poll cycle's one-pass path (stormwatch.alerts.cyclepath, Engine.feed_cycle) gives the events,
in the same order, the counts and the engine's state of the general path (Engine._feed_cycle: admitted
as a batch, released by Engine._release): plain cycles, messages out of order, the odd cycles (physics
refused, another site, late, duplicates, flagged readings), late re-evaluation on and off, a clock, a
hold and a gauge reported offline between cycles -- and the one-pass path does take most cycles."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from stormwatch.alerts import cyclepath
from stormwatch.alerts.engine import Engine
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import Event, Reading
from stormwatch.fastwire import Cycle
from stormwatch.profiles import ProfileLibrary
from tests.alerts.test_feed_cycle import as_cycle, odd_cycles
from tests.alerts.test_feed_many import REPO, cycles, shuffled


def fed(messages: list[list[Reading]], one_pass: bool, reevaluate_late: bool, clock: bool = False,
        interrupt: bool = False) -> tuple[list[dict[str, Any]], dict[str, int], tuple[Any, ...]]:
    """Every event in the order given, the counts and the engine's state at the end; ``interrupt``: a hold
    now and then (lifted a few cycles later) and the gauge's gateway reported offline once a day."""
    profiles = ProfileLibrary()
    manual = ManualClock(messages[0][0].time) if clock else None
    engine = Engine.for_site(load_site(REPO / "examples" / "site.yaml", profiles), profiles, None,
                             reevaluate_late=reevaluate_late, clock=manual)
    events: list[Event] = []
    for k, message in enumerate(messages):
        if manual is not None:
            manual.set(max(r.time for r in message) + timedelta(seconds=30))
        if interrupt and k % 400 == 17:
            events += engine.hold(message[0].time - timedelta(minutes=1))
        if interrupt and k % 400 == 23:
            events += engine.hold(None)
        if interrupt and k % 1440 == 300:
            events += engine.source_offline(message[0].gateway, message[0].time)
        one = as_cycle(message)
        if not isinstance(one, Cycle):
            events += engine.feed_many(one)
        elif one_pass:
            events += engine.feed_cycle(one)
        else:
            events += engine._feed_cycle(one, False)
    events += engine.flush()
    state = (engine.watermark, len(engine._fifo), len(engine._heap), len(engine._recent),
             [s.time for s in engine._snapshots], engine._seen.count, len(engine._emitted))
    return [e.model_dump(mode="json") for e in events], engine.counts, state


def plain(days: int = 3) -> list[list[Reading]]:
    """:func:`cycles` without its odd readings (a reading behind the watermark has a seq far ahead of the
    gateway's: with late re-evaluation on it is remembered, and the cycles after it are not one fresh run)."""
    return [[r for r in message if r.seq < 100_000] for message in cycles(days)]


@pytest.fixture
def one_pass_count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many releases the one-pass path made to the end (counted as it runs)."""
    taken = [0]
    release = cyclepath.release_one

    def counted(*args: Any) -> list[Event]:
        found = release(*args)
        taken[0] += 1
        return found
    monkeypatch.setattr(cyclepath, "release_one", counted)
    return taken


@pytest.mark.parametrize("scenario", [plain, cycles, shuffled, odd_cycles])
@pytest.mark.parametrize("keep", [False, True])
def test_one_pass_gives_the_general_paths_events_counts_and_state(scenario: Any, keep: bool,
                                                                   one_pass_count: list[int]) -> None:
    messages = scenario()
    plain, counts_plain, state_plain = fed(messages, False, keep)
    general_releases = one_pass_count[0]
    fast, counts_fast, state_fast = fed(messages, True, keep)
    assert fast == plain and counts_fast == counts_plain and state_fast == state_plain
    assert any(e["kind"] == "storm_inspection_due" for e in fast)  # the scenario reaches the rules
    assert general_releases == 0 and one_pass_count[0] > 0
    if scenario is plain:  # the others' late reading, seen once judged, is a run of seqs ahead of the rest
        assert one_pass_count[0] > len(messages) * 0.6  # most cycles take it


@pytest.mark.parametrize("scenario", [plain, odd_cycles])
@pytest.mark.parametrize("keep", [False, True])
def test_a_clock_a_hold_and_an_offline_gauge_alike(scenario: Any, keep: bool, one_pass_count: list[int]) -> None:
    messages = scenario(2)
    general = fed(messages, False, keep, clock=True, interrupt=True)
    fast = fed(messages, True, keep, clock=True, interrupt=True)
    assert fast == general
    assert one_pass_count[0] > (len(messages) * 0.5 if scenario is plain else 0)


def test_a_rule_due_before_the_released_cycle_takes_the_general_path(one_pass_count: list[int]) -> None:
    """A gauge silent for two hours: the storm rule is due (a data gap) before the cycle after the silence."""
    messages = plain(2)
    general = fed(messages, False, True)
    fast = fed(messages, True, True)
    assert fast == general
    assert any(e["kind"] == "data_gap" for e in fast[0])
    assert one_pass_count[0] < len(messages) - 3
