"""InfluxDB 2.x (and 3.x / Cloud, v2 write API) store through ``influxdb-client``.

Same schema and semantics as :mod:`stormwatch.stores.influx1` (``docs/influxdb-schema.md``): line protocol
from :mod:`stormwatch.stores.lineprotocol`, written with the synchronous write API at ns precision; retries
with backoff honouring ``Retry-After``; a refused batch (400/413/422) is bisected and only the
refused lines are dead-lettered (``store_rejected``); an unreachable server raises
:class:`~stormwatch.stores.base.StoreError`. Readings are read back with Flux (``pivot`` on ``_field``).

No InfluxDB 2.x server can run on the test machines (Debian ships 1.6, without the v2 API): the
conformance suite (``tests/test_store_conformance.py``) runs this store through influxdb-client
against a recording endpoint that forwards its writes to a real InfluxDB 1.x -- its line protocol
must equal the 1.x store's byte for byte -- and checks its Flux texts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import cast

from influxdb_client import InfluxDBClient, WritePrecision
from influxdb_client.client.exceptions import InfluxDBError
from influxdb_client.client.write_api import SYNCHRONOUS

from stormwatch.clock import Clock, WallClock
from stormwatch.contract import Reading
from stormwatch.stores.base import StoreError
from stormwatch.stores.influxwrite import LineProtocolWrites, Retryable, StoredPoint, Window
from stormwatch.stores.lineprotocol import (
    READINGS,
    time_ns,
)
from stormwatch.stores.rows import influx_readings
from stormwatch.stores.splitwrite import BatchRejected
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

_REJECT_STATUSES = frozenset({400, 413, 422})
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: Columns of a pivoted Flux record that are not tags.
_NOT_TAGS = frozenset({"result", "table", "stormwatch_ns"})


def flux_string(text: str) -> str:
    """A Flux string literal (``\\``, ``"`` and ``${`` escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${") + '"'


class Influx2Store(LineProtocolWrites):
    """A :class:`stormwatch.stores.base.ReadingStore` on InfluxDB 2.x.

    Args:
        url: ``http(s)://host:port``.
        org, bucket, token: InfluxDB 2.x organisation, bucket and API token (never logged).
        clock: stamps dead letters of refused lines.
        timeout_s, retries, backoff_s, max_backoff_s, batch_lines, sleep: as
            :class:`stormwatch.stores.influx1.Influx1Store`.
    """

    _log = log

    def __init__(
        self,
        url: str,
        *,
        org: str,
        bucket: str,
        token: str,
        clock: Clock | None = None,
        timeout_s: float = 10.0,
        retries: int = 4,
        backoff_s: float = 0.25,
        max_backoff_s: float = 10.0,
        batch_lines: int = 5000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not (org and bucket):
            raise ValueError("InfluxDB 2.x needs org and bucket")
        self.url = url
        self.org = org
        self.bucket = bucket
        self.clock: Clock = clock or WallClock()
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.batch_lines = batch_lines
        self._sleep = sleep
        self._client = InfluxDBClient(url=url, token=token, org=org, timeout=int(timeout_s * 1000))
        self._write_api = self._client.write_api(write_options=SYNCHRONOUS)
        self._lock = threading.RLock()
        self.rejected_total = 0
        #: HTTP retries so far (each a retryable failure followed by a backoff).
        self.retries_total = 0

    def __repr__(self) -> str:
        return f"Influx2Store({self.url!r}, org={self.org!r}, bucket={self.bucket!r})"

    def _send(self, lines: Sequence[str]) -> None:
        def attempt() -> None:
            try:
                self._write_api.write(bucket=self.bucket, org=self.org, record="\n".join(lines),
                                      write_precision=cast(WritePrecision, WritePrecision.NS))
            except InfluxDBError as exc:
                status = getattr(exc, "status", None) or getattr(getattr(exc, "response", None), "status", None)
                if status in _REJECT_STATUSES:
                    raise BatchRejected(f"HTTP {status}: {exc.message}") from exc
                if status is not None and status not in _RETRY_STATUSES:
                    raise StoreError(f"InfluxDB {self.url} answered HTTP {status}: {exc.message}") from exc
                try:
                    wait = float(exc.retry_after) if exc.retry_after else None
                except ValueError:
                    wait = None
                raise Retryable(f"HTTP {status}: {exc.message}", wait) from exc
            except OSError as exc:  # urllib3 connection errors derive from OSError
                raise Retryable(f"{type(exc).__name__}: {exc}") from exc
            except Exception as exc:  # urllib3 MaxRetryError etc. (not OSError in every version)
                if type(exc).__module__.startswith("urllib3"):
                    raise Retryable(f"{type(exc).__name__}: {exc}") from exc
                raise

        self._retrying(attempt, self.url)

    def _target(self) -> str:
        return self.url

    def _stored(self, measurement: str, fields: tuple[str, ...], windows: Sequence[Window]) -> Iterator[StoredPoint]:
        """Flux, one query per window: the fields pivoted into columns, the time as integer ns
        (``int(v: r._time)``: the Python client would cut ``_time`` to microseconds)."""
        field_test = " or ".join(f"r._field == {flux_string(f)}" for f in fields)
        for w in windows:
            match = " and ".join("(" + " or ".join(f"r[{flux_string(tag)}] == {flux_string(v)}" for v in values) + ")"
                                 for tag, values in w.match)
            flux = (
                f"from(bucket: {flux_string(self.bucket)})"
                f" |> range(start: time(v: {w.start_ns}), stop: time(v: {w.stop_ns + 1}))"
                f" |> filter(fn: (r) => r._measurement == {flux_string(measurement)} and {match})"
                f" |> filter(fn: (r) => {field_test})"
                ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
                " |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))"
            )
            try:
                tables = self._client.query_api().query(flux, org=self.org)
            except Exception as exc:
                raise StoreError(f"InfluxDB {self.url} Flux query failed: {exc}") from exc
            for table in tables:
                for rec in table.records:
                    values = rec.values
                    tags = {k: str(v) for k, v in values.items()
                            if not k.startswith("_") and k not in fields and k not in _NOT_TAGS}
                    yield StoredPoint(tags, int(values["stormwatch_ns"]), tuple(values.get(f) for f in fields))

    def _deadletter_topic(self) -> str:
        return f"influx2:{self.bucket}"

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
        """See :meth:`stormwatch.stores.base.ReadingStore.query_readings` (Flux ``pivot``; rows decoded by
        :func:`stormwatch.stores.rows.influx_readings`; ``late`` as
        :meth:`stormwatch.stores.influx1.Influx1Store.query_readings`).

        Raises:
            StoreError: the query failed.
        """
        start_s = format_time(start) if start else "0"
        stop_s = format_time(end) if end else "2262-04-11T00:00:00Z"
        flux = (
            f"from(bucket: {flux_string(self.bucket)})"
            f" |> range(start: {start_s}, stop: {stop_s})"
            f' |> filter(fn: (r) => r._measurement == "{READINGS}" and r.site == {flux_string(site)})'
        )
        if device is not None:
            flux += f" |> filter(fn: (r) => r.device == {flux_string(device)})"
        if quantity is not None:
            flux += f" |> filter(fn: (r) => r.quantity == {flux_string(quantity)})"
        flux += ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
        try:
            tables = self._client.query_api().query(flux, org=self.org)
        except Exception as exc:
            raise StoreError(f"InfluxDB {self.url} Flux query failed: {exc}") from exc
        rows = ((rec.values, time_ns(rec.get_time())) for table in tables for rec in table.records)
        return influx_readings(rows, late=late)

    def close(self) -> None:
        """Close the HTTP client (writes are synchronous: nothing is buffered)."""
        self._write_api.close()
        self._client.close()
