"""A report over a period with a rain-gauge gap lists the gap as UNKNOWN with its duration and never
reports that window as dry; a day with a gap shows its rain as a lower bound.

The store holds a gauge that polled every minute on 2026-06-10 (local, New York) except from
09:00 to 14:00 EDT, when it sent nothing, with 7 tips at 16:00. By hand: the gap runs from the last
reading (08:59) to the first after it (14:00): 5 h 01 min of unknown rain; the day is 24 h long; its
total is 7 tips = 0.07 in, shown ">= 7 tips = 0.07 in".
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.stores.sqlite import SqliteStore
from tests.report_support import GAP_SITE, NY, gap_store, need_poppler, pdf_words, run_cli


def _gauge_every_minute(path: Path, start: datetime, stop: datetime, tips_at: Callable[[datetime], int | None]) -> None:
    """The gauge's reading of every minute in ``[start, stop)``: ``tips_at(t)`` tips (``None``: nothing sent)."""
    readings, t, seq = [], start, 0
    while t < stop:
        tips = tips_at(t)
        if tips is not None:
            seq += 1
            readings.append(Reading(site="gap-site", device="rain-1", quantity="rain_tips", value=tips, unit=TIP_UNIT,
                                    time=t, gateway="gw-1", boot="b1", seq=seq))
        t += timedelta(minutes=1)
    with SqliteStore(path) as store:
        store.write_readings(readings)


def _csv_report(tmp_path: Path, start: str, until: str) -> list[dict[str, str]]:
    site = tmp_path / "site.yaml"
    site.write_text(GAP_SITE, encoding="utf-8")
    out = tmp_path / "r.csv"
    run_cli("report", "--site", str(site), "--store", f"sqlite:///{tmp_path}/store.db", "--no-work-orders",
            "--from", start, "--until", until, "-o", str(out))
    return list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))


def test_gauge_gap_is_unknown_never_dry(tmp_path: Path) -> None:
    need_poppler()
    site = tmp_path / "site.yaml"
    site.write_text(GAP_SITE, encoding="utf-8")
    gap_store(tmp_path / "store.db")
    common = ["report", "--site", str(site), "--store", f"sqlite:///{tmp_path}/store.db", "--no-work-orders",
              "--from", "2026-06-10", "--until", "2026-06-11"]
    out = tmp_path / "r.csv"
    run_cli(*common, "-o", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    unknown = [r for r in rows if r["section"] == "unknown"]
    assert [(r["item"], r["start"], r["end"], r["duration"], r["status"]) for r in unknown] == [
        ("rain", "2026-06-10T08:59:00-04:00", "2026-06-10T14:00:00-04:00", "5 h 01 min", "UNKNOWN")]
    (day,) = [r for r in rows if r["section"] == "day"]
    assert day["id"] == "2026-06-10" and day["tips"] == "7" and day["depth"] == ">= 7 tips = 0.07 in"
    assert day["duration"] == "5 h 01 min"
    assert next(r for r in rows if r["section"] == "storm")["qualifying"] == "no"
    pdf = tmp_path / "r.pdf"
    run_cli(*common, "-o", str(pdf))
    text = pdf_words(pdf)
    # the rain calendar's cell of 10 June: a lower bound of the gauge's 7 tips (0.01 in each)
    assert "UNKNOWN" in text and "5 h 01 min" in text and ">= 0.07" in text
    assert "no work-order state (--no-work-orders)" in text


PAIR_SITE = """
site: {id: pair-site, name: Pair Site, jurisdiction: ch133, timezone: America/New_York}
gateway_id: gw-1
devices:
  - {id: rain-1, profile: tipping_bucket_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
  - {id: turb-up, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1, unit_id: 2}}
  - {id: turb-down, profile: yosemitech_y511, transport: {kind: modbus-tcp, host: 127.0.0.1, unit_id: 3}}
rain_gauge: rain-1
turbidity_pair: {upstream: turb-up, downstream: turb-down}
"""


def _pair_store(path: Path, rain: tuple[datetime, datetime], probes: tuple[datetime, datetime]) -> None:
    """Every minute: the gauge's 0 tips in ``[rain)``, both probes' 12.0 NTU in ``[probes)``."""
    readings, seq = [], 0
    for device, quantity, value, unit, (t, stop) in (("rain-1", "rain_tips", 0, TIP_UNIT, rain),
                                                      ("turb-up", "turbidity", 12.0, "NTU", probes),
                                                      ("turb-down", "turbidity", 12.0, "NTU", probes)):
        while t < stop:
            seq += 1
            readings.append(Reading(site="pair-site", device=device, quantity=quantity, value=value, unit=unit,
                                    time=t, gateway="gw-1", boot="b1", seq=seq))
            t += timedelta(minutes=1)
    with SqliteStore(path) as store:
        store.write_readings(readings)


def _unknown_rows(tmp_path: Path, *period: str) -> list[tuple[str, str, str, str, str]]:
    site = tmp_path / "site.yaml"
    site.write_text(PAIR_SITE, encoding="utf-8")
    out = tmp_path / "r.csv"
    run_cli("report", "--site", str(site), "--store", f"sqlite:///{tmp_path}/store.db", "--no-work-orders",
            "--from", period[0], "--until", period[1], "-o", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    return sorted((r["item"], r["id"], r["start"], r["end"], r["duration"]) for r in rows if r["section"] == "unknown")


def test_every_device_silent_to_the_end_is_unknown_turbidity_too(tmp_path: Path) -> None:
    # The demo's ending: every device's last reading at 07:59 EDT on 2 June, the period to 3 June
    # 00:00 EDT. By hand: 07:59 -> 24:00 is 16 h 01 min without any reading -- rain unknown, and R2
    # judged no window after its last one (no later reading to close it): both probes unknown.
    day = datetime(2026, 6, 1, tzinfo=NY)
    last = day + timedelta(days=1, hours=7, minutes=59)
    _pair_store(tmp_path / "store.db", (day - timedelta(days=1), last + timedelta(minutes=1)),
                (day - timedelta(days=1), last + timedelta(minutes=1)))
    end = "2026-06-03T00:00:00-04:00"
    assert _unknown_rows(tmp_path, "2026-06-01", "2026-06-03") == [
        ("rain", "rain-1", "2026-06-02T07:59:00-04:00", end, "16 h 01 min"),
        ("turbidity contrast", "turb-down", "2026-06-02T07:59:00-04:00", end, "16 h 01 min"),
        ("turbidity contrast", "turb-up", "2026-06-02T07:59:00-04:00", end, "16 h 01 min")]


def test_probes_starting_late_are_unknown_from_the_period_start(tmp_path: Path) -> None:
    # The gauge reports all day; the probes' first readings come at 06:00 EDT on the period's first
    # day and run past its end. By hand: 00:00 -> 06:00 is 6 h 00 min with no probe reading and no
    # window R2 judged (it starts with its first reading); nothing else is unknown.
    day = datetime(2026, 6, 1, tzinfo=NY)
    _pair_store(tmp_path / "store.db", (day - timedelta(days=1), day + timedelta(days=2)),
                (day + timedelta(hours=6), day + timedelta(days=2)))
    assert _unknown_rows(tmp_path, "2026-06-01", "2026-06-02") == [
        ("turbidity contrast", "turb-down", "2026-06-01T00:00:00-04:00", "2026-06-01T06:00:00-04:00", "6 h 00 min"),
        ("turbidity contrast", "turb-up", "2026-06-01T00:00:00-04:00", "2026-06-01T06:00:00-04:00", "6 h 00 min")]


def test_a_day_without_any_gauge_data_is_unknown_not_zero(tmp_path: Path) -> None:
    # The gauge polls every minute from 10 June on and sends nothing on 11 June (local). By hand:
    # the gap runs from 10 June 23:59 to 12 June 00:00, so 11 June (24 h) has no gauge data at all:
    # its rain is UNKNOWN -- no ">= 0 tips = 0.00 in" lower bound, no tip count -- while 10 June
    # (1 min of it in the gap) keeps its lower bound.
    day = datetime(2026, 6, 10, tzinfo=NY)
    # past the period's end and the storm rule's dry gap after it
    _gauge_every_minute(tmp_path / "store.db", day, day + timedelta(days=6),
                        lambda t: None if t.astimezone(NY).day == 11 else 0)
    rows = _csv_report(tmp_path, "2026-06-10", "2026-06-13")
    days = {r["id"]: (r["tips"], r["depth"], r["depth_in"], r["duration"], r["status"])
            for r in rows if r["section"] == "day"}
    assert days == {"2026-06-10": ("0", ">= 0 tips = 0.00 in", "0.00", "1 min", ""),
                    "2026-06-11": ("", "UNKNOWN", "", "1 d 0 h 00 min", "UNKNOWN"),
                    "2026-06-12": ("0", "0 tips = 0.00 in", "0.00", "", "")}
    run_cli("report", "--site", str(tmp_path / "site.yaml"), "--store", f"sqlite:///{tmp_path}/store.db",
            "--no-work-orders", "--from", "2026-06-10", "--until", "2026-06-13", "-o", str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")

    def cell(day: int) -> str:  # the rain calendar's one month (June 2026): a row per day of the month
        row = html[html.index(f'<tr><th class="num">{day}</th>'):]
        return row[:row.index("</tr>")].removeprefix(f'<tr><th class="num">{day}</th>')

    assert cell(11) == '<td class="num unknown">UNKNOWN</td>'
    assert cell(10) == '<td class="num unknown">&gt;= 0.00</td>' and cell(12) == '<td class="num">0.00</td>'


def test_a_storm_with_a_gauge_gap_inside_is_a_lower_bound(tmp_path: Path) -> None:
    # The gauge polls every minute; on 10 June (EDT) it counts 1 tip a minute 10:00-10:29 (30 tips),
    # sends nothing 10:30-10:49 (readings lost: no counter catch-up names them), then 1 tip a minute
    # 10:50-11:09 (20 tips, the last at 11:09). By hand: one storm (the gap is far shorter than the 6 h dry gap) of 50
    # counted tips = 0.50 in at 0.01 in a tip -- it qualifies (Ch. 133 §133-7A(2): 0.5 in), and with
    # the rain of 10:29-10:50 unknown it was AT LEAST that deep. On 11 June the same with 10 + 10
    # tips (nothing sent 10:10-10:49, the last tip at 10:59): a storm of at least 0.20 in, below the
    # threshold -- a lower bound all the same. The gaps run from the last reading before to the first after.
    wet: dict[datetime, int | None] = {}
    for day, before, after in ((10, 30, 20), (11, 10, 10)):
        start = datetime(2026, 6, day, 10, tzinfo=NY)
        wet.update({start + timedelta(minutes=k): 1 for k in range(before)})
        wet.update({start + timedelta(minutes=50 + k): 1 for k in range(after)})
        wet.update({start + timedelta(minutes=k): None for k in range(before, 50)})  # lost
    _gauge_every_minute(tmp_path / "store.db", datetime(2026, 6, 9, tzinfo=NY), datetime(2026, 6, 13, tzinfo=NY),
                        lambda t: wet.get(t, 0))
    rows = _csv_report(tmp_path, "2026-06-10", "2026-06-12")
    storms = [(r["start"], r["end"], r["tips"], r["depth"], r["qualifying"]) for r in rows if r["section"] == "storm"]
    assert storms == [("2026-06-10T10:00:00-04:00", "2026-06-10T11:09:00-04:00", "50", ">= 50 tips = 0.50 in", "yes"),
                      ("2026-06-11T10:00:00-04:00", "2026-06-11T10:59:00-04:00", "20", ">= 20 tips = 0.20 in", "no")]
    notes = [r["note"] for r in rows if r["section"] == "storm"]
    assert all("its depth is a lower bound" in n for n in notes)
    gaps = [(r["start"], r["end"]) for r in rows if r["section"] == "unknown"]
    assert gaps == [("2026-06-10T10:29:00-04:00", "2026-06-10T10:50:00-04:00"),
                    ("2026-06-11T10:09:00-04:00", "2026-06-11T10:50:00-04:00")]


def test_a_storm_running_past_the_period_is_reported_whole(tmp_path: Path) -> None:
    # The gauge polls every minute; a tip every 10 minutes from 1 June 10:00 EDT to 2 June 01:00
    # EDT (91 tips: never a 6 h dry gap), then dry. A report of 1 June 12:00-13:00 EDT touches the
    # storm: by hand it is the whole storm -- 91 tips = 0.91 in, qualifying (0.5 in, Ch. 133
    # §133-7A(2)), its end confirmed by the dry gauge, the inspection due 24 h after the last tip
    # (3 June 01:00 EDT) -- not the 60 tips "in progress" it had counted by 20:00, where the rules used
    # to stop (the period's end, the 6 h dry gap and an hour).
    first, last = datetime(2026, 6, 1, 10, tzinfo=NY), datetime(2026, 6, 2, 1, tzinfo=NY)
    _gauge_every_minute(tmp_path / "store.db", datetime(2026, 5, 31, tzinfo=NY), datetime(2026, 6, 3, tzinfo=NY),
                        lambda t: 1 if first <= t <= last and t.minute % 10 == 0 else 0)
    rows = _csv_report(tmp_path, "2026-06-01T12:00", "2026-06-01T13:00")
    (storm,) = [r for r in rows if r["section"] == "storm"]
    assert (storm["start"], storm["end"], storm["tips"], storm["depth"], storm["qualifying"], storm["status"]) == (
        "2026-06-01T10:00:00-04:00", "2026-06-02T01:00:00-04:00", "91", "91 tips = 0.91 in", "yes", "confirmed")
    assert storm["due"] == "2026-06-03T01:00:00-04:00"
    assert "started before the period" in storm["note"] and "continues after the period" in storm["note"]
