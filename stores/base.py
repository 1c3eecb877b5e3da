"""The store interface every sink implements (embedded SQLite by default, InfluxDB 1.x/2.x).

Store URLs (``open_store``):

* ``sqlite:///path/to/stormwatch.db`` (or a bare path) -- embedded, zero setup (default).
* ``influx1://[user:password@]host:port/database[?rp=autogen]`` -- InfluxDB 1.x HTTP ``/write``.
* ``influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN`` (``influx2s://`` for TLS) --
  InfluxDB 2.x/3.x/Cloud through influxdb-client.

The design: docs/stores.md ("The modules", `stores/base.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol, TypeAlias

from stormwatch import topics
from stormwatch.contract import Event, Reading, dump_readings
from stormwatch.display import amount
from stormwatch.reasons import check_reason

log = logging.getLogger(__name__)


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


def measurement(r: Reading) -> tuple[str, str, str, str, datetime, int | float]:
    """What a reading says -- ``(site, device, quantity, unit, time, value)``: two readings of one
    identity are the same reading when these are equal (module docstring)."""
    return (r.site, r.device, r.quantity, r.unit, r.time, r.value)


@dataclass(frozen=True)
class Conflict:
    """A reading refused because its identity is already stored with another measurement.

    Attributes:
        reading: the refused reading.
        stored_value, stored_unit, stored_time: what the store holds under its identity.
    """

    reading: Reading
    stored_value: int | float
    stored_unit: str
    stored_time: datetime

    def detail(self) -> str:
        """One sentence for a dead letter or an error line: the identity, both values, what happens."""
        r = self.reading
        gateway, boot, seq = r.identity
        said = amount(r.value, r.unit)
        held = amount(self.stored_value, self.stored_unit)
        if self.stored_time != r.time:
            said += f" at {r.time.isoformat()}"
            held += f" at {self.stored_time.isoformat()}"
        # The stored reading's device and quantity are not known here (it may be another device's):
        # they are said of the refused reading alone.
        return (f"identity (gateway {gateway!r}, boot {boot!r}, seq {seq}) is stored with {held}; this reading "
                f"({r.device} {r.quantity}) says {said}: refused, the stored reading is kept")

    def letter(self, topic: str, received_at: datetime) -> DeadLetter:
        """The ``conflicting_value`` dead letter of the refused reading (its JSON as the payload)."""
        return DeadLetter("conflicting_value", self.detail(), topic, dump_readings([self.reading]), received_at)


@dataclass(frozen=True)
class Refused:
    """A reading the store's server refused to hold (InfluxDB HTTP 400: a field type conflict, a time
    beyond the retention policy), with the server's words."""

    reading: Reading
    message: str

    def letter(self, topic: str, received_at: datetime) -> DeadLetter:
        """The ``store_rejected`` dead letter of the refused reading (its JSON as the payload)."""
        return DeadLetter("store_rejected", self.message, topic, dump_readings([self.reading]), received_at)


@dataclass(frozen=True)
class WriteOutcome:
    """What became of the readings of one write.

    Attributes:
        new: readings stored by this write.
        already: readings whose identity was stored with the same measurement (duplicates; not
            written again).
        conflicts: readings refused because their identity is stored with another measurement.
        refused: readings the server refused to hold.
    """

    new: int = 0
    already: int = 0
    conflicts: tuple[Conflict, ...] = ()
    refused: tuple[Refused, ...] = ()

    def held(self, readings: Sequence[Reading]) -> list[Reading]:
        """Those of ``readings`` (the objects given to the write) the store now holds as they are (new
        or already stored): not the conflicts and not the refused."""
        out = {id(r) for r in (*(c.reading for c in self.conflicts), *(f.reading for f in self.refused))}
        return [r for r in readings if id(r) not in out] if out else list(readings)


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


def refusal_letters(outcome: WriteOutcome, received_at: datetime,
                    topic_of: Callable[[Reading], str] | None = None) -> list[DeadLetter]:
    """The dead letters of a write's conflicts and server refusals, each on its reading's topic
    (``topic_of``; default: the readings topic of its site and gateway)."""
    where = topic_of or (lambda r: topics.readings(r.site, r.gateway))
    return [*(c.letter(where(c.reading), received_at) for c in outcome.conflicts),
            *(f.letter(where(f.reading), received_at) for f in outcome.refused)]


def keep_refusals(store: ReadingStore, outcome: WriteOutcome, received_at: datetime) -> None:
    """What :meth:`ReadingStore.write_readings` does with the readings it could not store: each logged
    at WARNING and kept as a dead letter in ``store`` (nothing refused disappears).

    Raises:
        StoreError: the dead letters could not be written.
    """
    letters = refusal_letters(outcome, received_at)
    for letter in letters:
        log.warning("%r: reading not stored (%s): %s", store, letter.reason, letter.detail)
    if letters:
        store.write_deadletters(letters)


class ReadingStore(Protocol):
    """What ingest writes to and the alert engine reads back for backfill."""

    def write_checked(self, readings: Sequence[Reading], *, late: bool = False) -> WriteOutcome:
        """Durably store readings and say what became of each (module docstring): new, already
        stored (same measurement), conflicts (``conflicting_value``: another measurement is stored
        under the identity; not written) and refused by the server (``store_rejected``). Neither the
        conflicts nor the refused are kept by the store: the caller dead-letters or reports them.

        Raises:
            StoreError: nothing may be acknowledged.
        """
        ...

    def write_readings(self, readings: Sequence[Reading], *, late: bool = False) -> int:
        """Durably store readings; returns how many were new (duplicates are skipped). Conflicts and
        readings the server refuses are kept as dead letters in the store and logged at WARNING
        (:func:`keep_refusals`); callers that report them use :meth:`write_checked`.

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

    def supersede(self, reading: Reading) -> Reading | None:
        """Put ``reading`` in place of the stored reading with its identity and measurement point
        (site, device, quantity, unit, time) -- the ONE way a stored value changes, for an explicit
        correction of a manual entry (``stormwatch readings add --correct``); the caller keeps the
        replaced reading as a ``superseded`` dead letter. Returns the replaced reading (its ``raw``
        and flags as stored), or ``None`` when no such reading is stored (nothing is written then).

        Raises:
            StoreError: the store is unavailable; nothing was changed.
        """
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
# Its fields by name -- read ``row[ROW_TIME]``, never ``row[0]``. Plain tuples, not a NamedTuple: the
# rows of a site-year cross process pipes by marshal and are made by the million at C speed.
ROW_TIME: Final = 0
ROW_VALUE: Final = 1
ROW_UNIT: Final = 2
ROW_FLAGS: Final = 3
ROW_GATEWAY: Final = 4
ROW_BOOT: Final = 5
ROW_SEQ: Final = 6
ROW_TIP_SIZE: Final = 7


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
