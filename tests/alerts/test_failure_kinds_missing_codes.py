"""Failure kind #25 (docs/reference/failure-kinds.md), "Missing-value codes averaged in":
``[12, -9999, 14]`` NTU has mean 13 over 2 samples, not -3324.3 over 3; the same for medians and
daily averages.

The code arrives as the gateway publishes it: its value with the quality flags the gateway's QC
gives it (stormwatch.gateway.qc.check_value with the profile's range and the code among its
``error_codes``: ``out_of_range``, ``device_error``). Two mechanisms keep it out, each tested, live
(the engine fed reading by reading) and in a backfill from a store (``evaluate``'s code; the
readings are written to the store directly, as a store holding them anyway would give them):

* ``-9999``: a negative turbidity is impossible (stormwatch/physics.py): ingest dead-letters it
  (impossible_value) and the engine refuses it before any rule;
* ``9999`` (the same code, positive, as other loggers write it): physically possible, but flagged by
  the gateway -- and the rules leave flagged readings out (the daily average says so).

The expected values, by hand:

* R2's window median (Ch. 133, Washington criterion, alerts/packs/ch133.yaml: 5-min windows,
  sustained 15 min): background 7.5 NTU allows 7.5 + 5 = 12.5 NTU (WAC 173-201A-200, background
  <= 50 NTU); downstream 12 and 14 in each window have median (12 + 14) / 2 = 13 > 12.5 -- three
  windows in a row are a turbidity_contrast. With the -9999 counted the median of [-9999, 12, 14]
  would be 12 <= 12.5: nothing (with 9999 counted, 14: a contrast of 14.0 NTU).
* the daily average (CA CGP turbidity NAL, alerts/packs/ca-cgp-2022.yaml; the site sets the
  action level to 12.5 NTU and 2 samples a day): (12 + 14) / 2 = 13 > 12.5 over 2 samples, one
  flagged sample not counted -- an exceedance. With it counted: (12 - 9999 + 14) / 3 = -3324.3,
  no exceedance (with 9999: 3341.7 over 3 samples).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.backfill import evaluate
from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_site_pack
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import Event, Reading
from stormwatch.gateway.qc import check_value
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import Feeder, ca_doc, site

MISSING = -9999.0
CODES = pytest.mark.parametrize("code", [MISSING, 9999.0], ids=["minus-9999", "plus-9999"])
MIN = timedelta(minutes=1)
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a 5-min window boundary (windows align to UTC multiples)
DAY = datetime(2026, 6, 3, 7, 0, tzinfo=UTC)  # Wed 3 June 2026, midnight PDT
HOUR = timedelta(hours=1)


def gateway_flags(value: float, code: float = MISSING) -> tuple[str, ...]:
    """The flags the gateway's QC gives a Y511 turbidity value, ``code`` being the probe's 'no value' code."""
    modbus = ProfileLibrary().get("yosemitech_y511").modbus
    assert modbus is not None
    (point,) = [p for p in modbus.points if p.quantity == "turbidity"]
    verdict = check_value(value, value, point.valid_range, (code,))
    assert verdict.publish
    return verdict.flags


@CODES
def test_the_gateway_flags_the_code_and_nothing_else(code: float) -> None:
    assert gateway_flags(code, code) == ("out_of_range", "device_error")
    assert gateway_flags(12.0, code) == gateway_flags(14.0, code) == ()


def turbidity_readings(code: float) -> list[Reading]:
    """Three 5-min windows: upstream 7.5 NTU three times, downstream 12, -9999, 14; then a window
    later readings that close the third."""
    feed = Feeder()
    out: list[Reading] = []
    for w in range(4):
        start = T0 + 5 * w * MIN
        for i, down in enumerate((12.0, code, 14.0)):
            t = start + i * MIN
            out.append(feed("up", "turbidity", 7.5, "NTU", t))
            out.append(feed("down", "turbidity", down, "NTU", t, gateway_flags(down, code)))
    return out


def contrast(events: list[Event]) -> Event:
    (e,) = [e for e in events if e.kind == "turbidity_contrast"]
    return e


def check_contrast(e: Event) -> None:
    assert e.event_time == T0 + 15 * MIN  # the end of the third violating window
    assert "downstream median 13.0 NTU > allowed 12.5 NTU (background 7.5 NTU + 5 NTU) for 15 min" in e.message
    assert [w["downstream_median_ntu"] for w in e.evidence] == [13.0, 13.0, 13.0]
    assert [w["upstream_median_ntu"] for w in e.evidence] == [7.5, 7.5, 7.5]
    assert [[v for _, v in w["downstream"]] for w in e.evidence] == [[12.0, 14.0]] * 3  # 2 samples each


@CODES
def test_the_turbidity_median_leaves_the_code_out_live(tmp_path: Path, code: float) -> None:
    cfg = site("ch133")
    engine = Engine(cfg, ProfileLibrary(), load_site_pack(cfg), WorkOrders(tmp_path / "wo.db", ManualClock(T0)),
                    lateness_s=60)
    events: list[Event] = []
    for r in turbidity_readings(code):
        events += engine.feed(r)
    check_contrast(contrast(events))


def _stored(tmp_path: Path, readings: list[Reading]) -> SqliteStore:
    store = SqliteStore(tmp_path / "store.db")
    assert store.write_readings(readings) == len(readings)  # the -9999 is kept, with its flags
    return store


@CODES
def test_the_turbidity_median_leaves_the_code_out_in_a_backfill(tmp_path: Path, code: float) -> None:
    cfg = site("ch133")
    store = _stored(tmp_path, turbidity_readings(code))
    try:
        result = evaluate(cfg, ProfileLibrary(), store, T0, T0 + 30 * MIN)
    finally:
        store.close()
    check_contrast(contrast(result.events))


def ca_site() -> SiteConfig:
    doc = ca_doc(rules={"NALt": {"upper": 12.5, "min_samples_per_day": 2}})
    return parse_site(doc, "ca-site.yaml", ProfileLibrary())


def day_readings(code: float) -> list[Reading]:
    """Three samples at outfall-1 on Wed 3 June; a reading of the other point the next morning
    moves the backfill past local midnight (a backfill advances to its newest reading)."""
    feed = Feeder()
    day = [feed("turb-1", "turbidity", v, "NTU", DAY + (9 + i) * HOUR, gateway_flags(v, code))
           for i, v in enumerate((12.0, code, 14.0))]
    return [*day, feed("turb-2", "turbidity", 5.0, "NTU", DAY + 25 * HOUR)]


def check_average(events: list[Event], flagged_counted: bool) -> None:
    (e,) = [e for e in events if e.kind.startswith("nal_")]
    assert e.kind == "nal_exceedance"
    assert e.details.samples == 2  # type: ignore[attr-defined]
    assert e.details.daily_average == pytest.approx(13.0)  # type: ignore[attr-defined]
    left_out = " (1 flagged by quality control not counted)" if flagged_counted else ""
    assert f"daily average on Wed 03 Jun 2026 13.00 NTU of 2 samples{left_out} is above 12.5" in e.message


@CODES
def test_the_daily_average_is_13_over_2_samples_live(tmp_path: Path, code: float) -> None:
    cfg = ca_site()
    engine = Engine(cfg, ProfileLibrary(), load_site_pack(cfg), WorkOrders(tmp_path / "wo.db", ManualClock(DAY)),
                    lateness_s=0)
    events: list[Event] = []
    for r in day_readings(code):
        events += engine.feed(r)
    # -9999 is refused before the rule (physics); 9999 reaches it flagged and is not counted
    check_average(events + engine.advance_to(DAY + 24 * HOUR), flagged_counted=code > 0)


@CODES
def test_the_daily_average_is_13_over_2_samples_in_a_backfill(tmp_path: Path, code: float) -> None:
    store = _stored(tmp_path, day_readings(code))
    try:
        result = evaluate(ca_site(), ProfileLibrary(), store, DAY, DAY + 26 * HOUR)
    finally:
        store.close()
    check_average(result.events, flagged_counted=code > 0)
