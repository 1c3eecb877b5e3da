"""The pH rule end to end on real Mosquitto: a simulated Yosemitech Y532 on an RS-485 line (Modbus RTU on
a pseudo-terminal) → the gateway → MQTT → ingest (SQLite) → the ca-cgp-2022 alert engine.

Scenario ``concrete-washout`` on its site (examples/ca-cgp-site.yaml, America/Los_Angeles): Tue 2 June
2026 runs from local midnight; from 10:00 to 17:00 PDT half the water at outfall 1 is pH-12 washout
water, flushing out with a 20-minute time constant afterwards (docs/reference/hydrology.md).

Expected by hand:
"""

# * pH at the probe = the pH of the mix, by hydroxide: 14 + log10(f·10⁻²) while f ≫ 10⁻⁵ -- 11.70 at
#   f = 0.5 -- and the runoff's 7.2 ± 0.05 otherwise; the local day's arithmetic mean of those values at
#   the stored sample times comes to about 8.85, above the upper pH NAL 8.5 (docs/reference/permits/
#   ca-cgp-2022.md), so the day ending Wed 3 June 00:00 PDT (07:00 UTC) opens an ``nal_report`` due 10
#   local days after it: Sat 13 June 2026 00:00 PDT = 07:00 UTC (the pack's unconfirmed default);
# * turbidity never approaches the 250 NTU NAL: every sample ≤ 8.4 + 1 + 30 NTU per in/h × the 0.3 in
#   shower falling in at most one 15-minute window (1.2 in/h) = 45.4 NTU;
# * the 0.3-in shower (30 tips of 0.01 in) is no qualifying precipitation event (0.5 in = 50 tips);
# * temperature compensation on the wire: each poll's stored pH = 7 − E / (0.19842 mV/K × T) from the
#   same poll's electrode potential E and temperature T (sensors.md, "pH probes").

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.pipeline import Pipeline
from stormwatch.clock import WallClock
from stormwatch.config import load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.stores.urls import open_store
from tests.conftest import REPO

DAY_START = datetime(2026, 6, 2, 7, 0, tzinfo=UTC)  # Tue 2 June 2026 00:00 PDT (UTC-7)
DAY_END = DAY_START + timedelta(hours=24)
POLL_S = 300  # ph-1's poll interval (examples/ca-cgp-site.yaml)


def ph_by_hand(t: datetime) -> float:
    """The pH at outfall 1, written from the scenario's numbers (not its code): shares by volume of
    washout water (pH 12: 10⁻² mol/L OH⁻) and runoff (pH 7.2), added as [OH⁻] − [H⁺]."""
    hours = (t - DAY_START).total_seconds() / 3600
    if hours < 10:
        share = 0.0
    elif hours < 17:
        share = 0.5
    else:
        share = 0.5 * math.exp(-(hours - 17) * 60 / 20)
    runoff = 7.2 + 0.05 * math.sin(2 * math.pi * hours * 60 / 131)
    excess = share * (1e-2 - 1e-12) + (1 - share) * (10 ** (runoff - 14) - 10 ** -runoff)
    h = (math.sqrt(excess**2 + 4e-14) - excess) / 2 if excess < 0 else 2e-14 / (excess + math.sqrt(excess**2 + 4e-14))
    return -math.log10(h)


@pytest.mark.timeout(400)
def test_concrete_washout_ph_nal_end_to_end_on_mosquitto(mosquitto_server, tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    scenario = load_scenario("concrete-washout")
    cfg = load_site(REPO / "examples" / "ca-cgp-site.yaml", profiles)
    assert scenario.start == DAY_START
    result = Pipeline(cfg, profiles, scenario, tmp_path, broker_url=mosquitto_server.url).run()  # lockstep
    # nothing of this site is refused; a broker shared by the whole test session may still hold other
    # tests' sites' readings queued for this ingest's persistent session: those are unknown_site
    with closing(sqlite3.connect(tmp_path / "stormwatch.db")) as db:
        refused = db.execute("SELECT reason, topic FROM deadletter").fetchall()
    assert all(reason == "unknown_site" and not topic.startswith(f"stormwatch/v1/{cfg.site.id}/")
               for reason, topic in refused), refused[:3]
    assert result.readings_stored == result.readings_made

    store = open_store(f"sqlite:///{tmp_path / 'stormwatch.db'}")
    readings = store.query_readings(cfg.site.id)
    store.close()
    by_q: dict[str, dict[datetime, float]] = {}
    for r in readings:
        if r.device == "ph-1":
            by_q.setdefault(r.quantity, {})[r.time] = float(r.value)
            assert not r.flags, r  # 11.70 is inside the probe's 2-12 range
    ph = by_q["ph"]
    day = {t: v for t, v in ph.items() if DAY_START <= t < DAY_END}
    # one sample per 300-s poll: 288 in the day
    assert result.missed_slots == 0
    assert len(day) == 288 and all((t - DAY_START).total_seconds() % POLL_S == 0 for t in day)
    # A simulated device answers with the scenario's value at the simulated moment it is asked: on the
    # lockstep clock that is its slot plus the clock time of what the RS-485 line does first in that
    # poll (the Y511's wiper command and wait, the probes' warm-ups), always within the poll interval.
    for t, v in day.items():
        window = [ph_by_hand(t + timedelta(seconds=s)) for s in range(0, POLL_S + 1, 5)]
        assert min(window) - 1e-4 <= v <= max(window) + 1e-4, (t, v, window[0])
    at_noon = DAY_START + timedelta(hours=12)
    assert ph[at_noon] == pytest.approx(14 + math.log10(0.005), abs=1e-4)  # 11.699, the plateau
    # temperature compensation: pH from the same poll's potential and temperature, by Nernst, on the
    # plateau (10:00-17:00 PDT: pH steady while the poll's three values are read one after the other),
    # where a slope fixed at 25 °C would be off by (11.7 - 7)·(1 - 291/298) ≈ 0.11 at 18 °C
    first, last = DAY_START + timedelta(hours=10), DAY_START + timedelta(hours=17, seconds=-POLL_S)
    plateau = [t for t in day if first <= t < last]
    assert len(plateau) == 84 - 1  # 7 h of 300-s slots, less the last
    for t in plateau:
        e, temp = by_q["electrode_potential"][t], by_q["temperature"][t]
        assert day[t] == pytest.approx(7 - e / (0.19842 * (273.15 + temp)), abs=2e-4), t
        assert abs(day[t] - (7 - e / (0.19842 * 298.15))) > 0.08

    mean = math.fsum(day.values()) / len(day)
    hand_mean = math.fsum(ph_by_hand(t) for t in day) / len(day)
    assert 8.8 < hand_mean < 8.9  # about 8.85: above the upper NAL 8.5
    assert mean == pytest.approx(hand_mean, abs=0.02)  # the lag above, on the falling tail only

    nal = [e for e in result.events if e.kind.startswith("nal_")]
    assert [(e.kind, e.rule) for e in nal] == [("nal_exceedance", "NALph")]  # no turbidity NAL, no undetermined day
    (e,) = nal
    d = e.details
    assert (d.discharge_point, d.quantity, d.day, d.samples, d.unit) == (  # type: ignore[attr-defined]
        "outfall-1", "ph", "2026-06-02", len(day), "[pH]")
    assert d.daily_average == pytest.approx(mean, abs=1e-9)  # type: ignore[attr-defined]
    assert (d.lower, d.upper) == (6.5, 8.5)  # type: ignore[attr-defined]
    assert e.event_time == DAY_END
    assert e.due_at == datetime(2026, 6, 13, 7, 0, tzinfo=UTC)  # 10 local days: Sat 13 June 00:00 PDT
    assert e.citation == "CA CGP Order WQ 2022-0057-DWQ, NAL pH 6.5-8.5"

    # the day's turbidity stays far below the 250 NTU NAL (bound by hand: 45.4 NTU)
    turbidity = [float(r.value) for r in readings if r.device == "turb-1" and r.quantity == "turbidity"]
    assert turbidity and max(turbidity) < 45.4
    # the 0.3-in shower: 30 tips, no qualifying precipitation event
    assert result.stored_tips == 30
    assert not [e for e in result.events if e.kind in ("storm_qualified", "storm_inspection_due")]

    book = WorkOrders(tmp_path / "alerts.db", WallClock())
    try:
        orders = book.list(site=cfg.site.id)
    finally:
        book.close()
    assert [(o.kind, o.rule, o.due_at) for o in orders] == [("nal_report", "NALph", e.due_at)]
    assert orders[0].id == e.work_order
