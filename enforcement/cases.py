"""Enforcement cases, persisted in SQLite (``enforcement.db`` in the state directory).

A case is one violation: opened by the SMO from ordinance events (their work orders: the event's
citation, message and evidence are copied in, so the record never changes when the book does) or
by hand, with the notice's contents as a draft (party, address, location, nature, remedial
measures and the date to complete them). Its history holds every change and every action -- who
recorded it, when, what, on which day it happened -- like a work order's. Actions are checked
before anything is written (:func:`stormwatch.enforcement.actions.check`): a refused action leaves
the case as it was. The draft is edited until the notice is issued; after that it is what was served.

Case ids are ``EC-<year of the violation>-<number>`` (``EC-2026-001``). A case counts as an
offense of its party for the penalty ladder once its notice is issued, unless a decision cancelled
it (:meth:`EnforcementBook.offenses`). Design: docs/enforcement.md.
"""

from __future__ import annotations

import builtins
import functools
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from stormwatch import resources
from stormwatch.alerts.enforcement_pack import EnforcementSection
from stormwatch.alerts.packs import PackError, load_pack, packs_search_path
from stormwatch.clock import Clock
from stormwatch.contract import check_person_name
from stormwatch.enforcement.actions import ACTIONS, CaseError, Draft, Recorded, check, parse_day
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: The file in a state directory.
CASES_FILE = "enforcement.db"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cases (
    id TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    jurisdiction TEXT NOT NULL,
    timezone TEXT NOT NULL,
    found_on TEXT NOT NULL,
    party TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL DEFAULT '',
    location TEXT NOT NULL DEFAULT '',
    nature TEXT NOT NULL DEFAULT '',
    violated TEXT NOT NULL DEFAULT '',
    remedy TEXT NOT NULL DEFAULT '',
    correct_by TEXT,
    sources TEXT NOT NULL DEFAULT '[]',
    opened_at TEXT NOT NULL,
    opened_by TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cases_site ON cases (site, found_on);
CREATE TABLE IF NOT EXISTS case_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    case_id TEXT NOT NULL REFERENCES cases (id),
    kind TEXT NOT NULL,
    on_day TEXT NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL,
    notes TEXT NOT NULL DEFAULT '',
    fields TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS case_history_case ON case_history (case_id, seq);
"""

#: The draft's fields a person edits (with the notice's contents they fill).
DRAFT_FIELDS = ("party", "address", "location", "nature", "violated", "remedy", "correct_by")
_CASE_COLUMNS = ("id, site, jurisdiction, timezone, found_on, party, address, location, nature, violated, remedy, "
                 "correct_by, sources, opened_at, opened_by")


@dataclass(frozen=True)
class Case:
    """One enforcement case (module docstring). Days are site-local dates; ``opened_at`` is UTC.

    Attributes:
        found_on: the day the violation was found (the offense's day for the penalty ladder).
        party, address: the person responsible and their address (the notice's addressee).
        location: the address or description of the land (the notice's second content).
        nature: the statement of the violation; ``violated`` the sections it violates.
        remedy, correct_by: the remedial measures and the day to complete them.
        sources: what the case was opened from (work orders with their event's evidence).
    """

    id: str
    site: str
    jurisdiction: str
    timezone: str
    found_on: date
    party: str
    address: str
    location: str
    nature: str
    violated: str
    remedy: str
    correct_by: date | None
    sources: list[dict[str, Any]]
    opened_at: datetime
    opened_by: str

    @property
    def draft(self) -> Draft:
        return Draft(self.party, self.address, self.location, self.nature, self.remedy, self.correct_by)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = (format_time(value) if isinstance(value, datetime) else
                        value.isoformat() if isinstance(value, date) else value)
        return out


@dataclass(frozen=True)
class Entry:
    """One entry of a case's history: ``by`` recorded ``kind`` at ``at`` (UTC), which happened ``on``."""

    seq: int
    kind: str
    on: date
    at: datetime
    by: str
    notes: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        spec = ACTIONS.get(self.kind)
        return spec.label if spec else self.kind.replace("_", " ")

    @property
    def recorded(self) -> Recorded:
        return Recorded(self.kind, self.on, self.fields)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "on": self.on.isoformat(), "at": format_time(self.at),
                "by": self.by, "notes": self.notes, "fields": dict(self.fields)}


def party_key(name: str) -> str:
    """A party's name as the ladder compares it: case and spacing ignored."""
    return " ".join(name.casefold().split())


def section_of(jurisdiction: str) -> EnforcementSection:
    """The enforcement section of pack ``jurisdiction`` (loaded again when its file changes).

    Raises:
        CaseError: no such pack, or a pack without an enforcement section (a permit).
    """
    path = resources.find_one(jurisdiction, packs_search_path())
    stamp = None
    if path is not None:
        try:
            stamp = (str(path), path.stat().st_mtime_ns)
        except OSError:
            stamp = None
    return _section(jurisdiction, stamp)


@functools.lru_cache(maxsize=64)
def _section(jurisdiction: str, stamp: tuple[str, int] | None) -> EnforcementSection:
    """:func:`section_of` for the pack file ``stamp`` names (path, modification time): a desk showing
    many cases reads each pack once."""
    try:
        pack = load_pack(jurisdiction)
    except PackError as exc:
        raise CaseError(str(exc)) from None
    if pack.enforcement is None:
        raise CaseError(f"rule pack {jurisdiction} has no enforcement section ({pack.title or 'a permit'}): "
                        "enforcement cases follow a village code (ch133, ch196, ch507, spencerport)")
    return pack.enforcement


def _day(text: str | None) -> date | None:
    return date.fromisoformat(text) if text else None


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


class EnforcementBook:
    """The cases of one state directory (thread-safe; one SQLite file).

    Args:
        path: the SQLite file (created if absent; its directory must exist).
        clock: stamps each entry's ``at`` and says what "today" is (the site's local date).

    Raises:
        CaseError: ``path`` is not an enforcement-case file, is newer than this code, or its
            directory does not exist.
    """

    def __init__(self, path: str | Path, clock: Clock) -> None:
        self.path = Path(path)
        self.clock = clock
        if not self.path.parent.is_dir():
            raise CaseError(f"{self.path}: directory {self.path.parent} does not exist")
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA busy_timeout=5000")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise CaseError(f"{self.path}: written by a newer stormwatch (enforcement schema {version}; this "
                                f"version reads up to {SCHEMA_VERSION})")
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "cases" not in tables:
                raise CaseError(f"{self.path}: an SQLite database but not an enforcement-case file (tables: "
                                f"{', '.join(sorted(tables))})")
            self._db.execute("PRAGMA journal_mode=WAL")
            if version < SCHEMA_VERSION:
                self._db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise CaseError(f"{self.path}: not an enforcement-case file (SQLite): {exc}") from exc
        except CaseError:
            self._db.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def today(self, timezone: str) -> date:
        """The local date in ``timezone`` at the clock's now."""
        return self.clock.now().astimezone(ZoneInfo(timezone)).date()

    # -- reading -----------------------------------------------------------------------------

    def _case(self, row: tuple[Any, ...]) -> Case:
        (cid, site, jurisdiction, tz, found_on, party, address, location, nature, violated, remedy, correct_by,
         sources, opened_at, opened_by) = row
        return Case(cid, site, jurisdiction, tz, date.fromisoformat(found_on), party, address, location, nature,
                    violated, remedy, _day(correct_by), json.loads(sources), datetime.fromisoformat(opened_at),
                    opened_by)

    def get(self, case_id: str) -> Case:
        """The case ``case_id``.

        Raises:
            CaseError: no such case.
        """
        with self._lock:
            row = self._db.execute(f"SELECT {_CASE_COLUMNS} FROM cases WHERE id = ?", (case_id,)).fetchone()
        if row is None:
            raise CaseError(f"no enforcement case {case_id!r} in {self.path}")
        return self._case(row)

    def list(self, site: str | None = None, sites: builtins.list[str] | None = None) -> builtins.list[Case]:
        """Cases, oldest violation first; only ``site``'s, or only those of ``sites``."""
        sql, args = f"SELECT {_CASE_COLUMNS} FROM cases", []
        if site is not None:
            sql, args = sql + " WHERE site = ?", [site]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY found_on, id", args).fetchall()
        cases = [self._case(r) for r in rows]
        return cases if sites is None else [c for c in cases if c.site in sites]

    def history(self, case_id: str) -> builtins.list[Entry]:
        """The case's history, in the order it was recorded."""
        with self._lock:
            rows = self._db.execute("SELECT seq, kind, on_day, at, by, notes, fields FROM case_history"
                                    " WHERE case_id = ? ORDER BY seq", (case_id,)).fetchall()
        return [Entry(seq, kind, date.fromisoformat(on), datetime.fromisoformat(at), by, notes, json.loads(fields))
                for seq, kind, on, at, by, notes, fields in rows]

    def actions(self, case_id: str) -> builtins.list[Entry]:
        """The case's actions (the history without its opening and draft edits), in the order recorded."""
        return [e for e in self.history(case_id) if e.kind in ACTIONS]

    def offenses(self, jurisdiction: str, party: str) -> builtins.list[tuple[str, date]]:
        """``(case id, violation day)`` of the party's offenses under ``jurisdiction``: cases whose
        notice was issued and not cancelled by a decision (module docstring). One query."""
        key = party_key(party)
        with self._lock:
            rows = self._db.execute(
                "SELECT c.id, c.found_on, c.party FROM cases c WHERE c.jurisdiction = ?"
                " AND EXISTS (SELECT 1 FROM case_history h WHERE h.case_id = c.id AND h.kind = 'nov_issued')"
                " AND NOT EXISTS (SELECT 1 FROM case_history h WHERE h.case_id = c.id AND h.kind = 'decision'"
                "                 AND json_extract(h.fields, '$.outcome') = 'cancelled')"
                " ORDER BY c.found_on, c.id", (jurisdiction,)).fetchall()
        return [(cid, date.fromisoformat(day)) for cid, day, name in rows if party_key(name) == key]

    # -- writing -----------------------------------------------------------------------------

    def open(self, *, site: str, jurisdiction: str, timezone: str, by: str, found_on: date,
             sources: builtins.list[dict[str, Any]] | None = None, **draft: str | date | None) -> Case:
        """Open a case (a draft: nothing is issued).

        Args:
            site, jurisdiction, timezone: the site's id, rule pack and IANA zone.
            by: who opens it.
            found_on: the day the violation was found (not after today).
            sources: the work orders it is opened from, with their evidence.
            draft: any of :data:`DRAFT_FIELDS` (``correct_by`` a date or ``YYYY-MM-DD``).

        Raises:
            CaseError: a pack without an enforcement section, an empty site or name, a day after today,
                an unknown field.
        """
        section_of(jurisdiction)
        by = self._name(by)
        if not site.strip():
            raise CaseError("a case needs the site it is about")
        today = self.today(timezone)
        if found_on > today:
            raise CaseError(f"the violation found on {found_on.isoformat()} is after today ({today.isoformat()})")
        values = self._draft_values(draft, found_on)
        now = self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                prefix = f"EC-{found_on.year}-"
                (n,) = self._db.execute("SELECT MAX(CAST(substr(id, ?) AS INTEGER)) FROM cases WHERE id LIKE ?",
                                        (len(prefix) + 1, prefix + "%")).fetchone()
                cid = f"{prefix}{(n or 0) + 1:03d}"
                cols = ["id", "site", "jurisdiction", "timezone", "found_on", "sources", "opened_at", "opened_by",
                        *values]
                self._db.execute(f"INSERT INTO cases ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 [cid, site, jurisdiction, timezone, found_on.isoformat(), json.dumps(sources or []),
                                  _ts(now), by, *values.values()])
                note = f"from {', '.join(str(s.get('order')) for s in sources)}" if sources else "by hand"
                self._log(cid, "opened", today, now, by, note, {})
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        log.info("enforcement case %s opened at %s by %s (%s)", cid, site, by, note)
        return self.get(cid)

    def edit(self, case_id: str, by: str, **changes: str | date | None) -> Case:
        """Change the draft (:data:`DRAFT_FIELDS`), recorded in the history with what changed.

        Raises:
            CaseError: no such case, the notice is already issued, an unknown field, an empty name.
        """
        by = self._name(by)
        case = self.get(case_id)
        issued = next((e for e in self.actions(case_id) if e.kind == "nov_issued"), None)
        if issued is not None:
            raise CaseError(f"the notice of case {case_id} was issued on {issued.on.isoformat()}: its contents are "
                            "as issued (a decision on an appeal may modify them)")
        values = self._draft_values(changes, case.found_on)
        if not values:
            return case
        now = self.clock.now()
        changed = ", ".join(f"{k}: {v or '-'}" for k, v in values.items())
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(f"UPDATE cases SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",
                             [*values.values(), case_id])
            self._log(case_id, "edited", self.today(case.timezone), now, by, changed, {})
            self._db.execute("COMMIT")
        return self.get(case_id)

    def add_sources(self, case_id: str, by: str, sources: builtins.list[dict[str, Any]]) -> Case:
        """Add the evidence of more work orders to a case's draft (one violation shown by several
        events); an order already among its sources is not added twice. Recorded in the history.

        Raises:
            CaseError: no such case, the notice is already issued, an order of another site.
        """
        by = self._name(by)
        case = self.get(case_id)
        issued = next((e for e in self.actions(case_id) if e.kind == "nov_issued"), None)
        if issued is not None:
            raise CaseError(f"the notice of case {case_id} was issued on {issued.on.isoformat()}: its evidence is "
                            "as issued")
        for source in sources:
            if source.get("site", case.site) != case.site:
                raise CaseError(f"work order {source.get('order')} is of site {source.get('site')}, not {case.site}")
        known = {s.get("order") for s in case.sources}
        new = [s for s in sources if s.get("order") not in known]
        if not new:
            return case
        now = self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("UPDATE cases SET sources = ? WHERE id = ?", (json.dumps([*case.sources, *new]), case_id))
            self._log(case_id, "edited", self.today(case.timezone), now, by,
                      f"evidence added from {', '.join(str(s.get('order')) for s in new)}", {})
            self._db.execute("COMMIT")
        return self.get(case_id)

    def record(self, case_id: str, kind: str, on: date, by: str, notes: str = "",
               **fields: str) -> tuple[Case, Entry]:
        """Record action ``kind`` that happened ``on`` (checked first: nothing is written when refused).

        Raises:
            CaseError: no such case, an unknown action, or a refusal of
                :func:`stormwatch.enforcement.actions.check` (one line).
        """
        by = self._name(by)
        case = self.get(case_id)
        kind = kind.replace("-", "_")
        values = {k: str(v).strip() for k, v in fields.items() if v is not None and str(v).strip()}
        if "method" in values:  # certified-mail, as the other words of the command line are written
            values["method"] = values["method"].replace("-", "_")
        check(kind, on, values, [e.recorded for e in self.actions(case_id)], section_of(case.jurisdiction),
              case.draft, case.found_on, self.today(case.timezone))
        now = self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            seq = self._log(case_id, kind, on, now, by, notes.strip(), values)
            self._db.execute("COMMIT")
        log.info("enforcement case %s: %s on %s recorded by %s", case_id, ACTIONS[kind].label, on.isoformat(), by)
        return case, next(e for e in self.history(case_id) if e.seq == seq)

    def _log(self, case_id: str, kind: str, on: date, at: datetime, by: str, notes: str,
             fields: dict[str, str]) -> int:
        cur = self._db.execute("INSERT INTO case_history (case_id, kind, on_day, at, by, notes, fields) VALUES "
                               "(?, ?, ?, ?, ?, ?, ?)", (case_id, kind, on.isoformat(), _ts(at), by, notes,
                                                         json.dumps(fields, sort_keys=True)))
        return int(cur.lastrowid or 0)

    @staticmethod
    def _name(by: str) -> str:
        try:
            return check_person_name(by, "the name of who records it (--by)")
        except ValueError as exc:
            raise CaseError(str(exc)) from None

    @staticmethod
    def _draft_values(draft: dict[str, str | date | None], found_on: date) -> dict[str, str | None]:
        unknown = sorted(set(draft) - set(DRAFT_FIELDS))
        if unknown:
            raise CaseError(f"not a field of a case: {', '.join(unknown)} (fields: {', '.join(DRAFT_FIELDS)})")
        out: dict[str, str | None] = {}
        for key, value in draft.items():
            if value is None:
                continue
            if key == "correct_by":
                day = value if isinstance(value, date) else parse_day(str(value), "correct_by") if value else None
                if day is not None and day < found_on:
                    # a date order: nothing is corrected before it was found (docs/enforcement.md)
                    raise CaseError(f"the day to complete the remedial measures ({day.isoformat()}) is before "
                                    f"the violation was found ({found_on.isoformat()})")
                out[key] = day.isoformat() if day else None
            else:
                out[key] = str(value).strip()
        return out

    # -- records (stormwatch archive / import-archive) -------------------------------------

    def export_records(self, site: str) -> builtins.list[dict[str, Any]]:
        """Every stored column of the site's cases with their history: the lossless form of
        :meth:`import_records`."""
        with self._lock:
            cur = self._db.execute("SELECT * FROM cases WHERE site = ? ORDER BY found_on, id", (site,))
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            for row in rows:
                cur = self._db.execute("SELECT * FROM case_history WHERE case_id = ? ORDER BY seq", (row["id"],))
                cols = [d[0] for d in cur.description]
                row["history"] = [{k: v for k, v in zip(cols, r, strict=True) if k not in ("seq", "case_id")}
                                  for r in cur.fetchall()]
        return rows

    def import_records(self, records: builtins.list[dict[str, Any]]) -> tuple[int, int]:
        """Add cases exported by :meth:`export_records`; a case id already here is left as it is.
        Returns ``(added, already present)``.

        Raises:
            CaseError: a record lacks a column this file requires.
        """
        added = present = 0
        with self._lock:
            columns = [r[1] for r in self._db.execute("PRAGMA table_info(cases)")]
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for rec in records:
                    row = {k: rec[k] for k in columns if k in rec}
                    cur = self._db.execute(f"INSERT OR IGNORE INTO cases ({', '.join(row)}) VALUES "
                                           f"({', '.join('?' * len(row))})", list(row.values()))
                    if cur.rowcount != 1:
                        present += 1
                        continue
                    added += 1
                    for item in rec.get("history", []):
                        cols = ["case_id", *item]
                        self._db.execute(f"INSERT INTO case_history ({', '.join(cols)}) VALUES "
                                         f"({', '.join('?' * len(cols))})", [rec["id"], *item.values()])
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise CaseError(f"{self.path}: cannot import enforcement cases: {exc}") from exc
        return added, present

