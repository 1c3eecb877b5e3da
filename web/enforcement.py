"""The enforcement desk's pages: cases, their deadlines, letters and the register.

* ``/enforcement`` -- the cases the user may see; ``/enforcement/{case}`` -- one case: its stop-work
  order, every deadline with its citation, the code's words and its state, the notice's contents,
  the penalty, the evidence, the history; the SMO edits the draft and records what happens there.
* ``/enforcement/{case}/letter.pdf?kind=nov|stop-work`` -- the letter (a draft only to the SMO).
* ``/enforcement/calendar.ics`` -- the open deadlines of the user's cases; ``/enforcement/register.csv``,
  ``/enforcement/register.pdf?year=Y`` -- the MS4 register (the SMO).
* ``POST /orders/{oid}/enforcement`` -- the SMO opens a case draft from a work order and its evidence;
  ``POST /enforcement/{case}/edit|record|evidence`` -- the draft, an action, another order's evidence
  (each with the session's CSRF token).

Who sees what: the SMO every case; an inspector or contractor of the site its cases once something
was issued to the site (a warning, a notice, a stop-work order) -- never a draft; anyone else is
refused (403). :func:`banners` gives the site page and the portfolio their cases, a stop-work order
in effect first. Every refusal of an action is the case page again with the one-line reason, nothing
recorded. Design: docs/enforcement.md, "The web desk".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, cast
from zoneinfo import ZoneInfo

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from stormwatch.enforcement.actions import ACTIONS, DECISIONS, SERVICE_METHODS, STOP_WORK_DECISIONS, CaseError
from stormwatch.enforcement.cases import DRAFT_FIELDS, Case, EnforcementBook
from stormwatch.enforcement.deadlines import Deadline
from stormwatch.enforcement.evidence import evidence_of
from stormwatch.enforcement.view import CaseView, view_of
from stormwatch.stores.base import ReadingStore
from stormwatch.web.accounts import Session, User, can_enforce, can_view
from stormwatch.web.desk import Desk, desk_of
from stormwatch.web.pages import Forbidden, order_of, page, render

#: Actions that issue something to the site: after one, the site's people see the case.
ISSUED = frozenset({"verbal_warning", "nov_issued", "stop_work_issued"})

#: The fields of the record form, as the form names them -> the action's field.
_RECORD_FIELDS = {"method": "method", "certified": "certified_number", "outcome": "outcome",
                  "correct_by": "correct_by", "appellant": "appellant", "referred_to": "to",
                  "amount_usd": "amount_usd", "written_confirmation": "written_confirmation"}


def cases_of(desk: Desk) -> EnforcementBook:
    """The desk's cases.

    Raises:
        HTTPException: 404, the desk keeps none.
    """
    if desk.cases is None:
        raise HTTPException(404, "this desk keeps no enforcement cases")
    return desk.cases


def issued(book: EnforcementBook, case: Case) -> bool:
    """Something was issued to the site on this case (a warning, a notice, a stop-work order)."""
    return any(e.kind in ISSUED for e in book.actions(case.id))


def may_see(book: EnforcementBook, user: User, case: Case) -> bool:
    """The SMO every case; the site's people its issued cases."""
    return can_enforce(user, case.site) or (can_view(user, case.site) and issued(book, case))


def case_of(desk: Desk, user: User, case_id: str) -> Case:
    """The case ``case_id`` if ``user`` may see it.

    Raises:
        HTTPException: 404, no such case.
        Forbidden: another site's case, or a draft to anyone but the SMO.
    """
    book = cases_of(desk)
    try:
        case = book.get(case_id)
    except CaseError:
        raise HTTPException(404, f"no enforcement case {case_id!r}") from None
    if not can_view(user, case.site):
        raise Forbidden(f"enforcement case {case_id} belongs to site {case.site}, which is not one of your sites")
    if not may_see(book, user, case):
        raise Forbidden(f"enforcement case {case_id} is a draft: nothing has been issued to the site yet")
    return case


def _smo(session: Session, site: str, what: str) -> None:
    if not can_enforce(session.user, site):
        raise Forbidden(f"only the SMO may {what}")


@dataclass(frozen=True)
class Banner:
    """A case as the site page and the portfolio show it: its deadlines not yet met, earliest first."""

    view: CaseView
    pending: list[Deadline]

    @property
    def stop_work(self) -> bool:
        return self.view.stop_work is not None and self.view.stop_work.in_effect


def banners(desk: Desk, user: User, site_ids: list[str]) -> list[Banner]:
    """The open cases of ``site_ids`` the user may see, each with its deadlines not yet met; a stop-work
    order in effect first, then the overdue, then by violation day."""
    if desk.cases is None:
        return []
    out = []
    for case in desk.cases.list(sites=site_ids):
        if not may_see(desk.cases, user, case):
            continue
        try:
            view = view_of(desk.cases, case)
        except CaseError:
            continue
        if view.open:
            out.append(Banner(view, sorted((d for d in view.deadlines if d.state in ("open", "overdue")),
                                           key=lambda d: d.due)))
    out.sort(key=lambda b: (not b.stop_work, not b.view.overdue, b.view.case.found_on, b.view.case.id))
    return out


def _context(desk: Desk, session: Session, case: Case, *, error: str = "",
             form: dict[str, str] | None = None) -> dict[str, Any]:
    book = cases_of(desk)
    view = view_of(book, case)
    site = desk.sites.get(case.site)
    evidence = evidence_of(case.sources, ZoneInfo(case.timezone))
    smo = can_enforce(session.user, case.site)
    return {"view": view, "case": case, "site": site, "evidence": evidence, "smo": smo, "error": error,
            "issued": view.action("nov_issued") is not None,
            "actions": [(k.replace("_", "-"), spec.label) for k, spec in ACTIONS.items()],
            "methods": SERVICE_METHODS, "decisions": DECISIONS + tuple(d for d in STOP_WORK_DECISIONS
                                                                        if d not in DECISIONS),
            "form": form or {}, "today": view.today.isoformat(), "tz": case.timezone}


async def case_list(request: Request, session: Session) -> Response:
    """``GET /enforcement``: the cases the user may see, open first."""
    desk = desk_of(request)
    book = cases_of(desk)
    views = []
    for case in book.list(sites=[s for s in desk.sites if can_view(session.user, s)]):
        if may_see(book, session.user, case):
            views.append(view_of(book, case))
    views.sort(key=lambda v: (not v.open, v.case.found_on, v.case.id))
    return render(request, "enforcement.html", {"views": views, "smo": session.user.role == "smo"})


async def case_page(request: Request, session: Session) -> Response:
    """``GET /enforcement/{case}``."""
    desk = desk_of(request)
    case = case_of(desk, session.user, request.path_params["case"])
    ctx = _context(desk, session, case)
    ctx["message"] = {"opened": "Case opened: a draft. Complete the notice's contents, then record its issue.",
                      "edited": "Draft saved.", "recorded": "Recorded."}.get(request.query_params.get("done", ""), "")
    return render(request, "case.html", ctx)


async def open_from_order(request: Request, session: Session) -> Response:
    """``POST /orders/{oid}/enforcement``: the SMO opens a case draft from a work order."""
    from stormwatch.enforcement.drafting import draft_from

    desk = desk_of(request)
    order = order_of(desk, session.user, request.path_params["oid"])
    _smo(session, order.site, "open an enforcement case")
    site = desk.sites.get(order.site)
    if site is None:
        raise HTTPException(404, f"site {order.site} is not on this desk")
    book = cases_of(desk)
    try:
        proposed = draft_from(site.cfg, [order])
        case = book.open(site=site.id, jurisdiction=site.cfg.site.jurisdiction, timezone=site.cfg.site.timezone,
                         by=session.user.display_name, **proposed)
    except CaseError as exc:
        raise HTTPException(409, str(exc)) from None
    return RedirectResponse(f"/enforcement/{case.id}?done=opened", status_code=303)


def cases_from(book: EnforcementBook | None, order_id: str, site: str) -> tuple[list[str], list[str]]:
    """The ids of the cases holding work order ``order_id``'s evidence, and of the site's other drafts
    (it may be added to one: one violation shown by several events) -- for the order's page."""
    if book is None:
        return [], []
    holding, drafts = [], []
    for c in book.list(site=site):
        if any(s.get("order") == order_id for s in c.sources):
            holding.append(c.id)
        elif not any(e.kind == "nov_issued" for e in book.actions(c.id)):
            drafts.append(c.id)
    return holding, drafts


async def add_evidence(request: Request, session: Session) -> Response:
    """``POST /enforcement/{case}/evidence`` (form ``order``): the SMO adds a work order's evidence to a draft."""
    from stormwatch.enforcement.drafting import source_of

    desk = desk_of(request)
    case = case_of(desk, session.user, request.path_params["case"])
    _smo(session, case.site, "add evidence to an enforcement case")
    order = order_of(desk, session.user, str(request.state.form.get("order") or ""))
    try:
        cases_of(desk).add_sources(case.id, session.user.display_name, [source_of(order)])
    except CaseError as exc:
        return render(request, "case.html", _context(desk, session, case, error=str(exc)), 409)
    return RedirectResponse(f"/enforcement/{case.id}?done=edited", status_code=303)


async def edit(request: Request, session: Session) -> Response:
    """``POST /enforcement/{case}/edit``: the SMO changes the draft."""
    desk = desk_of(request)
    case = case_of(desk, session.user, request.path_params["case"])
    _smo(session, case.site, "edit an enforcement case")
    form = {k: str(request.state.form.get(k) or "").strip() for k in DRAFT_FIELDS}
    changes: dict[str, str | date | None] = {k: v for k, v in form.items() if k != "correct_by"}
    changes["correct_by"] = form["correct_by"] or None
    try:
        cases_of(desk).edit(case.id, session.user.display_name, **changes)
    except CaseError as exc:
        return render(request, "case.html", _context(desk, session, case, error=str(exc), form=form), 409)
    return RedirectResponse(f"/enforcement/{case.id}?done=edited", status_code=303)


async def record(request: Request, session: Session) -> Response:
    """``POST /enforcement/{case}/record``: the SMO records an action (refused: the page again, why)."""
    desk = desk_of(request)
    case = case_of(desk, session.user, request.path_params["case"])
    _smo(session, case.site, "record on an enforcement case")
    form = {k: str(request.state.form.get(k) or "").strip() for k in ("action", "on", "notes", *_RECORD_FIELDS)}
    fields = {_RECORD_FIELDS[k]: form[k] for k in _RECORD_FIELDS if form[k]}
    try:
        try:
            day = date.fromisoformat(form["on"])
        except ValueError:
            raise CaseError(f"the day it happened {form['on']!r}: a date (YYYY-MM-DD)") from None
        cases_of(desk).record(case.id, form["action"], day, session.user.display_name, form["notes"], **fields)
    except CaseError as exc:
        return render(request, "case.html", _context(desk, session, case, error=str(exc), form=form), 409)
    return RedirectResponse(f"/enforcement/{case.id}?done=recorded", status_code=303)


async def letter(request: Request, session: Session) -> Response:
    """``GET /enforcement/{case}/letter.pdf?kind=nov|stop-work``: the letter as PDF (a draft: the SMO's)."""
    from stormwatch.enforcement import letters

    desk = desk_of(request)
    case = case_of(desk, session.user, request.path_params["case"])
    kind = request.query_params.get("kind", "nov")
    if kind not in letters.KINDS:
        raise HTTPException(400, f"kind {kind[:20]!r}: nov or stop-work")
    book = cases_of(desk)
    view = view_of(book, case)
    issued_by = view.action("nov_issued" if kind == "nov" else "stop_work_issued")
    if issued_by is None:
        _smo(session, case.site, "print a letter that is not issued (a draft)")
    site = desk.sites.get(case.site)
    signer = issued_by.by if issued_by is not None else session.user.display_name
    try:
        if kind == "nov":
            made = letters.notice_letter(view, signer=signer, cfg=site.cfg if site else None,
                                         store=cast(ReadingStore, desk.store), now=desk.clock.now())
        else:
            made = letters.stop_work_letter(view, signer=signer, cfg=site.cfg if site else None)
    except CaseError as exc:
        raise HTTPException(404, str(exc)) from None
    name = f"{case.id}-{kind}.pdf"
    return Response(letters.to_pdf(made), media_type="application/pdf",
                    headers={"Content-Disposition": f'inline; filename="{name}"', "Cache-Control": "private"})


async def calendar(request: Request, session: Session) -> Response:
    """``GET /enforcement/calendar.ics``: the open deadlines of the cases the user may see."""
    from stormwatch.enforcement.ical import calendar_of

    desk = desk_of(request)
    book = cases_of(desk)
    views = [view_of(book, c) for c in book.list(sites=[s for s in desk.sites if can_view(session.user, s)])
             if may_see(book, session.user, c)]
    return Response(calendar_of(views, desk.clock.now()), media_type="text/calendar",
                    headers={"Content-Disposition": 'attachment; filename="enforcement.ics"'})


def _year(request: Request) -> int | None:
    text = request.query_params.get("year", "")
    if not text:
        return None
    if not text.isdigit() or not 1900 <= int(text) <= 9999:
        raise HTTPException(400, f"year {text[:10]!r}: a year like 2026")
    return int(text)


async def register_csv(request: Request, session: Session) -> Response:
    """``GET /enforcement/register.csv?year=Y``: the MS4 register (the SMO)."""
    from stormwatch.enforcement import register

    desk = desk_of(request)
    if session.user.role != "smo":
        raise Forbidden("only the SMO may read the enforcement register")
    book = cases_of(desk)
    rows = register.rows_of([view_of(book, c) for c in book.list()], _year(request))
    return Response(register.to_csv(rows), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="enforcement-register.csv"'})


async def register_pdf(request: Request, session: Session) -> Response:
    """``GET /enforcement/register.pdf?year=Y``: the register with the year's summary (the SMO)."""
    from stormwatch.enforcement import register

    desk = desk_of(request)
    if session.user.role != "smo":
        raise Forbidden("only the SMO may read the enforcement register")
    book = cases_of(desk)
    year = _year(request)
    views = [view_of(book, c) for c in book.list()]
    summary = register.summary_of(views, year) if year is not None else None
    title = f"Enforcement register {year}" if year is not None else "Enforcement register"
    return Response(register.to_pdf(register.rows_of(views, year), summary, title), media_type="application/pdf")


#: The routes of the enforcement desk (joined to :data:`stormwatch.web.app.ROUTES`).
ROUTES: list[BaseRoute] = [
    Route("/enforcement", page(case_list), methods=["GET"]),
    Route("/enforcement/calendar.ics", page(calendar), methods=["GET"]),
    Route("/enforcement/register.csv", page(register_csv), methods=["GET"]),
    Route("/enforcement/register.pdf", page(register_pdf), methods=["GET"]),
    Route("/enforcement/{case}", page(case_page), methods=["GET"]),
    Route("/enforcement/{case}/letter.pdf", page(letter), methods=["GET"]),
    Route("/enforcement/{case}/edit", page(edit, post=True), methods=["POST"]),
    Route("/enforcement/{case}/record", page(record, post=True), methods=["POST"]),
    Route("/enforcement/{case}/evidence", page(add_evidence, post=True), methods=["POST"]),
    Route("/orders/{oid}/enforcement", page(open_from_order, post=True), methods=["POST"]),
]
