"""Demo benchmark: how long README's first command's demo (``stormwatch demo``) takes, and its CPU.

Run: ``python benchmarks/demo.py [--runs N] [-- DEMO OPTIONS...]`` (not a test; loopback only).

Each run is the real command in its own process, as a newcomer runs it (``stormwatch demo``, the
default scenario: 32 simulated hours, lockstep unless a ``--speed`` is passed through), with
``--json`` added so the events can be counted. Measured per run: wall seconds, CPU seconds
(user + sys of the demo and its children: the embedded broker, pymodbus, ptys), the events and
``data_gap`` events it printed, and the 1-minute load average before and after (another program's
load makes a lockstep run slower, never different: the figure is only comparable at equal load).

Last line: one JSON object ``{"wall_s", "cpu_s", "events", "data_gaps", "load_before", "load_after",
"runs": [...], "machine": {...}}`` (the medians of the runs). Target: wall_s <= 30 on 2 cores.
The design: docs/simulators.md ("The lockstep clock").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import describe, machine


def run_once(extra: list[str]) -> dict[str, float]:
    """One ``stormwatch demo --json`` run: wall and CPU seconds, events, data gaps, load average."""
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "stormwatch", "demo", "--json", *extra],
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"stormwatch demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
        "events": len(events),
        "data_gaps": sum(1 for e in events if e["kind"] == "data_gap"),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs to take the median of (default 1)")
    parser.add_argument("demo", nargs="*", help="options passed to stormwatch demo (after --)")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    runs = []
    for i in range(args.runs):
        r = run_once(args.demo)
        runs.append(r)
        print(f"run {i + 1}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} CPU-s, {r['events']} events "
              f"({r['data_gaps']} data_gap), load {r['load_before']:.1f} -> {r['load_after']:.1f}")
    summary: dict[str, object] = {k: statistics.median(float(r[k]) for r in runs) for k in runs[0]}
    summary["runs"] = runs
    summary["demo_options"] = args.demo
    summary["machine"] = machine()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
