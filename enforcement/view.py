"""Where a case stands on a day: its stage, deadlines, stop-work order, continuing violation and penalty.

One :class:`CaseView` is what every desk shows of a case -- the CLI, the web pages, the letter and
the register -- so they can never disagree. Built from the case, its history, its code's
enforcement section and the party's other offenses (:meth:`EnforcementBook.offenses`).
Design: docs/enforcement.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from stormwatch.alerts.enforcement_pack import EnforcementSection
from stormwatch.enforcement.actions import ACTIONS, Recorded, draft_gaps, stop_work_start
from stormwatch.enforcement.cases import Case, EnforcementBook, Entry, section_of
from stormwatch.enforcement.deadlines import Deadline, Silence, deadlines_of
from stormwatch.enforcement.ladder import (
    Continuation,
    Offense,
    continuation,
    continuation_text,
    offense_of,
    penalty_statement,
)


@dataclass(frozen=True)
class StopWorkState:
    """The stop-work order of a case: in effect from ``since`` (its service; Spencerport: the
    notice's) until ``lifted`` (or a decision cancelling it)."""

    since: date | None
    lifted: date | None
    issued: date | None
    citation: str
    quote: str
    by_notice: bool
    lift_in_writing: bool

    @property
    def in_effect(self) -> bool:
        return self.since is not None and self.lifted is None


@dataclass(frozen=True)
class CaseView:
    """A case as of ``today`` (module docstring).

    Attributes:
        stage: the last thing that happened, in words ("draft", "notice served", ...).
        gaps: required contents the draft still lacks (empty once it can be issued).
        offense: its place on the penalty ladder (``None``: the code has no penalty in our copy).
        penalty_text: the notice's penalty statement (``""`` without a penalty).
        continuation: the continuing violation since service (``None``: no unit, or not served).
    """

    case: Case
    section: EnforcementSection
    history: list[Entry]
    today: date
    stage: str
    gaps: list[str]
    deadlines: list[Deadline]
    silences: list[Silence]
    stop_work: StopWorkState | None
    offense: Offense | None
    penalty_text: str
    continuation: Continuation | None

    @property
    def overdue(self) -> list[Deadline]:
        return [d for d in self.deadlines if d.overdue]

    @property
    def open(self) -> bool:
        return not any(e.kind == "resolved" for e in self.history)

    def action(self, kind: str) -> Entry | None:
        """The first ``kind`` action recorded."""
        return next((e for e in self.history if e.kind == kind), None)

    @property
    def continuation_text(self) -> str:
        if self.continuation is None or self.section.penalty is None:
            return ""
        return continuation_text(self.section.penalty, self.continuation)


def _stage(actions: Sequence[Entry]) -> str:
    if not actions:
        return "draft"
    last = actions[-1]
    label = ACTIONS[last.kind].label
    outcome = last.fields.get("outcome")
    return f"{label} ({outcome})" if outcome else label


def _stop_work(section: EnforcementSection, actions: Sequence[Recorded]) -> StopWorkState | None:
    spec = section.stop_work
    if spec is None:
        return None
    start = stop_work_start(actions, section)
    issued = next((a for a in actions if a.kind == ("nov_issued" if spec.by_notice else "stop_work_issued")), None)
    if start is None and issued is None:
        return None
    ended = next((a for a in actions if a.kind == "stop_work_lifted" or
                  (a.kind == "stop_work_decision" and a.fields.get("outcome") == "cancelled") or
                  (spec.by_notice and a.kind == "decision" and a.fields.get("outcome") == "cancelled")), None)
    return StopWorkState(start.on if start else None, ended.on if ended else None, issued.on if issued else None,
                         spec.citation, spec.quote, spec.by_notice, spec.lift_in_writing)


def view_of(book: EnforcementBook, case: Case, today: date | None = None) -> CaseView:
    """The view of ``case`` as of ``today`` (default: the book's today in the case's zone).

    Raises:
        CaseError: the case's pack is gone or has no enforcement section.
    """
    section = section_of(case.jurisdiction)
    day = today or book.today(case.timezone)
    history = book.history(case.id)
    actions = [e for e in history if e.kind in ACTIONS]
    recorded = [e.recorded for e in actions]
    deadlines, silences = deadlines_of(case, section, recorded, day)
    offense = text = None
    if section.penalty is not None:
        offense = offense_of(case.id, case.found_on, book.offenses(case.jurisdiction, case.party), section.penalty)
        text = penalty_statement(section.penalty, offense)
    served = next((a.on for a in actions if a.kind == "nov_served"), None)
    corrected = next((a.on for a in actions if a.kind == "correction_verified"), None)
    return CaseView(case, section, history, day, _stage(actions), draft_gaps(case.draft, section), deadlines,
                    silences, _stop_work(section, recorded), offense, text or "",
                    continuation(section.penalty, served, corrected, day))


def view_json(view: CaseView) -> dict[str, Any]:
    """The view as JSON (``stormwatch enforce show --json``): the case, its stage, deadlines with
    their citations and states, the code's silences, the stop-work order, the penalty and the history."""
    sw = view.stop_work
    return {
        **view.case.to_json(), "as_of": view.today.isoformat(), "stage": view.stage, "open": view.open,
        "missing": view.gaps,
        "deadlines": [{"name": d.name, "label": d.label, "due": d.due.isoformat(), "state": d.state,
                       "owed_by": d.owed_by, "basis": d.basis, "citations": list(d.citations),
                       "quotes": list(d.quotes), "note": d.note, "met_on": d.met_on.isoformat() if d.met_on else None}
                      for d in view.deadlines],
        "silent": [{"name": s.name, "text": s.text} for s in view.silences],
        "stop_work": None if sw is None else {
            "in_effect": sw.in_effect, "issued": sw.issued.isoformat() if sw.issued else None,
            "since": sw.since.isoformat() if sw.since else None, "lifted": sw.lifted.isoformat() if sw.lifted else None,
            "citation": sw.citation, "by_notice": sw.by_notice, "lift_in_writing": sw.lift_in_writing},
        "offense": None if view.offense is None else {
            "number": view.offense.number, "prior": [{"case": c, "on": d.isoformat()} for c, d in view.offense.prior],
            "window_start": view.offense.window_start.isoformat() if view.offense.window_start else None,
            "fine_min_usd": view.offense.tier.fine_min_usd, "fine_max_usd": view.offense.tier.fine_max_usd,
            "unverified": dict(view.offense.tier.unverified)},
        "penalty": view.penalty_text,
        "continuation": None if view.continuation is None else {
            "unit": view.continuation.unit, "count": view.continuation.count,
            "from": view.continuation.start.isoformat(), "to": view.continuation.end.isoformat(),
            "corrected": view.continuation.corrected, "text": view.continuation_text},
        "history": [e.to_json() for e in view.history],
    }
