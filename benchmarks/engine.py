"""Benchmark: re-evaluate one year of 1-minute readings of one site through the alert engine.

The site is ``examples/site.yaml`` (Ch. 133 pack: R1 storm, R1w routine, R2 turbidity, R3 basin)
with every device polled once a minute: a rain gauge (tip counts, storms of whole tips every few
days), two turbidity probes (upstream/downstream, with plumes) and an ultrasonic level sensor over
the sediment basin -- 4 x 525,600 = 2,102,400 readings. This is the re-evaluation path
(``stormwatch evaluate``): readings in event-time order into :meth:`stormwatch.alerts.engine.Engine.feed`,
then :meth:`~stormwatch.alerts.engine.Engine.flush`. Readings are generated in memory one day at a time and
only the engine is timed. Runs on loopback/in-process only; bounded by ``--max-seconds``.

Run: ``python benchmarks/engine.py [--days 365] [--max-seconds 300] [--profile]``. The last line is
one JSON object with ``readings``, ``seconds``, ``readings_per_s`` (bar: >= 200,000 readings/s).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import math
import pstats
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import describe, machine  # noqa: E402
from stormwatch.alerts.engine import Engine  # noqa: E402
from stormwatch.config import load_site  # noqa: E402
from stormwatch.contract import Reading  # noqa: E402
from stormwatch.profiles import ProfileLibrary  # noqa: E402

START = datetime(2025, 1, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)


def day_readings(cfg_ids: dict[str, str], day: int, seq0: int) -> list[Reading]:
    """One day of 1-minute readings of the four devices (deterministic; storms every 5th day)."""
    out: list[Reading] = []
    seq = seq0
    base = START + timedelta(days=day)
    storm = day % 5 == 0
    for i in range(1440):
        t = base + i * MIN
        tips = (1 if i % 3 == 0 else 0) if storm and 600 <= i < 780 else 0  # 60 tips = 0.60 in
        up = 12.0 + 3.0 * math.sin(i / 97.0)
        down = up + (9.0 if storm and 660 <= i < 720 else 2.0)
        dist = 8.0 * 304.8 - (0.5 + 2.5 * ((day % 120) / 120.0)) * 304.8  # sediment builds, then cleanout
        for device, quantity, value, unit in ((cfg_ids["rain"], "rain_tips", tips, "{tip}"),
                                              (cfg_ids["up"], "turbidity", up, "NTU"),
                                              (cfg_ids["down"], "turbidity", down, "NTU"),
                                              (cfg_ids["level"], "distance", round(dist, 1), "mm")):
            seq += 1
            out.append(Reading.model_construct(site=cfg_ids["site"], device=device, quantity=quantity, value=value,
                                               unit=unit, time=t, gateway=cfg_ids["gateway"], boot="bench",
                                               seq=seq, raw=None, flags=(),
                                               tip_size="0.01 in" if quantity == "rain_tips" else None))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--max-seconds", type=float, default=300.0, help="stop early after this much engine time")
    ap.add_argument("--profile", action="store_true", help="cProfile the engine and print the top functions")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    info = machine()
    print(f"machine: {describe()}", flush=True)
    profiles = ProfileLibrary()
    cfg = load_site(ROOT / "examples" / "site.yaml", profiles)
    ids = {"site": cfg.site.id, "gateway": cfg.gateway_id, "rain": "rain-1", "up": "turb-up", "down": "turb-down",
           "level": "basin-level"}
    engine = Engine.for_site(cfg, profiles, None)
    prof = cProfile.Profile() if args.profile else None
    n = 0
    events = 0
    seconds = 0.0
    seq = 0
    for day in range(args.days):
        chunk = day_readings(ids, day, seq)
        seq += len(chunk)
        feed = engine.feed
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        for r in chunk:
            events += len(feed(r))
        if day == args.days - 1:
            events += len(engine.flush())
        seconds += time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        n += len(chunk)
        if day % 30 == 29:
            print(f"day {day + 1}: {n:,} readings, {seconds:.1f} s engine time, {n / seconds:,.0f} readings/s, "
                  f"{events} events", flush=True)
        if seconds > args.max_seconds:
            print(f"stopping after {args.max_seconds:g} s of engine time", flush=True)
            break
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    print(f"{n:,} readings in {seconds:.2f} s: {n / seconds:,.0f} readings/s; {events} events", flush=True)
    print(json.dumps({"readings": n, "seconds": round(seconds, 3), "readings_per_s": round(n / seconds),
                      "events": events, "days": args.days, "cpu": info["cpu"], "cores": info["cores"],
                      "python": info["python"]}))


if __name__ == "__main__":
    main()
