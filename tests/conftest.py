"""Shared fixtures: real Mosquitto and InfluxDB 1.x servers, never mocks; and the fast lane's marks.

Servers come from the binaries on this machine (``.ci/run`` installs them from Debian). Without a
binary a test that needs it is skipped with a clear message -- except under ``CI=true``, where it
fails, so CI can never pass by skipping. Under pytest-xdist each worker has its own Mosquitto
(:func:`mosquitto_server`) and its own :data:`tests.names.RUN` token, so tests side by side never
share a topic, a retained message, a session or a database.

The fast lane (``pytest -m "not slow"``, docs/architecture.md "Tests") leaves out every test marked
``slow``: by hand (a module's ``pytestmark``, a test's mark: processes, browsers, scenarios at
speed), and here for every test in tests/e2e/ and every test needing a server or a demo run -- a
fixture of :data:`SERVER_FIXTURES` or a ``mosquitto``/``influxdb`` mark (:func:`pytest_collection_modifyitems`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormwatch.app import servers
from tests.scheduling import schedule, workers
from tests.shared_runs import DemoRun, shared_demo

REPO = Path(__file__).resolve().parent.parent
#: Real public data files the tests read, with their sources and licences (``tests/data/SOURCES.md``).
DATA = REPO / "tests" / "data"


#: Fixtures that start (or lend) a server process or a demo run: every test using one is ``slow``.
SERVER_FIXTURES = frozenset({"mosquitto_server", "own_mosquitto", "influx_server", "own_influx", "nats_cluster",
                             "default_demo", "two_outfalls_demo"})
#: Marks of a test that needs a real server (it may start one itself): every such test is ``slow``.
SERVER_MARKS = ("mosquitto", "influxdb")
#: End-to-end and acceptance tests: all ``slow``.
E2E = REPO / "tests" / "e2e"


@pytest.hookimpl(tryfirst=True)  # before the lanes' -m selects, and before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests of tests/e2e/ and every test that needs a server; order and group the
    tests for the workers (tests/scheduling.py)."""
    for item in items:
        uses_server = not SERVER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())) or any(
            item.get_closest_marker(mark) is not None for mark in SERVER_MARKS)
        if uses_server or item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.slow)
    schedule(items)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook; without xdist, never called
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: as many workers as the tests run can keep busy (tests/scheduling.py)."""
    return workers(config)


def _need(binary: str) -> None:
    if servers.find_binary(binary) is None:
        msg = f"{binary} not installed (Debian: apt-get install {'influxdb' if binary == 'influxd' else binary})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {msg}")
        pytest.skip(msg)


#: Where tests keep what a person looks at afterwards (browser screenshots): ``STORMWATCH_TEST_ARTIFACTS``,
#: default ``test-artifacts/`` in the checkout (git-ignored; ``.ci/run`` prints where it is).
ARTIFACTS_ENV = "STORMWATCH_TEST_ARTIFACTS"


def artifacts_dir(name: str) -> Path:
    """The directory ``name`` of the test artifacts (created, emptied of a previous run's files).

    Raises:
        OSError: it cannot be created.
    """
    root = Path(os.environ.get(ARTIFACTS_ENV) or REPO / "test-artifacts")
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.is_file():
            old.unlink()
    return out


def data_file(name: str) -> Path:
    """A file of ``tests/data`` (listed in its ``SOURCES.md``).

    Raises:
        FileNotFoundError: the file is not in the repository (a test that names a missing file is
            a bug, never a skip).
    """
    p = DATA / name
    if not p.is_file():
        raise FileNotFoundError(f"{p}: not in tests/data (add it with its source to tests/data/SOURCES.md)")
    return p


def _external_port(var: str) -> int | None:
    """Port of a server started outside pytest (``.ci/run`` exports ``STORMWATCH_TEST_*_URL``)."""
    url = os.environ.get(var)
    return int(url.rsplit(":", 1)[1].rstrip("/")) if url else None


def _xdist_worker() -> str | None:
    """This process's pytest-xdist worker id (``gw0``, ``gw1``, ...), ``None`` outside xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


@pytest.fixture(scope="session")
def mosquitto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Mosquitto]:
    """One Mosquitto for the whole session (tests must use unique client ids and topics).

    The broker of ``STORMWATCH_TEST_MQTT_URL`` when given, to the first xdist worker alone: each other
    worker starts a broker of its own with the same configuration, so a test that listens to a whole
    topic tree never hears a test running beside it.
    """
    port = _external_port("STORMWATCH_TEST_MQTT_URL")
    if port is not None and _xdist_worker() in (None, "gw0"):
        yield servers.Mosquitto("mosquitto", [], port, tmp_path_factory.mktemp("ext-mosquitto"))
        return
    _need("mosquitto")
    srv = servers.mosquitto(tmp_path_factory.mktemp("mosquitto"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture()
def own_mosquitto(tmp_path: Path) -> Iterator[servers.Mosquitto]:
    """A Mosquitto of this test alone, which the test may stop, kill and restart."""
    _need("mosquitto")
    srv = servers.mosquitto(tmp_path / "mosquitto")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def influx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.InfluxDB1]:
    """One InfluxDB 1.x for the session; tests use their own database names."""
    port = _external_port("STORMWATCH_TEST_INFLUX_URL")
    if port is not None:
        yield servers.InfluxDB1("influxd", [], port, tmp_path_factory.mktemp("ext-influxdb"))
        return
    _need("influxd")
    srv = servers.influxdb1(tmp_path_factory.mktemp("influxdb"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture()
def own_influx(tmp_path: Path) -> Iterator[servers.InfluxDB1]:
    """An InfluxDB 1.x of this test alone, which the test may stop and restart."""
    _need("influxd")
    srv = servers.influxdb1(tmp_path / "influxdb")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture()
def nats_cluster(tmp_path: Path) -> Iterator[servers.NatsCluster]:
    """A 3-node NATS cluster (JetStream, MQTT listeners) of this test alone; a node may be killed."""
    _need("nats-server")
    # a cluster's 12 ports are picked free, then bound by nats-server a moment later: another test's
    # server may take one in between (a CI run beside other work: "bind: address already in use") --
    # then the cluster is made again on other ports, never a test failure of the product
    for attempt in range(3):
        cluster = servers.nats_cluster(tmp_path / f"nats-{attempt}", 3)
        try:
            cluster.start()
            break
        except RuntimeError as exc:
            cluster.stop()
            if "address already in use" not in str(exc) or attempt == 2:
                raise
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def default_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The session's one `stormwatch demo --json` of the default scenario (tests/shared_runs.py):
    read it; a test that writes to its state works on ``copy_state``."""
    return shared_demo(tmp_path_factory, _xdist_worker(), "default")


@pytest.fixture(scope="session")
def two_outfalls_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The session's one `stormwatch demo --json --scenario two-outfalls` (as :func:`default_demo`)."""
    return shared_demo(tmp_path_factory, _xdist_worker(), "two-outfalls", "--scenario", "two-outfalls")
