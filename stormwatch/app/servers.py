"""Start real Mosquitto and InfluxDB 1.x servers as child processes on free loopback ports.

Used by the test suite, the benchmarks and ``stormwatch demo`` (which prefers a ``mosquitto`` on
PATH). Configuration files are the project's own (``MOSQUITTO_CONF`` below), written to a
private directory; data lives in that directory too.

Mosquitto's queue and in-flight limits are raised on purpose (failure-kinds.md #17).

A server never outlives the process that started it: a failed or interrupted start (Ctrl-C, SIGTERM)
stops it before the exception goes on, and on Linux it gets SIGTERM when its starter dies, even by
SIGKILL (:func:`tied_to_starter`). It runs in a session of its own, so a terminal's Ctrl-C reaches the
starter alone, which stops its services before the broker they flush to.

The design: docs/runtime.md ("The modules", `stormwatch/app/servers.py`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOSQUITTO_CONF = """\
# stormwatch test/demo broker -- see stormwatch/app/servers.py for why each limit is set.
per_listener_settings false
listener {port} 127.0.0.1
allow_anonymous true
persistence true
persistence_location {data}/
autosave_interval 1
max_queued_messages 1000000
max_inflight_messages 4000
set_tcp_nodelay true
max_packet_size 1048576
log_dest file {data}/mosquitto.log
log_type error
log_type warning
log_type notice
"""

INFLUXDB1_CONF = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"
[meta]
  dir = "{data}/meta"
[data]
  dir = "{data}/data"
  wal-dir = "{data}/wal"
  query-log-enabled = false
[coordinator]
[retention]
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:{port}"
  auth-enabled = false
  log-enabled = false
  max-body-size = 0
[continuous_queries]
  enabled = false
"""


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 15.0) -> None:
    """Wait until something listens on 127.0.0.1:``port``.

    Raises:
        TimeoutError: nothing listened within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


def find_binary(name: str) -> str | None:
    """Path to ``name`` on PATH or in the Debian sbin dirs (``mosquitto`` lives in /usr/sbin)."""
    found = shutil.which(name)
    if found:
        return found
    for d in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


@functools.cache
def _setpriv_pdeathsig() -> str | None:
    """util-linux's ``setpriv`` when it can set the parent-death signal (2.33 and later), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    try:
        done = subprocess.run([setpriv, "--pdeathsig", "TERM", "--", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return setpriv if done.returncode == 0 else None


def tied_to_starter(argv: list[str]) -> list[str]:
    """``argv`` run so that it gets SIGTERM when the process starting it dies, however it dies.

    The parent-death signal is set by ``setpriv`` before it execs the server (the same pid). The
    kernel's "parent" is the starting *thread*, so it is set only from the main thread (alive as long
    as the process is); from another thread, or without ``setpriv``, ``argv`` unchanged.
    """
    setpriv = _setpriv_pdeathsig()
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return argv
    return [setpriv, "--pdeathsig", "TERM", "--", *argv]


@dataclass
class ServerProcess:
    """A child server that can be stopped and started again on the same port and data dir."""

    name: str
    argv: list[str]
    port: int
    data_dir: Path
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, timeout_s: float = 20.0) -> None:
        """Start the server and wait until it listens.

        Raises:
            RuntimeError: it did not listen within ``timeout_s`` (it is stopped).
        """
        if self.running:
            return
        log = open(self.data_dir / f"{self.name}.stdout.log", "ab")
        self._proc = subprocess.Popen(tied_to_starter(self.argv), stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        log.close()
        try:
            wait_port(self.port, timeout_s)
        except TimeoutError:
            self.stop()
            tail = (self.data_dir / f"{self.name}.stdout.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.name} did not start on port {self.port}:\n{tail}") from None
        except BaseException:  # Ctrl-C or SIGTERM while it starts: no caller has it to stop
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None

    def kill(self) -> None:
        """SIGKILL the server (an abrupt outage)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(5)
        self._proc = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int:
        """The server's process id (0 when it is not running)."""
        return self._proc.pid if self.running and self._proc is not None else 0


@dataclass
class Mosquitto(ServerProcess):
    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"


@dataclass
class InfluxDB1(ServerProcess):
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def store_url(self, database: str) -> str:
        """A ``influx1://`` store URL for ``database`` on this server."""
        return f"influx1://127.0.0.1:{self.port}/{database}"

    def query(self, q: str, database: str | None = None) -> dict[str, Any]:
        """Run an InfluxQL query over HTTP and return the decoded JSON."""
        import json
        import urllib.parse

        params = {"q": q, "epoch": "ns"}
        if database:
            params["db"] = database
        url = f"{self.url}/query?{urllib.parse.urlencode(params)}"
        req = urllib.request.Request(url, method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
            return answer

    def wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as resp:
                    if resp.status in (200, 204):
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"InfluxDB on {self.url} not ready")

    def start(self, timeout_s: float = 30.0) -> None:
        super().start(timeout_s)
        try:
            self.wait_ready(timeout_s)
        except BaseException:  # not ready, or interrupted: stopped, as a server that never listened
            self.stop()
            raise


def mosquitto(data_dir: Path, port: int | None = None, extra_conf: str = "") -> Mosquitto:
    """A (not yet started) Mosquitto on ``port`` with the project's configuration.

    Raises:
        FileNotFoundError: no ``mosquitto`` binary.
    """
    binary = find_binary("mosquitto")
    if binary is None:
        raise FileNotFoundError("mosquitto not found (Debian: apt-get install mosquitto)")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    conf = data_dir / "mosquitto.conf"
    run_as = "user root\n" if os.geteuid() == 0 else ""
    conf.write_text(MOSQUITTO_CONF.format(port=port, data=data_dir) + run_as + extra_conf)
    return Mosquitto("mosquitto", [binary, "-c", str(conf)], port, data_dir)


def influxdb1(data_dir: Path, port: int | None = None) -> InfluxDB1:
    """A (not yet started) InfluxDB 1.x ``influxd`` on ``port``, data in ``data_dir``.

    Raises:
        FileNotFoundError: no ``influxd`` binary.
    """
    binary = find_binary("influxd")
    if binary is None:
        raise FileNotFoundError("influxd not found (Debian: apt-get install influxdb)")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    conf = data_dir / "influxdb.conf"
    conf.write_text(INFLUXDB1_CONF.format(port=port, rpc_port=free_port(), data=data_dir))
    return InfluxDB1("influxd", [binary, "-config", str(conf)], port, data_dir)


NATS_CONF = """\
# stormwatch test broker cluster: NATS with JetStream and its MQTT listener (docs/scaling.md).
server_name: {name}
listen: 127.0.0.1:{client_port}
http: 127.0.0.1:{http_port}
jetstream {{
  store_dir: "{data}/jetstream"
}}
cluster {{
  name: stormwatch
  listen: 127.0.0.1:{route_port}
  routes: [{routes}]
}}
mqtt {{
  listen: 127.0.0.1:{port}
  stream_replicas: {replicas}
}}
"""


@dataclass
class NatsNode(ServerProcess):
    """One node of a :class:`NatsCluster`; ``port`` is its MQTT listener, ``http_port`` its monitoring port."""

    http_port: int = 0

    def monitor(self, path: str) -> dict[str, Any]:
        """A monitoring endpoint's JSON (``/jsz``, ``/healthz``...).

        Raises:
            OSError: the node does not answer.
        """
        import json

        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=2) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
            return answer


@dataclass
class NatsCluster:
    """A cluster of ``nats-server`` nodes with JetStream and MQTT (3 nodes: one may be lost).

    JetStream keeps MQTT sessions, retained messages and QoS 1 messages in streams replicated to
    every node (``stream_replicas``, up to 3; each QoS 1 subscription is a durable consumer with the
    same replicas), so a persistent session is meant to live on when the node its client was
    connected to dies; the client reconnects to another node (a broker URL listing every node,
    :attr:`stormwatch.runtime.mqtt.BrokerSettings.endpoints`). How well nats-server 2.9 keeps that promise
    is measured in tests/e2e/test_broker_cluster.py (docs/scaling.md).
    """

    nodes: list[NatsNode]

    def url(self, first: int = 0) -> str:
        """``mqtt://`` URL listing every node's MQTT listener, node ``first`` first."""
        order = self.nodes[first:] + self.nodes[:first]
        return "mqtt://" + ",".join(f"127.0.0.1:{n.port}" for n in order)

    def start(self, timeout_s: float = 60.0) -> None:
        """Start every node and wait until the cluster has elected its JetStream meta leader.

        Raises:
            RuntimeError: a node did not start; TimeoutError: no meta leader in time (every node
                is stopped then).
        """
        try:
            for node in self.nodes:
                node.start(timeout_s)
            self._wait_meta_leader(timeout_s)
        except BaseException:  # the nodes already started must not outlive a failed start
            self.stop()
            raise

    def _wait_meta_leader(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if all(self.meta_leader(n) for n in self.nodes if n.running):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"NATS cluster: no JetStream meta leader after {timeout_s:.0f} s")

    @staticmethod
    def meta_leader(node: NatsNode) -> str:
        """The JetStream meta leader as ``node`` sees it ('' while there is none)."""
        return str(node.monitor("/jsz").get("meta_cluster", {}).get("leader", ""))

    def stream_leader(self, stream: str) -> str | None:
        """The server name leading JetStream ``stream`` (e.g. ``$MQTT_msgs``), asked of a running node."""
        for node in self.nodes:
            if not node.running:
                continue
            try:
                info = node.monitor("/jsz?accounts=true&streams=true")
            except OSError:
                continue
            for account in info.get("account_details", []):
                for detail in account.get("stream_detail", []):
                    if detail.get("name") == stream:
                        return str(detail.get("cluster", {}).get("leader", "")) or None
        return None

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def nats_cluster(data_dir: Path, size: int = 3) -> NatsCluster:
    """A (not yet started) NATS cluster of ``size`` nodes (``n1``, ``n2``...) on free loopback ports.

    Raises:
        FileNotFoundError: no ``nats-server`` binary.
    """
    binary = find_binary("nats-server")
    if binary is None:
        raise FileNotFoundError("nats-server not found (Debian: apt-get install nats-server)")
    routes = [free_port() for _ in range(size)]
    nodes = []
    for i in range(size):
        name = f"n{i + 1}"
        node_dir = data_dir / name
        node_dir.mkdir(parents=True, exist_ok=True)
        port, http_port = free_port(), free_port()
        conf = node_dir / "nats.conf"
        conf.write_text(NATS_CONF.format(
            name=name, client_port=free_port(), http_port=http_port, data=node_dir, route_port=routes[i], port=port,
            routes=", ".join(f"nats-route://127.0.0.1:{r}" for r in routes), replicas=min(size, 3)))
        nodes.append(NatsNode(name, [binary, "-c", str(conf)], port, node_dir, http_port=http_port))
    return NatsCluster(nodes)
