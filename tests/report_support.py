"""Helpers of the report tests: run the CLI, read a PDF with poppler (pdftotext, pdftoppm), a store
with a rain-gauge gap."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.stores.sqlite import SqliteStore


def need_poppler() -> None:
    """Skip without poppler-utils, except under CI=true (.ci/run installs it)."""
    if shutil.which("pdftotext") is None or shutil.which("pdftoppm") is None:
        msg = "poppler-utils not installed (Debian: apt-get install poppler-utils)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {msg}")
        pytest.skip(msg)


def run_cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def pdf_text(pdf: Path) -> str:
    """The PDF's text, each run of whitespace one space (table cells wrap inside a line)."""
    out = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True)
    return out.stdout


def pdf_words(pdf: Path) -> str:
    out = subprocess.run(["pdftotext", "-raw", str(pdf), "-"], check=True, capture_output=True, text=True)
    return " ".join(out.stdout.split())


def blank_pages(pdf: Path, tmp: Path) -> list[int]:
    """Pages (1-based) pdftoppm renders without a single dark pixel in the page body (header and
    footer in the page margins excluded), from 8-bit greyscale PGM renderings at 30 dpi."""
    prefix = tmp / "page"
    subprocess.run(["pdftoppm", "-r", "30", "-gray", str(pdf), str(prefix)], check=True)
    blank = []
    pages = sorted(tmp.glob("page-*.pgm"))
    assert pages, "pdftoppm rendered no page"
    for i, page in enumerate(pages, 1):
        data = page.read_bytes()
        # P5 header: magic, width, height, maxval, then the pixels
        parts = data.split(maxsplit=4)
        width, height = int(parts[1]), int(parts[2])
        pixels = parts[4]
        band = height // 20  # skip the running header and footer (in the 16-mm page margins)
        body = pixels[band * width:(height - band) * width]
        if min(body) > 128:
            blank.append(i)
    return blank


NY = ZoneInfo("America/New_York")


GAP_SITE = """
site: {id: gap-site, name: Gap Site, jurisdiction: ch133, timezone: America/New_York}
gateway_id: gw-1
devices:
  - {id: rain-1, profile: tipping_bucket_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
rain_gauge: rain-1
"""


def gap_store(path: Path) -> None:
    """A SQLite store at ``path`` of GAP_SITE's gauge polled every minute from 9 to 11 June 2026 (New
    York), silent 09:00-14:00 on the 10th, 7 tips at 16:00 that day."""
    day = datetime(2026, 6, 10, tzinfo=NY)
    hole = (day + timedelta(hours=9), day + timedelta(hours=14))
    readings = []
    t, seq = day - timedelta(days=1), 0
    while t < day + timedelta(days=2):
        if not hole[0] <= t < hole[1]:
            seq += 1
            tips = 7 if t == day + timedelta(hours=16) else 0
            readings.append(Reading(site="gap-site", device="rain-1", quantity="rain_tips", value=tips, unit=TIP_UNIT,
                                    time=t, gateway="gw-1", boot="b1", seq=seq))
        t += timedelta(minutes=1)
    with SqliteStore(path) as store:
        store.write_readings(readings)
