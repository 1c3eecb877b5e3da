"""The alert engine's path for the common poll cycle: one message in, one poll cycle out, in one pass.

Live, nearly every message is a plain poll cycle (:class:`~stormwatch.fastwire.Cycle`) a minute after
the last, and it releases exactly one cycle, the one ``lateness`` before it, to the rules' quick
feeders. :func:`feed_cycle` (``Engine.feed_cycle``) does that in one frame for admission and one for
the release -- the checks of ``Engine._admit_cycle``, the release of ``Engine._release`` and the rules'
run of ``Engine._run_cycle``, in the same order with the same effects -- and reads the clock once.
Anything not plainly that (a rule due before the released cycle, a held watermark, the heap in use,
a new shape, a cycle not after everything buffered, ...) takes the engine's general path before
anything is done on the way it left. tests/alerts/test_cycle_path.py holds the two equal.
The design: docs/scaling.md ("Alert engine").
"""

from __future__ import annotations

import operator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from stormwatch.alerts.rules import Rule
from stormwatch.contract import Event
from stormwatch.fastwire import Cycle

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_le = operator.le
#: The engine (:class:`stormwatch.alerts.engine.Engine`, whose ``feed_cycle`` this is): not imported,
#: not even for its type, since the engine imports this module and the code has no import cycle.
_Engine = Any


def feed_cycle(engine: _Engine, cycle: Cycle, *, retained: bool = False) -> list[Event]:
    """:meth:`Engine.feed_many` of a message decoded as columns (:class:`~stormwatch.fastwire.Cycle`):
    the same events and counts. Its shared fields (site, gateway, boot, time, the seq run) are checked
    once, physics per reading from ranges found once per shape, and when it is released alone the
    rules take its readings from the columns; anything not plainly admitted goes ``feed_many``'s way
    with the cycle's readings. The common cycle is admitted here (module docstring)."""
    t = cycle.time
    w = engine._watermark
    fifo = engine._fifo
    bounds = engine._last_bounds  # the cycles of one gateway share their shape object
    if retained or w is None or t <= w or engine._hold is not None or engine._heap or not fifo \
            or not t > fifo[-1][1][0] or cycle.site != engine.site or bounds[0] is not cycle.shape:
        return cast(list[Event], engine._feed_cycle(cycle, retained))
    values = cycle.values  # a shape in the bounds was admitted before: not empty
    if not (all(map(_le, bounds[1], values)) and all(map(_le, values, bounds[2]))):
        return cast(list[Event], engine._feed_cycle(cycle, retained))
    clock = engine.clock
    now = None
    if clock is not None:  # the bounds' latest and earliest, and the cap of the watermark: one reading
        now = clock.now()
        behind = engine._behind
        if t > now + engine._ahead or (behind is not None and t < now - behind):
            return cast(list[Event], engine._feed_cycle(cycle, retained))
    gateway, boot, seq = cycle.gateway, cycle.boot, cycle.seq
    end = seq + len(values) - 1
    if not engine._seen.take_run(gateway, boot, seq, end, t):  # nothing done when it is not fresh
        return cast(list[Event], engine._feed_cycle(cycle, retained))
    fifo.append(((t, gateway, boot, seq), (t, gateway, boot, end), cycle))
    top = engine._max_seen
    if top is None or t > top:
        engine._max_seen = top = t
    edge = top - engine.lateness
    if now is not None and now < edge:
        edge = now
    if edge <= w:
        return []
    front = fifo[0]
    if front[1][0] > edge or (len(fifo) > 1 and fifo[1][0][0] <= edge) or type(front[2]) is not Cycle:
        return cast(list[Event], engine._release(edge))
    return release_one(engine, edge, front[2])


def release_one(engine: _Engine, w: datetime, c: Cycle) -> list[Event]:
    """``Engine._release`` to ``w`` of the reorder buffer's front cycle ``c``, the only one at or before
    ``w``: its readings to the rules' quick feeders (``Engine._run_cycle``), then the rules due at ``w``
    advanced; ``Engine._release`` itself when a rule is due before ``c``'s time or its plan is not at hand."""
    t = c.time
    rules = engine.rules
    last = engine._last_plan
    if last[0] is not c.shape:
        return cast(list[Event], engine._release(w))
    for rule in rules:
        nd = rule.next_due
        if nd is not None and nd < t:
            return cast(list[Event], engine._release(w))
    engine._watermark = w
    engine._fifo.popleft()
    if engine.reevaluate_late:
        engine._keep_cycle(c)
    values = c.values
    engine.counts["fed"] += len(values)
    out: list[Event] = []
    us = (t - _EPOCH) // _US  # not us_of: its one-entry cache misses here, a new instant every cycle
    take_plan(engine, last[1], c, us, [], out)
    if engine._hungry or engine._watchers:
        return cast(list[Event], engine._after_release(w, out))
    # Engine._after_release without routes to renew or watchers to tell, inline: calling it here cost
    # 5-10 % of a poll cycle (µs, min of 5, two pairs on a quiet machine)
    for rule in rules:
        nd = rule.next_due
        if nd is not None and nd <= w:
            out += rule.advance_to(w)
    if engine.reevaluate_late:
        if w >= engine._prune_at:
            engine._prune(w)
    elif engine._seen.count > engine._forget_above:  # (as Engine._after_release forgets)
        engine._seen.forget(w, including=True)
        engine._forget_above = engine._seen.count + 4096
    return cast(list[Event], [engine._with_order(e) for e in engine._record(out)]) if out else out


def take_plan(engine: _Engine, plan: tuple[Any, ...], c: Cycle, us: int, again: list[Rule],
              out: list[Event]) -> None:
    """The readings of ``c`` (at ``us`` µs since the epoch) to the rules of its ``plan``, reading by reading:
    by a rule's quick feeder from the columns, or as a model when the feeder declines it (or it has none);
    a rule due before ``c``'s time after taking one (``again``: those already due) is advanced before
    the next reading. Events are appended to ``out`` (``Engine._run_cycle``, ``release_one``)."""
    t = c.time
    values, units, sizes, gateway = c.values, c.units, c.tip_sizes, c.gateway
    prev = 0
    for i, taker, quick in plan:
        if again and i != prev:
            again = engine._due_before(again, t, out)
        prev = i
        found = None if quick is None else quick(t, us, values[i], units[i], sizes[i], gateway)
        if found is None:
            found = taker.feed(c.reading(i))
        if found:
            out += found
        nd = taker.next_due
        if nd is not None and nd < t:
            again.append(taker)
