"""Stored rows back into :class:`~stormwatch.contract.Reading` objects (the read side of every store).

Each store encodes a reading its own way (SQLite columns, InfluxDB fields from
:func:`stormwatch.stores.lineprotocol.reading_point`); once those columns are decoded, :func:`stored_reading`
builds the reading. :func:`influx_readings` decodes the InfluxDB field encoding shared by
:mod:`stormwatch.stores.influx1` and :mod:`stormwatch.stores.influx2` (``docs/influxdb-schema.md``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from stormwatch.contract import Reading
from stormwatch.stores.lineprotocol import from_ns


def stored_reading(row: Mapping[str, Any], ns: int, *, value: int | float, raw: Any,
                   flags: Iterable[str]) -> Reading:
    """The reading of a stored row whose encoded columns are already decoded.

    Args:
        row: ``site``, ``device``, ``quantity``, ``unit``, ``gateway``, ``boot``, ``seq`` (int or
            numeric text).
        ns: event time, integer nanoseconds since the Unix epoch (truncated to microseconds).
        value, raw, flags: the decoded value, raw value and quality flags.

    Raises:
        pydantic.ValidationError: the row does not make a valid reading.
    """
    return Reading(
        site=row["site"], device=row["device"], quantity=row["quantity"], value=value, unit=row["unit"],
        time=from_ns(ns), gateway=row["gateway"], boot=row["boot"], seq=int(row["seq"]), raw=raw,
        flags=tuple(flags),
    )


def influx_readings(rows: Iterable[tuple[Mapping[str, Any], int]], *, late: bool | None) -> list[Reading]:
    """Readings from InfluxDB ``readings`` rows (fields pivoted into columns), in (time, ``seq``) order.

    Args:
        rows: ``(row, ns)`` pairs: the tag and field columns of one point and its time in ns.
            ``value`` comes back as a float, except ``rain_tips`` whose integer ``tips`` field is
            used; ``raw`` is JSON text (absent: ``None``); ``flags`` is comma-joined text.
        late: ``None`` every row, ``False`` rows without the ``late`` field, ``True`` late rows only.

    Raises:
        pydantic.ValidationError: a row does not make a valid reading.
    """
    out: list[tuple[int, int, Reading]] = []
    for row, ns in rows:
        if late is not None and bool(row.get("late")) != late:
            continue
        value: int | float = float(row["value"])
        if row.get("quantity") == "rain_tips" and row.get("tips") is not None:
            value = int(row["tips"])
        reading = stored_reading(
            row, ns, value=value, raw=json.loads(row["raw"]) if row.get("raw") else None,
            flags=row["flags"].split(",") if row.get("flags") else (),
        )
        out.append((ns, reading.seq, reading))
    out.sort(key=lambda t: (t[0], t[1]))
    return [r for _, _, r in out]
