"""What a run decided, comparable between runs (no tests here).

On the lockstep clock (``stormwatch demo`` without ``--speed``) two runs agree exactly, but for
the run's own ids (:func:`without_run_ids`). The rest is for runs paced by the wall clock:

Data gaps, ``turbidity_undetermined`` and ``turbidity_cleared`` follow from readings a loaded
machine skips at simulation speed (a poll slot missed is a gap, never a zero), so two correct runs
may differ in them; the compliance answer may not: the storm (tips, depth, due time), the
turbidity violation, the basin cleanout, the routine inspection and their citations.

A storm's total (``storm_inspection_due``: tips and depth) is compared exactly; the count at which
it qualified is not: near the peak one 60-s reading carries two or three tips, and which slot
a tip falls in depends on how long after its slot time the poll reached the simulated gauge, so
``storm_qualified`` may say 50 or 51 tips -- both runs must say at least the threshold (50 tips).
"""

# Due times are compared to within :data:`SLOT_SLACK`. The gateway stamps a reading with its poll
# slot, and the simulated device answers with its value at the moment the request reaches it: at
# 2000x, 0.3 real seconds of scheduling delay on a loaded machine put a tip 10 simulated minutes
# into an earlier slot, and a skipped slot (a gap) puts it into a later one. Observed: up to 9 min
# at load average 8 on 2 cores. The mistakes these tests catch -- a second storm, a wall clock, a
# due date a day or an hour off -- are far larger.

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

#: Event kinds that carry the compliance answer of the default scenario.
ANSWER_KINDS = frozenset({
    "storm_started", "storm_qualified", "storm_inspection_due", "routine_inspection_due", "turbidity_contrast",
    "basin_capacity_warning", "basin_cleanout_due",
})

#: How far the same rain may be stamped apart by two runs at simulation speed (see the module docstring).
SLOT_SLACK = timedelta(minutes=15)


def answer(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``kind -> {citation, tips, depth_in, due_at}`` of the events of :data:`ANSWER_KINDS` (wire
    form, :meth:`stormwatch.contract.Event.to_wire`); a kind emitted again after a late
    re-evaluation counts with its last version.

    Raises:
        AssertionError: a kind of :data:`ANSWER_KINDS` for two different occurrences (the default
            scenario has one storm, one plume, one basin).
    """
    out: dict[str, dict[str, Any]] = {}
    occurrence: dict[str, str] = {}
    for e in events:
        kind = e["kind"]
        if kind not in ANSWER_KINDS:
            continue
        assert occurrence.setdefault(kind, e.get("occurrence", "")) == e.get("occurrence", ""), \
            f"two {kind} occurrences: {occurrence[kind]!r} and {e.get('occurrence')!r}"
        due = e.get("due_at")
        out[kind] = {"citation": e["citation"], "tips": e.get("tips"), "depth_in": e.get("depth_in"),
                     "due_at": datetime.fromisoformat(due) if due else None}
    return out


def assert_same_answer(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """The two runs' events give the same answer: kinds, citations, tips and depths exactly, due
    times to within :data:`SLOT_SLACK`."""
    a, b = answer(got), answer(expected)
    assert sorted(a) == sorted(b), f"kinds differ: {sorted(a)} vs {sorted(b)}"
    for kind in a:
        x, y = a[kind], b[kind]
        assert x["citation"] == y["citation"], (kind, x, y)
        if kind == "storm_qualified":
            assert x["tips"] >= 50 and y["tips"] >= 50, (kind, x, y)  # 0.50 in at 0.01 in per tip
        else:
            assert (x["tips"], x["depth_in"]) == (y["tips"], y["depth_in"]), (kind, x, y)
        assert (x["due_at"] is None) == (y["due_at"] is None), (kind, x, y)
        if x["due_at"] is not None:
            assert abs(x["due_at"] - y["due_at"]) <= SLOT_SLACK, (kind, x["due_at"], y["due_at"])


#: A run's own identities in its events: the gateway's boot id (new at every process start).
RUN_IDS = frozenset({"boot"})


def without_run_ids(value: Any) -> Any:
    """``value`` (wire-form events) without the run's own ids (:data:`RUN_IDS`): what two lockstep runs
    of one scenario must agree on exactly -- kinds, times, depths, percentages, due times."""
    if isinstance(value, dict):
        return {k: without_run_ids(v) for k, v in value.items() if k not in RUN_IDS}
    if isinstance(value, list):
        return [without_run_ids(v) for v in value]
    return value
