"""Engine.feed_cycle (a message decoded as columns, stormwatch.fastwire.Cycle) gives the events, in the
same order, and the counts of Engine.feed reading by reading and of Engine.feed_many: storms, plumes, a
data gap, messages out of order, and every cycle or reading the plain path does not take -- physics
refused, another site, a duplicate message, a cycle too late for the watermark, retained."""

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
from tests.alerts.test_feed_many import REPO, START, cycles, shuffled

_SHAPES: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def as_cycle(message: list[Reading]) -> Cycle | list[Reading]:
    """The message as the decoder gives a plain poll cycle (shared site, gateway, boot and time, one run
    of seqs, no flags), else its readings."""
    r0 = message[0]
    if any(r.site != r0.site or r.gateway != r0.gateway or r.boot != r0.boot or r.time != r0.time or r.flags
           or r.seq != r0.seq + i for i, r in enumerate(message)):
        return message
    shape = (tuple(r.device for r in message), tuple(r.quantity for r in message))
    return Cycle(r0.site, r0.gateway, r0.boot, r0.seq, r0.time, _SHAPES.setdefault(shape, shape),
                 tuple(r.value for r in message), tuple(r.unit for r in message),
                 tuple(r.tip_size for r in message), tuple(r.raw for r in message))


def odd_cycles(days: int = 3) -> list[list[Reading]]:
    """:func:`cycles` with whole cycles the plain path must refuse, each with a run of seqs of its own:
    one with a value physics forbids, one of another site, one an hour behind the watermark, and one
    delivered twice; and one whose first reading no rule takes."""
    out = cycles(days)
    fresh = 2_000_000
    for k in range(200, len(out), 1440):
        base = [r for r in out[k] if not r.flags]
        variants = [
            [r.model_copy(update={"value": -1.0}) if r.quantity == "turbidity" else r for r in base],
            [r.model_copy(update={"site": "elsewhere"}) for r in base],
            [r.model_copy(update={"time": r.time - timedelta(hours=1)}) for r in base],
        ]
        for v in variants:
            message = [r.model_copy(update={"seq": fresh + i}) for i, r in enumerate(v)]
            fresh += 100
            out[k:k] = [message]
        out[k + 40:k + 40] = [out[k + 39]]  # redelivered
    # a cycle whose first reading no rule takes, before the variants' seqs (after them the gateway's older
    # seqs are not one fresh run: feed_many's way)
    spare = out[150]
    out[150] = [spare[0].model_copy(update={"device": "spare-1", "quantity": "temperature", "value": 9.5,
                                            "unit": "Cel", "tip_size": None}), *spare[1:]]
    return out


def fed(messages: list[list[Reading]], how: str, reevaluate_late: bool = False,
        clock: ManualClock | None = None, retained: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    profiles = ProfileLibrary()
    engine = Engine.for_site(load_site(REPO / "examples" / "site.yaml", profiles), profiles, None,
                             reevaluate_late=reevaluate_late, clock=clock)
    events: list[Event] = []
    for k, message in enumerate(messages):
        if clock is not None:
            clock.set(max(r.time for r in message) + timedelta(seconds=30))
        keep = retained and k % 500 == 7
        if how == "feed":
            for r in message:
                events += engine.feed(r, retained=keep)
        elif how == "many":
            events += engine.feed_many(message, retained=keep)
        else:
            one = as_cycle(message)
            events += (engine.feed_cycle(one, retained=keep) if isinstance(one, Cycle)
                       else engine.feed_many(one, retained=keep))
    events += engine.flush()
    return [e.model_dump(mode="json") for e in events], engine.counts


@pytest.mark.slow  # the whole matrix: three engines over three days each
@pytest.mark.parametrize("scenario", [cycles, shuffled, odd_cycles])
@pytest.mark.parametrize("keep", [False, True])
def test_a_cycle_gives_the_events_and_counts_of_feed(scenario: Any, keep: bool) -> None:
    messages = scenario()
    one, counts_one = fed(messages, "feed", keep)
    many, counts_many = fed(messages, "many", keep)
    columns, counts_columns = fed(messages, "cycle", keep)
    assert columns == many == one
    assert sum(e["kind"] == "storm_inspection_due" for e in one) == 3  # the scenario reaches the rules
    assert counts_columns == counts_many
    if not keep:  # a re-evaluation feeds the rules again up to the watermark, which moves per message
        assert counts_columns == counts_one


def test_the_odd_cycles_are_counted_as_feed_counts_them() -> None:
    columns, counts = fed(odd_cycles(2), "cycle")
    one, counts_one = fed(odd_cycles(2), "feed")
    assert columns == one and counts == counts_one
    assert counts["impossible"] >= 2 * 2 and counts["foreign"] >= 2 * 3 and counts["late"] >= 2 * 3
    assert counts["duplicate"] >= 2 * 3


def test_the_clock_and_retained_alike() -> None:
    for retained in (False, True):
        one, counts_one = fed(odd_cycles(1), "feed", clock=ManualClock(START), retained=retained)
        columns, counts = fed(odd_cycles(1), "cycle", clock=ManualClock(START), retained=retained)
        assert columns == one and counts == counts_one
    assert counts["retained"] >= 3


def test_a_cycle_is_its_readings() -> None:
    message = cycles(1)[5]
    one = as_cycle(message)
    assert isinstance(one, Cycle)
    assert list(one) == message and len(one) == 4 and one[2] == message[2] and one[1:3] == message[1:3]
    with pytest.raises(ValueError):
        Cycle("s", "g", "b", 1, START, (("a",), ("rain_tips",)), (1, 2), ("{tip}",), (None,))
