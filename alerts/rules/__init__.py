"""Ordinance rules: one module each, each a small object fed one site's readings in event-time order.

Every rule has the same shape (:class:`Rule`): ``feed(reading)`` with readings in event-time
order, ``advance_to(t)`` when the site's event-time watermark reaches ``t`` (closes windows and
storms whose end is now known), both returning the :class:`stormwatch.contract.Event` s that
became true. Rules never read a clock, so live data, late data and a backfill from the store give
the same events (design-notes.md, "Rules").
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from stormwatch.contract import Event, Reading


class Rule(Protocol):
    """A rule fed one site's readings in event-time order."""

    rule_id: str
    #: earliest event time at which ``advance_to`` can emit something (None: time alone emits nothing);
    #: the engine skips ``advance_to`` before it (the hot path).
    next_due: datetime | None

    def wants(self, reading: Reading) -> bool:
        """Whether ``reading`` is input to this rule."""
        ...

    def feed(self, reading: Reading) -> list[Event]:
        """Take one reading (time ≥ every earlier one); events that became true at its time."""
        ...

    def advance_to(self, t: datetime) -> list[Event]:
        """Event time has reached ``t`` (no reading at or before ``t`` will come): due events."""
        ...
