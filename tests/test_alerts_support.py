"""Builders shared by the alert tests (no tests here): sites, readings, a fixed clock."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stormwatch.clock import ManualClock
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary, profiles_dir
from tests.names import run_unique

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


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
