"""A site's records as one portable bundle, and back (``stormwatch archive`` / ``import-archive``).

Records are kept five years (Spencerport §276-26C: "shall retain the records for at least five
years"; Ch. 133 §133-7A(2) and Ch. 196 §196-9B: inspection reports in the site log book). A bundle
is a ZIP file anyone can open without stormwatch:

* ``manifest.json`` -- format ``stormwatch-archive`` version 2, the site (id, zone, jurisdiction),
  the period ``[from, until)``, when and by which stormwatch version it was written, from which
  store (password-free), and for every member its row count, size and SHA-256;
* ``SHA256SUMS`` -- the same checksums (and the manifest's) in ``sha256sum -c`` form;
* ``site.yaml`` -- the site file as it was;
* ``readings.csv`` -- one row per stored reading: ``site, device, quantity, value, unit, time,
  gateway, boot, seq, raw, flags, late, tip_size``; ``value`` keeps its type (an integer without a
  point, a float as Python's shortest repr, which always has one), ``time`` is RFC 3339 UTC with
  microseconds, ``raw`` and ``flags`` are JSON, ``late`` is 0/1, ``tip_size`` a rain reading's depth
  per tip (``0.01 in``; empty for other quantities and for rain stored without one). Version 1
  bundles (before stored rain described itself) have no ``tip_size`` column and still load: their
  rain comes back without a size, as it was stored;
* ``events.jsonl`` -- the stored ordinance events, one ``Event.to_wire()`` JSON object per line;
* ``workorders.jsonl`` -- every column of each work order opened in the period (and of the
  inspection reports they opened), with its full history and its photos (base64);
* ``enforcement.jsonl`` -- every column of each enforcement case whose violation was found in the
  period (site-local days), with its full history; ``enforcement-register.csv`` -- their rows of the
  MS4 enforcement register (:mod:`stormwatch.enforcement.register`). Bundles written before cases
  were archived have neither and still load.

:func:`load_bundle` verifies every checksum before it writes anything, then loads the readings
(with their late flag), events and work orders into a store and a work-order book: the round trip
gives back equal records. Loading twice adds nothing (readings are deduplicated by identity,
events by ``(site, kind, occurrence)`` -- an event the store already holds is not written again --
orders by id), and what loading added is counted as added, not as read.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import logging
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from stormwatch import __version__
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.config import SiteConfig
from stormwatch.contract import Event, Reading
from stormwatch.enforcement.cases import EnforcementBook
from stormwatch.errors import problems_message
from stormwatch.stores.base import ReadingStore
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

FORMAT = "stormwatch-archive"
VERSION = 2
READING_COLUMNS = ("site", "device", "quantity", "value", "unit", "time", "gateway", "boot", "seq", "raw", "flags",
                   "late", "tip_size")
#: The columns of a version 1 bundle (no ``tip_size``).
READING_COLUMNS_V1 = READING_COLUMNS[:-1]
#: Event time read from the store per query (memory stays flat over years of 1-minute data).
CHUNK = timedelta(days=1)
#: Readings written to the store per call when loading.
BATCH = 5000


class ArchiveError(ValueError):
    """A bundle that cannot be read or does not check out (the message says which member and why)."""


@runtime_checkable
class EventReader(Protocol):
    """A store that can read its events back (SQLite, InfluxDB 1.x and 2.x)."""

    def query_events(self, site: str, start: datetime | None = None, end: datetime | None = None) -> list[Event]:
        ...


@dataclass(frozen=True)
class Counts:
    """What a bundle holds (or what loading it added).

    ``events_known``: when loading into a store that cannot read its events back (no
    :class:`EventReader`), every event is written and ``events`` is how many were written, not
    how many were new."""

    readings: int
    events: int
    orders: int
    events_known: bool = True
    cases: int = 0


class _Hashing:
    """A binary sink that hashes and counts what passes through it."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.sha.update(data)
        self.size += len(data)
        self.raw.write(data)


def _value_text(value: int | float) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _value(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eEn") else int(text)


def _row_reading(rec: dict[str, str], line: int) -> Reading:
    """The reading of one ``readings.csv`` row.

    Raises:
        ArchiveError: a row that is not a reading, or a time without its UTC offset -- the archive
            writes every time with one, and a zone-less time is never read in a guessed zone.
    """
    where = f"readings.csv line {line}"
    try:
        when = datetime.fromisoformat(rec["time"])
    except ValueError:
        raise ArchiveError(f"{where}: time {rec['time']!r} is not an RFC 3339 time") from None
    if when.tzinfo is None:
        raise ArchiveError(f"{where}: time {rec['time']!r} has no UTC offset (an archive's times are UTC, "
                           "written with +00:00; the bundle was made or edited by something else)")
    try:
        return Reading(site=rec["site"], device=rec["device"], quantity=rec["quantity"], value=_value(rec["value"]),
                       unit=rec["unit"], time=when, gateway=rec["gateway"], boot=rec["boot"], seq=int(rec["seq"]),
                       raw=json.loads(rec["raw"]), flags=tuple(json.loads(rec["flags"])),
                       tip_size=rec.get("tip_size") or None)
    except ValidationError as exc:
        raise ArchiveError(problems_message(f"{where}: not a reading", [
            f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in exc.errors()])) from None
    except ValueError as exc:  # a value or sequence number that is not a number, raw or flags not JSON
        raise ArchiveError(f"{where}: not a reading: {exc}") from None


def _reading_row(r: Reading, late: bool) -> list[str]:
    return [r.site, r.device, r.quantity, _value_text(r.value), r.unit,
            r.time.astimezone(UTC).isoformat(timespec="microseconds"), r.gateway, r.boot, str(r.seq),
            json.dumps(r.raw, separators=(",", ":")), json.dumps(list(r.flags)), "1" if late else "0", r.tip_size or ""]


def _csv_line(values: list[str]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue().encode("utf-8")


def write_bundle(path: Path, cfg: SiteConfig, site_file: Path, store: ReadingStore, book: WorkOrders | None,
                 start: datetime, end: datetime, *, store_name: str = "", cases: EnforcementBook | None = None,
                 ) -> Counts:
    """Write the bundle of ``cfg``'s site for ``[start, end)`` to ``path`` (module docstring);
    ``cases``: the enforcement cases of the state directory (``None``: none archived, said in the manifest).

    Raises:
        stormwatch.stores.base.StoreError: the store cannot be read.
        OSError: ``path`` cannot be written.
    """
    site = cfg.site.id
    members: dict[str, dict[str, Any]] = {}
    tmp = path.with_name(path.name + ".partial")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        def member(name: str, rows: int, chunks: Iterator[bytes]) -> None:
            with zf.open(name, "w", force_zip64=True) as raw:
                sink = _Hashing(raw)
                for data in chunks:
                    sink.write(data)
            members[name] = {"rows": rows, "bytes": sink.size, "sha256": sink.sha.hexdigest()}

        member("site.yaml", 0, iter([site_file.read_bytes()]))
        count = [0]

        def readings() -> Iterator[bytes]:
            yield _csv_line(list(READING_COLUMNS))
            t = start
            while t < end:
                upto = min(end, t + CHUNK)
                for late in (False, True):
                    rows = store.query_readings(site, t, upto, late=late)
                    count[0] += len(rows)
                    if rows:
                        yield b"".join(_csv_line(_reading_row(r, late)) for r in rows)
                t = upto

        member("readings.csv", 0, readings())
        members["readings.csv"]["rows"] = count[0]
        if isinstance(store, EventReader):
            events = store.query_events(site, start, end)
            events_note = ""
        else:
            events, events_note = [], f"this store ({type(store).__name__}) cannot read events back: none archived"
            log.warning("%s: %s", site, events_note)
        member("events.jsonl", len(events),
               iter([b"".join(json.dumps(e.to_wire(), ensure_ascii=False).encode("utf-8") + b"\n" for e in events)]))
        orders = book.export_records(site, start, end) if book is not None else []
        for o in orders:
            for p in o["photos"]:
                p["data"] = base64.b64encode(bytes(p["data"])).decode("ascii")
        member("workorders.jsonl", len(orders),
               iter([b"".join(json.dumps(o, ensure_ascii=False).encode("utf-8") + b"\n" for o in orders)]))
        records, register = _cases(cfg, cases, start, end)
        member("enforcement.jsonl", len(records),
               iter([b"".join(json.dumps(c, ensure_ascii=False).encode("utf-8") + b"\n" for c in records)]))
        member("enforcement-register.csv", register.count("\n") - 1, iter([register.encode("utf-8")]))
        manifest = {
            "format": FORMAT, "version": VERSION, "stormwatch": __version__,
            "written_at": format_time(datetime.now(UTC)),
            "site": {"id": site, "name": cfg.site.name, "timezone": cfg.site.timezone,
                     "jurisdiction": cfg.site.jurisdiction},
            "from": format_time(start), "until": format_time(end), "store": store_name,
            "work_orders": "" if book is not None else "no work-order state given: none archived",
            "events": events_note, "members": members,
            "enforcement": "" if cases is not None else "no enforcement cases in the state directory: none archived",
        }
        data = json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
        zf.writestr("manifest.json", data)
        sums = {**{n: m["sha256"] for n, m in members.items()}, "manifest.json": hashlib.sha256(data).hexdigest()}
        zf.writestr("SHA256SUMS", "".join(f"{h}  {n}\n" for n, h in sums.items()))
    tmp.replace(path)
    log.info("%s: bundle %s: %d readings, %d events, %d work orders, %d enforcement cases", site, path, count[0],
             len(events), len(orders), len(records))
    return Counts(count[0], len(events), len(orders), cases=len(records))


def _cases(cfg: SiteConfig, cases: EnforcementBook | None, start: datetime,
           end: datetime) -> tuple[list[dict[str, Any]], str]:
    """The site's enforcement cases found in ``[start, end)`` (site-local days) as records, and their
    register rows as CSV."""
    from stormwatch.enforcement import register
    from stormwatch.enforcement.view import view_of

    if cases is None:
        return [], register.to_csv([])
    tz = cfg.site.tz
    first, last = start.astimezone(tz).date(), end.astimezone(tz).date()
    ids = {c.id for c in cases.list(site=cfg.site.id) if first <= c.found_on < last or
           (c.found_on == last and end.astimezone(tz).time() != datetime.min.time())}
    records = [r for r in cases.export_records(cfg.site.id) if r["id"] in ids]
    views = [view_of(cases, cases.get(i)) for i in sorted(ids)]
    return records, register.to_csv(register.rows_of(views))


def read_manifest(zf: zipfile.ZipFile) -> dict[str, Any]:
    """The bundle's manifest after every checksum checked out.

    Raises:
        ArchiveError: not a stormwatch bundle, a newer format, a member missing or changed.
    """
    names = set(zf.namelist())
    if "manifest.json" not in names or "SHA256SUMS" not in names:
        raise ArchiveError("not a stormwatch archive (no manifest.json and SHA256SUMS)")
    sums = {}
    for line in zf.read("SHA256SUMS").decode("utf-8").splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    for name, digest in sums.items():
        if name not in names:
            raise ArchiveError(f"{name}: listed in SHA256SUMS but missing from the bundle")
        sha = hashlib.sha256()
        with zf.open(name) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        if sha.hexdigest() != digest:
            raise ArchiveError(f"{name}: checksum differs from SHA256SUMS (the bundle was changed or damaged)")
    manifest: dict[str, Any] = json.loads(zf.read("manifest.json"))
    if manifest.get("format") != FORMAT:
        raise ArchiveError(f"not a stormwatch archive (format {manifest.get('format')!r})")
    if int(manifest.get("version", 0)) > VERSION:
        raise ArchiveError(f"archive format version {manifest['version']} is newer than this stormwatch reads "
                           f"({VERSION})")
    for name, meta in manifest["members"].items():
        if sums.get(name) != meta["sha256"]:
            raise ArchiveError(f"{name}: the manifest's checksum differs from SHA256SUMS")
    return manifest


def load_bundle(path: Path, store: ReadingStore, book: WorkOrders | None,
                cases: EnforcementBook | None = None) -> tuple[dict[str, Any], Counts]:
    """Verify the bundle at ``path``, then load it into ``store``, ``book`` and ``cases``; returns its
    manifest and how many readings were new, events written, orders and cases added.

    Raises:
        ArchiveError: the bundle does not check out, or it holds work orders (cases) and ``book``
            (``cases``) is None.
        stormwatch.stores.base.StoreError: the store refused a write.
    """
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:  # the caller names the path: said once
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ArchiveError(f"not a readable archive: {detail}") from exc
    with zf:
        manifest = read_manifest(zf)
        added = 0
        with zf.open("readings.csv") as raw:
            rows = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
            columns = tuple(next(rows))
            if columns not in (READING_COLUMNS, READING_COLUMNS_V1):
                raise ArchiveError("readings.csv: unexpected columns")
            batch: dict[bool, list[Reading]] = {False: [], True: []}
            for line, row in enumerate(rows, 2):
                try:
                    rec = dict(zip(columns, row, strict=True))
                except ValueError as exc:
                    raise ArchiveError(f"readings.csv line {line}: {len(row)} fields, expected "
                                       f"{len(columns)}") from exc
                late = rec["late"] == "1"
                batch[late].append(_row_reading(rec, line))
                if len(batch[late]) >= BATCH:
                    added += store.write_readings(batch[late], late=late)
                    batch[late] = []
            for late, rest in batch.items():
                if rest:
                    added += store.write_readings(rest, late=late)
        events = [Event.model_validate(json.loads(line)) for line in zf.read("events.jsonl").splitlines() if line]
        new_events, known = _new_events(store, manifest, events)
        if new_events:
            store.write_events(new_events)
        orders = [json.loads(line) for line in zf.read("workorders.jsonl").splitlines() if line]
        new_orders = 0
        if orders:
            if book is None:
                raise ArchiveError("the bundle holds work orders: give a --state-dir to load them into")
            for o in orders:
                for p in o.get("photos", []):
                    p["data"] = base64.b64decode(p["data"])
            new_orders, _present = book.import_records(orders)
        records = ([json.loads(line) for line in zf.read("enforcement.jsonl").splitlines() if line]
                   if "enforcement.jsonl" in zf.namelist() else [])
        new_cases = 0
        if records:
            if cases is None:
                raise ArchiveError("the bundle holds enforcement cases: give a --state-dir to load them into")
            new_cases, _present = cases.import_records(records)
    return manifest, Counts(added, len(new_events), new_orders, known, cases=new_cases)


def _new_events(store: ReadingStore, manifest: dict[str, Any], events: list[Event]) -> tuple[list[Event], bool]:
    """The bundle's events the store does not hold yet -- by ``(site, kind, occurrence)``, an event's
    identity in every store -- and True; or all of them and False for a store that cannot read its
    events back.

    Raises:
        stormwatch.stores.base.StoreError: the store cannot be read.
    """
    if not events:
        return [], True
    if not isinstance(store, EventReader):
        return events, False
    held: set[tuple[str, str, str]] = set()
    start = min(datetime.fromisoformat(manifest["from"]), *(e.event_time for e in events))
    end = max(datetime.fromisoformat(manifest["until"]), *(e.event_time for e in events)) + timedelta(microseconds=1)
    for site in sorted({e.site for e in events}):
        held |= {(e.site, e.kind, e.occurrence) for e in store.query_events(site, start, end)}
    return [e for e in events if (e.site, e.kind, e.occurrence) not in held], True
