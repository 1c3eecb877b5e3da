"""Builders shared by the alert tests (no tests here): sites, readings, a fixed clock, the 10-hour
scenario, the basin's half-volume depth by hand and the permits' site documents."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary, profiles_dir
from tests.names import run_unique

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
#: The permits' sites' zone.
LA = "America/Los_Angeles"


def site(jurisdiction: str = "ch133", *, rules: dict[str, Any] | None = None, basin: dict[str, Any] | None = None,
         gauge_profile: str = "tipping_bucket_modbus_counter", timezone: str = "America/New_York") -> SiteConfig:
    return parse_site(site_doc(jurisdiction, rules=rules, basin=basin, gauge_profile=gauge_profile, timezone=timezone),
                      "test-site.yaml")


def site_doc(jurisdiction: str = "ch133", *, rules: dict[str, Any] | None = None, basin: dict[str, Any] | None = None,
             gauge_profile: str = "tipping_bucket_modbus_counter", timezone: str = "America/New_York",
             rain_poll_s: float = 600) -> dict[str, Any]:
    """The test site as a YAML-ready document (write it for the CLI)."""
    return {
        "site": {"id": "s1", "jurisdiction": jurisdiction, "timezone": timezone},
        "gateway_id": "gw",
        "devices": [
            {"id": "rain", "profile": gauge_profile, "transport": {"kind": "modbus-tcp", "host": "h"},
             "poll_interval_s": rain_poll_s},  # the tests' dry polls come every 10 min
            {"id": "up", "profile": "yosemitech_y511", "transport": {"kind": "modbus-tcp", "host": "h"}},
            {"id": "down", "profile": "yosemitech_y511", "transport": {"kind": "modbus-tcp", "host": "h"}},
            {"id": "lvl", "profile": "maxbotix_hrxl", "transport": {"kind": "serial", "port": "/dev/null"}},
            {"id": "press", "profile": "keller_acculevel", "transport": {"kind": "modbus-tcp", "host": "h"}},
        ],
        "rain_gauge": "rain",
        "turbidity_pair": {"upstream": "up", "downstream": "down"},
        "basin": basin or {"device": "lvl", "sensor_mount_height_ft": 8.0,
                           "geometry": {"bottom_length_ft": 40, "bottom_width_ft": 20, "side_slope_z": 3,
                                        "design_height_ft": 4}},
        "rules": rules or {},
    }


def metric_gauge_profiles(tmp: Path) -> ProfileLibrary:
    """The repository profiles plus ``tipping_bucket_02mm`` (0.2 mm per tip)."""
    for p in profiles_dir().glob("*.yaml"):
        shutil.copy(p, tmp / p.name)
    text = (profiles_dir() / "tipping_bucket_modbus_counter.yaml").read_text()
    text = text.replace("model: tipping_bucket_modbus_counter", "model: tipping_bucket_02mm")
    text = text.replace('resolution: "0.01 in"', 'resolution: "0.2 mm"')
    (tmp / "tipping_bucket_02mm.yaml").write_text(text)
    return ProfileLibrary(tmp)


@dataclass
class Feeder:
    """Makes readings with increasing seq for one gateway boot."""

    site: str = "s1"
    gateway: str = "gw"
    boot: str = "b1"
    seq: int = 0
    made: list[Reading] = field(default_factory=list)

    def __call__(self, device: str, quantity: str, value: float | int, unit: str, time: datetime,
                 flags: tuple[str, ...] = ()) -> Reading:
        self.seq += 1
        r = Reading(site=self.site, device=device, quantity=quantity, value=value, unit=unit, time=time,
                    gateway=self.gateway, boot=self.boot, seq=self.seq, flags=flags)
        self.made.append(r)
        return r

    def tips(self, n: int, time: datetime) -> Reading:
        return self("rain", "rain_tips", n, "{tip}", time)


@contextmanager
def live_service(cfg: SiteConfig, broker_url: str, tmp_path: Path, clock: ManualClock,
                 client_id: str, **options: Any) -> Iterator[tuple[Any, list[Event], Any]]:
    """A running AlertService on ``broker_url`` with a SQLite store: yields (service, events seen, store);
    ``options`` go to the AlertService."""
    from stormwatch.alerts.service import AlertService
    from stormwatch.stores.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "store.db")
    seen: list[Event] = []
    service = AlertService([cfg], ProfileLibrary(), broker_url, store, tmp_path / "state.db", clock,
                           client_id=run_unique(client_id), lateness_s=120, on_event=seen.append, overdue_check_s=0.1,
                           **options)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        assert service.connected.wait(10)
        yield service, seen, store
    finally:
        service.stop()
        runner.join(10)
        store.close()


# The alert tests' 10-hour scenario (tests/alerts/test_engine_backfill.py and the live tests that
# replay it).
HOURS = 10


def scenario(feed: Feeder, hours: int = HOURS) -> list[Reading]:
    """1-minute readings: a 60-tip storm, a turbidity plume, sediment rising past half the basin."""
    out: list[Reading] = []
    for i in range(hours * 60):
        t = T0 + i * MIN
        out.append(feed.tips(1 if i < 60 else 0, t))
        out.append(feed("up", "turbidity", 20.0, "NTU", t))
        out.append(feed("down", "turbidity", 40.0 if 30 <= i < 60 else 21.0, "NTU", t))
        depth_ft = 1.0 + 2.0 * i / (hours * 60)  # 1 ft -> 3 ft of sediment
        out.append(feed("lvl", "distance", round((8.0 - depth_ft) * 304.8, 1), "mm", t))
    return out


def keys(events: list[Event]) -> set[tuple[str, str, object]]:
    return {(e.kind, e.occurrence, e.due_at) for e in events}


def live(cfg, readings: list[Reading], book: WorkOrders | None, **options) -> tuple[Engine, list[Event]]:
    engine = Engine.for_site(cfg, ProfileLibrary(), book, 300, **options)
    events: list[Event] = []
    for r in readings:
        events += engine.feed(r)
    return engine, events + engine.flush()


# A rain gauge silent for three hours (tests/alerts/test_engine_gaps.py).
SILENT_FROM = T0 + 59 * MIN  # last reading before the outage


BACK_AT = T0 + 240 * MIN  # first reading after it: 3 h 1 min later


def minute(feed: Feeder, i: int) -> list[Reading]:
    t = T0 + i * MIN
    return [feed.tips(0, t), feed("up", "turbidity", 12.0, "NTU", t), feed("down", "turbidity", 13.0, "NTU", t)]


def storm_due(occurrence: str = "storm:2026-06-01T12:00:00Z") -> Event:
    return Event(kind="storm_inspection_due", site="s1", event_time=T0 + timedelta(hours=7), rule="R1",
                 citation="Ch. 196 §196-9B", occurrence=occurrence, due_at=T0 + timedelta(hours=25), tips=50,
                 depth_in=0.5, evidence=[{"time": "2026-06-01T12:00:00Z", "tips": 50}])


# The basin of site(): 40 x 20 ft, 3:1 sides, 4 ft high, its level sensor 8 ft above the bottom.
MOUNT_FT = 8.0


def half_volume_depth() -> float:
    def area(y: float) -> float:
        return (40 + 6 * y) * (20 + 6 * y)

    def vol(h: float) -> float:
        return h / 6 * (area(0) + 4 * area(h / 2) + area(h))

    d = 2.0
    for _ in range(60):
        d -= (vol(d) - 0.5 * vol(4.0)) / area(d)
    return d


D = half_volume_depth()


def distance_mm(depth_ft: float) -> float:
    return (MOUNT_FT - depth_ft) * 304.8


def dev(dev_id: str, profile: str = "yosemitech_y511") -> dict[str, Any]:
    return {"id": dev_id, "profile": profile, "transport": {"kind": "modbus-tcp", "host": "h"}}


def ca_doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "site": {"id": "s1", "jurisdiction": "ca-cgp-2022", "timezone": LA},
        "gateway_id": "gw",
        "devices": [{**dev("rain", "tipping_bucket_modbus_counter"), "poll_interval_s": 600},
                    dev("turb-1"), dev("turb-2")],
        "rain_gauge": "rain",
        "discharge_points": [{"id": "outfall-1", "downstream": "turb-1"},
                             {"id": "outfall-2", "downstream": "turb-2"}],
    }
    doc.update(extra)
    return doc


def wa_doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "site": {"id": "s1", "jurisdiction": "wa-cswgp", "timezone": LA},
        "gateway_id": "gw",
        "devices": [{**dev("rain", "tipping_bucket_modbus_counter"), "poll_interval_s": 600}, dev("turb-1")],
        "rain_gauge": "rain",
        "discharge_points": [{"id": "outfall-1", "name": "Outfall 1 to Thornton Creek", "downstream": "turb-1"},
                             {"id": "outfall-2"}],  # sampled by hand only
    }
    doc.update(extra)
    return doc
