"""California CGP (``ca-cgp-2022``): numeric action levels on daily averages, expected events derived by
hand from the text in hand (docs/reference/permits/ca-cgp-2022.md).

* Turbidity NAL 250 NTU; pH NAL 6.5-8.5; the daily average of a discharge point's samples, from at
  least three samples a day (fewer: undetermined, not compliant).
* Days are local calendar days of the site (America/Los_Angeles: PDT = UTC-7, PST = UTC-8; in 2026
  daylight saving ends Sun 1 November 02:00 local, so that day lasts 25 h).
* The exceedance report is due ``report_within_days`` (10, unconfirmed) local days after the day ends.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stormwatch.alerts.engine import Engine, EngineError
from stormwatch.alerts.packs import PackError, load_pack, load_site_pack
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import Feeder, ca_doc

# Wed 3 June 2026, local midnight = 07:00 UTC (PDT)
DAY = datetime(2026, 6, 3, 7, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def ca_engine(tmp_path: Path, doc: dict[str, Any] | None = None) -> tuple[Engine, WorkOrders]:
    cfg = parse_site(doc or ca_doc(), "ca-site.yaml", ProfileLibrary())
    book = WorkOrders(tmp_path / "wo.db", ManualClock(DAY))
    return Engine(cfg, ProfileLibrary(), load_site_pack(cfg), book, lateness_s=0), book


def samples(engine: Engine, feed: Feeder, device: str, quantity: str, unit: str,
            values: list[tuple[datetime, float]], flags: tuple[str, ...] = ()) -> list[Event]:
    out: list[Event] = []
    for t, v in values:
        out += engine.feed(feed(device, quantity, v, unit, t, flags))
    return out


def nal(events: list[Event]) -> list[Event]:
    return [e for e in events if e.kind.startswith("nal_")]


def test_three_samples_average_above_250_ntu_opens_a_report(tmp_path: Path) -> None:
    engine, book = ca_engine(tmp_path)
    feed = Feeder()
    # (200 + 260 + 300) / 3 = 253.33 NTU > 250
    events = samples(engine, feed, "turb-1", "turbidity", "NTU",
                     [(DAY + 9 * HOUR, 200.0), (DAY + 10 * HOUR, 260.0), (DAY + 11 * HOUR, 300.0)])
    assert nal(events) == []  # the day is not over
    events = engine.advance_to(DAY + 24 * HOUR)
    (e,) = nal(events)
    d = e.details
    assert e.kind == "nal_exceedance" and e.rule == "NALt"
    assert (d.discharge_point, d.day, d.samples, d.unit, d.upper) == ("outfall-1", "2026-06-03", 3, "NTU", 250)  # type: ignore[attr-defined]
    assert d.daily_average == pytest.approx(760 / 3)  # type: ignore[attr-defined]
    assert e.event_time == DAY + 24 * HOUR  # local midnight ending 3 June
    assert e.due_at == DAY + 24 * HOUR + 10 * 24 * HOUR  # 13 June 00:00 PDT, no DST change
    assert e.occurrence == "nal:outfall-1:turbidity:2026-06-03"
    assert e.unverified == ["min_samples_per_day=3", "report_within_days=10"]
    (order,) = [o for o in book.list() if o.rule == "NALt"]
    assert (order.kind, order.due_at) == ("nal_report", e.due_at)


def test_two_samples_are_undetermined_not_compliant(tmp_path: Path) -> None:
    engine, book = ca_engine(tmp_path)
    events = samples(engine, Feeder(), "turb-1", "turbidity", "NTU",
                     [(DAY + 9 * HOUR, 400.0), (DAY + 10 * HOUR, 400.0)])
    events += engine.advance_to(DAY + 24 * HOUR)
    (e,) = nal(events)
    assert e.kind == "nal_undetermined" and e.details.samples == 2 and e.details.daily_average is None  # type: ignore[attr-defined]
    assert "2 samples, at least 3 needed (not a compliant day)" in e.message
    assert [o for o in book.list() if o.rule == "NALt"] == []


def test_an_average_of_exactly_250_is_not_an_exceedance(tmp_path: Path) -> None:
    engine, _ = ca_engine(tmp_path)
    events = samples(engine, Feeder(), "turb-1", "turbidity", "NTU",
                     [(DAY + 9 * HOUR, 240.0), (DAY + 10 * HOUR, 250.0), (DAY + 11 * HOUR, 260.0)])
    assert nal(events + engine.advance_to(DAY + 24 * HOUR)) == []


def test_days_are_local_calendar_days(tmp_path: Path) -> None:
    # 22:00 and 23:00 PDT on 3 June, 01:00 PDT on 4 June: one UTC day (05:00, 06:00, 08:00 UTC on 4 June),
    # two local days -- 2 samples and 1 sample, both undetermined
    engine, _ = ca_engine(tmp_path)
    events = samples(engine, Feeder(), "turb-1", "turbidity", "NTU",
                     [(DAY + 22 * HOUR, 900.0), (DAY + 23 * HOUR, 900.0), (DAY + 25 * HOUR, 900.0)])
    events += engine.advance_to(DAY + 48 * HOUR)
    assert [(e.kind, e.details.day, e.details.samples) for e in nal(events)] == [  # type: ignore[attr-defined]
        ("nal_undetermined", "2026-06-03", 2), ("nal_undetermined", "2026-06-04", 1)]


def test_the_fall_back_day_lasts_25_hours(tmp_path: Path) -> None:
    # Sun 1 Nov 2026 starts 00:00 PDT = 07:00 UTC and ends Mon 2 Nov 00:00 PST = 08:00 UTC (25 h);
    # a sample at 23:30 PST (07:30 UTC on 2 Nov) still belongs to 1 November
    start = datetime(2026, 11, 1, 7, 0, tzinfo=UTC)
    engine, book = ca_engine(tmp_path)
    events = samples(engine, Feeder(), "turb-1", "turbidity", "NTU",
                     [(start + HOUR, 300.0), (start + 2 * HOUR, 300.0), (start + 24 * HOUR + 30 * timedelta(minutes=1),
                                                                          300.0)])
    assert nal(events + engine.advance_to(start + 24 * HOUR + 59 * timedelta(minutes=1))) == []
    (e,) = nal(engine.advance_to(start + 25 * HOUR))
    assert (e.kind, e.details.day, e.details.samples, e.event_time) == (  # type: ignore[attr-defined]
        "nal_exceedance", "2026-11-01", 3, start + 25 * HOUR)
    # 10 local days after Mon 2 Nov 00:00 PST: Thu 12 Nov 00:00 PST = 08:00 UTC (240 h, no change in between)
    assert e.due_at == datetime(2026, 11, 12, 8, 0, tzinfo=UTC)
    assert book.get(e.work_order).due_at == e.due_at  # type: ignore[arg-type]


def test_ph_outside_6_5_to_8_5_on_average(tmp_path: Path) -> None:
    engine, _ = ca_engine(tmp_path)
    feed = Feeder()
    # outfall-1: (6.0 + 6.5 + 6.8) / 3 = 6.433 < 6.5; outfall-2: (8.4 + 8.5 + 8.6) / 3 = 8.5, inside.
    # Manual grab samples from a hand meter are recorded against the discharge point's id.
    events = samples(engine, feed, "outfall-1", "ph", "[pH]", [(DAY + 9 * HOUR, 6.0), (DAY + 10 * HOUR, 6.5),
                                                              (DAY + 11 * HOUR, 6.8)])
    events += samples(engine, feed, "outfall-2", "ph", "[pH]", [(DAY + 9 * HOUR, 8.4), (DAY + 10 * HOUR, 8.5),
                                                               (DAY + 11 * HOUR, 8.6)])
    (e,) = nal(events + engine.advance_to(DAY + 24 * HOUR))
    assert (e.kind, e.rule, e.details.discharge_point) == ("nal_exceedance", "NALph", "outfall-1")  # type: ignore[attr-defined]
    assert e.details.daily_average == pytest.approx(19.3 / 3)  # type: ignore[attr-defined]
    assert "below 6.5 (action level 6.5-8.5 [pH])" in e.message
    assert e.unverified == ["average=arithmetic", "min_samples_per_day=3", "report_within_days=10"]


def test_hydrogen_ion_averaging_when_a_site_chooses_it(tmp_path: Path) -> None:
    # pH 6, 7, 8: arithmetic mean 7.0 (inside); hydrogen-ion mean (1e-6 + 1e-7 + 1e-8) / 3 = 3.7e-7 -> pH 6.432 (below)
    engine, _ = ca_engine(tmp_path, ca_doc(rules={"NALph": {"average": "hydrogen_ion"}}))
    events = samples(engine, Feeder(), "outfall-1", "ph", "[pH]",
                     [(DAY + 9 * HOUR, 6.0), (DAY + 10 * HOUR, 7.0), (DAY + 11 * HOUR, 8.0)])
    (e,) = nal(events + engine.advance_to(DAY + 24 * HOUR))
    assert e.details.daily_average == pytest.approx(6.4318, abs=1e-4)  # type: ignore[attr-defined]
    assert "average=hydrogen_ion" not in (e.unverified or [])  # the site set it: its own reading


def test_flagged_samples_do_not_count(tmp_path: Path) -> None:
    engine, _ = ca_engine(tmp_path)
    feed = Feeder()
    events = samples(engine, feed, "turb-2", "turbidity", "NTU", [(DAY + 9 * HOUR, 300.0), (DAY + 10 * HOUR, 300.0)])
    events += samples(engine, feed, "turb-2", "turbidity", "NTU", [(DAY + 11 * HOUR, 300.0)], flags=("spike",))
    (e,) = nal(events + engine.advance_to(DAY + 24 * HOUR))
    assert (e.kind, e.details.discharge_point, e.details.samples) == ("nal_undetermined", "outfall-2", 2)  # type: ignore[attr-defined]
    assert "1 flagged by quality control not counted" in e.message


def test_an_fnu_probe_is_refused_for_an_ntu_action_level(tmp_path: Path) -> None:
    doc = ca_doc()
    doc["devices"][1] = {"id": "turb-1", "profile": "ysi_exo_turbidity", "transport": {"kind": "serial",
                                                                                       "port": "/dev/null"}}
    with pytest.raises(EngineError, match="outfall-1's probe 'turb-1' reports turbidity in FNU"):
        ca_engine(tmp_path, doc)


def test_the_qualifying_precipitation_event_is_half_an_inch(tmp_path: Path) -> None:
    engine, _ = ca_engine(tmp_path)
    feed = Feeder()
    for i in range(50):  # 50 tips of 0.01 in, one a minute
        engine.feed(feed("rain", "rain_tips", 1, "{tip}", DAY + i * timedelta(minutes=1)))
    events = [e for e in engine.advance_to(DAY + 60 * HOUR) if e.rule == "R1"]
    (due,) = [e for e in events if e.kind == "storm_inspection_due"]
    assert due.details.tips == 50 and due.unverified == ["dry_gap_hours=48", "inspection_within_hours=48"]  # type: ignore[attr-defined]
    assert due.due_at == DAY + 49 * timedelta(minutes=1) + 48 * HOUR


@pytest.mark.parametrize(("entry", "problem"), [
    ({"quantity": "turbidity"}, "give the action level"),
    ({"quantity": "ph", "lower": 8.5, "upper": 6.5}, "lower (8.5) must be below upper (6.5)"),
    ({"quantity": "turbidity", "upper": 250, "average": "hydrogen_ion"}, "hydrogen_ion is for pH only"),
])
def test_bad_daily_average_entries_are_named(tmp_path: Path, entry: dict[str, Any], problem: str) -> None:
    (tmp_path / "x.yaml").write_text(
        "name: x\nrules:\n  N:\n    kind: daily_average\n    citation: c\n"
        + "".join(f"    {k}: {v}\n" for k, v in entry.items()), encoding="utf-8")
    with pytest.raises(PackError, match=re.escape(problem)):
        load_pack("x", directory=tmp_path)
