"""``open_store(url)``: a :class:`~stormwatch.stores.base.ReadingStore` from a store URL.

URLs (see :mod:`stormwatch.stores.base`):

* ``sqlite:///relative/or/absolute/path.db``, ``sqlite:////abs/path.db`` or a bare path -- SQLite;
  ``sqlite:///./var/stormwatch.db`` is ``./var/stormwatch.db``; ``sqlite:///:memory:`` is in-memory.
* ``influx1://[user:password@]host:port/database[?rp=POLICY]`` (``influx1s://`` for HTTPS).
* ``influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN`` (``influx2s://`` for HTTPS).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from stormwatch.clock import Clock
from stormwatch.errors import InputError
from stormwatch.stores.base import ReadingStore


class StoreUrlError(InputError):
    """A store URL that cannot be used; the message shows the accepted forms."""


_FORMS = ("sqlite:///path/to/file.db (or a bare path), influx1://[user:pass@]host:port/database[?rp=POLICY], "
          "influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN")


def redact(url: str) -> str:
    """``url`` with any password or token replaced by ``***`` (for logs)."""
    parts = urllib.parse.urlsplit(url)
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
            raise StoreUrlError(f"bad SQLite URL {url!r}: use sqlite:///path (three slashes); accepted: {_FORMS}")
        path = rest[1:]  # sqlite:///rel -> rel ; sqlite:////abs -> /abs
        if not path:
            raise StoreUrlError(f"bad SQLite URL {url!r}: no file path")
        return path
    return url


def open_store(url: str, clock: Clock | None = None) -> ReadingStore:
    """Open the store ``url`` names.

    Args:
        url: a store URL (module docstring).
        clock: passed to the store (stamps receive times / dead letters).

    Raises:
        StoreUrlError: unknown scheme or missing parts (message lists the accepted forms), or an
            SQLite file whose directory does not exist (a typo must not create directories).
        StoreError: an SQLite file that cannot be opened.
    """
    if not url:
        raise StoreUrlError(f"empty store URL; accepted: {_FORMS}")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("sqlite", ""):
        from stormwatch.stores.sqlite import SqliteStore

        path = sqlite_path(url)
        if path == ":memory:":
            return SqliteStore(path, clock=clock)
        directory = Path(path).parent
        if not directory.is_dir():
            raise StoreUrlError(f"{redact(url)}: directory {directory} does not exist (create it first; "
                                "a store is never created in a directory that is not there)")
        return SqliteStore(Path(path), clock=clock)
    if scheme in ("influx1", "influx1s"):
        from stormwatch.stores.influx1 import Influx1Store

        database = parts.path.strip("/")
        if not parts.hostname or not database or "/" in database:
            raise StoreUrlError(f"bad InfluxDB 1.x URL {redact(url)!r}: need host, port and one database; "
                                f"accepted: {_FORMS}")
        query = dict(urllib.parse.parse_qsl(parts.query))
        unknown = set(query) - {"rp"}
        if unknown:
            raise StoreUrlError(f"bad InfluxDB 1.x URL {redact(url)!r}: unknown parameter(s) {sorted(unknown)}")
        http = "https" if scheme == "influx1s" else "http"
        return Influx1Store(
            f"{http}://{parts.hostname}:{_port(parts, url)}", urllib.parse.unquote(database), rp=query.get("rp"),
            username=urllib.parse.unquote(parts.username) if parts.username else None,
            password=urllib.parse.unquote(parts.password) if parts.password else None, clock=clock,
        )
    if scheme in ("influx2", "influx2s"):
        from stormwatch.stores.influx2 import Influx2Store

        query = dict(urllib.parse.parse_qsl(parts.query))
        missing = [k for k in ("org", "bucket", "token") if not query.get(k)]
        if not parts.hostname or missing:
            raise StoreUrlError(f"bad InfluxDB 2.x URL {redact(url)!r}: missing {missing or ['host']}; "
                                f"accepted: {_FORMS}")
        http = "https" if scheme == "influx2s" else "http"
        return Influx2Store(f"{http}://{parts.hostname}:{_port(parts, url)}", org=query["org"],
                            bucket=query["bucket"], token=query["token"], clock=clock)
    raise StoreUrlError(f"unknown store URL scheme {parts.scheme!r} in {redact(url)!r}; accepted: {_FORMS}")


def _port(parts: urllib.parse.SplitResult, url: str) -> int:
    try:
        port = parts.port
    except ValueError as exc:
        raise StoreUrlError(f"bad port in store URL {redact(url)!r}: {exc}") from exc
    return port or 8086
