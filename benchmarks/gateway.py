"""Gateway benchmark (issue 7): resident memory and CPU per 1,000 polls, and the outbox replay rate.

Run: ``python benchmarks/gateway.py`` (not a test; loopback only; bounded to ~2 minutes).

1. Polling: a simulator PROCESS serves 10 Modbus TCP devices (Keller Acculevel register maps,
   unit ids 1..10 on one pymodbus server); the gateway runs as its own process
   (wall clock, outbox and QC on) polling each device once a second and publishing to a real
   Mosquitto. It is started as ``stormwatch gateway --site ...``, which validates the site,
   writes ``plan.json`` and execs (same pid) the lean field process ``python -m stormwatch.gateway --plan
   plan.json`` (no pydantic, no typer); the benchmark checks ``/proc/<pid>/cmdline`` before it
   measures. RSS (VmRSS) and CPU
   time (utime + stime) come from ``/proc/<gateway pid>``; CPU is measured over a window after a
   warm-up and scaled to 1,000 polls.
2. Replay: an outbox filled with 24 h × 60 × 10 readings (a 24-hour outage at 1-minute polling
   of 10 devices) is drained by the gateway's publisher to Mosquitto; readings/s to PUBACK.

Last line: one JSON object ``{"rss_mb", "cpu_s_per_1000_polls", "outbox_replay_per_s", ...}``.
Bar (issue 7): ≤ 32 MB, ≤ 2.2 CPU-s per 1,000 polls, ≥ 2,000 readings/s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

# This file is named like the package it measures: keep its own directory off the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import describe, process_usage  # noqa: E402

DEVICES = 10
WARMUP_S = 8.0
MEASURE_S = 40.0
REPLAY_READINGS = 24 * 60 * DEVICES


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


def polling(work: Path, broker_url: str) -> dict[str, float]:
    from stormwatch.app import servers

    port = servers.free_port()
    sim = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        servers.wait_port(port, 20)
        site = {
            "site": {"id": f"bench-{uuid.uuid4().hex[:6]}", "jurisdiction": "ch133"}, "gateway_id": "gw-bench",
            "devices": [{"id": f"level-{u}", "profile": "keller_acculevel", "poll_interval_s": 1,
                         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": port, "unit_id": u}}
                        for u in range(1, DEVICES + 1)],
        }
        site_path = work / "site.json"  # JSON is YAML
        site_path.write_text(json.dumps(site))
        gw = subprocess.Popen([sys.executable, "-m", "stormwatch", "gateway", "--site", str(site_path),
                               "--broker", broker_url, "--state-dir", str(work / "gw")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            print(f"polling: gateway pid {gw.pid}, {DEVICES} devices at 1 Hz; warm-up {WARMUP_S:.0f} s", flush=True)
            time.sleep(WARMUP_S)
            cmdline = Path(f"/proc/{gw.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            print(f"polling: measuring `{cmdline}`", flush=True)
            if "-m stormwatch.gateway --plan" not in cmdline:
                raise RuntimeError(f"the gateway did not exec the lean process: {cmdline}")
            _, _, cpu0 = process_usage(gw.pid)
            t0 = time.monotonic()
            time.sleep(MEASURE_S)
            rss, hwm, cpu1 = process_usage(gw.pid)
            elapsed = time.monotonic() - t0
            if gw.poll() is not None:
                raise RuntimeError(f"gateway exited with {gw.returncode}")
        finally:
            gw.terminate()
            gw.wait(30)
    finally:
        sim.terminate()
        sim.wait(10)
    polls = DEVICES * elapsed  # one poll per device per second
    cpu_per_1000 = (cpu1 - cpu0) / polls * 1000
    print(f"polling: {polls:.0f} polls in {elapsed:.1f} s; CPU {cpu1 - cpu0:.2f} s; RSS {rss:.1f} MB "
          f"(peak {hwm:.1f} MB)", flush=True)
    return {"rss_mb": round(rss, 1), "peak_rss_mb": round(hwm, 1), "cpu_s_per_1000_polls": round(cpu_per_1000, 3)}


def replay(work: Path, broker_url: str) -> float:
    from stormwatch.clock import WallClock
    from stormwatch.gateway.outbox import Outbox
    from stormwatch.gateway.publisher import MqttPublisher
    from stormwatch.mqtt import parse_broker_url
    from stormwatch.wire import WireReading

    box = Outbox(work / "replay.sqlite3", max_age_s=None)
    t0 = datetime(2026, 6, 1, tzinfo=UTC)
    boot = uuid.uuid4().hex
    seq = 0
    batch: list[WireReading] = []
    fill0 = time.monotonic()
    for minute in range(24 * 60):
        for d in range(DEVICES):
            batch.append(WireReading(site="bench", device=f"level-{d}", quantity="pressure", value=0.0421, unit="bar",
                                 time=t0 + timedelta(minutes=minute), gateway="gw-replay", boot=boot, seq=seq,
                                 raw=[15660, 27263]))
            seq += 1
        if len(batch) >= 600:
            box.add(batch)
            batch = []
    box.add(batch)
    print(f"replay: outbox filled with {box.depth()} readings in {time.monotonic() - fill0:.1f} s", flush=True)
    pub = MqttPublisher(parse_broker_url(broker_url), "bench", "gw-replay", boot, box, WallClock())
    start = time.monotonic()
    pub.start()
    deadline = start + 60
    while box.depth() > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    done = REPLAY_READINGS - box.depth()
    pub.close()
    box.close()
    rate = done / elapsed
    print(f"replay: {done} readings to PUBACK in {elapsed:.2f} s = {rate:.0f} readings/s "
          f"(connect included)", flush=True)
    return rate


def main() -> None:
    from stormwatch.app import servers

    print(f"machine: {describe()}", flush=True)
    lean_imports()
    with tempfile.TemporaryDirectory(prefix="stormwatch-bench-") as tmp:
        work = Path(tmp)
        broker = servers.mosquitto(work / "mosquitto")
        broker.start()
        try:
            figures = polling(work, broker.url)
            figures["outbox_replay_per_s"] = round(replay(work, broker.url))
        finally:
            broker.stop()
    figures["bar"] = {"rss_mb": 32, "cpu_s_per_1000_polls": 2.2, "outbox_replay_per_s": 2000}
    figures["machine"] = describe()
    print(json.dumps(figures))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        main()
