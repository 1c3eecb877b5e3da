"""What an SMO records on an enforcement case, and when the record is refused.

Each action has a day (``on``, the site's local date the thing happened), who records it, a note,
and the fields its kind needs (a served notice's method and certified-mail number, a decision's
outcome, a bill's amount, a referral's agency, a stop-work lift's written confirmation). Before
anything is written, :func:`check` holds the action to the order of events and to the code: service
before issue, a decision before the appeal, a lien before the payment period has run, a stop-work
lift without the written confirmation the code requires, a day after today -- each refused with one
line saying why. Nothing is issued by the product: every action is a person's record.

The vocabulary (:data:`ACTIONS`) and the rules per kind: docs/enforcement.md, "Actions".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from stormwatch.alerts.enforcement_pack import EnforcementSection
from stormwatch.enforcement.clocks import due_of
from stormwatch.errors import InputError


class CaseError(InputError):
    """An enforcement case or action that cannot be recorded (the message says why, in one line)."""


@dataclass(frozen=True)
class Kind:
    """One kind of action.

    Attributes:
        label: how a person reads it ("notice of violation served").
        enforcement: the MS4 register's type of enforcement when this action is one (else "").
        repeat: may be recorded more than once on a case.
        fields: the fields it takes, each ``name -> required``.
    """

    label: str
    enforcement: str = ""
    repeat: bool = False
    fields: tuple[tuple[str, bool], ...] = ()


#: Every action, in the order a case usually runs.
ACTIONS: dict[str, Kind] = {
    "verbal_warning": Kind("verbal warning", enforcement="verbal warning", repeat=True),
    "nov_issued": Kind("notice of violation issued", enforcement="notice of violation"),
    "nov_served": Kind("notice of violation served", fields=(("method", True), ("certified_number", False))),
    "appeal_filed": Kind("appeal filed", fields=(("appellant", False),)),
    "hearing_held": Kind("hearing held"),
    "decision": Kind("decision on the appeal", fields=(("outcome", True), ("correct_by", False))),
    "decision_mailed": Kind("decision mailed", fields=(("certified_number", False),)),
    "correction_verified": Kind("correction verified"),
    "stop_work_issued": Kind("stop-work order issued", enforcement="stop-work order"),
    "stop_work_served": Kind("stop-work order served", fields=(("method", True), ("certified_number", False))),
    "stop_work_appeal_filed": Kind("stop-work appeal filed", fields=(("appellant", False),)),
    "stop_work_hearing_held": Kind("stop-work appeal hearing held"),
    "stop_work_decision": Kind("decision on the stop-work appeal", fields=(("outcome", True),)),
    "stop_work_lifted": Kind("stop-work order lifted", fields=(("written_confirmation", False),)),
    "abatement": Kind("abatement by the village", enforcement="abatement by the village", repeat=True),
    "costs_billed": Kind("costs billed", fields=(("amount_usd", True),)),
    "paid": Kind("costs paid", fields=(("amount_usd", True),)),
    "lien_recorded": Kind("lien recorded", enforcement="lien"),
    "referral": Kind("referral", enforcement="referral", repeat=True, fields=(("to", True),)),
    "resolved": Kind("resolved"),
}

#: How a notice or order may be served.
SERVICE_METHODS = ("hand", "certified_mail", "posted", "other")
#: Outcomes of a decision on an appeal (Ch. 196 §196-12D: "confirm, modify or cancel" a stop-work order).
DECISIONS = ("upheld", "modified", "cancelled")
STOP_WORK_DECISIONS = ("confirmed", "modified", "cancelled")


@dataclass(frozen=True)
class Recorded:
    """An action as the case's history holds it (``on``: the local day it happened)."""

    kind: str
    on: date
    fields: Mapping[str, str]


@dataclass(frozen=True)
class Draft:
    """What the notice will say: the contents the letter fills in."""

    party: str
    address: str
    location: str
    nature: str
    remedy: str
    correct_by: date | None


def parse_day(text: str, what: str) -> date:
    """A day written ``YYYY-MM-DD``.

    Raises:
        CaseError: not such a day (names ``what``).
    """
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise CaseError(f"{what} {text!r}: a day written YYYY-MM-DD (e.g. 2026-06-30)") from None


def _last(history: Sequence[Recorded], kind: str) -> Recorded | None:
    return next((a for a in reversed(history) if a.kind == kind), None)


def _need(history: Sequence[Recorded], kind: str, why: str) -> Recorded:
    found = _last(history, kind)
    if found is None:
        raise CaseError(f"no {ACTIONS[kind].label} is recorded: {why}")
    return found


def _not_before(on: date, earlier: Recorded, what: str) -> None:
    if on < earlier.on:
        raise CaseError(f"{what} on {on.isoformat()} is before the {ACTIONS[earlier.kind].label} on "
                        f"{earlier.on.isoformat()}")


def draft_gaps(draft: Draft, section: EnforcementSection) -> list[str]:
    """The required contents a draft still lacks (the code's citation of each), in the code's order."""
    have = {"party": bool(draft.party.strip()) and bool(draft.address.strip()),
            "location": bool(draft.location.strip()), "nature": bool(draft.nature.strip()),
            "remedy": bool(draft.remedy.strip()) and draft.correct_by is not None}
    names = {"party": "the name and address of the person responsible", "location": "the location",
             "nature": "the nature of the violation", "remedy": "the remedial measures and the date to complete them"}
    keys = [c.key for c in section.notice.contents]
    if "remedy" not in keys:  # Ch. 507: "notice of violation and order to correct within a specified time"
        keys.append("remedy")
    cites = {c.key: c.citation for c in section.notice.contents}
    return [f"{names[k]} ({cites.get(k, section.notice.citation)})" for k in keys if k in have and not have[k]]


Check = Callable[[date, Mapping[str, str], Sequence[Recorded], EnforcementSection, Draft], None]


def _issue(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection, d: Draft) -> None:
    gaps = draft_gaps(d, s)
    if gaps:
        raise CaseError(f"the notice lacks required contents: {'; '.join(gaps)}")
    if d.correct_by is not None and d.correct_by < on:
        raise CaseError(f"the date to complete the remedial measures ({d.correct_by.isoformat()}) is before the "
                        f"notice's issue on {on.isoformat()}")


def _serve(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection, d: Draft,
           issued: str = "nov_issued") -> None:
    _not_before(on, _need(history, issued, "serve what was issued"), ACTIONS[issued].label.replace(" issued", "")
                + " served")
    method = fields.get("method", "")
    if method not in SERVICE_METHODS:
        raise CaseError(f"method {method!r}: one of {', '.join(SERVICE_METHODS)}")
    if method == "certified_mail" and not fields.get("certified_number", "").strip():
        raise CaseError("service by certified mail needs the certified-mail number (--certified NUMBER)")


def _appeal(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
            d: Draft) -> None:
    if s.appeal is None:
        raise CaseError(s.silent.get("appeal", f"{s.notice.citation}: the code provides no appeal of the notice"))
    _not_before(on, _need(history, "nov_served", "an appeal runs from service of the notice"), "the appeal")


def _hearing(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
             d: Draft) -> None:
    _not_before(on, _need(history, "appeal_filed", "a hearing hears an appeal"), "the hearing")


def _decision(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
              d: Draft) -> None:
    _not_before(on, _need(history, "appeal_filed", "a decision decides an appeal"), "the decision")
    heard = _last(history, "hearing_held")
    if heard is not None:
        _not_before(on, heard, "the decision")
    if fields.get("outcome") not in DECISIONS:
        raise CaseError(f"outcome {fields.get('outcome', '')!r}: one of {', '.join(DECISIONS)}")
    if fields.get("correct_by"):
        if fields.get("outcome") != "modified":
            raise CaseError("a new date to complete the remedial measures comes with a modified decision")
        new = parse_day(fields["correct_by"], "correct_by")
        if new < on:
            raise CaseError(f"the new date to complete the remedial measures ({new.isoformat()}) is before the "
                            f"decision on {on.isoformat()}")


def _mailed(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
            d: Draft) -> None:
    _not_before(on, _need(history, "decision", "mail the decision once it is made"), "the decision's mailing")


def _corrected(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
               d: Draft) -> None:
    issued = _last(history, "nov_issued")
    if issued is not None:
        _not_before(on, issued, "the verified correction")


def _stop_work(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
               d: Draft) -> None:
    if s.stop_work is None:
        raise CaseError(f"{s.notice.citation}: the code (as we have it) provides no stop-work order")
    if s.stop_work.by_notice:
        raise CaseError(f"under {s.stop_work.citation} receiving the notice of violation halts the work: the "
                        "served notice is the stop-work order (record the notice's service)")


def _stop_work_served(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
                      d: Draft) -> None:
    _serve(on, fields, history, s, d, issued="stop_work_issued")


def _stop_work_appeal(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
                      d: Draft) -> None:
    if s.stop_work_appeal is None:
        raise CaseError(s.silent.get("stop_work_appeal", "the code provides no appeal of a stop-work order"))
    _not_before(on, _need(history, "stop_work_served", "an appeal runs from service of the order"), "the appeal")


def _stop_work_hearing(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
                       d: Draft) -> None:
    _not_before(on, _need(history, "stop_work_appeal_filed", "a hearing hears an appeal"), "the hearing")


def _stop_work_decision(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
                        d: Draft) -> None:
    _not_before(on, _need(history, "stop_work_appeal_filed", "a decision decides an appeal"), "the decision")
    if fields.get("outcome") not in STOP_WORK_DECISIONS:
        raise CaseError(f"outcome {fields.get('outcome', '')!r}: one of {', '.join(STOP_WORK_DECISIONS)}")


def stop_work_start(history: Sequence[Recorded], s: EnforcementSection) -> Recorded | None:
    """The action that put a stop-work order in effect: its service, or (Spencerport D) the
    notice's service; ``None``: none is in effect."""
    if s.stop_work is None:
        return None
    return _last(history, "nov_served" if s.stop_work.by_notice else "stop_work_served")


def _lift(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection, d: Draft) -> None:
    start = stop_work_start(history, s)
    if start is None or s.stop_work is None:
        raise CaseError("no stop-work order is in effect on this case (none served)")
    _not_before(on, start, "the lift")
    if s.stop_work.lift_in_writing and not fields.get("written_confirmation", "").strip():
        raise CaseError(f"{s.stop_work.citation}: the stop-work order stays in effect until the village confirms "
                        "compliance in writing: give the written confirmation (--written-confirmation REF)")


def _amount(fields: Mapping[str, str]) -> None:
    text = fields.get("amount_usd", "").replace(",", "").removeprefix("$")
    try:
        value = float(text)
    except ValueError:
        raise CaseError(f"amount {fields.get('amount_usd', '')!r}: dollars, e.g. 1250.00") from None
    if not 0 < value < 1e9 or round(value, 2) != value:
        raise CaseError(f"amount {fields.get('amount_usd', '')!r}: more than $0, in whole cents")


def _billed(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
            d: Draft) -> None:
    _not_before(on, _need(history, "abatement", "costs billed are the village's work charged to the violator"),
                "the bill")
    _amount(fields)


def _paid(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection, d: Draft) -> None:
    _not_before(on, _need(history, "costs_billed", "pay what was billed"), "the payment")
    _amount(fields)


def _lien(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection, d: Draft) -> None:
    billed = _need(history, "costs_billed", "a lien secures costs billed and unpaid")
    _not_before(on, billed, "the lien")
    if _last(history, "paid") is not None:
        raise CaseError("the costs billed were paid: nothing to record a lien for")
    due = due_of(s.clocks.get("payment", ()), {"costs_billed": billed.on}, s.holidays)
    if due is not None and on <= due.due:
        raise CaseError(f"{due.citations[0]}: the costs become a lien only if unpaid within "
                        f"{due.terms[0].clock.days} days of billing: the earliest day is "
                        f"{(due.due + timedelta(days=1)).isoformat()}")


def _referral(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
              d: Draft) -> None:
    if not fields.get("to", "").strip():
        raise CaseError("a referral names the agency it goes to (--to AGENCY)")


def _resolved(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection,
              d: Draft) -> None:
    latest = max(history, key=lambda a: a.on, default=None)
    if latest is not None:
        _not_before(on, latest, "the resolution")


def _none(on: date, fields: Mapping[str, str], history: Sequence[Recorded], s: EnforcementSection, d: Draft) -> None:
    return None


_CHECKS: dict[str, Check] = {
    "verbal_warning": _none, "nov_issued": _issue, "nov_served": _serve, "appeal_filed": _appeal,
    "hearing_held": _hearing, "decision": _decision, "decision_mailed": _mailed, "correction_verified": _corrected,
    "stop_work_issued": _stop_work, "stop_work_served": _stop_work_served, "stop_work_appeal_filed": _stop_work_appeal,
    "stop_work_hearing_held": _stop_work_hearing, "stop_work_decision": _stop_work_decision,
    "stop_work_lifted": _lift, "abatement": _none, "costs_billed": _billed, "paid": _paid, "lien_recorded": _lien,
    "referral": _referral, "resolved": _resolved,
}


def check(kind: str, on: date, fields: Mapping[str, str], history: Sequence[Recorded], section: EnforcementSection,
          draft: Draft, found_on: date, today: date) -> None:
    """Refuse an action that cannot be recorded now (:class:`CaseError`, one line; module docstring).

    Args:
        kind: one of :data:`ACTIONS`.
        on: the day it happened (site-local).
        fields: its fields (see :data:`ACTIONS`); unknown ones are refused.
        history: the case's actions so far, oldest first.
        section: the code's enforcement section.
        draft: the notice's contents as they stand.
        found_on: the day the violation was found.
        today: the site's local date now.
    """
    spec = ACTIONS.get(kind)
    if spec is None:
        raise CaseError(f"unknown action {kind!r}: one of {', '.join(a.replace('_', '-') for a in ACTIONS)}")
    allowed = {name for name, _ in spec.fields}
    extra = sorted(set(fields) - allowed)
    if extra:
        raise CaseError(f"{spec.label} takes no {', '.join(extra)}")
    missing = [name for name, required in spec.fields if required and not str(fields.get(name, "")).strip()]
    if missing:
        raise CaseError(f"{spec.label} needs {', '.join(missing)}")
    done = _last(history, "resolved")
    if done is not None:
        raise CaseError(f"the case was resolved on {done.on.isoformat()}: nothing more is recorded on it")
    if not spec.repeat and (earlier := _last(history, kind)) is not None:
        raise CaseError(f"{spec.label} is already recorded (on {earlier.on.isoformat()})")
    if on > today:
        raise CaseError(f"{spec.label} on {on.isoformat()} is after today ({today.isoformat()}): record what has "
                        "happened")
    if on < found_on:
        raise CaseError(f"{spec.label} on {on.isoformat()} is before the violation was found ({found_on.isoformat()})")
    _CHECKS[kind](on, fields, history, section, draft)
