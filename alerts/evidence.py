"""A work order's evidence for people: a storm order carries one item per tip reading (a hundred
or more), so the desks show them summarized -- how many readings, how many tips, first and last
time -- and the full list on request (``workorders show --evidence full|csv``, the order page's
"all readings"). Design: docs/rules.md ("Work orders").
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: At most this many items of other evidence are listed one by one in a summary (first and last).
SHOWN = 6


@dataclass(frozen=True)
class TipSummary:
    """The tip readings of an order's evidence, counted."""

    readings: int
    tips: int
    first: datetime
    last: datetime
    flagged: int  # readings with a quality flag


def _time(item: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(item["time"]).replace("Z", "+00:00"))


def tip_summary(evidence: Sequence[dict[str, Any]]) -> TipSummary | None:
    """The evidence's tip readings (items with ``tips`` and a ``time``) counted; ``None`` without any."""
    tips = [item for item in evidence if "tips" in item and item.get("time")]
    if not tips:
        return None
    times = [_time(item) for item in tips]
    return TipSummary(len(tips), sum(int(item["tips"]) for item in tips), min(times), max(times),
                      sum(1 for item in tips if item.get("flags")))


def other_items(evidence: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evidence that is not a tip reading (summarized apart), in its order."""
    return [item for item in evidence if not ("tips" in item and item.get("time"))]


def shortened(items: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    """At most :data:`SHOWN` items: the first ones, how many are left out, the last ones."""
    if len(items) <= SHOWN:
        return list(items), 0, []
    head = SHOWN - SHOWN // 3
    tail = SHOWN - head
    return list(items[:head]), len(items) - SHOWN, list(items[-tail:])


def to_csv(evidence: Sequence[dict[str, Any]]) -> str:
    """Every evidence item as a CSV row; the columns are every key any item has, in the order first
    seen (a list or dict value as JSON)."""
    columns: list[str] = []
    for item in evidence:
        columns += [k for k in item if k not in columns]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for item in evidence:
        writer.writerow(["" if item.get(k) is None else
                         json.dumps(item[k]) if isinstance(item[k], list | dict) else item[k] for k in columns])
    return out.getvalue()
