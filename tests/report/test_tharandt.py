"""The Tharandt tip record (tests/data/tharandt_davis_tips_Sensor1.csv, 2018-07-01 to 2019-05-04)
imported as the event log it is (`import --silence dry`) and reported for the whole period.

Everything expected is derived here from the file with the csv module: tips per minute (each row is
0.2 mm = one tip; the first row is a 0 start marker), storms as runs of tips without a 6-hour gap
(rules.md R1), qualifying at 64 tips (0.5 in = 12.7 mm; 63 tips = 12.6 mm do not reach it), depths
written exactly in mm and in inches cut to 3 decimals, and daily totals on local calendar days of
Europe/Berlin -- 28 Oct 2018, when clocks went back, is a 25-hour day with rain on it. The file's
times are taken as local time of the station (Tharandt, Saxony; SOURCES.md: zone not stated).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from datetime import date, datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from tests.conftest import data_file
from tests.report_support import need_poppler, pdf_words, run_cli

BERLIN = ZoneInfo("Europe/Berlin")
SITE = """
site: {id: tharandt, name: Tharandt rain gauge, jurisdiction: ch133, timezone: Europe/Berlin}
gateway_id: gw-1
devices:
  - id: rain-1
    profile: tipping_bucket_0_2mm_modbus_counter
    transport: {kind: modbus-tcp, host: 127.0.0.1}
    poll_interval_s: 600
rain_gauge: rain-1
"""


def tips_by_minute() -> Counter[datetime]:
    tips: Counter[datetime] = Counter()
    with data_file("tharandt_davis_tips_Sensor1.csv").open(newline="") as f:
        for when, depth in list(csv.reader(f, delimiter=";"))[1:]:
            n = int(Decimal(depth) / Decimal("0.2"))
            if n:
                tips[datetime.strptime(when, "%d.%m.%Y %H:%M").replace(tzinfo=BERLIN)] += n
    return tips


def storms(tips: Counter[datetime]) -> list[tuple[datetime, datetime, int]]:
    out: list[list] = []
    for t in sorted(tips):
        if out and t - out[-1][1] < timedelta(hours=6):
            out[-1][1] = t
            out[-1][2] += tips[t]
        else:
            out.append([t, t, tips[t]])
    return [tuple(s) for s in out]  # type: ignore[misc]


def depth(n: int) -> str:
    mm = Decimal(n) * Decimal("0.2")
    inches = (mm / Decimal("25.4")).quantize(Decimal("0.001"), rounding=ROUND_DOWN)
    return f"{n} tips = {mm.normalize():f} mm ({inches} in)"


def test_tharandt_season_report(tmp_path: Path) -> None:
    need_poppler()
    site = tmp_path / "site.yaml"
    site.write_text(SITE, encoding="utf-8")
    url = f"sqlite:///{tmp_path}/store.db"
    run_cli("import", str(data_file("tharandt_davis_tips_Sensor1.csv")), "--site", str(site), "--device", "rain-1",
            "--store", url, "--delimiter", ";", "--time-format", "%d.%m.%Y %H:%M", "--tip-mm", "0.2",
            "--tz", "Europe/Berlin", "--silence", "dry")
    common = ["report", "--site", str(site), "--store", url, "--no-work-orders",
              "--from", "2018-07-01", "--until", "2019-05-05"]
    out = tmp_path / "season.csv"
    run_cli(*common, "-o", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))

    tips = tips_by_minute()
    assert sum(tips.values()) == 2631  # SOURCES.md
    expected = [s for s in storms(tips) if s[2] >= 64]
    assert len(expected) >= 5
    got = [(datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"]), int(r["tips"]), r["depth"])
           for r in rows if r["section"] == "storm" and r["qualifying"] == "yes"]
    assert got == [(a, b, n, depth(n)) for a, b, n in expected]
    small = [r for r in rows if r["section"] == "storm" and r["qualifying"] == "no"]
    assert len(small) == len(storms(tips)) - len(expected)
    assert all(int(r["tips"]) < 64 for r in small)

    per_day: Counter[date] = Counter()
    for t, n in tips.items():
        per_day[t.date()] += n
    days = {date.fromisoformat(r["id"]): r for r in rows if r["section"] == "day"}
    assert len(days) == (date(2019, 5, 5) - date(2018, 7, 1)).days
    assert {d: int(r["tips"]) for d, r in days.items() if int(r["tips"])} == dict(per_day)
    dst = days[date(2018, 10, 28)]
    assert dst["item"] == "25 h" and int(dst["tips"]) == per_day[date(2018, 10, 28)] > 0
    assert days[date(2019, 3, 31)]["item"] == "23 h"
    # the gauge reported (rows or dry polls) the whole season; only after the last row is rain unknown
    unknown = [r for r in rows if r["section"] == "unknown"]
    last_row = max(tips)
    assert [r["item"] for r in unknown] == ["rain"]
    assert datetime.fromisoformat(unknown[0]["start"]) >= last_row
    assert all(not r["duration"] for d, r in days.items() if d < last_row.date())

    pdf = tmp_path / "season.pdf"
    run_cli(*common, "-o", str(pdf))
    text = pdf_words(pdf)
    for _a, _b, n in expected:
        assert depth(n) in text
