"""Gateway benchmark: resident memory and CPU per 1,000 polls, the outbox replay
rate, and how long a reading waits for ingest's stored-acknowledgement.

Run: ``python benchmarks/gateway.py`` (not a test; loopback only; bounded to ~3 minutes).

1. Polling: a simulator PROCESS serves 10 Modbus TCP devices (Keller Acculevel register maps,
   unit ids 1..10 on one pymodbus server); the gateway runs as its own process (wall clock, outbox
   and QC on) polling each device once a second and publishing to a real Mosquitto, where a
   ``stormwatch ingest`` process stores the readings in SQLite and confirms them
   (``stormwatch/v1/<site>/<gateway>/stored``): a reading leaves the outbox only then (the
   gateway's default ``--confirm stored``). The gateway is started as ``stormwatch gateway --site ...``,
   which validates the site, writes ``plan.json`` and execs (same pid) the lean field process
   ``python -m stormwatch.gateway --plan plan.json`` (no pydantic, no typer); the benchmark checks
   ``/proc/<pid>/cmdline`` before it measures. RSS (VmRSS) and CPU time (utime + stime) come from
   ``/proc/<gateway pid>``; CPU is measured over a window after a warm-up and scaled to 1,000 polls
   made: the polls counted are those whose readings reached the broker with an event time in the
   window (at most 10 a second; a poll that failed or a slot skipped is not counted).
   ``--anchor REF`` runs the gateway of git commit REF beside this checkout's, both polling over the
   same windows (``--rounds``), so the load of a shared machine falls on both alike.
   Meanwhile the benchmark's own MQTT client sees each reading on the readings topic and its
   confirmation on the stored topic: the confirmation lag (p50, p95, max, in ms) is the time between
   the two (ingest's batch window, its SQLite commit, two broker hops).
2. Replay: an outbox filled with 24 h × 60 × 10 readings (a 24-hour outage at 1-minute polling
   of 10 devices) is drained by the gateway's publisher to Mosquitto while the ingest process stores
   and confirms them: readings/s until the broker acknowledged every one (``outbox_replay_per_s``,
   the publishing rate) and until ingest confirmed every one and the outbox
   is empty (``outbox_replay_confirmed_per_s``, end to end; bounded by ingest's SQLite writes).

Last line: one JSON object ``{"rss_mb", "cpu_s_per_1000_polls", "confirm_lag_ms", "outbox_replay_per_s",
"outbox_replay_confirmed_per_s", ...}``.
Bar: ≤ 32 MB, ≤ 1.0 CPU-s per 1,000 polls (docs/scaling.md, the gateway), ≥ 2,000 readings/s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# This file is named like the package it measures: keep its own directory off the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import checkout, describe, print_profile, process_usage, start_profiler  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

DEVICES = 10
WARMUP_S = 8.0
MEASURE_S = 40.0
REPLAY_READINGS = 24 * 60 * DEVICES
POLL_SITE = f"bench-{uuid.uuid4().hex[:6]}"
REPLAY_SITE = f"bench-replay-{uuid.uuid4().hex[:6]}"
ANCHOR_SITE = f"bench-anchor-{uuid.uuid4().hex[:6]}"


def serve(port: int) -> None:
    """Child process: one pymodbus TCP server with DEVICES Keller Acculevel devices."""
    import asyncio

    from pymodbus.server import ModbusTcpServer
    from pymodbus.simulator import DataType, SimData, SimDevice

    from stormwatch.codec import encode_point
    from stormwatch.profiles import ProfileLibrary

    profile = ProfileLibrary().get("keller_acculevel")
    assert profile.modbus is not None
    words = encode_point(profile.modbus.points[0], 0.0421) + encode_point(profile.modbus.points[1], 17.5)
    devices = [SimDevice(u, simdata=[SimData(0x0100, values=words, datatype=DataType.REGISTERS)])
               for u in range(1, DEVICES + 1)]

    async def main() -> None:
        server = ModbusTcpServer(devices, address=("127.0.0.1", port))
        await server.serve_forever()

    asyncio.run(main())


def lean_imports() -> None:
    """Fail loudly if the lean process would load pydantic (the memory it must not spend)."""
    code = "import sys, stormwatch.gateway.__main__, stormwatch.gateway.service; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    if out != "False":
        raise RuntimeError("the lean gateway process imports pydantic")


def site_doc(site: str, gateway: str, port: int, units: range) -> dict[str, Any]:
    """A site of Keller Acculevel devices ``level-<u>`` on one Modbus TCP server."""
    return {
        "site": {"id": site, "jurisdiction": "ch133"}, "gateway_id": gateway,
        "devices": [{"id": f"level-{u}", "profile": "keller_acculevel", "poll_interval_s": 1,
                     "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": port, "unit_id": max(1, u)}}
                    for u in units],
    }


class LagWatch:
    """Sees each reading of a gateway on the broker and its stored-acknowledgement: the lag between, and
    the polls made (each distinct device and event time seen)."""

    def __init__(self, port: int, site: str, gateway: str) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from stormwatch import storedack, topics

        self._decode = storedack.decode
        self.readings_topic, self.stored_topic = topics.readings(site, gateway), topics.stored(site, gateway)
        self.seen: dict[tuple[str, int], float] = {}
        self.polls: set[tuple[str, str]] = set()  # (device, event time) of every reading seen
        self.lags: list[float] = []
        self.lock = threading.Lock()
        ready = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"lag-{uuid.uuid4().hex[:6]}")
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *_a: ready.set()
        self.client.connect("127.0.0.1", port)
        self.client.subscribe([(self.readings_topic, 0), (self.stored_topic, 0)])
        self.client.loop_start()
        if not ready.wait(10):
            raise RuntimeError("lag watcher: no SUBACK")

    def _on_message(self, _c: object, _u: object, msg: Any) -> None:
        now = time.monotonic()
        if msg.topic == self.readings_topic:
            doc = json.loads(msg.payload)
            with self.lock:
                for r in doc.get("readings", [doc]):
                    self.seen.setdefault((r["boot"], r["seq"]), now)
                    self.polls.add((r["device"], r["time"]))
            return
        with self.lock:
            for boot, first, last in self._decode(bytes(msg.payload)):
                for seq in range(first, last + 1):
                    t = self.seen.pop((boot, seq), None)
                    if t is not None:
                        self.lags.append(now - t)

    def polls_between(self, start: datetime, end: datetime) -> int:
        """Polls whose readings were seen, with an event time in ``[start, end)`` (the gateway stamps a
        reading with its poll slot's time on the wall clock)."""
        with self.lock:
            times = [datetime.fromisoformat(t.replace("Z", "+00:00")) for _d, t in self.polls]
        return sum(1 for t in times if start <= t < end)

    def figures(self) -> dict[str, float]:
        """``{"p50", "p95", "max"}`` in ms and ``n`` readings confirmed."""
        with self.lock:
            lags = sorted(self.lags)
        if not lags:
            return {}
        return {"p50": round(1000 * statistics.median(lags), 1),
                "p95": round(1000 * lags[int(0.95 * (len(lags) - 1))], 1), "max": round(1000 * lags[-1], 1),
                "n": len(lags)}

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def start_ingest(work: Path, broker_url: str, sites: list[Path]) -> subprocess.Popen[bytes]:
    """A ``stormwatch ingest`` process storing to SQLite (it confirms what it stored); waits for its subscription."""
    log = work / "ingest.log"
    args = [sys.executable, "-m", "stormwatch", "ingest", "--broker", broker_url, "--store",
            f"sqlite:///{work / 'ingest.db'}", "--client-id", f"bench-ingest-{uuid.uuid4().hex[:6]}"]
    for site in sites:
        args += ["--site", str(site)]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while "subscribed to" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ingest did not subscribe:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
    return proc


def start_gateway(site: Path, broker_url: str, state_dir: Path, tree: Path | None) -> subprocess.Popen[bytes]:
    """``stormwatch gateway --site`` as a process, from this checkout or from ``tree`` (an anchor's code)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return subprocess.Popen([sys.executable, "-m", "stormwatch", "gateway", "--site", str(site),
                             "--broker", broker_url, "--state-dir", str(state_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=str(tree) if tree is not None else None)


def wait_lean(gw: subprocess.Popen[bytes]) -> str:
    """The command line of ``gw`` once it has exec'd the lean process.

    Raises:
        RuntimeError: it did not within three minutes.
    """
    # On a loaded machine the site's validation before the exec can take longer than the warm-up.
    deadline = time.monotonic() + 180
    while True:
        cmdline = Path(f"/proc/{gw.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        if "-m stormwatch.gateway --plan" in cmdline or time.monotonic() > deadline or gw.poll() is not None:
            break
        time.sleep(0.5)
    if "-m stormwatch.gateway --plan" not in cmdline:
        raise RuntimeError(f"the gateway did not exec the lean process: {cmdline}")
    return cmdline


def polling(work: Path, broker_url: str, broker_port: int, runs: list[tuple[str, Path, Path | None]],
            profile: bool = False) -> list[dict[str, Any]]:
    """CPU and memory of gateway processes polling ``DEVICES`` devices at 1 Hz side by side, one per
    ``(label, site file, code tree or None for this checkout)`` in ``runs``, over the same window,
    and the confirmation lag (``profile``: the first sampled with py-spy over the measured window).

    Polls are counted as made: the distinct (device, event time) of the readings seen on the broker
    with an event time inside the window."""
    tag = uuid.uuid4().hex[:4]
    watches, gws = [], []
    try:
        for label, site, tree in runs:
            site_id = json.loads(site.read_text())["site"]["id"]
            watches.append(LagWatch(broker_port, site_id, "gw-bench"))
            gws.append(start_gateway(site, broker_url, work / f"gw-{label.split()[0]}-{tag}", tree))
        print(f"polling: gateways {', '.join(f'{r[0]} (pid {g.pid})' for r, g in zip(runs, gws, strict=True))}, "
              f"each {DEVICES} devices at 1 Hz, an ingest process confirming; warm-up {WARMUP_S:.0f} s", flush=True)
        for gw in gws:
            wait_lean(gw)
        time.sleep(WARMUP_S)
        spy = start_profiler(gws[0].pid, work / "profile.txt") if profile else None
        cpu0 = [process_usage(gw.pid)[2] for gw in gws]
        t0, wall0 = time.monotonic(), datetime.now(UTC)
        time.sleep(MEASURE_S)
        usage = [process_usage(gw.pid) for gw in gws]
        elapsed, wall1 = time.monotonic() - t0, datetime.now(UTC)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
            print(f"polling: profile of the gateway process ({runs[0][0]}):", flush=True)
            print_profile(work / "profile.txt")
        for (label, _s, _t), gw in zip(runs, gws, strict=True):
            if gw.poll() is not None:
                raise RuntimeError(f"gateway {label} exited with {gw.returncode}")
        time.sleep(2.0)  # the window's last readings reach the broker
    finally:
        for gw in gws:
            gw.terminate()
        for gw in gws:
            gw.wait(30)
        for watch in watches:
            watch.close()
    out = []
    for (label, _s, _t), watch, c0, (rss, hwm, c1) in zip(runs, watches, cpu0, usage, strict=True):
        lag = watch.figures()
        polls = watch.polls_between(wall0, wall1)
        cpu_per_1000 = (c1 - c0) / max(1, polls) * 1000
        print(f"polling ({label}): {polls} polls made in {elapsed:.1f} s (at most {DEVICES * elapsed:.0f}); "
              f"CPU {c1 - c0:.2f} s = {cpu_per_1000:.3f} s per 1,000 polls; RSS {rss:.1f} MB (peak {hwm:.1f} MB); "
              f"confirmation lag {lag} ms", flush=True)
        out.append({"rss_mb": round(rss, 1), "peak_rss_mb": round(hwm, 1), "polls": polls,
                    "cpu_s": round(c1 - c0, 2), "cpu_s_per_1000_polls": round(cpu_per_1000, 3), "confirm_lag_ms": lag})
    return out


def replay(work: Path, broker_url: str) -> tuple[float, float]:
    """(readings/s to the broker's PUBACK, readings/s to ingest's confirmation: the outbox empty)."""
    from stormwatch.clock import WallClock
    from stormwatch.gateway.outbox import Outbox
    from stormwatch.gateway.publisher import MqttPublisher
    from stormwatch.runtime.mqtt import parse_broker_url
    from stormwatch.wire import WireReading

    box = Outbox(work / "replay.sqlite3", max_age_s=None)
    # before now: ingest runs on the wall clock and refuses readings from the future or older than 90 days
    t0 = (datetime.now(UTC) - timedelta(days=2)).replace(second=0, microsecond=0)
    boot = uuid.uuid4().hex
    seq = 0
    batch: list[WireReading] = []
    fill0 = time.monotonic()
    for minute in range(24 * 60):
        for d in range(DEVICES):
            batch.append(WireReading(site=REPLAY_SITE, device=f"level-{d}", quantity="pressure", value=0.0421,
                                     unit="bar", time=t0 + timedelta(minutes=minute), gateway="gw-replay", boot=boot,
                                     seq=seq, raw=[15660, 27263]))
            seq += 1
        if len(batch) >= 600:
            box.add(batch)
            batch = []
    box.add(batch)
    print(f"replay: outbox filled with {box.depth()} readings in {time.monotonic() - fill0:.1f} s", flush=True)
    pub = MqttPublisher(parse_broker_url(broker_url), REPLAY_SITE, "gw-replay", boot, box, WallClock())
    start = time.monotonic()
    pub.start()
    deadline = start + 120
    acked_at: float | None = None
    while box.depth() > 0 and time.monotonic() < deadline:
        if acked_at is None and pub.acknowledged >= REPLAY_READINGS:
            acked_at = time.monotonic()
        time.sleep(0.02)
    done_at = time.monotonic()
    acked_at = acked_at or done_at
    confirmed = REPLAY_READINGS - box.depth()
    pub.close()
    box.close()
    to_puback = pub.acknowledged / (acked_at - start)
    to_stored = confirmed / (done_at - start)
    print(f"replay: {pub.acknowledged} readings to PUBACK in {acked_at - start:.2f} s = {to_puback:.0f} readings/s; "
          f"{confirmed} confirmed stored by ingest in {done_at - start:.2f} s = {to_stored:.0f} readings/s "
          f"({pub.resent_rows} re-sent; connect included)", flush=True)
    return to_puback, to_stored


def main(profile: bool = False, polling_only: bool = False, rounds: int = 1, anchor: str | None = None) -> None:
    from stormwatch.app import servers

    print(f"machine: {describe()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    load_before = os.getloadavg()[0]
    lean_imports()
    with tempfile.TemporaryDirectory(prefix="stormwatch-bench-") as tmp:
        work = Path(tmp)
        tree = checkout(ROOT, anchor, work / "anchor") if anchor else None
        broker = servers.mosquitto(work / "mosquitto")
        broker.start()
        port = servers.free_port()
        sim = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
        ingest: subprocess.Popen[bytes] | None = None
        try:
            servers.wait_port(port, 90)  # the simulator imports pymodbus: slow on a busy machine
            sites = [work / "site.json", work / "replay-site.json", work / "anchor-site.json"]  # JSON is YAML
            sites[0].write_text(json.dumps(site_doc(POLL_SITE, "gw-bench", port, range(1, DEVICES + 1))))
            sites[1].write_text(json.dumps(site_doc(REPLAY_SITE, "gw-replay", port, range(DEVICES))))
            sites[2].write_text(json.dumps(site_doc(ANCHOR_SITE, "gw-bench", port, range(1, DEVICES + 1))))
            ingest = start_ingest(work, broker.url, sites)
            runs: list[tuple[str, Path, Path | None]] = [("this checkout", sites[0], None)]
            if tree is not None:
                runs.append((f"anchor {anchor}", sites[2], tree))
            ours: list[dict[str, Any]] = []
            theirs: list[dict[str, Any]] = []
            for rnd in range(max(1, rounds)):
                print(f"round {rnd + 1} (load average {os.getloadavg()[0]:.2f})", flush=True)
                both = polling(work, broker.url, broker.port, runs, profile and rnd == 0)
                ours.append(both[0])
                theirs.extend(both[1:])
            figures = summary(ours)
            if theirs:
                figures["anchor"] = anchor
                figures.update({f"anchor_{k}": v for k, v in summary(theirs).items()})
                figures["cpu_ratio_to_anchor"] = round(figures["cpu_s_per_1000_polls"] /
                                                       figures["anchor_cpu_s_per_1000_polls"], 2)
            if not polling_only:
                to_puback, to_stored = replay(work, broker.url)
                figures["outbox_replay_per_s"] = round(to_puback)
                figures["outbox_replay_confirmed_per_s"] = round(to_stored)
        finally:
            if ingest is not None:
                ingest.terminate()
                ingest.wait(30)
            sim.terminate()
            sim.wait(10)
            broker.stop()
    figures["bar"] = {"rss_mb": 32, "cpu_s_per_1000_polls": 1.0, "outbox_replay_per_s": 2000}
    figures["machine"] = describe()
    figures["load_before"] = round(load_before, 2)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures))


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds of one gateway's figures, with every round's CPU figure."""
    def med(key: str) -> float:
        return statistics.median(float(r[key]) for r in runs)

    return {"rss_mb": med("rss_mb"), "peak_rss_mb": med("peak_rss_mb"),
            "cpu_s_per_1000_polls": round(med("cpu_s_per_1000_polls"), 3),
            "rounds_cpu_s_per_1000_polls": [r["cpu_s_per_1000_polls"] for r in runs],
            "polls": [r["polls"] for r in runs], "confirm_lag_ms": runs[-1]["confirm_lag_ms"]}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        ap.add_argument("--profile", action="store_true", help="sample the gateway process with py-spy")
        ap.add_argument("--polling-only", action="store_true", help="measure polling only (no outbox replay)")
        ap.add_argument("--rounds", type=int, default=1, help="polling windows (medians reported)")
        ap.add_argument("--anchor", metavar="REF", help="also run the gateway of git commit REF, side by side "
                                                        "with this checkout's over the same windows")
        args = ap.parse_args()
        main(args.profile, args.polling_only, args.rounds, args.anchor)
