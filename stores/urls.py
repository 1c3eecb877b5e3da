"""``open_store(url)``: a :class:`~stormwatch.stores.base.ReadingStore` from a store URL.

URLs (see :mod:`stormwatch.stores.base`):

* ``sqlite:///relative/or/absolute/path.db``, ``sqlite:////abs/path.db`` or a bare path -- SQLite;
  ``sqlite:///./var/stormwatch.db`` is ``./var/stormwatch.db``; ``sqlite:///:memory:`` is in-memory.
* ``influx1://[user:password@]host:port/database[?rp=POLICY]`` (``influx1s://`` for HTTPS).
* ``influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN`` (``influx2s://`` for HTTPS).

An IPv6 host is written in brackets (``influx1://[::1]:8086/db``). These are the only store URLs
of every command (``--store``); InfluxDB's own ``http://HOST:PORT`` address is refused with the
store URL to write instead (it names no database, and 1.x and 2.x both speak HTTP).
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path

from stormwatch.clock import Clock
from stormwatch.errors import InputError
from stormwatch.stores.base import ReadingStore


class StoreUrlError(InputError):
    """A store URL that cannot be used; the message says why (and shows the accepted forms) without
    repeating the URL: the command prefixes its option and the URL, ``--store URL: <message>``."""


_FORMS = ("sqlite:///path/to/file.db (or a bare path), influx1://[user:pass@]host:port/database[?rp=POLICY], "
          "influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN")


def _split(url: str) -> urllib.parse.SplitResult:
    """``urlsplit(url)``, or one clear error (``urlsplit`` raises a bare ValueError for a host with
    a missing bracket, ``influx1://[::1/db``).

    Raises:
        StoreUrlError: the URL cannot be split.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises for a bad port or a bad IPv6 host
    except ValueError as exc:
        hint = " (an IPv6 host is written in brackets: influx1://[::1]:8086/db)" if "IPv6" in str(exc) else ""
        raise StoreUrlError(f"not a URL: {exc}{hint}; accepted: {_FORMS}") from None
    return parts


def _mask(url: str) -> str:
    """``url`` with everything between ``://`` and the last ``@`` hidden, for a URL that cannot be
    parsed (it may still hold a password)."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return url


def _netloc_host(host: str) -> str:
    """``host`` as it goes into an http(s) URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def redact(url: str) -> str:
    """``url`` with any password or token replaced by ``***`` (for logs); never raises."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.password  # noqa: B018 -- may raise for a malformed host
    except ValueError:
        return _mask(url)
    if parts.password is None and "token=" not in parts.query:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", ":***@")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    q = urllib.parse.urlencode([(k, "***" if k == "token" else v) for k, v in query], safe="*")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, q, parts.fragment))


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:`` URL or bare path."""
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://"):]
        if not rest.startswith("/"):
            raise StoreUrlError(f"not an SQLite URL: use sqlite:///path (three slashes); accepted: {_FORMS}")
        path = rest[1:]  # sqlite:///rel -> rel ; sqlite:////abs -> /abs
        if not path:
            raise StoreUrlError("not an SQLite URL: no file path")
        return path
    return url


#: SQLite result codes of a file that is not (or no longer) an SQLite database: SQLITE_CORRUPT, SQLITE_NOTADB.
_NOT_A_DATABASE = (11, 26)


def open_store(url: str, clock: Clock | None = None, *, existing: bool = False) -> ReadingStore:
    """Open the store ``url`` names.

    Args:
        url: a store URL (module docstring).
        clock: passed to the store (stamps receive times / dead letters).
        existing: the store must already be there -- for a command that reads what the services
            stored (evaluate, report, archive, web): an SQLite file that does not exist, or an
            InfluxDB 1.x database the server does not hold, is refused instead of being created
            and read as "0 readings".

    Raises:
        StoreUrlError: unknown scheme, a malformed URL or missing parts (message lists the accepted
            forms); an SQLite file whose directory does not exist (a typo must not create
            directories), or a file that is not an SQLite database; with ``existing``, a store
            that is not there.
        StoreError: an SQLite file that cannot be opened; the InfluxDB server cannot be asked
            whether it has the database (``existing``).
    """
    if not url:
        raise StoreUrlError(f"empty store URL; accepted: {_FORMS}")
    parts = _split(url)
    scheme = parts.scheme.lower()
    if scheme in ("sqlite", ""):
        return _open_sqlite(url, clock, existing)
    if scheme in ("http", "https"):
        tls = "s" if scheme == "https" else ""
        where = f"{_netloc_host(parts.hostname)}:{parts.port or 8086}" if parts.hostname else "HOST:8086"
        raise StoreUrlError(f"an HTTP address, not a store URL: for InfluxDB 1.x write "
                            f"influx1{tls}://{where}/DATABASE, for 2.x influx2{tls}://{where}?org=ORG&bucket=BUCKET"
                            f"&token=TOKEN; accepted: {_FORMS}")
    store = _open_influx(url, parts, scheme, clock)
    if existing:
        exists = getattr(store, "database_exists", None)
        try:
            found = exists() if exists is not None else True
        except BaseException:
            store.close()
            raise
        if not found:
            store.close()
            raise StoreUrlError(f"the server has no database {getattr(store, 'database', '?')!r} "
                                "(the database ingest writes; check the name)")
    return store


def _open_sqlite(url: str, clock: Clock | None, existing: bool) -> ReadingStore:
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.sqlite import SqliteStore

    path = sqlite_path(url)
    if path == ":memory:":
        return SqliteStore(path, clock=clock)
    file = Path(path)
    directory = file.parent
    if existing and not file.exists():
        raise StoreUrlError(f"no SQLite store at {file} (the store ingest, import or the demo writes; check the "
                            "path)")
    if not directory.is_dir():
        raise StoreUrlError(f"directory {directory} does not exist (create it first; "
                            "a store is never created in a directory that is not there)")
    if file.is_dir():
        raise StoreUrlError(f"{file} is a directory, not an SQLite file")
    if existing:
        _check_stormwatch_file(file)
    try:
        return SqliteStore(file, clock=clock)
    except StoreError as exc:
        cause = exc.__cause__
        if isinstance(cause, sqlite3.DatabaseError) and getattr(cause, "sqlite_errorcode", None) in _NOT_A_DATABASE:
            raise StoreUrlError(f"{file} is not an SQLite database ({cause})") from None
        raise


def _check_stormwatch_file(file: Path) -> None:
    """Refuse, before anything is written to it, a file a reading command was pointed at that is not
    a stormwatch store: an empty file or another program's SQLite database (opening it as a store
    would add stormwatch's tables and switch it to WAL -- a report then said "no data" of the wrong
    file), or no SQLite database at all.

    Raises:
        StoreUrlError: why the file is not a stormwatch store.
    """
    uri = f"file:{urllib.parse.quote(str(file.resolve()))}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
        try:
            found = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'readings'").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) in _NOT_A_DATABASE:
            raise StoreUrlError(f"{file} is not an SQLite database ({exc})") from None
        return  # another error (locked, unreadable): opening the store says what it is
    if found is None:
        what = "an empty file" if file.stat().st_size == 0 else "an SQLite database without stormwatch's readings table"
        raise StoreUrlError(f"{file} is {what}, not a stormwatch store (the store ingest, import or the demo writes; "
                            "check the path)")


def _open_influx(url: str, parts: urllib.parse.SplitResult, scheme: str, clock: Clock | None) -> ReadingStore:
    if scheme in ("influx1", "influx1s"):
        from stormwatch.stores.influx1 import Influx1Store

        database = parts.path.strip("/")
        if not parts.hostname or not database or "/" in database:
            raise StoreUrlError("not an InfluxDB 1.x URL: need host, port and one database; "
                                f"accepted: {_FORMS}")
        query = dict(urllib.parse.parse_qsl(parts.query))
        unknown = set(query) - {"rp"}
        if unknown:
            raise StoreUrlError(f"not an InfluxDB 1.x URL: unknown parameter(s) {', '.join(sorted(unknown))} "
                                "(only rp=POLICY)")
        http = "https" if scheme == "influx1s" else "http"
        return Influx1Store(
            f"{http}://{_netloc_host(parts.hostname)}:{_port(parts)}", urllib.parse.unquote(database),
            rp=query.get("rp"),
            username=urllib.parse.unquote(parts.username) if parts.username else None,
            password=urllib.parse.unquote(parts.password) if parts.password else None, clock=clock,
        )
    if scheme in ("influx2", "influx2s"):
        from stormwatch.stores.influx2 import Influx2Store

        query = dict(urllib.parse.parse_qsl(parts.query))
        missing = [k for k in ("org", "bucket", "token") if not query.get(k)]
        if not parts.hostname or missing:
            raise StoreUrlError(f"not an InfluxDB 2.x URL: missing {', '.join(missing or ['host'])}; "
                                f"accepted: {_FORMS}")
        http = "https" if scheme == "influx2s" else "http"
        return Influx2Store(f"{http}://{_netloc_host(parts.hostname)}:{_port(parts)}", org=query["org"],
                            bucket=query["bucket"], token=query["token"], clock=clock)
    raise StoreUrlError(f"unknown store URL scheme {parts.scheme!r}; accepted: {_FORMS}")


def _port(parts: urllib.parse.SplitResult) -> int:
    """The URL's port, 8086 when it names none.

    Raises:
        StoreUrlError: a port that is not 1..65535 (``:0`` is refused, never replaced).
    """
    try:
        port = parts.port
    except ValueError as exc:
        raise StoreUrlError(f"bad port: {exc}") from exc
    if port is None:
        return 8086
    if not 1 <= port <= 65535:
        raise StoreUrlError(f"bad port: {port} is not a TCP port (1-65535)")
    return port
