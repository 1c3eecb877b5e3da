"""The engine's rule-state snapshots (stormwatch.alerts.statecopy): a copy equals copy.deepcopy's, shares
no object that can change with the live rules, keeps shared references shared, and a snapshot kept
for late re-evaluation still holds -- and restores -- the rules' state at its time after the live rules
have run on for days (storms, a plume, a data gap of the gauge)."""

from __future__ import annotations

import copy
import math
from collections import deque
from datetime import date, datetime, timedelta, tzinfo
from fractions import Fraction
from typing import Any

from pydantic import BaseModel

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.statecopy import state_copy
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import TipResolution
from tests.alerts.test_feed_cycle import as_cycle
from tests.alerts.test_feed_many import REPO, cycles

#: what a copy may share with the live rules (a tip size is a value: its inches never change)
_VALUES = (str, int, float, bool, bytes, type(None), datetime, date, timedelta, tzinfo, Fraction, type, TipResolution)


def _frozen(x: object) -> bool:
    if isinstance(x, BaseModel):
        return bool(x.model_config.get("frozen"))
    params = getattr(type(x), "__dataclass_params__", None)
    return bool(params is not None and params.frozen)


def dump(x: Any, path: tuple[int, ...] = ()) -> Any:
    """``x`` as nested plain values (types named, containers in order, objects by their fields)."""
    if isinstance(x, _VALUES) or _frozen(x):
        return ("nan",) if isinstance(x, float) and math.isnan(x) else x
    if id(x) in path:
        return ("cycle", type(x).__name__)
    inner = (*path, id(x))
    if isinstance(x, BaseModel):
        return (type(x).__name__, dump(x.model_dump(), inner))
    if isinstance(x, dict):
        return ("dict", [(dump(k, inner), dump(v, inner)) for k, v in x.items()])
    if isinstance(x, (list, tuple, deque, set, frozenset)):
        items = sorted(x, key=repr) if isinstance(x, (set, frozenset)) else x
        return (type(x).__name__, [dump(v, inner) for v in items])
    fields = dict(getattr(x, "__dict__", {}))
    for klass in type(x).__mro__:
        for name in klass.__dict__.get("__slots__", ()):
            if hasattr(x, name):
                fields[name] = getattr(x, name)
    return (type(x).__name__, sorted((k, dump(v, inner)) for k, v in fields.items()))


def twins(a: Any, b: Any, pairs: dict[int, int]) -> None:
    """``b`` is a copy of ``a`` that shares nothing mutable with it, and shares what ``a`` shares."""
    if isinstance(a, _VALUES) or _frozen(a) or isinstance(a, frozenset):
        return
    if isinstance(a, tuple):  # shared as deepcopy shares it when all its items are values; never one that holds more
        for va, vb in zip(a, b, strict=True):
            twins(va, vb, pairs)
        return
    assert b is not a, f"a mutable {type(a).__name__} is shared with the live rules"
    if id(a) in pairs:
        assert pairs[id(a)] == id(b), f"a shared {type(a).__name__} was copied twice"
        return
    pairs[id(a)] = id(b)
    if isinstance(a, dict):
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            twins(ka, kb, pairs)
            twins(va, vb, pairs)
    elif isinstance(a, (list, deque)) or isinstance(a, tuple):
        for va, vb in zip(a, b, strict=True):
            twins(va, vb, pairs)
    elif isinstance(a, BaseModel):
        for name in type(a).model_fields:
            twins(getattr(a, name), getattr(b, name), pairs)
    else:
        for name, va in vars(a).items() if hasattr(a, "__dict__") else ():
            twins(va, vars(b)[name], pairs)
        for klass in type(a).__mro__:
            for name in klass.__dict__.get("__slots__", ()):
                if hasattr(a, name):
                    twins(getattr(a, name), getattr(b, name), pairs)


def engine(reevaluate_late: bool) -> Engine:
    profiles = ProfileLibrary()
    return Engine.for_site(load_site(REPO / "examples" / "site.yaml", profiles), profiles, None,
                           reevaluate_late=reevaluate_late, clock=ManualClock(datetime(2026, 6, 1).astimezone()))


def feed(eng: Engine, message: list[Any]) -> None:
    assert eng.clock is not None and isinstance(eng.clock, ManualClock)
    eng.clock.set(max(r.time for r in message) + timedelta(seconds=30))
    one = as_cycle(message)
    if isinstance(one, list):
        eng.feed_many(one)
    else:
        eng.feed_cycle(one)


def test_a_copy_of_the_rules_equals_deepcopy_and_shares_nothing_that_changes() -> None:
    eng = engine(reevaluate_late=False)
    checked = 0
    for k, message in enumerate(cycles(3)):
        feed(eng, message)
        # mid-storm, in a plume, in the gauge's data gap (day 2), and quiet stretches
        if k % 97 == 0 or (1440 + 200 <= k <= 1440 + 340 and k % 7 == 0):
            memo: dict[int, Any] = {}
            ours, theirs = state_copy(eng.rules, dict(memo)), copy.deepcopy(eng.rules, dict(memo))
            assert dump(ours) == dump(theirs) == dump(eng.rules)
            twins(eng.rules, ours, {})
            checked += 1
    assert checked > 40


def test_a_snapshot_holds_and_restores_the_rules_at_its_time() -> None:
    eng = engine(reevaluate_late=True)
    at_snapshot: dict[datetime, Any] = {}  # the rules' state as each snapshot was taken (a re-run's replaces)
    take = eng._snapshot

    def snapshot(t: datetime) -> None:
        at_snapshot[t] = dump(eng.rules)
        take(t)

    eng._snapshot = snapshot  # type: ignore[method-assign]
    for message in cycles(3):
        feed(eng, message)
    kept = eng._snapshots
    assert len(at_snapshot) >= 70 and len(kept) >= 8 and eng.counts["reevaluated"] >= 2
    for snap in kept:  # days of live rules later, each kept snapshot is still its time's state
        assert dump(snap.rules) == at_snapshot[snap.time]
        restored = eng._copy_rules(snap.rules)
        assert dump(restored) == at_snapshot[snap.time]
        twins(snap.rules, restored, {})
