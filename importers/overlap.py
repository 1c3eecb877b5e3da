"""Which of a file's readings would measure again what the store holds from another source.

A device's readings that did not come from an import (``gateway`` is not
:data:`~stormwatch.importers.identity.IMPORT_GATEWAY`: the site's gateway, live or late) cover
stretches of time. An imported reading inside such a stretch would count the same rain twice (the
gateway's tip count and the logger's), or give a second value of one sensor; it is rejected
``overlaps_stored``. A reading in a genuine gap of the other source is stored: filling a gateway's
outage with the logger's own file is what an import is for (docs/importing.md, "Overlap with
gateway data"). Two imports of one device share one identity (:mod:`stormwatch.importers.identity`)
and meet as ``already_stored`` / ``conflicting_value`` instead.

The design: docs/importing.md ("The modules", `importers/overlap.py`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from stormwatch.clock import Clock
from stormwatch.contract import Reading
from stormwatch.gateway.counter import FLAG_RESET
from stormwatch.importers.identity import IMPORT_GATEWAY
from stormwatch.stores.base import ReadingStore
from stormwatch.wire import format_time

_TICK = timedelta(microseconds=1)
_FIRST_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class Coverage:
    """The stretches of one device's quantity that another source's stored readings cover.

    Attributes:
        spans: ``(start, end, start_open)`` in time order: times ``start < t <= end`` (``start_open``)
            or ``start <= t <= end`` are covered.
        sources: the other sources' names (``gateway gw-1``), sorted.
        count: how many of their readings lie in the file's span.
    """

    spans: tuple[tuple[datetime, datetime, bool], ...]
    sources: tuple[str, ...]
    count: int
    ends: tuple[datetime, ...] = ()  # the spans' ends, for bisection (made by :func:`coverage`)

    def covering(self, when: datetime) -> tuple[datetime, datetime] | None:
        """The covered stretch holding ``when`` (``(start, end)``), or ``None`` (a gap)."""
        i = bisect.bisect_left(self.ends, when)
        if i < len(self.spans):
            start, end, open_start = self.spans[i]
            if (start < when if open_start else start <= when) and when <= end:
                return start, end
        return None


def _foreign(readings: Sequence[Reading]) -> list[Reading]:
    return [r for r in readings if r.gateway != IMPORT_GATEWAY]


def _nearest(store: ReadingStore, site: str, device: str, quantity: str, at: datetime, clock: Clock,
             forward: bool) -> Reading | None:
    """Another source's reading nearest before ``at`` (``forward=False``) or from ``at`` on."""
    width = _FIRST_WINDOW
    floor = datetime(1970, 1, 1, tzinfo=at.tzinfo)
    ceiling = clock.now() + timedelta(days=1)
    while True:
        if forward:
            start, end = at, min(at + width, ceiling)
        else:
            start, end = max(at - width, floor), at
        found = _foreign(store.query_readings(site, start, end, device=device, quantity=quantity))
        if found:
            return found[0] if forward else found[-1]
        if (forward and end >= ceiling) or (not forward and start <= floor):
            return None
        width *= 2


def coverage(store: ReadingStore, site: str, device: str, quantity: str, first: datetime, last: datetime,
             poll_interval_s: float, clock: Clock) -> Coverage:
    """What other sources' stored readings of ``device``'s ``quantity`` cover in ``first .. last``
    (module docstring).

    Raises:
        stormwatch.stores.base.StoreError: a query failed.
    """
    inside = _foreign(store.query_readings(site, first, last + _TICK, device=device, quantity=quantity))
    before = _nearest(store, site, device, quantity, first, clock, forward=False)
    after = _nearest(store, site, device, quantity, last + _TICK, clock, forward=True)
    chain = [r for r in (before, *inside, after) if r is not None]
    spans: list[tuple[datetime, datetime, bool]] = []
    if quantity == "rain_tips":
        for i, r in enumerate(chain):
            if i == 0 or FLAG_RESET in r.flags:
                spans.append((r.time, r.time, False))
            else:
                spans.append((chain[i - 1].time, r.time, True))
    else:
        allowance = timedelta(seconds=2 * poll_interval_s)
        for i, r in enumerate(chain):
            if i > 0 and r.time - chain[i - 1].time <= allowance:
                spans.append((chain[i - 1].time, r.time, False))
            else:
                spans.append((r.time, r.time, False))
    merged: list[tuple[datetime, datetime, bool]] = []
    for span in spans:
        if merged and span[0] <= merged[-1][1]:
            start, end, open_start = merged[-1]
            merged[-1] = (start, max(end, span[1]), open_start)
        else:
            merged.append(span)
    sources = tuple(sorted({f"gateway {r.gateway}" for r in chain}))
    return Coverage(tuple(merged), sources, len(inside), tuple(end for _s, end, _o in merged))


def overlap_detail(reading: Reading, span: tuple[datetime, datetime], cover: Coverage) -> str:
    """Why ``reading`` is rejected ``overlaps_stored`` (after ``file:line: ``)."""
    return (f"{reading.device} {reading.quantity} at {format_time(reading.time)}: the store already holds "
            f"{reading.device}'s readings from {', '.join(cover.sources)} covering {format_time(span[0])} .. "
            f"{format_time(span[1])} ({cover.count} of them in the file's span); storing this row would count "
            "that time twice, so the stored readings are kept (rows in their gaps are stored)")
