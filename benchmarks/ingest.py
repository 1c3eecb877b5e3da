"""Benchmark: sustained readings/s from Mosquitto into InfluxDB 1.x, stormwatch vs. the alternatives.

Run: ``python benchmarks/ingest.py`` (not a test; docs/scaling.md holds its figures):

* the same 50,000 readings for every contender, in two message forms (``--mode``): one reading per
  message (the gateway's JSON, ``stormwatch.contract.dump_readings``: 50,000 messages) and one message
  per poll cycle of the gateway's 10 devices (``{"readings": [...]}``, as ``stormwatch gateway
  --batch`` publishes: 5,000 messages); QoS 1, distinct timestamps, published by ``mosquitto_pub -l``
  (C, so the publisher is not the bottleneck);
* each contender writes into a fresh InfluxDB 1.x database and is checked with an InfluxQL
  ``COUNT``; the figure is readings/s end to end, from the first publish to the moment the count
  reaches 50,000 (or, for a contender that loses points, to the last point that landed);
* contenders: ``stormwatch ingest`` with 1 worker and with 2 workers (shared subscription
  ``$share/bench/...``), each a real ``stormwatch ingest`` process; the raw limit
  (``mosquitto_sub -c`` persistent session piped into batched HTTP line-protocol writes, the
  ``--raw-writer`` mode of this file); Node-RED 4.x with ``node-red-contrib-influxdb`` in the two
  flows in ``benchmarks/nodered/`` (per message; batched by ``join`` of 5,000 or 200 ms).

It starts its own influxd and a fresh Mosquitto for every run (:mod:`stormwatch.app.servers`, the
project's broker configuration, loopback only; a fresh broker so that persistent sessions of earlier
runs do not keep queueing the next run's messages; each database is dropped after its count) and installs
Node-RED with npm into ``~/.cache/stormwatch-bench`` when it is not there (``STORMWATCH_BENCH_CACHE``
overrides); without npm or network the Node-RED contenders are skipped (``null``). Every
contender is bounded (``CONTENDER_TIMEOUT_S``). The last output line is one JSON object.
``--only stormwatch_1_worker,raw`` runs a subset (the others are ``null``), ``--rounds N`` sets the
rounds, ``--mode single|batched|both`` the message forms (keys of the batched form end in
``_batched``), ``--profile`` samples the first stormwatch worker of the first round with py-spy (when
installed) and prints its top functions, ``--anchor REF`` runs the ingest of git commit ``REF``
(1 worker) beside this one, interleaved (``stormwatch_1_worker_before``: the code before).
Beside the rates, ``stormwatch_*_cpu_s_per_10k``: the ingest processes' CPU seconds (utime + stime from
``/proc``, after their start-up) per 10,000 readings stored, median of the rounds (``raw_cpu_s_per_10k``:
mosquitto_sub and the writer; ``node_red_batch_cpu_s_per_10k``: the Node-RED process) -- a cost that a
machine shared with other work disturbs far less than a rate (the stored confirmations' cost is measured
the same way). ``<key>_influxd_cpu_s_per_10k`` and ``<key>_mosquitto_cpu_s_per_10k``: the servers' CPU over each
of the contender's runs (its start, the writes and queries, this benchmark's ``COUNT`` every 0.1 s, the
``DROP``) per 10,000 readings stored, median of the rounds.

``--backlog``: the messages are offered as a backlog instead of live. A publisher paces the live figure:
where a contender keeps up with ``mosquitto_pub`` (it stores its last reading within a few tenths of a
second of the last publish), the rate is the publisher's, not the contender's. With ``--backlog`` each
contender's processes are stopped (SIGSTOP) once subscribed, all messages are published (the broker
holds them: the project's ``max_queued_messages``), and the figure runs from their SIGCONT to the count
reaching 50,000 -- how fast a contender works off a backlog (a cellular uplink back after an outage),
the publisher out of the way. Every contender is measured the same way (``"offer": "backlog"``).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.machine import checkout, describe, print_profile, process_usage, start_profiler  # noqa: E402
from stormwatch import topics  # noqa: E402
from stormwatch.app import servers  # noqa: E402
from stormwatch.contract import Reading, dump_readings  # noqa: E402

N_MESSAGES = 50_000
N_DEVICES = 10
SITE = "bench-site"
GATEWAY = "gw-bench"
TOPIC = topics.readings(SITE, GATEWAY)
#: Event time of the first message: midnight UTC two days ago, so all 50,000 (one per second, ~14 h)
#: are in the past and within ingest's age bound (90 days; older ones are refused as implausible_time).
T0 = (datetime.now(UTC) - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
CONTENDER_TIMEOUT_S = 150.0
#: How long a stormwatch worker may take to start and subscribe (imports take long on a loaded machine).
START_TIMEOUT_S = 180.0
#: Runs per contender (median reported): a 2-core machine shared with the broker, the database and
#: the publisher varies by +-20 % from run to run.
ROUNDS = 5
NODE_RED_BATCH_ROUNDS = 3
#: A contender that loses points is finished when its count stays put this long after publishing
#: (at load 30 one write of a poll-cycle batch, 5,000 points, took InfluxDB more than 8 s).
SETTLE_S = 30.0
#: ``--backlog``: offer the messages as a backlog (module docstring), not live.
BACKLOG = False
CACHE = Path(os.environ.get("STORMWATCH_BENCH_CACHE", Path.home() / ".cache" / "stormwatch-bench"))
NODE_RED_PACKAGES = ("node-red@4", "node-red-contrib-influxdb")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def bench_readings() -> list[Reading]:
    """The 50,000 readings: 10 devices polled in turn, distinct timestamps (1 s apart)."""
    return [Reading(site=SITE, device=f"turb-{i % N_DEVICES}", quantity="turbidity",
                    value=round(5 + (i % 997) * 0.1, 1), unit="NTU", time=T0 + timedelta(seconds=i), gateway=GATEWAY,
                    boot="bench-boot", seq=i + 1, raw=[i % 65536, 16720]) for i in range(N_MESSAGES)]


def make_payloads(path: Path, batched: bool = False) -> int:
    """The payloads, one per line: one reading each, or (``batched``) one poll cycle of the 10 devices
    each (``{"readings": [...]}``, as ``stormwatch gateway --batch`` publishes); returns the messages."""
    readings = bench_readings()
    step = N_DEVICES if batched else 1
    with path.open("wb") as f:
        for i in range(0, len(readings), step):
            f.write(dump_readings(readings[i:i + step]) + b"\n")
    return len(readings) // step


def site_yaml(path: Path) -> None:
    devices = "\n".join(
        f"  - {{id: turb-{d}, profile: yosemitech_y511, transport: {{kind: modbus-tcp, host: 127.0.0.1, "
        f"port: 5020, unit_id: {d + 1}}}}}" for d in range(N_DEVICES))
    path.write_text(f"site:\n  id: {SITE}\n  name: Benchmark site\n  jurisdiction: ch133\n"
                    f"  timezone: America/New_York\ngateway_id: {GATEWAY}\ndevices:\n{devices}\n")


def influx_count(srv: servers.InfluxDB1, db: str) -> int:
    res = srv.query('SELECT COUNT("value") FROM readings', db)["results"][0]
    series = res.get("series")
    return int(series[0]["values"][0][1]) if series else 0


def publish(mosq: servers.Mosquitto, payload_file: Path) -> float:
    """Publish every line at QoS 1 with mosquitto_pub; returns the wall time it took."""
    binary = servers.find_binary("mosquitto_pub")
    assert binary is not None
    t = time.monotonic()
    with payload_file.open("rb") as f:
        subprocess.run([binary, "-h", "127.0.0.1", "-p", str(mosq.port), "-q", "1", "-t", TOPIC, "-l",
                        "-i", f"bench-pub-{time.monotonic_ns()}"], stdin=f, check=True, timeout=CONTENDER_TIMEOUT_S)
    return time.monotonic() - t


def measure(srv: servers.InfluxDB1, db: str, mosq: servers.Mosquitto, payload_file: Path,
            alive: Callable[[], bool], pids: Sequence[int] = ()) -> tuple[float, int]:
    """Publish all messages and wait for the count (in ``db``, dropped afterwards); returns (readings/s, points).
    With :data:`BACKLOG`, ``pids`` (the contender's processes) are stopped while the messages are published
    and the clock starts when they continue."""
    if BACKLOG:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            log(f"  backlog published in {publish(mosq, payload_file):.2f}s while the contender was stopped")
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    start = time.monotonic()
    pub_s: list[float] = []

    def publish_all() -> None:
        try:
            pub_s.append(publish(mosq, payload_file))
        except (subprocess.SubprocessError, OSError) as exc:
            log(f"  publishing failed: {exc}")

    pub = threading.Thread(target=publish_all, daemon=True)
    if not BACKLOG:
        pub.start()
    last, last_change = 0, start
    deadline = start + CONTENDER_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            count = influx_count(srv, db)
        except OSError:
            continue
        now = time.monotonic()
        if count != last:
            last, last_change = count, now
        if count >= N_MESSAGES:
            break
        if not pub.is_alive() and now - last_change > SETTLE_S:
            log(f"  count stays at {count} for {SETTLE_S:.0f}s after publishing: giving up waiting")
            break
        if not alive():
            log("  contender process died")
            break
    else:
        log(f"  timed out after {CONTENDER_TIMEOUT_S:.0f}s at {last} points")
    if pub.is_alive():
        pub.join(5)
    srv.query(f'DROP DATABASE "{db}"')  # keeps influxd as light for the next run as for this one
    elapsed = last_change - start
    rate = last / elapsed if elapsed > 0 else 0.0
    log(f"  {last} points stored in {elapsed:.2f}s -> {rate:,.0f} readings/s "
        + ("(a backlog)" if BACKLOG else f"(publishing took {pub_s[0] if pub_s else float('nan'):.2f}s)"))
    return rate, last


def create_db(srv: servers.InfluxDB1, db: str) -> None:
    srv.query(f'CREATE DATABASE "{db}"')


def stop_procs(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def wait_for_line(proc: subprocess.Popen[bytes], needle: str, timeout_s: float, sink: Path) -> bool:
    """Copy ``proc``'s stdout to ``sink`` in a thread; True once a line contains ``needle``."""
    seen = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        with sink.open("ab") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if needle.encode() in line:
                    seen.set()

    threading.Thread(target=pump, daemon=True).start()
    return seen.wait(timeout_s)


def run_stormwatch(workers: int, srv: servers.InfluxDB1, mosq: servers.Mosquitto, work: Path,
                   payload_file: Path, site: Path, tag: str, cpu: list[float],
                   profile: Path | None = None, tree: Path = REPO) -> tuple[float, int]:
    """One stormwatch run; appends to ``cpu`` the workers' CPU seconds (utime + stime, from /proc, after
    their start-up) per 10,000 readings stored -- a cost figure a loaded machine disturbs less than a rate.
    ``profile``: sample the first worker with py-spy into this file; ``tree``: the checkout whose code runs."""
    db = f"stormwatch_{workers}_{tag}" + ("" if tree == REPO else "_before")
    create_db(srv, db)
    log(f"stormwatch ingest, {workers} worker(s) -> database {db}")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for w in range(workers):
            argv = [sys.executable, "-m", "stormwatch", "ingest", "--site", str(site), "--broker", mosq.url,
                    "--store", srv.store_url(db), "--client-id", f"bench-sw{workers}-{tag}-{w}",
                    "--stats-interval-s", "5"]
            if workers > 1:
                argv += ["--share-group", f"bench{workers}{tag}"]
            p = subprocess.Popen(argv, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            procs.append(p)
            if not wait_for_line(p, "subscribed to", START_TIMEOUT_S, work / f"stormwatch-{workers}-{tag}-{w}.log"):
                raise RuntimeError(f"stormwatch worker {w} did not connect (see {work})")
        time.sleep(0.5)  # SUBACK
        spy = start_profiler(procs[0].pid, profile) if profile is not None else None
        cpu0 = sum(process_usage(p.pid)[2] for p in procs)
        rate, count = measure(srv, db, mosq, payload_file, lambda: all(p.poll() is None for p in procs),
                              [p.pid for p in procs])
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        if count and all(p.poll() is None for p in procs):
            used = sum(process_usage(p.pid)[2] for p in procs) - cpu0
            cpu.append(used / count * 10_000)
            log(f"  ingest CPU {used:.2f} s = {cpu[-1]:.3f} s per 10,000 readings")
        return rate, count
    finally:
        stop_procs(procs)


def measure_cpu(pids: list[int], cpu: list[float] | None, run: Callable[[], tuple[float, int]]) -> tuple[float, int]:
    """``run()``, appending to ``cpu`` the CPU seconds (utime + stime) of ``pids`` per 10,000 readings stored."""
    cpu0 = sum(process_usage(pid)[2] for pid in pids)
    rate, count = run()
    if cpu is not None and count:
        try:
            used = sum(process_usage(pid)[2] for pid in pids) - cpu0
        except (OSError, KeyError):  # a process that ended: no figure
            return rate, count
        cpu.append(used / count * 10_000)
        log(f"  CPU {used:.2f} s = {cpu[-1]:.3f} s per 10,000 readings")
    return rate, count


def run_raw(srv: servers.InfluxDB1, mosq: servers.Mosquitto, payload_file: Path, tag: str,
            cpu: list[float] | None = None) -> tuple[float, int]:
    db = f"raw_{tag}"
    create_db(srv, db)
    log(f"raw limit: mosquitto_sub (persistent session) | batched HTTP writes -> database {db}")
    sub_bin = servers.find_binary("mosquitto_sub")
    assert sub_bin is not None
    base = [sub_bin, "-h", "127.0.0.1", "-p", str(mosq.port), "-q", "1", "-t", TOPIC, "-c", "-i", f"bench-raw-{tag}"]
    subprocess.run([*base, "-E"], check=True, timeout=10)  # creates the persistent session + subscription
    sub = subprocess.Popen(base, stdout=subprocess.PIPE)
    writer = subprocess.Popen([sys.executable, __file__, "--raw-writer", srv.url, db], stdin=sub.stdout)
    assert sub.stdout is not None
    sub.stdout.close()
    try:
        return measure_cpu([sub.pid, writer.pid], cpu, lambda: measure(
            srv, db, mosq, payload_file, lambda: writer.poll() is None and sub.poll() is None, [sub.pid, writer.pid]))
    finally:
        stop_procs([sub, writer])


def raw_writer(base_url: str, db: str) -> None:
    """stdin JSON lines -> line protocol -> POST /write in batches of 5,000 or 200 ms (benchmark only).

    Deliberately minimal (no validation, no escaping: the benchmark's tags need none): the raw limit.
    """
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        for line in sys.stdin.buffer:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    url = f"{base_url}/write?{urllib.parse.urlencode({'db': db, 'precision': 's'})}"
    done = False
    while not done:
        batch: list[str] = []
        deadline = time.monotonic() + 0.2
        while len(batch) < 5000:
            try:
                raw = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if raw is None:
                done = True
                break
            msg = json.loads(raw)
            for r in msg.get("readings", (msg,)):
                ts = int(datetime.fromisoformat(r["time"]).timestamp())
                batch.append(f"readings,device={r['device']},quantity={r['quantity']},site={r['site']},"
                             f"unit={r['unit']} value={float(r['value'])},seq={r['seq']}i {ts}")
        if batch:
            body = ("\n".join(batch) + "\n").encode()
            for _attempt in range(10):
                try:
                    urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=30).read()
                    break
                except OSError:
                    time.sleep(0.2)


def node_red_bin() -> Path | None:
    """Find node-red in the cache dir, installing it with npm when missing; None when impossible."""
    binary = CACHE / "node_modules" / ".bin" / "node-red"
    contrib = CACHE / "node_modules" / "node-red-contrib-influxdb"
    if binary.exists() and contrib.is_dir():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        log("Node-RED skipped: node/npm not installed")
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    log(f"installing {' '.join(NODE_RED_PACKAGES)} into {CACHE} (npm)")
    try:
        subprocess.run([npm, "install", "--no-audit", "--no-fund", *NODE_RED_PACKAGES], cwd=CACHE, check=True,
                       timeout=300, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        err = getattr(exc, "stderr", b"") or b""
        log(f"Node-RED skipped: npm install failed ({exc}): {err.decode(errors='replace')[-500:]}")
        return None
    return binary if binary.exists() and contrib.is_dir() else None


def run_node_red(binary: Path, flow: str, srv: servers.InfluxDB1, mosq: servers.Mosquitto, work: Path,
                 payload_file: Path, tag: str, cpu: list[float] | None = None) -> tuple[float, int]:
    db = f"nodered_{flow}_{tag}"
    create_db(srv, db)
    log(f"Node-RED flow {flow} -> database {db}")
    user_dir = work / f"nodered-{flow}-{tag}"
    user_dir.mkdir()
    shutil.copy(REPO / "benchmarks" / "nodered" / f"{flow}.json", user_dir / "flows.json")
    client_id = f"bench-nodered-{flow}-{tag}"
    env = dict(os.environ, MQTT_PORT=str(mosq.port), MQTT_CLIENT_ID=client_id, INFLUX_PORT=str(srv.port),
               INFLUX_DB=db)
    port = servers.free_port()
    proc = subprocess.Popen([str(binary), "-u", str(user_dir), "-p", str(port), "flows.json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if not wait_for_line(proc, "Connected to broker", 90, work / f"nodered-{flow}-{tag}.log"):
            raise RuntimeError(f"Node-RED did not connect to the broker (see {user_dir}.log)")
        time.sleep(1.0)  # subscription
        return measure_cpu([proc.pid], cpu, lambda: measure(srv, db, mosq, payload_file, lambda: proc.poll() is None,
                                                            [proc.pid]))
    finally:
        stop_procs([proc])


#: Result keys of the contenders, in the order they are reported.
KEYS = ("stormwatch_1_worker", "stormwatch_2_workers", "stormwatch_1_worker_before", "raw", "node_red_batch",
        "node_red_per_message")


def main(only: set[str] | None = None, rounds: int = ROUNDS, modes: tuple[str, ...] = ("single", "batched"),
         profile: bool = False, anchor: str | None = None) -> None:
    """Run the contenders (``only``: a subset of the result keys) in each message form of ``modes`` and
    print the JSON line (the batched form's keys end in ``_batched``); ``anchor``: a git commit whose
    ingest runs beside this one (``stormwatch_1_worker_before``)."""
    log(f"machine: {describe()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[str, object] = {"load_before": round(os.getloadavg()[0], 2),
                                  "offer": "backlog" if BACKLOG else "live"}
    with tempfile.TemporaryDirectory(prefix="stormwatch-bench-") as tmp:
        work = Path(tmp)
        site = work / "bench-site.yaml"
        site_yaml(site)
        before: Path | None = None
        if anchor is not None:
            try:
                before = checkout(REPO, anchor, work / "before")
            except subprocess.CalledProcessError as exc:
                why = (exc.stderr or b"").decode(errors="replace").strip() or str(exc)
                print(f"error: --anchor {anchor}: {why}", file=sys.stderr)
                sys.exit(2)
            results["anchor"] = anchor
        srv = servers.influxdb1(work / "influxdb")
        srv.start()
        binary = None
        if only is None or only & {"node_red_batch", "node_red_per_message"}:
            binary = node_red_bin()
        try:
            for mode in modes:
                run_mode(mode, srv, work, site, binary, only, rounds, profile, results, before)
        finally:
            srv.stop()
    results["load_after"] = round(os.getloadavg()[0], 2)
    results["machine"] = describe()
    print(json.dumps(results), flush=True)


def run_mode(mode: str, srv: servers.InfluxDB1, work: Path, site: Path, binary: Path | None,
             only: set[str] | None, rounds: int, profile: bool, results: dict[str, object],
             before: Path | None = None) -> None:
    """The rounds of one message form (``single``: one reading a message; ``batched``: one poll cycle)."""
    batched = mode == "batched"
    suffix = "_batched" if batched else ""
    payload_file = work / f"payloads-{mode}.jsonl"
    messages = make_payloads(payload_file, batched)
    log(f"{mode}: {N_MESSAGES} readings in {messages} messages, {N_DEVICES} devices, QoS 1; influxd on {srv.url}, "
        "a fresh mosquitto per run")
    stored: dict[str, list[int]] = {}
    rates: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {"stormwatch_1_worker": [], "stormwatch_2_workers": [],
                                   "stormwatch_1_worker_before": [], "raw": [], "node_red_batch": []}
    spy_out = work / f"profile-{mode}.txt" if profile else None
    Run = Callable[[servers.Mosquitto, str], tuple[float, int]]
    contenders: dict[str, tuple[int, Run]] = {
        "stormwatch_1_worker": (rounds, lambda mq, tag: run_stormwatch(
            1, srv, mq, work, payload_file, site, tag, cpu["stormwatch_1_worker"],
            spy_out if tag == f"{mode}0" else None)),
        "stormwatch_2_workers": (rounds, lambda mq, tag: run_stormwatch(2, srv, mq, work, payload_file, site, tag,
                                                                        cpu["stormwatch_2_workers"])),
        "raw": (rounds, lambda mq, tag: run_raw(srv, mq, payload_file, tag, cpu["raw"])),
    }
    if before is not None:
        old = before
        contenders["stormwatch_1_worker_before"] = (rounds, lambda mq, tag: run_stormwatch(
            1, srv, mq, work, payload_file, site, tag, cpu["stormwatch_1_worker_before"], tree=old))
    if binary is not None:
        nr = binary
        contenders["node_red_batch"] = (
            min(rounds, NODE_RED_BATCH_ROUNDS), lambda mq, tag: run_node_red(nr, "batch", srv, mq, work, payload_file,
                                                                             tag, cpu["node_red_batch"]))
        if not batched:  # once: it loses points and then waits SETTLE_S for the count to stop moving
            contenders["node_red_per_message"] = (
                1, lambda mq, tag: run_node_red(nr, "per_message", srv, mq, work, payload_file, tag))
    rates.update({k: [] for k in contenders})
    servers_cpu: dict[str, list[tuple[float, float]]] = {}  # contender -> (influxd, mosquitto) CPU s per 10,000
    # Rounds interleave the contenders so that drift on a shared machine hits them alike.
    for rnd in range(max(n for n, _ in contenders.values())):
        for key, (n, fn) in contenders.items():
            if rnd >= n or (only is not None and key not in only):
                continue
            log(f"{mode} round {rnd + 1}/{n}: {key} (load average {os.getloadavg()[0]:.2f})")
            # A fresh broker per run: persistent sessions of earlier runs would otherwise
            # keep queueing every message published (and slow every later run).
            mq = servers.mosquitto(work / f"mosquitto-{mode}-{key}-{rnd}")
            mq.start()
            used0 = _servers_cpu(srv, mq)
            try:
                rate, count = fn(mq, f"{mode}{rnd}")
                _note_servers_cpu(servers_cpu, key, used0, _servers_cpu(srv, mq), count)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                log(f"{key} failed: {exc}")
                rate, count = 0.0, 0
            finally:
                mq.stop()
                shutil.rmtree(mq.data_dir, ignore_errors=True)
            rates[key].append(rate)
            stored.setdefault(key, []).append(count)
    for key in KEYS:
        runs = [r for r in rates.get(key, []) if r > 0]
        results[key + suffix] = round(statistics.median(runs)) if runs else None
        if runs:
            log(f"{key}{suffix}: median {results[key + suffix]:,}/s of {[round(r) for r in runs]}; "
                f"stored {stored.get(key)}")
    for key, values in cpu.items():
        results[f"{key}{suffix}_cpu_s_per_10k"] = round(statistics.median(values), 3) if values else None
        if values:
            log(f"{key}{suffix}: CPU median {results[f'{key}{suffix}_cpu_s_per_10k']} s per 10,000 readings of "
                f"{[round(v, 3) for v in values]}")
    for key, pairs in servers_cpu.items():
        for i, server in enumerate(("influxd", "mosquitto")):
            results[f"{key}{suffix}_{server}_cpu_s_per_10k"] = round(statistics.median(p[i] for p in pairs), 3)
        log(f"{key}{suffix}: servers' CPU per 10,000 readings (influxd, mosquitto) {pairs}")
    if not batched:
        per_message = stored.get("node_red_per_message")
        results["node_red_per_message_stored"] = per_message[0] if per_message else None
    ran = [k for k in ("stormwatch_1_worker", "stormwatch_2_workers", "stormwatch_1_worker_before") if stored.get(k)]
    results[f"stormwatch_rows_verified{suffix}"] = bool(ran) and all(
        c == N_MESSAGES for k in ran for c in stored[k])
    for key in ran:
        value = results[key + suffix]
        raw, batch = results.get("raw" + suffix), results.get("node_red_batch" + suffix)
        if not isinstance(value, int):
            continue
        bar = "(need >= 100,000/s)" if batched else "(need >= 1.5x Node-RED batched, >= 0.9x raw)"
        log(f"bar {mode}: {key} {value:,}/s {bar} = "
            + (f"{value / batch:.2f}x Node-RED batched, " if isinstance(batch, int) else "")
            + (f"{value / raw:.2f}x raw" if isinstance(raw, int) else ""))
    if spy_out is not None and spy_out.exists():
        log("profile of the first stormwatch worker:")
        print_profile(spy_out)


def _servers_cpu(srv: servers.InfluxDB1, mq: servers.Mosquitto) -> tuple[float, float]:
    """CPU seconds so far of influxd and of the run's Mosquitto (0 for one not running)."""
    return tuple(process_usage(s.pid)[2] if s.pid else 0.0 for s in (srv, mq))  # type: ignore[return-value]


def _note_servers_cpu(into: dict[str, list[tuple[float, float]]], key: str, before: tuple[float, float],
                      after: tuple[float, float], count: int) -> None:
    """influxd's and Mosquitto's CPU over one contender's run per 10,000 readings stored -- the whole run:
    its start, the writes (and queries), the benchmark's COUNT every 0.1 s and the DROP."""
    if count:
        used = tuple(round((a - b) / count * 10_000, 3) for a, b in zip(after, before, strict=True))
        into.setdefault(key, []).append(used)  # type: ignore[arg-type]
        log(f"  influxd CPU {used[0]:.3f}, mosquitto {used[1]:.3f} s per 10,000 readings")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--raw-writer":
        raw_writer(sys.argv[2], sys.argv[3])
    else:
        ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        ap.add_argument("--only", help="comma-separated contenders: " + ", ".join(KEYS))
        ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"runs per contender (default {ROUNDS}; "
                        f"Node-RED batched at most {NODE_RED_BATCH_ROUNDS}, per message once)")
        ap.add_argument("--mode", choices=("single", "batched", "both"), default="both",
                        help="message form: one reading a message, one poll cycle a message, or both (default)")
        ap.add_argument("--profile", action="store_true",
                        help="sample the first stormwatch worker of the first round with py-spy")
        ap.add_argument("--anchor", metavar="REF", help="also run the ingest of git commit REF (1 worker), "
                                                        "interleaved: stormwatch_1_worker_before")
        ap.add_argument("--backlog", action="store_true",
                        help="offer the messages as a backlog: each contender stopped while they are published, "
                             "timed from when it continues (module docstring); default: published live")
        args = ap.parse_args()
        BACKLOG = args.backlog
        main(set(args.only.split(",")) if args.only else None, max(1, args.rounds),
             ("single", "batched") if args.mode == "both" else (args.mode,), args.profile, args.anchor)
