"""The enforcement register an MS4 permit asks for, and the annual summary for the annual report.

One row per enforcement action taken (a verbal warning, a notice of violation, a stop-work order,
abatement by the village, a lien, a referral) with what the Minnesota MS4 general permit (MNR040000,
Part III.B.2) asks to be documented for each: the person responsible, the date and location of the
violation, its description with the regulatory reference, the corrective actions and their
schedule, the date and type of the enforcement, referrals to other agencies, and the date resolved
-- plus what the code adds (service, appeal, the offense on the ladder with its fine, the
continuing violations counted). A fine our copy of the code does not confirm is written as found
and marked UNVERIFIED. The summary of a year counts the actions by type and gives the median days
from the violation to its resolution. CSV and PDF (HTML laid out by WeasyPrint).
Field by field, with the permit's words: docs/enforcement.md, "The register".
"""

from __future__ import annotations

import csv
import io
import logging
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from markupsafe import Markup

from stormwatch.enforcement.actions import ACTIONS
from stormwatch.enforcement.ladder import fine_text, ordinal
from stormwatch.enforcement.view import CaseView

#: The CSV's columns, in order (docs/enforcement.md, "The register").
COLUMNS = ("case", "site", "responsible_party", "party_address", "violation_date", "location", "description",
           "regulatory_reference", "corrective_actions", "completion_schedule", "enforcement_date", "enforcement_type",
           "served", "appeal", "offense", "penalty", "additional_violations", "referrals", "date_resolved",
           "days_to_resolution", "unverified", "recorded_by")


@dataclass(frozen=True)
class Row:
    """One enforcement action of a case, as the register writes it (:data:`COLUMNS`)."""

    values: dict[str, str]
    enforcement_date: date
    enforcement_type: str

    def __getitem__(self, key: str) -> str:
        return self.values[key]


def _served(view: CaseView) -> str:
    served = view.action("nov_served")
    if served is None:
        return ""
    number = served.fields.get("certified_number")
    return f"{served.on.isoformat()} {served.fields.get('method', '').replace('_', ' ')}" + (
        f" no. {number}" if number else "")


def _appeal(view: CaseView) -> str:
    filed, decided = view.action("appeal_filed"), view.action("decision")
    if filed is None:
        return ""
    out = f"filed {filed.on.isoformat()}"
    if decided is not None:
        out += f"; decided {decided.on.isoformat()} ({decided.fields.get('outcome', '')})"
    return out


def _penalty(view: CaseView) -> tuple[str, str]:
    if view.offense is None or view.section.penalty is None:
        return "", "no penalty in our copy of the code"
    tier = view.offense.tier
    offense = f"{ordinal(view.offense.number)} offense" + (
        f" within {view.section.penalty.window_years} years" if view.section.penalty.window_years else "")
    return offense, f'{view.section.penalty.citation}: "{tier.text}" ({fine_text(tier)})'


def _resolution(view: CaseView) -> tuple[str, str]:
    resolved = view.action("resolved")
    if resolved is None:
        return "", ""
    return resolved.on.isoformat(), str((resolved.on - view.case.found_on).days)


def rows_of(views: Sequence[CaseView], year: int | None = None) -> list[Row]:
    """The register's rows: every enforcement action of ``views`` (of ``year`` only, when given),
    oldest first."""
    out = []
    for view in views:
        c = view.case
        correction = next((d for d in view.deadlines if d.name == "correction"), None)
        schedule = (correction.due if correction else c.correct_by)
        referrals = "; ".join(f"{e.on.isoformat()} to {e.fields.get('to', '')}" for e in view.history
                              if e.kind == "referral")
        offense, penalty = _penalty(view)
        resolved, days = _resolution(view)
        unverified = [n for n in view.offense.tier.unverified.values()] if view.offense else []
        if view.section.notice.cut_off:
            unverified.append(view.section.notice.cut_off)
        for e in view.history:
            kind = ACTIONS.get(e.kind)
            if kind is None or not kind.enforcement or (year is not None and e.on.year != year):
                continue
            detail = f" to {e.fields['to']}" if e.kind == "referral" else ""
            sw = view.section.stop_work
            if e.kind == "nov_issued" and sw is not None and sw.by_notice:  # Spencerport D: the notice halts the work
                detail = f" (a stop-work order: {sw.citation})"
            out.append(Row({
                "case": c.id, "site": c.site, "responsible_party": c.party, "party_address": c.address,
                "violation_date": c.found_on.isoformat(), "location": c.location, "description": c.nature,
                "regulatory_reference": c.violated, "corrective_actions": c.remedy,
                "completion_schedule": schedule.isoformat() if schedule else "",
                "enforcement_date": e.on.isoformat(), "enforcement_type": kind.enforcement + detail,
                "served": _served(view) if e.kind == "nov_issued" else "", "appeal": _appeal(view),
                "offense": offense, "penalty": penalty,
                "additional_violations": view.continuation_text, "referrals": referrals, "date_resolved": resolved,
                "days_to_resolution": days, "unverified": " | ".join(unverified), "recorded_by": e.by,
            }, e.on, kind.enforcement))
    out.sort(key=lambda r: (r.enforcement_date, r["case"]))
    return out


def to_csv(rows: Sequence[Row]) -> str:
    """The register as CSV (:data:`COLUMNS`, one row per enforcement action)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r.values)
    return buf.getvalue()


@dataclass(frozen=True)
class Summary:
    """A year's enforcement for the municipality's annual report.

    Attributes:
        by_type: enforcement actions dated in the year, by type (the register's ``enforcement_type``).
        opened: cases whose violation was found in the year.
        resolved: cases resolved in the year.
        median_days: median days from the violation to its resolution, of the cases resolved in the year
            (``None``: none resolved).
        open_at_end: cases with a violation found by the year's end and not resolved by then.
    """

    year: int
    by_type: dict[str, int]
    opened: int
    resolved: int
    median_days: float | None
    open_at_end: int

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def summary_of(views: Sequence[CaseView], year: int) -> Summary:
    """The summary of ``year`` (:class:`Summary`)."""
    types: Counter[str] = Counter()
    days: list[int] = []
    open_at_end = 0
    end = date(year, 12, 31)
    for view in views:
        for e in view.history:
            kind = ACTIONS.get(e.kind)
            if kind is not None and kind.enforcement and e.on.year == year:
                types[kind.enforcement] += 1
        resolved = view.action("resolved")
        if resolved is not None and resolved.on.year == year:
            days.append((resolved.on - view.case.found_on).days)
        if view.case.found_on <= end and (resolved is None or resolved.on > end):
            open_at_end += 1
    order = [k.enforcement for k in ACTIONS.values() if k.enforcement]
    return Summary(year, {t: types[t] for t in order if types[t]},
                   sum(1 for v in views if v.case.found_on.year == year), len(days),
                   float(statistics.median(days)) if days else None, open_at_end)


def to_html(rows: Sequence[Row], summary: Summary | None, title: str) -> str:
    """The register (and the year's summary) as one HTML document."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("stormwatch.enforcement", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    css = env.loader.get_source(env, "register.css")[0]  # type: ignore[union-attr]
    return env.get_template("register.html").render(rows=rows, summary=summary, title=title, css=Markup(css),
                                                    columns=COLUMNS)


def to_pdf(rows: Sequence[Row], summary: Summary | None, title: str) -> bytes:
    """The register as PDF (:func:`to_html` laid out by WeasyPrint, landscape)."""
    import weasyprint

    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    pdf = weasyprint.HTML(string=to_html(rows, summary, title)).write_pdf()
    assert pdf is not None
    return bytes(pdf)
