"""rtl_433 JSON Lines: what ``rtl_433 -F json`` writes (and publishes to MQTT), one radio message
per line::

    {"time" : "2023-02-11 06:58:31", "model" : "Acurite-5n1", "message_type" : 49, "id" : 3844,
     "channel" : "A", "sequence_num" : 2, "battery_ok" : 0, "wind_avg_km_h" : 0.000,
     "rain_in" : 109.660, "mic" : "CHECKSUM", "rssi" : -24.151, ...}

The design: docs/importing.md ("The modules", `importers/rtl433.py`).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

from stormwatch.display import names, plural
from stormwatch.importers.options import ImportOptions
from stormwatch.importers.table import ISO, UNIX, Table, TableError, TimeParser

#: Keys that describe the radio reception, not the message (differ between repeats).
RADIO_KEYS = frozenset({"sequence_num", "mic", "mod", "freq", "freq1", "freq2", "rssi", "snr", "noise"})
#: Keys that identify a sensor.
SENSOR_KEYS = ("model", "id", "channel")
#: rtl_433's running rain totals, in order of preference.
RAIN_KEYS = ("rain_mm", "rain_in")
#: Key suffix -> contract unit.
_SUFFIX_UNITS = {"_mm": "mm", "_in": "in", "_C": "Cel", "_cm": "cm", "_m": "m"}
#: How many recent messages are remembered to recognise repeats (repeats follow each other).
_REPEAT_WINDOW = 64


def is_json_lines(lines: list[str]) -> bool:
    """Whether the first non-blank line is a JSON object (a JSON Lines file)."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if not first.startswith("{"):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


def _unit(key: str) -> str | None:
    for suffix, unit in _SUFFIX_UNITS.items():
        if key.endswith(suffix):
            return unit
    return None


def _sensor(obj: dict[str, Any]) -> str:
    return " ".join(f"{k}={obj[k]}" for k in SENSOR_KEYS if k in obj)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _wanted(options: ImportOptions) -> tuple[str | None, set[str]]:
    """The rain key (named or rtl_433's default) and every wanted key."""
    wanted = {v.name.strip() for v in options.value_columns}
    rain = options.tips.column.strip() if options.tips is not None and options.tips.column else None
    if rain is not None:
        wanted.add(rain)
    elif options.tips is not None:
        wanted.update(RAIN_KEYS)
    return rain, wanted


def read_rtl433(path: Path, lines: list[str], options: ImportOptions) -> Table:
    """The table of one sensor's messages in an rtl_433 JSON Lines file.

    Raises:
        TableError: a line that is not a JSON object, no line of the selected sensor carrying a
            wanted column, or several sensors carrying them and no ``--select``.
    """
    rain, wanted = _wanted(options)
    kept: list[tuple[int, dict[str, Any]]] = []
    recent: deque[str] = deque(maxlen=_REPEAT_WINDOW)
    duplicates = ignored = 0
    sensors: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise TableError(f"{path}:{number}: not a JSON object: {exc}") from None
        if not isinstance(obj, dict):
            raise TableError(f"{path}:{number}: not a JSON object")
        if not wanted.intersection(obj) or "time" not in obj or \
                any(_cell(obj.get(k)) != v for k, v in options.select):
            ignored += 1
            continue
        key = json.dumps({k: v for k, v in obj.items() if k not in RADIO_KEYS}, sort_keys=True)
        if key in recent:
            duplicates += 1
            continue
        recent.append(key)
        sensors[_sensor(obj)] = sensors.get(_sensor(obj), 0) + 1
        kept.append((number, obj))
    if not kept:
        where = f" with {' '.join(f'{k}={v}' for k, v in options.select)}" if options.select else ""
        raise TableError(f"{path}: no rtl_433 message{where} carries {sorted(wanted) or 'a wanted column'}")
    if len(sensors) > 1:
        listed = "; ".join(f"{s or 'no model/id'} ({plural(n, 'message')})" for s, n in sorted(sensors.items()))
        raise TableError(f"{path}: several sensors carry {names(wanted)}: {listed}; choose one with "
                         "--select KEY=VALUE (e.g. --select model=Acurite-5n1 --select id=3844)")
    columns = ["time", *sorted({k for _, obj in kept for k in obj if k != "time"})]
    index = {c: i for i, c in enumerate(columns)}
    data = tuple((number, tuple(_cell(obj.get(c)) for c in columns)) for number, obj in kept)
    skip = frozenset(index[k] for k in (*SENSOR_KEYS, *RADIO_KEYS, "protocol", "message_type", "subtype")
                     if k in index)
    present = [k for k in RAIN_KEYS if k in index]
    rain_key = rain if rain is not None and rain in index else (present[0] if present else None)
    formats = [options.time_format] if options.time_format else [ISO, UNIX]
    return Table(path, "rtl433", tuple(columns), tuple(_unit(c) for c in columns), data, 0,
                 TimeParser(formats, options.zone, options.tz_source), skip, ",",
                 rain_column=None if rain_key is None else index[rain_key],
                 rain_per_row="cumulative" if rain_key in RAIN_KEYS else "depth",
                 duplicate_lines=duplicates, ignored_lines=ignored)
