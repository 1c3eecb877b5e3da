"""Engine.feed_many (a message's readings at once) gives the events and counts of Engine.feed reading by
reading: storms, plumes, a data gap, and every reading feed skips -- flagged, impossible, another
site, a duplicate, a reading too late for the watermark, a time the clock rules out."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stormwatch.alerts.engine import Engine
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary

REPO = Path(__file__).resolve().parents[2]
START = datetime(2026, 6, 1, tzinfo=UTC)
SITE, GW = "riverside-commons", "gw-riverside-1"


def cycles(days: int = 3) -> list[list[Reading]]:
    """Poll cycles of the example site's four devices a minute apart: a storm and a plume each day, a
    silent gauge for two hours on day 2, and the odd readings feed skips."""
    out: list[list[Reading]] = []
    seq = 0
    for minute in range(days * 1440):
        t = START + timedelta(minutes=minute)
        day, i = divmod(minute, 1440)
        storm = 600 <= i < 780
        cycle = []
        for device, quantity, value, unit in (
                ("rain-1", "rain_tips", (1 if i % 3 == 0 else 0) if storm else 0, "{tip}"),
                ("turb-up", "turbidity", 12.0 + 3 * math.sin(i / 97), "NTU"),
                ("turb-down", "turbidity", 14.0 + (40.0 if 660 <= i < 720 else 0.0), "NTU"),
                ("basin-level", "distance", 2000.0 - day * 10, "mm")):
            if device == "rain-1" and day == 1 and 200 <= i < 330:
                continue  # the gauge silent: a data gap
            seq += 1
            flags: tuple[str, ...] = ("spike",) if device == "turb-down" and i == 700 else ()
            cycle.append(Reading.model_construct(site=SITE, device=device, quantity=quantity, value=value, unit=unit,
                                                 time=t, gateway=GW, boot="b1", seq=seq, raw=None, flags=flags,
                                                 tip_size="0.01 in" if quantity == "rain_tips" else None))
        if i == 100:
            odd = cycle[1]
            cycle += [odd.model_copy(update={"value": -1.0, "seq": odd.seq + 100_000}),  # impossible
                      odd.model_copy(update={"site": "elsewhere", "seq": odd.seq + 100_001}),  # another site
                      odd.model_copy(update={"flags": ("late",), "seq": odd.seq + 100_002}),  # stored late
                      odd]  # a duplicate within the message
        if i == 101 and out:
            cycle.append(out[-90][2].model_copy(update={"seq": 900_000 + day}))  # behind the watermark
        out.append(cycle)
        if i == 400:
            out.append(list(cycle))  # a message redelivered whole: four duplicates
    return out


def run(batched: bool, clock: ManualClock | None = None) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    profiles = ProfileLibrary()
    engine = Engine.for_site(load_site(REPO / "examples" / "site.yaml", profiles), profiles, None, clock=clock)
    events: list[Event] = []
    for cycle in cycles():
        if clock is not None:
            clock.set(cycle[0].time + timedelta(seconds=30))
        if batched:
            events += engine.feed_many(cycle)
        else:
            for r in cycle:
                events += engine.feed(r)
    events += engine.flush()
    return sorted((e.kind, e.occurrence, e.event_time, e.details.model_dump_json()) for e in events), engine.counts


def test_a_message_at_once_gives_the_events_of_feed() -> None:
    one, counts_one = run(batched=False)
    many, counts_many = run(batched=True)
    assert one == many
    assert counts_one == counts_many
    kinds = {k for k, *_ in one}
    assert {"storm_qualified", "data_gap"} <= kinds  # the scenario reaches the rules
    assert counts_many["impossible"] == 3 and counts_many["foreign"] == 3 and counts_many["duplicate"] == 3 + 3 * 4
    assert counts_many["late"] == 3 and counts_many["retained"] == 3


def test_the_clocks_bounds_alike() -> None:
    clock_one, clock_many = ManualClock(START), ManualClock(START)
    one, counts_one = run(batched=False, clock=clock_one)
    many, counts_many = run(batched=True, clock=clock_many)
    assert one == many and counts_one == counts_many


def shuffled(days: int = 3) -> list[list[Reading]]:
    """:func:`cycles` as a broker may deliver them: now and then two messages swapped (the later
    poll cycle first, within the lateness), two poll cycles in one message (a catch-up), and a
    message whose readings come in reverse order."""
    out = cycles(days)
    for k in range(50, len(out) - 2, 97):
        out[k], out[k + 1] = out[k + 1], out[k]
    for k in range(130, len(out) - 2, 211):
        out[k:k + 2] = [out[k] + out[k + 1]]
    for k in range(170, len(out), 301):
        out[k] = out[k][::-1]
    return out


def dumped(messages: list[list[Reading]], batched: bool,
           reevaluate_late: bool) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every event, in the order the engine gave them, and the engine's counts."""
    profiles = ProfileLibrary()
    engine = Engine.for_site(load_site(REPO / "examples" / "site.yaml", profiles), profiles, None,
                             reevaluate_late=reevaluate_late)
    events: list[Event] = []
    for message in messages:
        if batched:
            events += engine.feed_many(message)
        else:
            for r in message:
                events += engine.feed(r)
    events += engine.flush()
    return [e.model_dump(mode="json") for e in events], engine.counts


def test_one_by_one_and_batched_give_identical_events_in_order() -> None:
    for messages in (cycles(), shuffled()):
        for keep in (False, True):
            one, counts_one = dumped(messages, batched=False, reevaluate_late=keep)
            many, counts_many = dumped(messages, batched=True, reevaluate_late=keep)
            assert many == one
            if keep:  # a re-evaluation feeds the rules again up to the watermark, which moves per message
                counts_one.pop("fed"), counts_many.pop("fed")
            assert counts_many == counts_one
            assert sum(e["kind"] == "storm_inspection_due" for e in one) == 3  # a storm a day, each qualifying
