"""Helpers of the importer tests: the test site's YAML, the Tharandt tip record and its storms by hand,
the golden cases' folder (tests/cases/README.md)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from typer.testing import CliRunner, Result

from stormwatch.app.cli import app
from tests.conftest import data_file

#: The golden cases, a folder each (tests/e2e/test_cases.py runs them).
CASES = Path(__file__).resolve().parent / "cases"

THARANDT = "tharandt_davis_tips_Sensor1.csv"


#: The Tharandt file does not state its zone (SOURCES.md): the tests read it as UTC, said with --tz
#: (without it, an import reads a file's zone-less times in the site's zone, America/New_York here).
THARANDT_ARGS = ["--delimiter", ";", "--time-format", "%d.%m.%Y %H:%M", "--tips", "0.2", "--tz", "UTC"]


SITE_YAML = """
site: {id: import-test, jurisdiction: ch133, timezone: America/New_York}
gateway_id: gw-1
devices:
  - {id: rain-1, profile: tipping_bucket_0_2mm_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
  - {id: sonde-1, profile: ysi_exo_turbidity, transport: {kind: serial, port: /dev/null}}
  - {id: turb-ntu, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1}}
  - {id: stage-1, profile: maxbotix_hrxl, transport: {kind: serial, port: /dev/null}}
  - {id: rain-in, profile: tipping_bucket_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
rain_gauge: rain-1
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["import", *args], catch_exceptions=False)


@dataclass(frozen=True)
class Storm:
    start: datetime
    end: datetime
    tips: int


def storms_by_hand(tips_at: list[tuple[datetime, int]], gap: timedelta) -> tuple[list[Storm], Storm | None]:
    """Storms closed by a dry gap inside the record, and the one still open at its end."""
    closed: list[Storm] = []
    current: Storm | None = None
    for when, n in sorted(tips_at):
        if n == 0:
            continue
        if current is not None and when - current.end >= gap:
            closed.append(current)
            current = None
        current = Storm(when, when, n) if current is None else Storm(current.start, when, current.tips + n)
    return closed, current


def tharandt_tips() -> list[tuple[datetime, int]]:
    with data_file(THARANDT).open(newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))[1:]
    return [(datetime.strptime(d, "%d.%m.%Y %H:%M").replace(tzinfo=UTC), int(Decimal(v) / Decimal("0.2")))
            for d, v in rows]


def z(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def golden(case: str) -> list[dict[str, object]]:
    """The expected events of a golden case folder (tests/e2e/test_cases.py runs the replay and compares)."""
    lines = (CASES / case / "expected.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
