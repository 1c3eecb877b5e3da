"""The desk's portfolio shows every discharge point's turbidity and every basin's storage of a
multi-point site (examples/two-outfalls.yaml, issue 16), each named by its id.

By hand, at 12:00 UTC on 1 June 2026 with a reading a minute for the last 10 minutes:

* outfall-1: down 20.0 / up 8.0 NTU (Washington, background <= 50 NTU: allowed 8.0 + 5 = 13.0 NTU):
  above the allowed value, not yet sustained (no contrast event): warn;
* outfall-2: down 9.0 / up 8.0 NTU (the shared background probe): within 13.0 NTU: ok;
* basin-1 (40 x 20 ft, 3:1, H = 4 ft; sensor 8 ft above the floor): 1,828.8 mm to the sediment is
  2.00 ft of it; V(2) = 800·2 + 60·3·4 + 4/3·9·8 = 2,416 ft³ of V(4) = 6,848 ft³: 35.3 %;
* trap-2 (table [1,300] [2,800], H = 3 ft, V(H) = 1,500 ft³; sensor at 6 ft): 1,371.6 mm is 1.50 ft,
  300 + 0.5·500 = 550 ft³: 36.7 %. Both below the 40 % warning: ok.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from stormwatch.config import load_site
from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.web.overview import portfolio, site_model

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "two-outfalls.yaml"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
VALUES = {("turb-up", "turbidity", "NTU"): 8.0, ("turb-down-1", "turbidity", "NTU"): 20.0,
          ("turb-down-2", "turbidity", "NTU"): 9.0, ("basin-level-1", "distance", "mm"): 1828.8,
          ("basin-level-2", "distance", "mm"): 1371.6, ("rain-1", "rain_tips", TIP_UNIT): 0}


def test_portfolio_shows_each_outfall_and_basin(tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    site = site_model(load_site(EXAMPLE, profiles), profiles, str(EXAMPLE))
    readings, seq = [], 0
    for i in range(10):
        t = NOW - timedelta(minutes=10 - i)
        for (device, quantity, unit), value in VALUES.items():
            seq += 1
            readings.append(Reading(site=site.id, device=device, quantity=quantity, value=value, unit=unit, time=t,
                                    gateway="gw-millcreek-1", boot="b1", seq=seq))
    with SqliteStore(tmp_path / "store.db") as store:
        store.write_readings(readings)
        (row,) = portfolio([site], store, [], NOW).rows
    assert row.turbidity.text == "outfall-1: down 20.0 / up 8.0 NTU; outfall-2: down 9.0 / up 8.0 NTU"
    assert row.turbidity.state == "warn"
    assert row.turbidity.detail.startswith("outfall-1: above the allowed 13.0 NTU (not yet sustained); "
                                           "outfall-2: allowed ≤ 13.0 NTU")
    assert row.basin.text == "basin-1: 35.3 %; trap-2: 36.7 %"
    assert row.basin.state == "ok"
    assert row.basin.detail == ("basin-1: sediment 2.00 ft; cleanout at 50.0 %; "
                                "trap-2: sediment 1.50 ft; cleanout at 50.0 %")
    assert row.silent == ()
