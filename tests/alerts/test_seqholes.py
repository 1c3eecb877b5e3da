"""Readings on their way (docs/rules.md, "Readings on their way"): a jump in a gateway's ``seq`` holds
the site's rules until the readings in between arrive, or, bounded, until ``hold_s`` real seconds have
passed.

Logic tests on a manual real clock and a manual event clock (no broker): the engine is the alert
tests' site (tests/alerts_support.py) at lateness 0; the storm rule is Ch. 133 R1 (0.5 in,
6-hour dry gap, 0.01 in per tip: 50 tips qualify).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.seqholes import MAX_HOLE_SEQS, SequenceHoles
from stormwatch.config import parse_site
from stormwatch.contract import Reading
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site, site_doc

MIN = timedelta(minutes=1)


class RealClock:
    """A manual monotonic clock (seconds)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _reading(seq: int, minute: int, gateway: str = "gw", boot: str = "b1") -> Reading:
    return Reading(site="s1", device="rain", quantity="rain_tips", value=1, unit="{tip}",
                   time=T0 + minute * MIN, gateway=gateway, boot=boot, seq=seq)


def test_a_jump_opens_a_hole_between_the_neighbours_times_and_its_readings_close_it() -> None:
    holes = SequenceHoles("s1", hold_s=120, now=RealClock())
    assert not holes.saw(_reading(1, 0)) and not holes.saw(_reading(2, 1))
    assert holes.saw(_reading(6, 5))  # seq 3, 4, 5 missing: made between minute 1 and minute 5
    (hole,) = holes.open
    assert (hole.first, hole.last, hole.missing) == (3, 5, {3, 4, 5})
    assert holes.hold() == T0 + MIN and holes.windows() == [(T0 + MIN, T0 + 5 * MIN)]
    assert not holes.saw(_reading(4, 3)) and not holes.saw(_reading(4, 3))  # a duplicate changes nothing
    assert not holes.saw(_reading(7, 6))  # the next in order: no new hole
    assert not holes.saw(_reading(3, 2))
    assert holes.saw(_reading(5, 4))  # the last missing one: closed
    assert holes.hold() is None and holes.open == [] and holes.filled == 3


def test_boots_and_gateways_number_apart_and_imports_do_not_count() -> None:
    holes = SequenceHoles("s1", now=RealClock())
    holes.saw(_reading(10, 0, boot="b1"))
    assert not holes.saw(_reading(0, 1, boot="b2"))  # a new boot starts again from 0
    assert not holes.saw(_reading(500, 2, gateway="gw2"))  # another gateway: its first reading
    assert not holes.saw(_reading(11, 3, boot="b1"))
    assert not holes.saw(_reading(100, 4, gateway="import")) and not holes.saw(_reading(900, 5, gateway="import"))
    assert holes.open == []


def test_stored_readings_fill_holes_and_move_the_sequence_on_but_open_none() -> None:
    holes = SequenceHoles("s1", now=RealClock())
    # warm-up: seq 1, 2, 4 stored (3 was refused by ingest: a dead letter, not a hole to wait for)
    assert not holes.saw_stored([_reading(1, 0), _reading(2, 1), _reading(4, 3)])
    assert holes.open == [] and not holes.saw(_reading(5, 4))  # live again right after the stored ones
    holes.saw(_reading(9, 8))
    assert not holes.saw_stored([_reading(6, 5), _reading(7, 6)])
    assert holes.saw_stored([_reading(8, 7)]) and holes.open == []


def test_a_refused_reading_arrived_and_is_not_waited_for() -> None:
    holes = SequenceHoles("s1", now=RealClock())
    assert not holes.refused("gw", "b1", 7)  # nothing to date it from yet: ignored
    holes.saw(_reading(1, 0))
    assert not holes.refused("gw", "b1", 2)  # a NaN value, say: the next in order
    assert not holes.saw(_reading(3, 2))  # so 3 follows on, no hole
    holes.saw(_reading(6, 5))  # 4 and 5 missing
    assert not holes.refused("gw", "b1", 4) and holes.refused("gw", "b1", 5) and holes.open == []
    assert holes.refused("gw", "b1", 9)  # refused past a jump: 7, 8 missing, dated from seq 6
    (hole,) = holes.open
    assert (hole.first, hole.last, holes.windows()) == (7, 8, [(T0 + 5 * MIN, None)])


def test_a_hole_is_given_up_after_hold_s_real_seconds() -> None:
    real = RealClock()
    holes = SequenceHoles("s1", hold_s=120, now=real)
    holes.saw(_reading(1, 0))
    holes.saw(_reading(5, 4))
    real.t += 119.9
    assert holes.expire() == [] and holes.hold() == T0
    real.t += 0.1
    (gone,) = holes.expire()
    assert (gone.first, gone.last) == (2, 4) and holes.hold() is None and holes.given_up == 3


def test_a_jump_too_large_to_be_an_outbox_is_not_waited_for() -> None:
    holes = SequenceHoles("s1", now=RealClock())
    holes.saw(_reading(1, 0))
    assert not holes.saw(_reading(MAX_HOLE_SEQS + 3, 1))
    assert holes.open == []
    with pytest.raises(ValueError, match="hold_s"):
        SequenceHoles("s1", hold_s=0)


def _storm(feed: Feeder, start: datetime, tips_per_minute: list[int]) -> list[Reading]:
    return [feed.tips(n, start + i * MIN) for i, n in enumerate(tips_per_minute)]


def test_the_engine_held_below_a_hole_closes_the_storm_with_every_tip_once_it_is_filled() -> None:
    """70 tips at one a minute from T0 (0.70 in), then dry readings every 10 minutes for 7 h. Minutes
    20-39 (20 tips) reach the engine only after the rest, as a gateway's re-send after a broker crash:
    held, the storm closes once, at 0.70 in, 6 h after its last tip (T0 + 69 min), due 24 h after it."""
    feed = Feeder()
    made = _storm(feed, T0, [1] * 70) + [feed.tips(0, T0 + 70 * MIN + k * 10 * MIN) for k in range(43)]
    resent = made[20:40]
    first = [r for r in made if r not in resent]
    engine = Engine.for_site(site("ch133"), ProfileLibrary(), None, 0)
    holes = SequenceHoles("s1", now=RealClock())
    events = []
    for r in first:
        if holes.saw(r):
            events += engine.hold(holes.hold())
        events += engine.feed(r)
    # held at the last reading before the hole (released already at lateness 0), whatever came after
    assert engine.held_at == T0 + 19 * MIN and engine.watermark == T0 + 19 * MIN
    assert [e.kind for e in events if e.rule == "R1"] == ["storm_started"]  # not qualified: tip 50 is held
    for r in resent:
        closed = holes.saw(r)
        events += engine.feed(r)
        if closed:
            events += engine.hold(holes.hold())
    assert engine.held_at is None
    (due,) = [e for e in events if e.kind == "storm_inspection_due"]
    last_tip = T0 + 69 * MIN
    assert (due.tips, due.depth_in, due.event_time, due.due_at) == (70, 0.7, last_tip + timedelta(hours=6),
                                                                    last_tip + timedelta(hours=24))
    assert "at least" not in due.message and due.details.model_dump().get("depth_lower_bound") is None
    assert [e.kind for e in events].count("storm_qualified") == 1 and "data_gap" not in [e.kind for e in events]


def test_without_the_hold_a_storm_with_a_gap_inside_is_a_lower_bound() -> None:
    """The same storm with minutes 20-39 never received and the gauge polled every minute: a data gap
    from minute 19 to 40 inside the storm; it closes with 50 tips (0.50 in: still qualifying) as
    *at least* 0.50 in, naming the gap (rules.md R1)."""
    feed = Feeder()
    made = _storm(feed, T0, [1] * 70) + [feed.tips(0, T0 + 70 * MIN + k * MIN) for k in range(370)]
    cfg = parse_site(site_doc("ch133", rain_poll_s=60), "test-site.yaml")
    engine = Engine.for_site(cfg, ProfileLibrary(), None, 0)
    events = [e for r in made[:20] + made[40:] for e in engine.feed(r)]
    gaps = [(e.gap_start, e.gap_end) for e in events if e.kind == "data_gap" and e.gap_end is not None]
    assert gaps == [(T0 + 19 * MIN, T0 + 40 * MIN)]
    (due,) = [e for e in events if e.kind == "storm_inspection_due"]
    assert (due.tips, due.depth_in) == (50, 0.5)
    assert due.details.model_dump()["depth_lower_bound"] is True
    assert "storm of at least 0.50 in (50 tips of 0.01 in); rain unknown in the rain gauge's data gap" in due.message


def test_a_gap_closed_by_a_counter_catch_up_keeps_the_depth_exact() -> None:
    """The gateway could not poll the gauge in minutes 20-29 (no readings made); its poll at minute 30
    counted the 11 tips since minute 19 (the counter's rise), flagged ``counter_catch_up``: a data gap
    19-30 (rain times unknown) but every tip counted -- 60 tips, 0.60 in, exact, needing verification."""
    feed = Feeder()
    made = [feed.tips(1, T0 + i * MIN) for i in range(20)]
    made.append(feed("rain", "rain_tips", 11, "{tip}", T0 + 30 * MIN, ("counter_catch_up",)))
    made += [feed.tips(1, T0 + i * MIN) for i in range(31, 60)]
    made += [feed.tips(0, T0 + 60 * MIN + k * MIN) for k in range(370)]
    engine = Engine.for_site(parse_site(site_doc("ch133", rain_poll_s=60), "test-site.yaml"), ProfileLibrary(), None, 0)
    events = [e for r in made for e in engine.feed(r)]
    assert [(e.gap_start, e.gap_end) for e in events if e.kind == "data_gap" and e.gap_end] == \
        [(T0 + 19 * MIN, T0 + 30 * MIN)]
    (due,) = [e for e in events if e.kind == "storm_inspection_due"]
    assert (due.tips, due.depth_in) == (60, 0.6)
    assert due.message.startswith("storm of 0.60 in (60 tips of 0.01 in) ended")
    assert due.details is not None and due.details.model_dump()["depth_lower_bound"] is None
    assert due.details.model_dump()["needs_verification"] == ["counter_catch_up"]


def test_a_message_taken_as_one_run_notes_what_reading_by_reading_notes() -> None:
    """``saw_run`` says ``True`` exactly when no reading of the message opens or fills a hole, and then
    leaves the holes as :meth:`SequenceHoles.saw` reading by reading leaves them."""
    messages = [
        [_reading(1, 0), _reading(2, 0), _reading(3, 0)],  # the gateway's first: one run
        [_reading(4, 1), _reading(5, 1)],  # the next seqs
        [_reading(0, 2, boot="b2"), _reading(1, 2, boot="b2")],  # a new boot from 0
        [_reading(6, 3), _reading(7, 3, gateway="gw2")],  # two gateways in one message
        [_reading(8, 4), _reading(8, 4)],  # a duplicate within the message
        [_reading(9, 5), _reading(11, 5)],  # a jump within the message
        [_reading(15, 6)],  # a jump from the newest (11)
        [_reading(3, 7, gateway="import"), _reading(9, 7, gateway="import")],  # not a gateway's: never a hole
    ]
    run_wise = SequenceHoles("s1", now=RealClock())
    one_by_one = SequenceHoles("s1", now=RealClock())
    verdicts = []
    for message in messages:
        taken = run_wise.saw_run(message)
        if not taken:
            for r in message:
                run_wise.saw(r)
        changed = [one_by_one.saw(r) for r in message]
        verdicts.append(taken)
        assert not (taken and any(changed))
        assert (run_wise.hold(), run_wise.windows()) == (one_by_one.hold(), one_by_one.windows())
    assert verdicts == [True, True, True, True, False, False, False, True]


def test_a_poll_cycle_taken_whole_notes_what_a_run_notes() -> None:
    """``saw_cycle`` (a cycle's seqs and time, no models) says what ``saw_run`` says of the cycle's readings
    and leaves the holes, and the newest seq, as it does: a first cycle, the next, a new boot, a jump, a
    cycle of an importer, a cycle after a hole."""
    cycles = [("gw", "b1", 1, 3, 0), ("gw", "b1", 4, 5, 1), ("gw", "b2", 0, 1, 2), ("gw", "b1", 9, 9, 3),
              ("import", "b1", 3, 4, 4), ("gw", "b1", 6, 6, 5), ("gw", "b1", 10, 11, 6)]
    columns = SequenceHoles("s1", now=RealClock())
    runs = SequenceHoles("s1", now=RealClock())
    verdicts = []
    for gateway, boot, first, last, minute in cycles:
        readings = [_reading(seq, minute, gateway, boot) for seq in range(first, last + 1)]
        taken = columns.saw_cycle(gateway, boot, first, last, T0 + minute * MIN)
        assert taken == runs.saw_run(readings)
        for holes in (columns, runs) if not taken else ():
            for r in readings:
                holes.saw(r)
        verdicts.append(taken)
        assert (columns.hold(), columns.windows(), columns.taken()) == (runs.hold(), runs.windows(), runs.taken())
    assert verdicts == [True, True, True, False, True, False, True]
