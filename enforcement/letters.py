"""The notice of violation and the stop-work order, as letters an SMO can sign and serve.

A notice holds the code's required contents in the code's order, each headed by the code's words
and its citation and filled from the case: the person responsible and their address, the land, the
nature of the violation with its sensor evidence (figures and a chart, times in the site's zone),
the remedial measures with the day to complete them, the penalty statement from the ladder (the
party's offense number in the code's window, the fine, the continuing violation so far), the appeal
statement with the actual last day, and the abatement-and-lien warning. Then what the code adds (a
notice that halts the work, Spencerport D), the signature block and the service record. A value our
copy of the code does not confirm (Ch. 196's "$1,0"), or a code cut off in our copy (Ch. 507), is
printed in a box marked NOT VERIFIED: never filled in. A letter of a case whose notice is not issued
is marked DRAFT. The stop-work order is built the same way.

HTML from one Jinja2 template (``templates/letter.html``); the PDF is that HTML laid out by
WeasyPrint, so the two never disagree. Design: docs/enforcement.md, "The letter".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal
from zoneinfo import ZoneInfo

from markupsafe import Markup

from stormwatch.alerts.enforcement_pack import ClockStart
from stormwatch.alerts.packs import load_pack
from stormwatch.config import SiteConfig
from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.clocks import due_of
from stormwatch.enforcement.evidence import Evidence, evidence_of
from stormwatch.enforcement.view import CaseView
from stormwatch.stores.base import ReadingStore

LetterKind = Literal["nov", "stop-work"]
KINDS: tuple[LetterKind, ...] = ("nov", "stop-work")

#: The signer's title when none is given.
DEFAULT_TITLE = "Stormwater Management Officer"


def long_day(day: date) -> str:
    """``Tuesday, July 7, 2026``."""
    return f"{day:%A, %B} {day.day}, {day.year}"


@dataclass(frozen=True)
class Part:
    """One numbered content of the letter.

    Attributes:
        number: its number in the code's list ((1), (2), ...), or ``None`` for what the code adds.
        heading: what it is; ``citation`` and ``requirement`` (the code's words) beside it.
        body: our paragraphs.
        evidence: the sensor evidence (the nature of the violation only).
    """

    number: int | None
    heading: str
    citation: str
    requirement: str
    body: list[str]
    evidence: list[Evidence] = field(default_factory=list)


@dataclass(frozen=True)
class Letter:
    """A letter ready to render (module docstring)."""

    kind: LetterKind
    title: str
    authority: str
    case_id: str
    site: str
    dated: date
    draft: bool
    to: list[str]
    intro: str
    parts: list[Part]
    unverified: list[str]
    signer: str
    signer_title: str
    service: str
    appeal_last_day: date | None = None


def _appeal_day(view: CaseView, issued: date) -> tuple[date | None, str]:
    """The last day to appeal the notice, and how it was counted (when service is not yet recorded:
    as if served on the day of the notice)."""
    clocks = view.section.clocks.get("appeal", ())
    served = view.action("nov_served")
    starts: dict[ClockStart, date] = {"issued": issued, "served": served.on if served else issued}
    due = due_of(clocks, starts, view.section.holidays)
    if due is None:
        return None, ""
    how = "; ".join(f"{t.clock.citation}: {t.clock.quote.rstrip('.')}" for t in due.terms)
    if served is None and any(c.start == "served" for c in clocks):
        how += "; counted as if this notice is served on its date -- the days run from the day you are served"
    if due.note:
        how += f"; {due.note}"
    return due.due, how


def _nature(view: CaseView, evidence: list[Evidence]) -> list[str]:
    body = [view.case.nature]
    if view.case.violated:
        body.append(f"Provision(s) violated: {view.case.violated}.")
    if evidence:
        body.append("The site's monitoring recorded the following (times are local to the site):")
    return body


def _remedy(view: CaseView) -> list[str]:
    c = view.case
    due = next((d for d in view.deadlines if d.name == "correction"), None)
    by = due.due if due is not None else c.correct_by
    return [c.remedy, f"These remedial measures are to be completed by {long_day(by)}." if by else ""]


def _penalty(view: CaseView) -> list[str]:
    p = view.section.penalty
    if p is None:
        return ["Our copy of the code states no penalty."]
    body = [view.penalty_text]
    if p.continuation is not None:
        body.append(f'{p.continuation_citation}: "{p.continuation_quote}"')
        if view.continuation is not None and view.continuation.count:
            body.append(f"As of {long_day(view.today)}: {view.continuation_text}.")
    return body


def _appeal(view: CaseView, issued: date) -> tuple[list[str], date | None]:
    a = view.section.appeal
    if a is None:
        return [view.section.silent.get("appeal", "The code provides no appeal of this notice.")], None
    last, how = _appeal_day(view, issued)
    body = f"The determination of violation may be appealed to {a.to} by filing a written notice of appeal."
    if last is not None:
        body += f" The last day to file your appeal is {long_day(last)} ({how})."
    return [body], last


def _abatement(view: CaseView) -> list[str]:
    lien = view.section.lien
    by = view.case.correct_by
    head = f"The deadline for the remediation is {long_day(by)}." if by else ""
    if lien is None:
        return [head]
    return [head, f'Should you fail to remediate or restore within that deadline: "{lien.quote}" ({lien.citation})']


def _unverified(view: CaseView) -> list[str]:
    s = view.section
    notes = []
    if s.notice.cut_off:
        notes.append(s.notice.cut_off)
    if view.offense is not None:
        notes += [f"{s.penalty.citation if s.penalty else ''} fine: {note}"
                  for note in view.offense.tier.unverified.values()]
    return notes


def _service(view: CaseView, kind: str) -> str:
    served = view.action(kind)
    if served is None:
        return "Served on ____________________ by ____________________ (hand / certified mail no. ____________)"
    method = served.fields.get("method", "").replace("_", " ")
    number = served.fields.get("certified_number")
    return (f"Served on {long_day(served.on)} by {method}" + (f", certified mail no. {number}" if number else "")
            + f" (recorded by {served.by}).")


_HEADINGS = {"party": "Person responsible", "location": "Location of the violation",
             "nature": "Nature of the violation", "remedy": "Remedial measures and time schedule", "penalty": "Penalty",
             "appeal": "Appeal", "abatement": "Abatement and restoration"}


def notice_letter(view: CaseView, *, signer: str, signer_title: str = DEFAULT_TITLE, authority: str = "",
                  cfg: SiteConfig | None = None, store: ReadingStore | None = None,
                  now: datetime | None = None) -> Letter:
    """The notice of violation of ``view``'s case (a DRAFT until the notice is issued).

    Args:
        signer, signer_title: the signature block.
        authority: the letterhead (default: the code's title).
        cfg, store: the site file and readings store, to chart the evidence (optional).
        now: the clock's now (the chart ends there).
    """
    case, section = view.case, view.section
    issued = view.action("nov_issued")
    dated = issued.on if issued else view.today
    tz = ZoneInfo(case.timezone)
    evidence = evidence_of(case.sources, tz, cfg=cfg, store=store, now=now)
    parts: list[Part] = []
    last_day: date | None = None
    for number, content in enumerate(section.notice.contents, 1):
        body: list[str]
        if content.key == "party":
            body = [case.party, case.address]
        elif content.key == "location":
            body = [case.location]
        elif content.key == "nature":
            body = _nature(view, evidence)
        elif content.key == "remedy":
            body = _remedy(view)
        elif content.key == "penalty":
            body = _penalty(view)
        elif content.key == "appeal":
            body, last_day = _appeal(view, dated)
        else:
            body = _abatement(view)
        parts.append(Part(number, _HEADINGS[content.key], content.citation, content.text, [b for b in body if b],
                          evidence if content.key == "nature" else []))
    keys = {c.key for c in section.notice.contents}
    if "remedy" not in keys:  # Ch. 507: a notice "and order to correct within a specified time"
        parts.append(Part(None, "Order to correct", section.notice.citation, section.notice.title,
                          [b for b in _remedy(view) if b]))
    if "nature" not in keys and evidence:
        parts.append(Part(None, "Evidence", "", "", [], evidence))
    if section.stop_work is not None and section.stop_work.by_notice:
        parts.append(Part(None, "Stop-work order", section.stop_work.citation, "",
                          [f'"{section.stop_work.quote}"']))
    return Letter("nov", section.notice.title.upper(), authority or _title(case.jurisdiction), case.id,
                  _site(case.site, cfg), dated, issued is None, [case.party, case.address],
                  f'This notice is issued under {section.notice.citation}: "{section.notice.quote}"', parts,
                  _unverified(view), signer, signer_title, _service(view, "nov_served"), last_day)


def stop_work_letter(view: CaseView, *, signer: str, signer_title: str = DEFAULT_TITLE,
                     authority: str = "", cfg: SiteConfig | None = None) -> Letter:
    """The stop-work order of ``view``'s case (a DRAFT until it is issued).

    Raises:
        CaseError: the code has no stop-work order, or its notice of violation is the order.
    """
    case, section = view.case, view.section
    spec = section.stop_work
    if spec is None:
        raise CaseError(f"{section.notice.citation}: the code (as we have it) provides no stop-work order")
    if spec.by_notice:
        raise CaseError(f"under {spec.citation} the served notice of violation is the stop-work order: print the "
                        "notice (--kind nov)")
    issued = view.action("stop_work_issued")
    dated = issued.on if issued else view.today
    parts = [Part(1, "Order", spec.citation, spec.quote,
                  [f"All work on the site is to halt, except the activities that address the violation, until "
                   f"{section.enforcer} confirms that the violation has been satisfactorily addressed."]),
             Part(2, "Violation", section.notice.citation, "", [case.nature, f"Location: {case.location}"])]
    last_day = None
    appeal = section.stop_work_appeal
    if appeal is not None:
        served = view.action("stop_work_served")
        starts: dict[ClockStart, date] = {"stop_work_served": served.on if served else dated}
        due = due_of(section.clocks.get("stop_work_appeal", ()), starts, section.holidays)
        body = [f"This order may be appealed to {appeal.to} ({appeal.citation}: \"{appeal.quote}\")."]
        if due is not None:
            last_day = due.due
            how = "" if served else " (counted as if served on the date of this order)"
            body.append(f"The last day to file your appeal is {long_day(due.due)}{how}.")
        parts.append(Part(3, "Appeal", appeal.citation, "", body))
    else:
        parts.append(Part(3, "Appeal", spec.citation, "", [section.silent.get("stop_work_appeal", "")]))
    return Letter("stop-work", "STOP-WORK ORDER", authority or _title(case.jurisdiction), case.id,
                  _site(case.site, cfg), dated, issued is None, [case.party, case.address],
                  f"This order is issued under {spec.citation}.", parts, [], signer, signer_title,
                  _service(view, "stop_work_served"), last_day)


def _title(jurisdiction: str) -> str:
    return load_pack(jurisdiction).title or jurisdiction


def _site(site: str, cfg: SiteConfig | None) -> str:
    name = cfg.site.name if cfg is not None and cfg.site.name else ""
    return f"{name} ({site})" if name else site


def to_html(letter: Letter) -> str:
    """The letter as one self-contained HTML document (charts inline as SVG)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("stormwatch.enforcement", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["long_day"] = long_day
    env.filters["svg"] = Markup  # our own matplotlib output
    css = env.loader.get_source(env, "letter.css")[0]  # type: ignore[union-attr]
    return env.get_template("letter.html").render(letter=letter, css=Markup(css))


def to_pdf(letter: Letter) -> bytes:
    """The letter as PDF: :func:`to_html` laid out by WeasyPrint."""
    import weasyprint

    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    pdf = weasyprint.HTML(string=to_html(letter)).write_pdf()
    assert pdf is not None
    return bytes(pdf)
