"""``stormwatch enforce``: enforcement cases from the command line (scriptable, ``--json``).

open (from work orders or by hand), edit the draft, record an action, list, show (deadlines with
their citations), letter (notice of violation or stop-work order, PDF or HTML), register (CSV or
PDF, with the year's summary), summary, ical. The cases live in ``enforcement.db`` of the state
directory (beside the alert service's ``alerts.db``); "today" is the alert engine's clock as it
recorded it there (a demo's simulated time), or the wall clock. Workflow: docs/enforcement.md.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import typer

from stormwatch.clock import Clock, WallClock
from stormwatch.enforcement.actions import ACTIONS, CaseError, parse_day
from stormwatch.enforcement.cases import CASES_FILE, Case, EnforcementBook
from stormwatch.enforcement.view import CaseView, view_json, view_of
from stormwatch.runtime.cliutil import check_site_ids, fail, output_path, use_state_dir

DEFAULT_STATE_DIR = "./var/alerts"
ALERTS_FILE = "alerts.db"

app = typer.Typer(
    help="Enforcement cases: notices of violation, stop-work orders, appeals and penalties as the village code "
         "prescribes -- drafted from the sensor evidence, every deadline computed and cited, recorded as the SMO "
         "acts. Nothing is issued by the product.",
    no_args_is_help=True,
)

_STATE_DIR = typer.Option(Path(DEFAULT_STATE_DIR), "--state-dir", metavar="DIR",
                          help=f"The state directory of the alert service or the demo (the cases are kept in its "
                               f"{CASES_FILE}).")
_WALL = typer.Option(False, "--wall-time", help="Judge deadlines against today's wall-clock date instead of the clock "
                                               "of the alert engine that wrote the state (a demo's simulated time).")
_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")
_BY = typer.Option(..., "--by", metavar="NAME", help="Who records it (kept in the case's history).")
_CASE = typer.Argument(..., metavar="CASE_ID", help="The case's id (EC-YYYY-NNN).")


def _clock(state_dir: Path, wall_time: bool) -> Clock:
    """The alert engine's clock as it recorded it in the state directory, else the wall clock."""
    alerts = state_dir / ALERTS_FILE
    if wall_time or not alerts.is_file():
        return WallClock()
    from stormwatch.alerts.workorders import WorkOrderError, WorkOrders

    try:
        orders = WorkOrders(alerts, WallClock())
    except WorkOrderError as exc:
        fail(str(exc))
    try:
        engine = orders.engine_clock()
    finally:
        orders.close()
    return WallClock() if engine is None else engine.reader_clock(False)[0]


def _book(state_dir: Path, wall_time: bool, *, create: bool = False) -> EnforcementBook:
    use_state_dir(state_dir, create=create, hint="the --state-dir of the alert service or the demo")
    path = state_dir / CASES_FILE
    if not create and not path.is_file():
        fail(f"--state-dir {state_dir}: no {CASES_FILE} there (no enforcement case opened yet: `stormwatch enforce "
             "open`)")
    try:
        return EnforcementBook(path, _clock(state_dir, wall_time))
    except CaseError as exc:
        fail(str(exc))


def _cases(book: EnforcementBook, site_id: str | None, state_dir: Path) -> list[Case]:
    """The cases, only ``site_id``'s when given: a site the state directory records (its cases,
    work orders or store), else refused."""
    import sqlite3

    from stormwatch.alerts.workorders import state_dir_sites

    if site_id is not None:
        try:
            known = state_dir_sites(state_dir)
        except sqlite3.Error as exc:
            fail(f"--state-dir {state_dir}: not readable ({exc})")
        check_site_ids([site_id], known + [c.site for c in book.list()], f"--state-dir {state_dir}")
    return book.list(site=site_id)


def _day(text: str | None, option: str) -> date | None:
    if text is None:
        return None
    try:
        return parse_day(text, option)
    except CaseError as exc:
        fail(str(exc))


def _deadline_lines(view: CaseView) -> list[str]:
    lines = []
    for d in view.deadlines:
        met = f" (met {d.met_on.isoformat()})" if d.met_on and d.state in ("met", "late") else ""
        state = d.state.upper() if d.state in ("overdue", "late") else d.state
        lines.append(f"  {d.label:<44} {d.due.strftime('%a %Y-%m-%d')}  {state}{met}  [{'; '.join(d.citations)}]"
                     f"  {d.basis}" + (f"  NOTE: {d.note}" if d.note else ""))
    lines += [f"  {s.name.replace('_', ' '):<44} not set by the code: {s.text}" for s in view.silences]
    return lines


def _text(view: CaseView) -> list[str]:
    c = view.case
    rows = [("case", f"{c.id} at {c.site} ({c.jurisdiction}), {view.stage}" + ("" if view.open else ", resolved")),
            ("found on", c.found_on.isoformat()), ("party", f"{c.party or '-'}; {c.address or '-'}"),
            ("location", c.location or "-"), ("nature", c.nature or "-"), ("violated", c.violated or "-"),
            ("remedy", f"{c.remedy or '-'} (complete by {c.correct_by.isoformat() if c.correct_by else '-'})")]
    if view.gaps:
        rows.append(("not ready", "the notice lacks " + "; ".join(view.gaps)))
    if view.stop_work is not None:
        sw = view.stop_work
        rows.append(("stop-work", (f"IN EFFECT since {sw.since.isoformat()}" if sw.since and not sw.lifted else
                                   f"lifted {sw.lifted.isoformat()}" if sw.lifted else "issued, not served")
                     + f" [{sw.citation}]"))
    if view.penalty_text:
        rows.append(("penalty", view.penalty_text))
    if view.continuation_text:
        rows.append(("continuing", view.continuation_text))
    lines = [f"{k:>11}: {v}" for k, v in rows]
    lines.append(f"{'deadlines':>11}: as of {view.today.isoformat()}")
    lines += _deadline_lines(view)
    lines.append(f"{'history':>11}:")
    for e in view.history:
        extra = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in e.fields.items())
        lines.append(f"  {e.on.isoformat()}  {e.label}{f' ({extra})' if extra else ''} -- recorded by {e.by}"
                     + (f": {e.notes}" if e.notes else ""))
    return lines


@app.command("open")
def open_cmd(
    site: Path = typer.Option(..., "--site", metavar="FILE", help="The site's YAML file (its id, code and zone)."),
    from_order: list[str] = typer.Option([], "--from-order", metavar="ORDER_ID",
                                         help="A work order whose event is the violation (repeatable): its evidence "
                                              "is copied into the case and the draft proposed from it."),
    found_on: str | None = typer.Option(None, "--found-on", metavar="DATE",
                                        help="The day the violation was found, YYYY-MM-DD (default: the first "
                                             "order's event day; required by hand)."),
    party: str = typer.Option("", "--party", metavar="TEXT", help="The person responsible (the notice's addressee)."),
    address: str = typer.Option("", "--address", metavar="TEXT", help="Their address."),
    location: str | None = typer.Option(None, "--location", metavar="TEXT",
                                        help="The address or description of the land."),
    nature: str | None = typer.Option(None, "--nature", metavar="TEXT", help="The statement of the violation."),
    violated: str | None = typer.Option(None, "--violated", metavar="TEXT", help="The sections violated."),
    remedy: str = typer.Option("", "--remedy", metavar="TEXT", help="The remedial measures necessary."),
    correct_by: str | None = typer.Option(None, "--correct-by", metavar="DATE",
                                          help="The day to complete them, YYYY-MM-DD."),
    by: str = _BY, state_dir: Path = _STATE_DIR, wall_time: bool = _WALL, as_json: bool = _JSON,
) -> None:
    """Open an enforcement case (a draft) from work orders or by hand; prints its id and what it lacks."""
    from stormwatch.alerts.packs import PackError
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.config import ConfigError
    from stormwatch.enforcement.drafting import draft_from

    try:
        cfg = load_site_file(site)
    except (ConfigError, PackError) as exc:
        fail(str(exc))
    day = _day(found_on, "--found-on")
    proposed: dict[str, Any] = {}
    if from_order:
        proposed = _drafted(state_dir, cfg, from_order, draft_from)
    elif day is None:
        fail("--found-on DATE: a case opened by hand needs the day the violation was found")
    book = _book(state_dir, wall_time, create=True)
    try:
        case = book.open(site=cfg.site.id, jurisdiction=cfg.site.jurisdiction, timezone=cfg.site.timezone, by=by,
                         found_on=day or proposed["found_on"], sources=proposed.get("sources", []), party=party,
                         address=address, location=location if location is not None else proposed.get(
                             "location", f"{cfg.site.name or cfg.site.id} (site {cfg.site.id})"),
                         nature=nature if nature is not None else proposed.get("nature", ""),
                         violated=violated if violated is not None else proposed.get("violated", ""),
                         remedy=remedy, correct_by=_day(correct_by, "--correct-by"))
        view = view_of(book, case)
    except CaseError as exc:
        fail(str(exc))
    _print(view, as_json)


def _work_orders(state_dir: Path, ids: list[str]) -> list[Any]:
    """The work orders ``ids`` of the state directory's book (one line and exit 2 when one is not there)."""
    from stormwatch.alerts.workorders import WorkOrderError, WorkOrders

    path = use_state_dir(state_dir, create=False) / ALERTS_FILE
    if not path.is_file():
        fail(f"--from-order: no work-order state in --state-dir {state_dir} (no {ALERTS_FILE})")
    try:
        book = WorkOrders(path, WallClock())
        try:
            return [book.get(i) for i in ids]
        finally:
            book.close()
    except WorkOrderError as exc:
        fail(str(exc))


def _drafted(state_dir: Path, cfg: Any, ids: list[str], draft_from: Any) -> dict[str, Any]:
    try:
        proposed: dict[str, Any] = draft_from(cfg, _work_orders(state_dir, ids))
    except CaseError as exc:
        fail(str(exc))
    return proposed


def _orders(state_dir: Path, ids: list[str]) -> list[dict[str, Any]]:
    from stormwatch.enforcement.drafting import source_of

    return [source_of(o) for o in _work_orders(state_dir, ids)]


def _print(view: CaseView, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(view_json(view), indent=2, ensure_ascii=False))
    else:
        typer.echo("\n".join(_text(view)))


@app.command("edit")
def edit_cmd(
    case_id: str = _CASE,
    party: str | None = typer.Option(None, "--party", metavar="TEXT", help="The person responsible."),
    address: str | None = typer.Option(None, "--address", metavar="TEXT", help="Their address."),
    location: str | None = typer.Option(None, "--location", metavar="TEXT", help="The land."),
    nature: str | None = typer.Option(None, "--nature", metavar="TEXT", help="The statement of the violation."),
    violated: str | None = typer.Option(None, "--violated", metavar="TEXT", help="The sections violated."),
    remedy: str | None = typer.Option(None, "--remedy", metavar="TEXT", help="The remedial measures."),
    correct_by: str | None = typer.Option(None, "--correct-by", metavar="DATE", help="The day to complete them."),
    from_order: list[str] = typer.Option([], "--from-order", metavar="ORDER_ID",
                                         help="Add the evidence of this work order of the case's site (repeatable)."),
    by: str = _BY, state_dir: Path = _STATE_DIR, wall_time: bool = _WALL, as_json: bool = _JSON,
) -> None:
    """Change the draft of a case before its notice is issued, or add evidence (each change kept in its history)."""
    book = _book(state_dir, wall_time)
    changes = {"party": party, "address": address, "location": location, "nature": nature, "violated": violated,
               "remedy": remedy, "correct_by": _day(correct_by, "--correct-by")}
    try:
        if from_order:
            book.add_sources(case_id, by, _orders(state_dir, from_order))
        case = book.edit(case_id, by, **{k: v for k, v in changes.items() if v is not None})
        view = view_of(book, case)
    except CaseError as exc:
        fail(str(exc))
    _print(view, as_json)


_ACTION_HELP = ", ".join(a.replace("_", "-") for a in ACTIONS)


@app.command("record")
def record_cmd(
    case_id: str = _CASE,
    action: str = typer.Argument(..., metavar="ACTION", help=f"What happened: {_ACTION_HELP}."),
    on: str = typer.Option(..., "--on", metavar="DATE", help="The day it happened, YYYY-MM-DD (site-local)."),
    method: str | None = typer.Option(None, "--method", metavar="METHOD",
                                      help="How a notice or order was served: hand, certified_mail, posted, other."),
    certified: str | None = typer.Option(None, "--certified", metavar="NUMBER",
                                         help="The certified-mail number (service or a mailed decision)."),
    outcome: str | None = typer.Option(None, "--outcome", metavar="OUTCOME",
                                       help="A decision: upheld, modified or cancelled (a stop-work appeal: "
                                            "confirmed, modified or cancelled)."),
    new_correct_by: str | None = typer.Option(None, "--correct-by", metavar="DATE",
                                              help="A modified decision's new day to complete the remedial "
                                                   "measures."),
    appellant: str | None = typer.Option(None, "--appellant", metavar="NAME", help="Who filed the appeal."),
    referred_to: str | None = typer.Option(None, "--referred-to", metavar="AGENCY",
                                           help="A referral's agency (e.g. NYSDEC Region 1)."),
    amount: str | None = typer.Option(None, "--amount-usd", metavar="USD", help="Costs billed or paid, dollars."),
    written: str | None = typer.Option(None, "--written-confirmation", metavar="REF",
                                       help="The written confirmation that lifts a stop-work order (where the code "
                                            "requires one: Spencerport D)."),
    notes: str = typer.Option("", "--notes", metavar="TEXT", help="A note kept with it."),
    by: str = _BY, state_dir: Path = _STATE_DIR, wall_time: bool = _WALL, as_json: bool = _JSON,
) -> None:
    """Record what happened on a case (checked against the code first: a refused action records nothing)."""
    day = _day(on, "--on")
    assert day is not None
    fields = {"method": method, "certified_number": certified, "outcome": outcome, "correct_by": new_correct_by,
              "appellant": appellant, "to": referred_to, "amount_usd": amount, "written_confirmation": written}
    book = _book(state_dir, wall_time)
    try:
        case, entry = book.record(case_id, action, day, by, notes,
                                  **{k: v for k, v in fields.items() if v is not None})
        view = view_of(book, case)
    except CaseError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps({"recorded": entry.to_json(), "case": view_json(view)}, indent=2, ensure_ascii=False))
        return
    typer.echo(f"{case_id}: {entry.label} on {entry.on.isoformat()} recorded")
    typer.echo("\n".join(_deadline_lines(view)))


@app.command("list")
def list_cmd(
    site_id: str | None = typer.Option(None, "--site-id", metavar="SITE_ID", help="Only this site's cases."),
    overdue: bool = typer.Option(False, "--overdue", help="Only cases with a deadline past and not met."),
    state_dir: Path = _STATE_DIR, wall_time: bool = _WALL, as_json: bool = _JSON,
) -> None:
    """List the cases, oldest violation first: stage, the next deadline, what is overdue."""
    book = _book(state_dir, wall_time)
    try:
        views = [view_of(book, c) for c in _cases(book, site_id, state_dir)]
    except CaseError as exc:
        fail(str(exc))
    if overdue:
        views = [v for v in views if v.overdue]
    if as_json:
        typer.echo(json.dumps([view_json(v) for v in views], indent=2, ensure_ascii=False))
        return
    typer.echo(f"{len(views)} enforcement case{'' if len(views) == 1 else 's'}")
    for v in views:
        pending = [d for d in v.deadlines if d.state == "open"]
        nxt = f"next: {pending[0].label} {pending[0].due.isoformat()}" if pending else ""
        late = "OVERDUE: " + ", ".join(f"{d.label} {d.due.isoformat()}" for d in v.overdue) if v.overdue else ""
        sw = "  STOP-WORK" if v.stop_work is not None and v.stop_work.in_effect else ""
        typer.echo(f"{v.case.id}  {v.case.site:<18} {v.stage:<32} {nxt}  {late}{sw}".rstrip())


@app.command("show")
def show_cmd(case_id: str = _CASE, state_dir: Path = _STATE_DIR, wall_time: bool = _WALL,
             as_json: bool = _JSON) -> None:
    """Show one case: the draft, every deadline with its citation and state, the penalty, the history."""
    book = _book(state_dir, wall_time)
    try:
        view = view_of(book, book.get(case_id))
    except CaseError as exc:
        fail(str(exc))
    _print(view, as_json)


@app.command("letter")
def letter_cmd(
    case_id: str = _CASE,
    kind: str = typer.Option("nov", "--kind", metavar="KIND", help="nov (notice of violation) or stop-work."),
    fmt: str = typer.Option("pdf", "--format", metavar="FORMAT", help="pdf or html."),
    output: Path = typer.Option(..., "--output", "-o", metavar="FILE", help="Write the letter to this file."),
    by: str = typer.Option(..., "--by", metavar="NAME", help="Who signs it."),
    title: str = typer.Option("Stormwater Management Officer", "--title", metavar="TEXT",
                              help="The signer's title."),
    site: Path | None = typer.Option(None, "--site", metavar="FILE",
                                     help="The site's YAML file, with --store: chart the evidence's readings."),
    store: str | None = typer.Option(None, "--store", envvar="STORMWATCH_STORE", metavar="URL",
                                     help="The readings store, with --site: chart the evidence's readings."),
    state_dir: Path = _STATE_DIR, wall_time: bool = _WALL,
) -> None:
    """Write the notice of violation (or the stop-work order) of a case: the code's contents in its order."""
    from stormwatch.enforcement import letters

    if kind not in letters.KINDS:
        fail(f"--kind {kind!r}: nov or stop-work")
    if fmt not in ("pdf", "html"):
        fail(f"--format {fmt!r}: pdf or html")
    output_path(output)
    book = _book(state_dir, wall_time)
    try:
        view = view_of(book, book.get(case_id))
        cfg, opened = _evidence_sources(site, store, view.case)
        try:
            if kind == "nov":
                letter = letters.notice_letter(view, signer=by, signer_title=title, cfg=cfg, store=opened,
                                               now=book.clock.now())
            else:
                letter = letters.stop_work_letter(view, signer=by, signer_title=title, cfg=cfg)
        finally:
            if opened is not None:
                opened.close()
    except CaseError as exc:
        fail(str(exc))
    data = letters.to_pdf(letter) if fmt == "pdf" else letters.to_html(letter).encode("utf-8")
    output.write_bytes(data)
    typer.echo(f"{output}: {letter.title.lower()} of {case_id}" + (" (DRAFT: not issued)" if letter.draft else ""))


def _evidence_sources(site: Path | None, store: str | None, case: Case) -> tuple[Any, Any]:
    if site is None and store is None:
        return None, None
    if site is None or store is None:
        fail("--site and --store go together (the site's probes are read from the store)")
    from stormwatch.alerts.packs import PackError
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.config import ConfigError
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    try:
        cfg = load_site_file(site)
    except (ConfigError, PackError) as exc:
        fail(str(exc))
    if cfg.site.id != case.site:
        fail(f"--site {site}: site {cfg.site.id}, but case {case.id} is of site {case.site}")
    try:
        return cfg, open_store(store, existing=True)
    except (StoreUrlError, StoreError) as exc:
        fail(f"--store {redact(store)}: {exc}")


@app.command("register")
def register_cmd(
    year: int | None = typer.Option(None, "--year", metavar="YEAR", min=1900, max=9999,
                                    help="Only the enforcement actions of this year (and its summary)."),
    site_id: str | None = typer.Option(None, "--site-id", metavar="SITE_ID", help="Only this site's cases."),
    fmt: str = typer.Option("csv", "--format", metavar="FORMAT", help="csv or pdf."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="FILE",
                                       help="Write to this file (CSV: default standard output; PDF: required)."),
    state_dir: Path = _STATE_DIR, wall_time: bool = _WALL,
) -> None:
    """Write the enforcement register an MS4 permit asks for: one row per enforcement action (CSV or PDF)."""
    from stormwatch.enforcement import register as registers

    if fmt not in ("csv", "pdf"):
        fail(f"--format {fmt!r}: csv or pdf")
    if fmt == "pdf" and output is None:
        fail("--format pdf needs --output FILE")
    if output is not None:
        output_path(output)
    book = _book(state_dir, wall_time)
    try:
        views = [view_of(book, c) for c in _cases(book, site_id, state_dir)]
    except CaseError as exc:
        fail(str(exc))
    rows = registers.rows_of(views, year)
    if fmt == "csv":
        text = registers.to_csv(rows)
        if output is None:
            typer.echo(text, nl=False)
            return
        output.write_text(text, encoding="utf-8")
    else:
        assert output is not None
        summary = registers.summary_of(views, year) if year is not None else None
        title = f"Enforcement register {year}" if year is not None else "Enforcement register"
        output.write_bytes(registers.to_pdf(rows, summary, title))
    typer.echo(f"{output}: {len(rows)} enforcement action{'' if len(rows) == 1 else 's'}", err=True)


@app.command("summary")
def summary_cmd(
    year: int = typer.Option(..., "--year", metavar="YEAR", min=1900, max=9999, help="The year of the annual report."),
    state_dir: Path = _STATE_DIR, wall_time: bool = _WALL, as_json: bool = _JSON,
) -> None:
    """The year's enforcement for the annual report: actions by type, cases resolved, median days to resolution."""
    from stormwatch.enforcement.register import summary_of

    book = _book(state_dir, wall_time)
    try:
        summary = summary_of([view_of(book, c) for c in book.list()], year)
    except CaseError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
        return
    typer.echo(f"enforcement in {year}")
    for kind, count in summary.by_type.items():
        typer.echo(f"  {kind:<28} {count}")
    median = "-" if summary.median_days is None else f"{summary.median_days:g}"
    typer.echo(f"  {'violations found':<28} {summary.opened}\n  {'cases resolved':<28} {summary.resolved}\n"
               f"  {'median days to resolution':<28} {median}\n  {'open at the year end':<28} {summary.open_at_end}")


@app.command("ical")
def ical_cmd(
    site_id: str | None = typer.Option(None, "--site-id", metavar="SITE_ID", help="Only this site's cases."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="FILE",
                                       help="Write the calendar to this file instead of standard output."),
    state_dir: Path = _STATE_DIR, wall_time: bool = _WALL,
) -> None:
    """Print the open deadlines of the cases as an iCalendar (.ics) feed: one all-day entry each."""
    from stormwatch.enforcement.ical import calendar_of

    if output is not None:
        output_path(output)
    book = _book(state_dir, wall_time)
    try:
        data = calendar_of([view_of(book, c) for c in _cases(book, site_id, state_dir)], book.clock.now())
    except CaseError as exc:
        fail(str(exc))
    if output is None:
        typer.echo(data.decode("utf-8"), nl=False)
    else:
        output.write_bytes(data)


def register(root: typer.Typer) -> None:
    """Add ``enforce`` to the ``stormwatch`` command."""
    root.add_typer(app, name="enforce")
