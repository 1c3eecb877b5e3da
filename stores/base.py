"""The store interface every sink implements (embedded SQLite by default, InfluxDB 1.x/2.x).

Store URLs (``open_store``):

* ``sqlite:///path/to/stormwatch.db`` (or a bare path) -- embedded, zero setup (default).
* ``influx1://[user:password@]host:port/database[?rp=autogen]`` -- InfluxDB 1.x HTTP ``/write``.
* ``influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN`` (``influx2s://`` for TLS) --
  InfluxDB 2.x/3.x/Cloud through influxdb-client.

Semantics shared by all sinks (design-notes.md, "Delivery"): a write is durable when the call
returns; readings are deduplicated by ``(gateway, boot, seq)`` (SQLite: a unique key; InfluxDB: the
identities held are looked up before each write, and no reading is written over another --
:mod:`stormwatch.stores.influxwrite`); ``rain_tips`` are tip counts per
poll; a reading marked ``late`` is stored but flagged so the alert engine never treats it as live.

Adding a sink: implement :class:`ReadingStore`, give ``open_store`` its URL scheme, and add it to
the conformance suite every store passes (``tests/test_store_conformance.py``: one ``Subject``
factory -- the store and independent readers of what it holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeAlias

from stormwatch.contract import Event, Reading
from stormwatch.reasons import check_reason


@dataclass(frozen=True)
class DeadLetter:
    """A message that could not be accepted, with why.

    Attributes:
        reason: short machine code, one of :data:`stormwatch.reasons.REASONS` (``bad_json``,
            ``schema``, ``unknown_device``, ``unit_mismatch``, ``duplicate``...).
        detail: human explanation.
        topic: MQTT topic it arrived on.
        payload: the payload as received (bytes).
        received_at: receive time (UTC).

    Raises:
        stormwatch.reasons.UnknownReason: ``reason`` is not in the one documented set.
    """

    reason: str
    detail: str
    topic: str
    payload: bytes
    received_at: datetime

    def __post_init__(self) -> None:
        check_reason(self.reason)


@dataclass(frozen=True)
class SiteInfo:
    """What a store keeps about a configured site, for dashboards (InfluxDB measurement ``sites``).

    Attributes:
        site: site id.
        timezone: the site's IANA zone (local days of daily totals; ``site.timezone`` of the site file).
        jurisdiction: the site's rule pack.
    """

    site: str
    timezone: str
    jurisdiction: str


@dataclass(frozen=True)
class SeriesSummary:
    """What one series (``site``, ``device``, ``quantity``) holds in a time window, from one query.

    Attributes:
        count: readings in the window (a rough coverage check: poll interval × count).
        total: for ``rain_tips``, the tips of rain in the window (an exact integer; readings flagged
            ``rain_beyond_envelope`` are not rain and not counted); ``None`` for other quantities.
        tips_by_size: for ``rain_tips``, ``total`` split by the readings' tip size (``(size, tips)``,
            canonical size text, ``""`` for readings stored without one), sorted by size: the depth
            is ``sum(tips × size)``.
        first_time, last_time: event times (UTC) of the first and last reading in the window.
        last_value, last_flags: the last reading's value (in ``unit``) and QC flags.
    """

    site: str
    device: str
    quantity: str
    unit: str
    count: int
    total: int | None
    first_time: datetime
    last_time: datetime
    last_value: int | float
    last_flags: tuple[str, ...]
    tips_by_size: tuple[tuple[str, int], ...] = ()


class StoreError(RuntimeError):
    """The store could not durably accept a write (the caller must not acknowledge)."""


class ReadingStore(Protocol):
    """What ingest writes to and the alert engine reads back for backfill."""

    def write_readings(self, readings: Sequence[Reading], *, late: bool = False) -> int:
        """Durably store readings; returns how many were new (duplicates are skipped).

        Raises:
            StoreError: nothing may be acknowledged.
        """
        ...

    def query_readings(
        self,
        site: str,
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        device: str | None = None,
        quantity: str | None = None,
        late: bool | None = None,
    ) -> list[Reading]:
        """Readings of ``site`` with ``start <= time < end``, in event-time order then ``seq``
        (``late``: ``None`` all, ``False`` live only, ``True`` only those written ``late=True``)."""
        ...

    def write_events(self, events: Sequence[Event]) -> None:
        """Store ordinance events (InfluxDB: measurement ``events``, usable as annotations)."""
        ...

    def write_deadletters(self, letters: Sequence[DeadLetter]) -> None:
        """Store dead letters (table / measurement ``deadletter``)."""
        ...

    def write_sites(self, sites: Sequence[SiteInfo], at: datetime) -> None:
        """Record the configured sites at time ``at`` (table / measurement ``sites``; writing the
        same site and time again changes nothing).

        Raises:
            StoreError: the store is unavailable.
        """
        ...

    def close(self) -> None:
        """Flush everything and release resources."""
        ...


#: One stored reading as a backfill reads it (:meth:`SeriesStore.query_series`): ``(time_us, value, unit,
#: flags, gateway, boot, seq, tip_size)`` -- event time in integer microseconds since the Unix epoch
#: (UTC), the value (``int`` tips for ``rain_tips``), the quality flags comma-joined (``""`` when
#: clean), the tip size of a rain reading (canonical text; ``""`` for other quantities and for rain
#: stored without one). No ``raw`` (no rule reads it) and no model object: a year of 1-minute
#: readings of a site is 2.1 million of these (``benchmarks/report.py``).
StoredRow: TypeAlias = tuple[int, int | float, str, str, str, str, int, str]


class SeriesStore(ReadingStore, Protocol):
    """A store that hands a backfill the rows of a few series at once (SQLite, InfluxDB 1.x); any other
    store is read through :func:`stormwatch.stores.rows.series_rows`."""

    def stored_series(self, site: str) -> list[tuple[str, str]]:
        """Every ``(device, quantity)`` the store holds readings of for ``site``, sorted.

        Raises:
            StoreError: the query failed.
        """
        ...

    def query_series(self, site: str, series: Sequence[tuple[str, str]], start: datetime, end: datetime,
                     ) -> dict[tuple[str, str], list[StoredRow]]:
        """The rows of each ``(device, quantity)`` of ``site`` with ``start <= time < end``, each list
        in (time, gateway, boot, seq) order -- the alert engine's order.

        Raises:
            StoreError: the query failed.
        """
        ...


class OverviewStore(ReadingStore, Protocol):
    """A store that answers many sites at once (the web portfolio: a constant number of queries per
    page, never one per site). Implemented by the SQLite, InfluxDB 1.x and 2.x stores."""

    def summarize(self, start: datetime, end: datetime, series: Sequence[tuple[str, str, str]],
                  ) -> list[SeriesSummary]:
        """One :class:`SeriesSummary` per ``(site, device, quantity)`` of ``series`` that has readings in
        ``start <= time < end``, in one query."""
        ...

    def query_tips(self, start: datetime, end: datetime, sites: Sequence[str] | None = None) -> list[Reading]:
        """The ``rain_tips`` readings with at least one tip in the window, every site in one query,
        in (site, event time) order."""
        ...

    def query_site_events(self, start: datetime, end: datetime, sites: Sequence[str] | None = None,
                          ) -> list[Event]:
        """Events with ``start <= event_time < end`` of ``sites`` (``None``: all), in event-time order."""
        ...
