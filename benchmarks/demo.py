"""Demo benchmark: how long README's first command's demo (``stormwatch demo``) takes, and its CPU.

Run: ``python benchmarks/demo.py [--runs N] [--anchor REF] [--priority] [-- DEMO OPTIONS...]``
(not a test; loopback only).

Each run is the real command in its own process, as a newcomer runs it (``stormwatch demo``, the
default scenario: 32 simulated hours, lockstep unless a ``--speed`` is passed through), with
``--json`` added so the events can be counted. Measured per run: wall seconds, CPU seconds
(user + sys of the demo and its children: the embedded broker, pymodbus, ptys), the events and
``data_gap`` events it printed, and the 1-minute load average before and after (another program's
load makes a lockstep run slower, never different: the figure is only comparable at equal load).

``--anchor REF`` runs the code of a git commit (``git archive`` into a temporary directory) before
each run of this tree, so the two are compared at the same load, and says whether their events are
the same (ids of the run aside). ``--priority`` runs every demo under ``chrt -r 5`` (root): the
other programs' load is pushed aside, the closest a shared machine comes to an idle one.

Last line: one JSON object ``{"wall_s", "cpu_s", "events", "data_gaps", "load_before", "load_after",
"runs": [...], "anchor": {... the same for REF, "ref", "same_events"}, "machine": {...}}`` (the
medians of the runs). Target: wall_s <= 30 on 2 cores.
The design: docs/simulators.md ("The lockstep clock").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import describe, machine

ROOT = Path(__file__).resolve().parents[1]
#: What differs between two runs of one scenario: the run's own ids.
RUN_IDS = re.compile(r'"boot": "[^"]*"|WO-[0-9a-f]+')


def run_once(extra: list[str], code: Path | None = None, priority: bool = False) -> tuple[dict[str, float], str]:
    """One ``stormwatch demo --json`` run (of ``code``, a source tree; default this one): wall and CPU
    seconds, events, data gaps, load average; and its events with the run's ids taken out."""
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    cmd = [sys.executable, "-m", "stormwatch", "demo", "--json", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(["chrt", "-r", "5", *cmd] if priority else cmd, capture_output=True, text=True,
                          check=False, env=env, cwd=code or ROOT)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"stormwatch demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    events = [json.loads(line) for line in lines]
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
        "events": len(events),
        "data_gaps": sum(1 for e in events if e["kind"] == "data_gap"),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }, RUN_IDS.sub("", "\n".join(lines))


def checkout(ref: str, into: Path) -> Path:
    """The tree of commit ``ref`` extracted into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--anchor {ref}: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def medians(runs: list[dict[str, float]]) -> dict[str, object]:
    return {k: statistics.median(float(r[k]) for r in runs) for k in runs[0]}


def say(name: str, i: int, r: dict[str, float]) -> None:
    print(f"{name} run {i + 1}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} CPU-s, {r['events']} events "
          f"({r['data_gaps']} data_gap), load {r['load_before']:.1f} -> {r['load_after']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs to take the median of (default 1)")
    parser.add_argument("--anchor", metavar="REF", help="a git commit to run before each run, at the same load")
    parser.add_argument("--priority", action="store_true", help="run the demos under chrt -r 5 (root)")
    parser.add_argument("demo", nargs="*", help="options passed to stormwatch demo (after --)")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    runs: list[dict[str, float]] = []
    anchor_runs: list[dict[str, float]] = []
    same = True
    with tempfile.TemporaryDirectory(prefix="demo-anchor-") as tmp:
        code = checkout(args.anchor, Path(tmp)) if args.anchor else None
        for i in range(args.runs):
            theirs = None
            if code is not None:
                r, theirs = run_once(args.demo, code, args.priority)
                anchor_runs.append(r)
                say(args.anchor, i, r)
            r, ours = run_once(args.demo, priority=args.priority)
            runs.append(r)
            say("this tree", i, r)
            same = same and (theirs is None or theirs == ours)
    summary = medians(runs)
    summary["runs"] = runs
    if anchor_runs:
        summary["anchor"] = {"ref": args.anchor, **medians(anchor_runs), "runs": anchor_runs, "same_events": same}
        print(f"events {'the same as' if same else 'DIFFERENT from'} {args.anchor}'s")
    summary["demo_options"] = args.demo
    summary["priority"] = args.priority
    summary["machine"] = machine()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
