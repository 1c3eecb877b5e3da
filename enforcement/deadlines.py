"""Every deadline of a case, from its actions and its code's clocks, and where each one stands.

=================== =================================== ============= ===============================
deadline            runs from                           met by        owed by
=================== =================================== ============= ===============================
appeal              the notice's issue and/or service   appeal filed  (a right: closes, never overdue)
hearing             the appeal's filing                 hearing held  the village
decision_mailed     the decision                        decision mailed the village
correction          the notice's schedule, or the       correction    the person responsible
                    code's clock after a decision        verified
stop_work_appeal    the stop-work order's service       appeal filed  (a right)
stop_work_hearing   the stop-work appeal's filing       hearing held  the village
payment             the bill for the village's work     paid          the person responsible
=================== =================================== ============= ===============================

States at a day: ``open`` (not yet due), ``met`` (on time), ``late`` (met after the day), ``overdue``
(a duty past its day), ``closed`` (a right not used in time), ``moot`` (the case was resolved or the
notice cancelled first). A deadline the code does not set is listed with what the code says instead
(the pack's ``silent``). Each carries its citations and the code's words. Design: docs/enforcement.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from stormwatch.alerts.enforcement_pack import ClockName, ClockStart, EnforcementSection
from stormwatch.enforcement.actions import Recorded
from stormwatch.enforcement.cases import Case
from stormwatch.enforcement.clocks import Due, due_of, non_business_note

State = Literal["open", "met", "late", "overdue", "closed", "moot"]

#: name -> (label, owed by, the action that meets it)
DEADLINES: dict[str, tuple[str, str, str]] = {
    "appeal": ("appeal window closes", "right", "appeal_filed"),
    "hearing": ("appeal to be heard by", "village", "hearing_held"),
    "decision_mailed": ("decision to be mailed by", "village", "decision_mailed"),
    "correction": ("correction due", "respondent", "correction_verified"),
    "stop_work_appeal": ("stop-work appeal window closes", "right", "stop_work_appeal_filed"),
    "stop_work_hearing": ("stop-work appeal hearing to be scheduled by", "village", "stop_work_hearing_held"),
    "payment": ("costs to be paid by", "respondent", "paid"),
}

#: The action each clock start names.
STARTS: dict[ClockStart, str] = {"issued": "nov_issued", "served": "nov_served", "appeal_filed": "appeal_filed",
                                 "decision": "decision", "stop_work_served": "stop_work_served",
                                 "stop_work_appeal_filed": "stop_work_appeal_filed", "costs_billed": "costs_billed"}

#: How a clock's start reads in a deadline's basis ("7 calendar days after service of the notice").
START_WORDS: dict[ClockStart, str] = {"issued": "the notice's issue", "served": "service of the notice",
                                      "appeal_filed": "the appeal's filing", "decision": "the decision",
                                      "stop_work_served": "service of the stop-work order",
                                      "stop_work_appeal_filed": "the stop-work appeal's filing",
                                      "costs_billed": "the bill"}

#: A silent clock is shown once this action is recorded (the deadline would run from it).
_SILENT_AFTER: dict[ClockName, str] = {"appeal": "nov_served", "hearing": "appeal_filed", "decision_mailed": "decision",
                                       "correction_after_decision": "decision", "stop_work_appeal": "stop_work_served",
                                       "stop_work_hearing": "stop_work_appeal_filed", "payment": "costs_billed"}


@dataclass(frozen=True)
class Deadline:
    """One deadline of a case (module docstring).

    Attributes:
        name: a key of :data:`DEADLINES`.
        due: the last day (site-local).
        basis: what sets it, in a few words ("the notice's time schedule", the governing clock).
        citations, quotes: the sections that set it and their words (earliest first).
        note: e.g. the day is not a business day (:func:`stormwatch.enforcement.clocks.non_business_note`).
        met_on: the day the action that meets it happened.
    """

    name: str
    due: date
    basis: str
    citations: tuple[str, ...]
    quotes: tuple[str, ...]
    note: str
    met_on: date | None
    state: State

    @property
    def label(self) -> str:
        return DEADLINES[self.name][0]

    @property
    def owed_by(self) -> str:
        return DEADLINES[self.name][1]

    @property
    def overdue(self) -> bool:
        return self.state == "overdue"


@dataclass(frozen=True)
class Silence:
    """A deadline the code does not set, and what it says instead."""

    name: str
    text: str


def _first(history: Sequence[Recorded], kind: str) -> Recorded | None:
    return next((a for a in history if a.kind == kind), None)


def _state(name: str, due: date, met: date | None, today: date, moot: bool) -> State:
    if met is not None:
        return "met" if met <= due else "late"
    if moot:
        return "moot"
    if today <= due:
        return "open"
    return "closed" if DEADLINES[name][1] == "right" else "overdue"


def _from(due: Due, name: str, history: Sequence[Recorded], today: date, moot: bool) -> Deadline:
    met = _first(history, DEADLINES[name][2])
    governing = due.terms[0]
    basis = f"{governing.clock.days} {governing.clock.unit} days after {START_WORDS[governing.clock.start]}"
    return Deadline(name, due.due, basis, tuple(due.citations), tuple(due.quotes), due.note,
                    met.on if met else None, _state(name, due.due, met.on if met else None, today, moot))


def _correction(case: Case, section: EnforcementSection, history: Sequence[Recorded], starts: dict[ClockStart, date],
                today: date, moot: bool) -> Deadline | Silence | None:
    """The correction deadline: the notice's schedule; after a decision on an appeal, the decision's
    new date or the code's clock (Ch. 133 §133-12), which also holds the schedule while the appeal
    is pending."""
    if _first(history, "nov_issued") is None:
        return None
    decision = _first(history, "decision")
    if decision is not None and decision.fields.get("outcome") == "cancelled":
        return None
    after_decision = section.clocks.get("correction_after_decision", ())
    if decision is None and after_decision and _first(history, "appeal_filed") is not None:
        clock = after_decision[0]
        return Silence("correction", f"appeal pending: the correction is due \"{clock.quote}\" ({clock.citation}), "
                                     "counted once the decision is recorded")
    met = _first(history, "correction_verified")
    met_on = met.on if met else None
    if decision is not None and decision.fields.get("correct_by"):
        day = date.fromisoformat(decision.fields["correct_by"])
        return Deadline("correction", day, "the decision on the appeal (modified)", (section.notice.citation,), (),
                        non_business_note(day, section.holidays), met_on,
                        _state("correction", day, met_on, today, moot))
    after = due_of(after_decision, starts, section.holidays)
    if after is not None:
        return _from(after, "correction", history, today, moot)
    if case.correct_by is None:
        return None
    content = next((c for c in section.notice.contents if c.key == "remedy"), None)
    cite = content.citation if content else section.notice.citation
    quote = content.text if content else section.notice.title
    return Deadline("correction", case.correct_by, "the notice's time schedule", (cite,), (quote,),
                    non_business_note(case.correct_by, section.holidays), met_on,
                    _state("correction", case.correct_by, met_on, today, moot))


def deadlines_of(case: Case, section: EnforcementSection, history: Sequence[Recorded],
                 today: date) -> tuple[list[Deadline], list[Silence]]:
    """The case's deadlines (in the order a case runs) and the code's silences that apply so far."""
    starts: dict[ClockStart, date] = {}
    for start, kind in STARTS.items():
        action = _first(history, kind)
        if action is not None:
            starts[start] = action.on
    resolved = _first(history, "resolved") is not None
    decision = _first(history, "decision")
    cancelled = decision is not None and decision.fields.get("outcome") == "cancelled"
    out: list[Deadline] = []
    silent: list[Silence] = []
    for name in DEADLINES:
        if name == "correction":
            found = _correction(case, section, history, starts, today, resolved)
            if isinstance(found, Silence):
                silent.append(found)
            elif found is not None:
                out.append(found)
            continue
        clocks = next((cs for n, cs in section.clocks.items() if n == name), ())
        due = due_of(clocks, starts, section.holidays)
        if due is not None:
            out.append(_from(due, name, history, today, resolved or (cancelled and name == "payment")))
    kinds = {a.kind for a in history}
    silent += [Silence(name, text) for name, text in section.silent.items() if _SILENT_AFTER[name] in kinds]
    return out, silent
