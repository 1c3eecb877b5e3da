"""A case drafted from ordinance events: what the SMO starts from, never what is served unread.

The work orders the alert engine opened (a turbidity contrast to review, an overdue storm
inspection, a basin cleanout overdue, ...) are copied into the case as its sources, with their
event's citation, message and evidence. The draft proposes the day the violation was found (the
first event's local day), the sections violated (the events' citations), a location (the site and
its discharge point or basin) and a statement of the violation from the events' messages; the
person responsible, their address and the remedial measures are the SMO's to write. An order of
another site, or a site whose code has no enforcement section, is refused.
Design: docs/enforcement.md, "Opening a case".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

from stormwatch.alerts.rules import parse_occurrence
from stormwatch.alerts.workorders import WorkOrder
from stormwatch.config import SiteConfig
from stormwatch.display import local_time
from stormwatch.enforcement.actions import CaseError
from stormwatch.wire import format_time

#: The words the alert engine puts around a message that asks the SMO to judge; a notice states a finding.
_POSSIBLE, _FOR_THE_SMO = "possible ", "; for the SMO to confirm"


def source_of(order: WorkOrder) -> dict[str, Any]:
    """What a case keeps of a work order (its event's evidence included), as JSON."""
    return {"order": order.id, "site": order.site, "kind": order.kind, "rule": order.rule, "citation": order.citation,
            "occurrence": order.occurrence, "event_time": format_time(order.event_time),
            "due_at": format_time(order.due_at) if order.due_at else None, "status": order.status,
            "overdue": order.overdue_at is not None, "message": order.message, "evidence": order.evidence}


def _finding(message: str) -> str:
    """An event's message as a finding (the engine's "possible ...; for the SMO to confirm" is the SMO's to decide)."""
    return message.removeprefix(_POSSIBLE).removesuffix(_FOR_THE_SMO)


def _where(cfg: SiteConfig, order: WorkOrder) -> str:
    try:
        key = parse_occurrence(order.occurrence).key
    except ValueError:
        key = None
    for p in cfg.points:
        if p.id == key:
            return f"discharge point {p.name or p.id}"
    for b in cfg.all_basins:
        if b.id == key:
            return f"basin {b.id}"
    return ""


def draft_from(cfg: SiteConfig, orders: Sequence[WorkOrder]) -> dict[str, Any]:
    """The proposed draft of a case opened from ``orders`` of site ``cfg``: ``found_on``, ``location``,
    ``nature``, ``violated`` and ``sources`` (:meth:`EnforcementBook.open`'s arguments).

    Raises:
        CaseError: no order, or an order of another site.
    """
    if not orders:
        raise CaseError("a case drafted from work orders needs at least one order")
    for o in orders:
        if o.site != cfg.site.id:
            raise CaseError(f"work order {o.id} is of site {o.site}, not {cfg.site.id}")
    tz = ZoneInfo(cfg.site.timezone)
    first = min(orders, key=lambda o: o.event_time)
    found_on = first.event_time.astimezone(tz).date()
    places = [w for w in dict.fromkeys(_where(cfg, o) for o in orders) if w]
    name = cfg.site.name or cfg.site.id
    statements = [f"{local_time(o.event_time, tz)}: {_finding(o.message)} ({o.citation}; work order {o.id}"
                  f"{', overdue' if o.overdue_at is not None else ''})." for o in orders]
    where = f", {', '.join(places)}" if places else ""
    return {"found_on": found_on, "location": f"{name} (site {cfg.site.id}){where}",
            "nature": " ".join(statements), "violated": "; ".join(dict.fromkeys(o.citation for o in orders)),
            "sources": [source_of(o) for o in orders]}

