"""Benchmark: re-evaluate one year of 1-minute readings of one site through the alert engine.

The site is ``examples/site.yaml`` (Ch. 133 pack: R1 storm, R1w routine, R2 turbidity, R3 basin)
with every device polled once a minute: a rain gauge (tip counts, storms of whole tips every few
days), two turbidity probes (upstream/downstream, with plumes) and an ultrasonic level sensor over
the sediment basin -- 4 x 525,600 = 2,102,400 readings. This is the re-evaluation path
(``stormwatch evaluate``): readings in event-time order into :meth:`stormwatch.alerts.engine.Engine.feed`,
then :meth:`~stormwatch.alerts.engine.Engine.flush`. Readings are generated in memory one day at a time and
only the engine is timed. Runs on loopback/in-process only; bounded by ``--max-seconds``.

The live feed path: each poll cycle's four readings as one message, decoded as columns
(:class:`stormwatch.fastwire.Cycle` into :meth:`Engine.feed_cycle`; code without it:
:meth:`Engine.feed_many` with the readings, what the alert service does with a ``--batch``
gateway's message; ``--single``: one :meth:`Engine.feed` per reading). ``--anchor REF`` runs the
same benchmark on the code of git commit ``REF`` too (the code of the round before; extracted with
``git archive`` into a temporary directory, fed reading by reading when that code has no
``feed_many``), the rounds interleaved so a shared machine's drift
hits both alike; ``--rounds N`` repeats each (medians reported).

Each round runs two engines: the bare one (no late re-evaluation) and the engine as the alert
service runs it (``AlertService._engine``: late re-evaluation on -- hourly rule snapshots, the
released readings of the last hour kept -- and a clock at each message's arrival, whose bounds
are checked); ``--bare`` or ``--service`` runs one.

Run: ``python benchmarks/engine.py [--days 365] [--rounds 3] [--anchor 59d7efd] [--profile]``. The
last line is one JSON object with ``readings``, ``seconds``, ``readings_per_s`` (medians; bar: >=
400,000 readings/s), ``readings_per_cpu_s`` (the process's CPU time: a shared machine disturbs it
less than the wall clock), ``events`` and ``events_sha256`` (of the events' JSON in order), the
anchor's figures, ``events_identical`` (the two digests equal) and the machine's load -- of the bare
engine, with the service's engine's figures under ``service`` (the same keys).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import json
import logging
import math
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import checkout, describe, machine  # noqa: E402
from stormwatch.alerts import engine as engine_module  # noqa: E402
from stormwatch.alerts.engine import Engine  # noqa: E402
from stormwatch.config import load_site  # noqa: E402
from stormwatch.contract import Event, Reading  # noqa: E402
from stormwatch.profiles import ProfileLibrary  # noqa: E402

try:  # the code of an anchor may have no cycles (fed as readings then)
    from stormwatch.fastwire import Cycle as _Cycle
    Cycle: type[_Cycle] | None = _Cycle
except ImportError:  # an anchor's tree
    Cycle = None

START = datetime(2025, 1, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


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


def as_cycles(chunk: list[Reading]) -> list[object]:
    """The day's poll cycles as the alert service's decoder gives them: one
    :class:`~stormwatch.fastwire.Cycle` (columns) per message, one shape object for them all."""
    shapes: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[str, ...], tuple[str, ...]]] = {}
    out: list[object] = []
    assert Cycle is not None
    for i in range(0, len(chunk), 4):
        rs = chunk[i:i + 4]
        shape = (tuple(r.device for r in rs), tuple(r.quantity for r in rs))
        shape = shapes.setdefault(shape, shape)
        r0 = rs[0]
        out.append(Cycle(r0.site, r0.gateway, r0.boot, r0.seq, r0.time, shape, tuple(r.value for r in rs),
                         tuple(r.unit for r in rs), tuple(r.tip_size for r in rs)))
    return out


class FeedClock:
    """The live service's clock as the engine sees it: the event time of the message being fed plus
    a second of delivery (the benchmark sets it before each message; no wall clock in the figures)."""

    def __init__(self) -> None:
        self.t = START

    def now(self) -> datetime:
        return self.t


def service_options(clock: FeedClock) -> dict[str, object]:
    """The engine as the alert service runs it (``AlertService._engine`` with a store): late
    re-evaluation on, an hour of released readings kept, the clock's bounds checked."""
    recent = getattr(engine_module, "RECENT_WITH_STORE_S", 3600.0)
    return {"reevaluate_late": True, "recent_s": recent, "clock": clock}


def feed_day(engine: Engine, chunk: list[Reading], cycles: list[list[Reading]], decoded: list[object] | None,
             arrivals: list[datetime], clock: FeedClock, single: bool) -> list[Event]:
    """Feed one day: reading by reading, a poll cycle's readings at once, or its columns; with
    ``arrivals`` (the service's engine) the clock set to each message's arrival first."""
    found: list[Event] = []
    many = getattr(engine, "feed_many", None)
    columns = getattr(engine, "feed_cycle", None)
    if many is None or single:
        for i, r in enumerate(chunk):
            if arrivals:
                clock.t = arrivals[i // 4]
            found += engine.feed(r)
    elif decoded is not None and columns is not None:
        if arrivals:
            for at, one in zip(arrivals, decoded, strict=True):
                clock.t = at
                found += columns(one)
        else:
            for one in decoded:
                found += columns(one)
    elif arrivals:
        for at, cycle in zip(arrivals, cycles, strict=True):
            clock.t = at
            found += many(cycle)
    else:
        for cycle in cycles:
            found += many(cycle)
    return found


def run(days: int, max_seconds: float, profile: bool, single: bool, readings_only: bool = False,
        live: bool = False) -> dict[str, object]:
    """One pass over ``days`` of the year through this checkout's engine: readings, seconds, events.

    ``live``: the engine as the alert service runs it (:func:`service_options`)."""
    profiles = ProfileLibrary()
    cfg = load_site(ROOT / "examples" / "site.yaml", profiles)
    ids = {"site": cfg.site.id, "gateway": cfg.gateway_id, "rain": "rain-1", "up": "turb-up", "down": "turb-down",
           "level": "basin-level"}
    clock = FeedClock()
    engine = Engine.for_site(cfg, profiles, None, **(service_options(clock) if live else {}))
    many = getattr(engine, "feed_many", None)
    columns = getattr(engine, "feed_cycle", None) if Cycle is not None and not readings_only else None
    prof = cProfile.Profile(time.process_time) if profile else None  # CPU time: a loaded machine's waits left out
    n = events = seq = 0
    digest = hashlib.sha256()  # of every event's JSON, in order: byte-identical or not
    seconds = cpu = 0.0
    for day in range(days):
        chunk = day_readings(ids, day, seq)
        cycles = [chunk[i:i + 4] for i in range(0, len(chunk), 4)]  # one message per poll cycle
        decoded = as_cycles(chunk) if columns is not None and not single else None
        count = len(chunk)
        # the clock at each message's arrival (made before timing; live only)
        arrivals = [chunk[i].time + SECOND for i in range(0, len(chunk), 4)] if live else []
        if decoded is not None:  # the service holds a message's columns, not a day of models (nor their GC)
            chunk, cycles = [], []
        if prof is not None:
            prof.enable()
        found: list[Event] = []
        t0, c0 = time.perf_counter(), time.process_time()
        found += feed_day(engine, chunk, cycles, decoded, arrivals, clock, single)
        if day == days - 1:
            if live:
                clock.t = START + timedelta(days=days + 1)  # the clock past the last reading: all released
            found += engine.flush()
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
        if prof is not None:
            prof.disable()
        events += len(found)
        for e in found:
            digest.update(e.model_dump_json().encode() + b"\n")
        n += count
        seq += count
        if day % 60 == 59:
            print(f"day {day + 1}: {n:,} readings, {seconds:.1f} s engine time, {n / seconds:,.0f} readings/s, "
                  f"{events} events", flush=True)
        if seconds > max_seconds:
            print(f"stopping after {max_seconds:g} s of engine time", flush=True)
            break
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    path = "feed per reading" if many is None or single else \
        "feed_cycle per poll cycle (columns)" if columns is not None else "feed_many per poll cycle"
    path += "; the service's engine (late re-evaluation, recent_s, clock)" if live else "; no late re-evaluation"
    print(f"{n:,} readings in {seconds:.2f} s ({cpu:.2f} CPU s): {n / seconds:,.0f} readings/s, "
          f"{n / cpu:,.0f} per CPU second; {events} events ({path})", flush=True)
    return {"readings": n, "seconds": round(seconds, 3), "readings_per_s": round(n / seconds), "events": events,
            "events_sha256": digest.hexdigest()[:16],
            "cpu_seconds": round(cpu, 3), "readings_per_cpu_s": round(n / cpu), "path": path}


def anchor_tree(ref: str, into: Path) -> Path:
    """The code of commit ``ref`` in ``into`` with this benchmark file beside it."""
    checkout(ROOT, ref, into)
    (into / "benchmarks" / "engine.py").write_text(Path(__file__).read_text())
    (into / "benchmarks" / "machine.py").write_text((ROOT / "benchmarks" / "machine.py").read_text())
    return into


def run_elsewhere(tree: Path, days: int, max_seconds: float, single: bool, live: bool) -> dict[str, object]:
    """One pass of this benchmark in another checkout (its own code on ``sys.path``)."""
    argv = [sys.executable, str(tree / "benchmarks" / "engine.py"), "--days", str(days), "--max-seconds",
            str(max_seconds), "--rounds", "1", "--json-only"] + (["--single"] if single else []) \
        + (["--service"] if live else [])
    out = subprocess.run(argv, cwd=tree, check=True, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def summary(ours: list[dict[str, object]], theirs: list[dict[str, object]], anchor: str | None) -> dict[str, object]:
    """Medians of one engine configuration's rounds, with the anchor's and the two compared."""

    def median(runs: list[dict[str, object]], key: str) -> float:
        return statistics.median(float(str(r[key])) for r in runs)

    result: dict[str, object] = {
        "readings": ours[0]["readings"], "seconds": round(median(ours, "seconds"), 3),
        "readings_per_s": round(median(ours, "readings_per_s")), "events": ours[0]["events"],
        "events_sha256": ours[0]["events_sha256"],
        "rounds": [r["readings_per_s"] for r in ours], "path": ours[0]["path"],
        "readings_per_cpu_s": round(median(ours, "readings_per_cpu_s")),
        "cpu_rounds": [r["readings_per_cpu_s"] for r in ours]}
    if theirs:
        result.update({"anchor": anchor, "anchor_readings_per_s": round(median(theirs, "readings_per_s")),
                       "anchor_readings_per_cpu_s": round(median(theirs, "readings_per_cpu_s")),
                       "anchor_events": theirs[0]["events"], "anchor_rounds": [r["readings_per_s"] for r in theirs],
                       "anchor_cpu_rounds": [r["readings_per_cpu_s"] for r in theirs],
                       "anchor_events_sha256": theirs[0].get("events_sha256")})
        result["events_identical"] = result["events_sha256"] == result["anchor_events_sha256"]
        result["ratio_to_anchor"] = round(float(str(result["readings_per_s"])) /
                                          float(str(result["anchor_readings_per_s"])), 2)
        result["cpu_ratio_to_anchor"] = round(float(str(result["readings_per_cpu_s"])) /
                                              float(str(result["anchor_readings_per_cpu_s"])), 2)
        print(f"{result['path']}: this checkout {result['readings_per_cpu_s']:,} per CPU second vs {anchor} "
              f"{result['anchor_readings_per_cpu_s']:,}: {result['cpu_ratio_to_anchor']}x (wall "
              f"{result['readings_per_s']:,}/s vs {result['anchor_readings_per_s']:,}/s); events {result['events']} "
              f"vs {result['anchor_events']}, {'byte-identical' if result['events_identical'] else 'DIFFERENT'}",
              flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--max-seconds", type=float, default=300.0, help="stop early after this much engine time")
    ap.add_argument("--rounds", type=int, default=1, help="passes over the year (medians reported)")
    ap.add_argument("--anchor", metavar="REF", help="also run the code of git commit REF, interleaved")
    ap.add_argument("--single", action="store_true", help="feed reading by reading (Engine.feed) instead of a "
                                                          "poll cycle at a time")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--service", action="store_true", help="only the engine as the alert service runs it "
                                                              "(late re-evaluation on, a clock); default: both")
    which.add_argument("--bare", action="store_true", help="only the engine without late re-evaluation")
    ap.add_argument("--profile", action="store_true", help="cProfile the engine and print the top functions")
    ap.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.json_only:  # one pass for a benchmark run from another checkout
        with contextlib.redirect_stdout(sys.stderr):
            one = run(args.days, args.max_seconds, False, args.single, live=args.service)
        print(json.dumps(one))
        return
    info = machine()
    print(f"machine: {describe()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    load_before = os.getloadavg()[0]
    configs = [False] if args.bare else [True] if args.service else [False, True]  # live: the service's engine
    ours: dict[bool, list[dict[str, object]]] = {live: [] for live in configs}
    theirs: dict[bool, list[dict[str, object]]] = {live: [] for live in configs}
    with tempfile.TemporaryDirectory(prefix="stormwatch-engine-anchor-") as tmp:
        try:
            tree = anchor_tree(args.anchor, Path(tmp)) if args.anchor else None
        except (subprocess.CalledProcessError, OSError) as exc:
            err = getattr(exc, "stderr", b"") or b""
            print(f"error: --anchor {args.anchor}: no such commit in {ROOT} "
                  f"({err.decode(errors='replace').strip() or exc})", file=sys.stderr)
            sys.exit(2)
        for rnd in range(max(1, args.rounds)):
            for live in configs:
                name = "the service's engine" if live else "no late re-evaluation"
                print(f"round {rnd + 1}, {name}: this checkout (load average {os.getloadavg()[0]:.2f})", flush=True)
                ours[live].append(run(args.days, args.max_seconds, args.profile and rnd == 0, args.single, live=live))
                if tree is not None:
                    print(f"round {rnd + 1}, {name}: the code of {args.anchor} "
                          f"(load average {os.getloadavg()[0]:.2f})", flush=True)
                    theirs[live].append(run_elsewhere(tree, args.days, args.max_seconds, args.single, live))
                    print(f"  {theirs[live][-1]['readings_per_cpu_s']:,} per CPU second, "
                          f"{theirs[live][-1]['events']} events ({theirs[live][-1].get('path', 'feed per reading')})",
                          flush=True)
    # the first configuration's figures at the top (the benchmark's keys as before); the service's
    # engine under "service"
    result = summary(ours[configs[0]], theirs[configs[0]], args.anchor)
    if len(configs) == 2:
        result["service"] = summary(ours[True], theirs[True], args.anchor)
        result["events_same_both_ways"] = result["events_sha256"] == result["service"]["events_sha256"]  # type: ignore[index]
    result.update({"days": args.days, "cpu": info["cpu"], "cores": info["cores"], "python": info["python"],
                   "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
